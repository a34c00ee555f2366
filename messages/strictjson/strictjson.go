package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Bounds on what the JSON reader takes in. A hostile block cannot make a reader
// allocate more than its bound or recurse deeper than maxDepth.
const (
	// MaxNoteLen bounds one note's JSON block.
	MaxNoteLen = 256 << 10
	// MaxStateLen bounds the status JSON.
	MaxStateLen = 64 << 20
	maxDepth    = 32
)

// Parse reads exactly one JSON value. Unlike encoding/json, which keeps the
// last of two equal keys without a word, it refuses duplicate keys: two readers
// could otherwise see two different notes in one block. It also refuses invalid
// UTF-8 (encoding/json would replace it silently), trailing data and nesting
// deeper than maxDepth. Numbers stay json.Number, so no precision is lost.
func Parse(data []byte, max int) (any, error) {
	if len(data) > max {
		return nil, FieldErr("", ErrTooLong, fmt.Sprintf("is %d bytes; at most %d", len(data), max))
	}
	if !utf8.Valid(data) {
		off := 0
		for off < len(data) {
			r, size := utf8.DecodeRune(data[off:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			off += size
		}
		return nil, FieldErr("", ErrSyntax, fmt.Sprintf("is not valid UTF-8 (at byte %d)", off))
	}
	if v, ok := parseFast(data); ok {
		return v, nil
	}
	return parseSlow(data)
}

// parseSlow is Parse's reader token by token, which names what is
// wrong and where: the reader of whatever parseFast leaves to it.
func parseSlow(data []byte) (any, error) {
	p := &strictParser{dec: json.NewDecoder(bytes.NewReader(data))}
	p.dec.UseNumber()
	v, err := p.value("", 0)
	if err != nil {
		return nil, err
	}
	if tok, err := p.dec.Token(); err != io.EOF {
		if err == nil {
			return nil, FieldErr("", ErrSyntax, fmt.Sprintf("holds more after its JSON value (%s at byte %d); a block is one JSON object", describeToken(tok), p.dec.InputOffset()))
		}
		return nil, p.syntax("", err)
	}
	return v, nil
}

type strictParser struct {
	dec *json.Decoder
}

func (p *strictParser) value(path string, depth int) (any, error) {
	tok, err := p.dec.Token()
	if err != nil {
		return nil, p.syntax(path, err)
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= maxDepth {
			return nil, FieldErr(path, ErrTooLong, fmt.Sprintf("nests deeper than %d levels", maxDepth))
		}
		switch t {
		case '{':
			m := make(map[string]any)
			for p.dec.More() {
				kt, err := p.dec.Token()
				if err != nil {
					return nil, p.syntax(path, err)
				}
				key, ok := kt.(string)
				if !ok {
					return nil, FieldErr(path, ErrSyntax, fmt.Sprintf("has %s where a key should be", describeToken(kt)))
				}
				field := JoinField(path, key)
				if _, dup := m[key]; dup {
					return nil, FieldErr(field, ErrDuplicateKey, "appears twice in one object; readers would disagree on which counts, so the block is refused")
				}
				v, err := p.value(field, depth+1)
				if err != nil {
					return nil, err
				}
				m[key] = v
			}
			if _, err := p.dec.Token(); err != nil {
				return nil, p.syntax(path, err)
			}
			return m, nil
		case '[':
			a := make([]any, 0)
			for p.dec.More() {
				v, err := p.value(IndexField(path, len(a)), depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := p.dec.Token(); err != nil {
				return nil, p.syntax(path, err)
			}
			return a, nil
		default:
			return nil, FieldErr(path, ErrSyntax, fmt.Sprintf("has an unexpected %q", rune(t)))
		}
	default:
		return tok, nil
	}
}

func (p *strictParser) syntax(path string, err error) error {
	var se *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return FieldErr(path, ErrSyntax, fmt.Sprintf("is not valid JSON: it ends at byte %d before its value does (truncated?)", p.dec.InputOffset()))
	case errors.As(err, &se):
		return FieldErr(path, ErrSyntax, fmt.Sprintf("is not valid JSON at byte %d: %s", se.Offset, trimJSONPrefix(se.Error())))
	}
	return FieldErr(path, ErrSyntax, "is not valid JSON: "+trimJSONPrefix(err.Error()))
}

func trimJSONPrefix(s string) string {
	if len(s) > 6 && s[:6] == "json: " {
		return s[6:]
	}
	return s
}

func describeToken(tok any) string {
	switch t := tok.(type) {
	case json.Delim:
		return strconv.QuoteRune(rune(t))
	case string:
		return "the string " + QuoteShort(t)
	case json.Number:
		return "the number " + t.String()
	case bool:
		return strconv.FormatBool(t)
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", tok)
}

// JSONType names a parsed value's JSON type for messages.
func JSONType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "true or false"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// Obj is a parsed JSON object and its path, with accessors that name the field
// at fault in every error.
type Obj struct {
	Path string         // the object's field path, "" at the top
	Map  map[string]any // the object as Parse read it
}

// Field is the path of key inside o.
func (o Obj) Field(key string) string { return JoinField(o.Path, key) }

// Has says whether o has key.
func (o Obj) Has(key string) bool { _, ok := o.Map[key]; return ok }

// WrongType reports that key holds v where want was expected.
func (o Obj) WrongType(key string, want string, v any) error {
	return FieldErr(o.Field(key), ErrInvalid, fmt.Sprintf("must be %s, not %s", want, JSONType(v)))
}

// Missing reports that the required key is absent; what says what it is.
func (o Obj) Missing(key, what string) error {
	return FieldErr(o.Field(key), ErrMissing, "is missing; "+what)
}

// Str reads a string. An absent optional key gives "".
func (o Obj) Str(key string, required bool, what string) (string, error) {
	v, ok := o.Map[key]
	if !ok {
		if required {
			return "", o.Missing(key, what)
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", o.WrongType(key, "a string", v)
	}
	return s, nil
}

// Boolean reads true or false. An absent optional key gives false.
func (o Obj) Boolean(key string, required bool, what string) (bool, error) {
	v, ok := o.Map[key]
	if !ok {
		if required {
			return false, o.Missing(key, what)
		}
		return false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, o.WrongType(key, "true or false", v)
	}
	return b, nil
}

// Strs reads a list of strings, never nil when present.
func (o Obj) Strs(key string, required bool, what string) ([]string, error) {
	return jlist(o, key, required, what, "a list of strings", "a string", func(_ int, e any) (string, bool) {
		s, ok := e.(string)
		return s, ok
	})
}

// Object reads a nested object. present says whether the key was there.
func (o Obj) Object(key string, required bool, what string) (obj Obj, present bool, err error) {
	v, ok := o.Map[key]
	if !ok {
		if required {
			return Obj{}, false, o.Missing(key, what)
		}
		return Obj{}, false, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return Obj{}, true, o.WrongType(key, "an object", v)
	}
	return Obj{Path: o.Field(key), Map: m}, true, nil
}

// Objects reads a list of objects.
func (o Obj) Objects(key string, required bool, what string) ([]Obj, error) {
	return jlist(o, key, required, what, "a list of objects", "an object", func(i int, e any) (Obj, bool) {
		m, ok := e.(map[string]any)
		return Obj{Path: IndexField(o.Field(key), i), Map: m}, ok
	})
}

// jlist reads the list at key (listWhat names it in a wrong type's error),
// each element through each, which says whether it is elemWhat; never nil
// when present.
func jlist[T any](o Obj, key string, required bool, what, listWhat, elemWhat string, each func(i int, e any) (T, bool)) ([]T, error) {
	v, ok := o.Map[key]
	if !ok {
		if required {
			return nil, o.Missing(key, what)
		}
		return nil, nil
	}
	a, ok := v.([]any)
	if !ok {
		return nil, o.WrongType(key, listWhat, v)
	}
	out := make([]T, len(a))
	for i, e := range a {
		t, ok := each(i, e)
		if !ok {
			return nil, FieldErr(IndexField(o.Field(key), i), ErrInvalid, "must be "+elemWhat+", not "+JSONType(e))
		}
		out[i] = t
	}
	return out, nil
}

// Uint reads a whole number in [0, max]. present says whether the key was there.
func (o Obj) Uint(key string, required bool, max uint64, what string) (n uint64, present bool, err error) {
	v, ok := o.Map[key]
	if !ok {
		if required {
			return 0, false, o.Missing(key, what)
		}
		return 0, false, nil
	}
	num, ok := v.(json.Number)
	if !ok {
		return 0, true, o.WrongType(key, "a whole number", v)
	}
	n, perr := strconv.ParseUint(num.String(), 10, 64)
	if perr != nil || n > max {
		return 0, true, FieldErr(o.Field(key), ErrInvalid, fmt.Sprintf("%s is not a whole number from 0 to %d", ShortToken(num.String()), max))
	}
	return n, true, nil
}

// OnlyKeys refuses any key not in allowed. It is used where an unknown key may be
// a limit (inside sandbox), so that no limit is ever silently dropped (E9).
func (o Obj) OnlyKeys(what string, allowed ...string) error {
	k, ok := o.UnknownKey(allowed)
	if !ok {
		return nil
	}
	return FieldErr(o.Field(k), ErrUnknownKey, fmt.Sprintf("is not a key this reader knows inside %s; an unknown key there may be a limit, so the whole block is refused (it knows %s)", what, ListWords(allowed)))
}

// UnknownKey is the first key, in sorted order, of the object that is not
// one of known: the one a refusal names.
func (o Obj) UnknownKey(known []string) (string, bool) {
	var unknown []string
	for k := range o.Map {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return "", false
	}
	return slices.Min(unknown), true
}

// ListWords joins words with ", " for an error message.
func ListWords(words []string) string {
	var b bytes.Buffer
	for i, w := range words {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(w)
	}
	return b.String()
}

// OptStr reads an optional string that, when present, is not empty: a writer
// leaves out what it has not got rather than write "".
func (o Obj) OptStr(key string) (string, error) {
	s, err := o.Str(key, false, "")
	if err == nil && o.Has(key) && s == "" {
		return "", FieldErr(o.Field(key), ErrInvalid, "is empty; leave the key out instead")
	}
	return s, err
}

// ShortToken shows a JSON number as it was written, eliding a long one.
func ShortToken(s string) string {
	if len(s) <= 40 {
		return s
	}
	return s[:20] + "…" + s[len(s)-20:]
}
