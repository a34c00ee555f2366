package modelapi

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// MaxScanValueLen bounds the raw JSON an ObjectScanner keeps of one
// top-level value it was asked for; a longer value is told as long, and
// none of it kept.
const MaxScanValueLen = 4 << 10

// maxScanDepth is how deep an ObjectScanner lets containers nest, as
// encoding/json does (its scanner's maxNestingDepth).
const maxScanDepth = 10000

// ObjectScanner reads one JSON object as its bytes come (Write, then
// Close), and keeps nothing of them but the raw values of the top-level
// keys it was made for (NewObjectScanner), each at most MaxScanValueLen:
// so a body of any size is read in bounded memory, the bytes passed on
// as they are read (the model proxy, D80). It checks the whole text as
// encoding/json reads it (json.Valid: strings, escapes, numbers, literals,
// nesting at most 10000 deep, whitespace after the object only), and the
// first error stays. A key is compared as encoding/json decodes it and
// matches a struct's field, without case: "mod\u0065l" and "MODEL" are
// "model". Made with an objectEdit (newObjectEditor), it passes the object
// on as it reads it (Pass), the values of the keys it holds changed.
type ObjectScanner struct {
	keys   []string
	vals   []scannedValue
	keyMax int // the longest raw form a key asked for can take
	edit   objectEdit
	held   []bool // per key: its value is held, and passed as edit.Value makes it

	// Pass's state.
	holding bool   // a held value is being read: its bytes wait
	ev      scanEv // what the last byte read did to what passes
	repl    []byte // what passes for a held value, or before the closing brace

	off   int64 // bytes read so far
	err   error
	stack []byte // '{' or '[' for each container open; the top object first
	st    scanState

	// The string being read.
	inKey   bool
	key     []byte // a top-level key's raw bytes, up to keyMax
	keyLong bool
	escaped bool // the key holds an escape: decoded before it is compared
	hexLeft int
	lit     string // the literal being read, and how far
	litAt   int

	cur       int  // the value being kept (an index of vals), -1 none
	capturing bool // its first byte is read
}

// scannedValue is what an ObjectScanner saw of one key at the top level:
// Seen counts the times the key was there; Raw is its first value's raw
// JSON once that value is whole, nil before or when it was Long.
type scannedValue struct {
	Seen int
	Raw  []byte
	Long bool
	done bool
}

// objectEdit is what an ObjectScanner passing its object on changes: a
// held key's top-level value waits until it is whole (at most
// MaxScanValueLen), then Value(key, raw) passes in its place (raw nil when
// the value was longer; an error ends the scan with it); End(empty) passes
// after the last member, before the closing brace (empty: the object has
// no member). A key named twice has its first value held only.
type objectEdit struct {
	Held  []string
	Value func(key string, raw []byte) ([]byte, error)
	End   func(empty bool) []byte
}

// scanEv is what a byte read does to what passes.
type scanEv uint8

const (
	evNone scanEv = iota
	evHold        // the byte begins a held value
	evHeld        // the held value is whole: repl passes for it
	evEnd         // the byte closes the object: repl passes before it
)

type scanState uint8

const (
	stBegin         scanState = iota // before the object
	stObjKeyOrEnd                    // after '{'
	stObjKey                         // after ',' in an object
	stColon                          // after a key
	stValue                          // after ':' or ',' in an array
	stArrValueOrEnd                  // after '['
	stAfterValue                     // after a value in a container
	stEnd                            // after the object
	stStr
	stStrEsc
	stStrHex
	stLit
	stNumNeg   // after '-'
	stNum0     // after a leading 0
	stNumInt   // in the integer's digits
	stNumDot   // after '.'
	stNumFrac  // in the fraction's digits
	stNumE     // after 'e'
	stNumESign // after the exponent's sign
	stNumExp   // in the exponent's digits
)

// NewObjectScanner scans for the top-level keys given.
func NewObjectScanner(keys ...string) *ObjectScanner {
	s := &ObjectScanner{keys: keys, vals: make([]scannedValue, len(keys)), held: make([]bool, len(keys)), cur: -1}
	for _, k := range keys {
		// Every character takes at most six bytes written as an escape
		// (\uXXXX); a surrogate pair's twelve are two characters' worth.
		s.keyMax = max(s.keyMax, 6*len(k))
	}
	return s
}

// newObjectEditor scans for the top-level keys given and e.Held (which it
// holds), to pass the object on changed by e (Pass).
func newObjectEditor(e objectEdit, keys ...string) *ObjectScanner {
	for _, k := range e.Held {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	s := NewObjectScanner(keys...)
	s.edit = e
	for i, k := range keys {
		s.held[i] = slices.Contains(e.Held, k)
	}
	return s
}

// Value is what the scan saw of key, one of those it was made for.
func (s *ObjectScanner) Value(key string) scannedValue {
	if i := slices.Index(s.keys, key); i >= 0 {
		v := s.vals[i]
		if !v.done || v.Long {
			v.Raw = nil
		}
		return v
	}
	return scannedValue{}
}

// Done says the object is whole: only whitespace may follow.
func (s *ObjectScanner) Done() bool { return s.err == nil && s.st == stEnd }

// Err is the first error met, nil while the text reads.
func (s *ObjectScanner) Err() error { return s.err }

// Close says the input is over: an error unless the object was whole.
func (s *ObjectScanner) Close() error {
	if s.err == nil && s.st != stEnd {
		if s.st == stBegin {
			s.err = fmt.Errorf("at byte %d: the end, before any object", s.off)
		} else {
			s.err = fmt.Errorf("at byte %d: the end, before the object is whole", s.off)
		}
	}
	return s.err
}

// Write reads p. It returns len(p) and nil while the text reads, else the
// first error (and then again at every call).
func (s *ObjectScanner) Write(p []byte) (int, error) { return s.read(p, nil) }

// Pass reads p as Write does and appends to dst what of it passes on:
// its bytes, but for the values held, each passed once whole as the
// scanner's objectEdit makes it, and what the edit adds before the
// object's closing brace. Passed whole, the object comes out as its
// bytes did, but for the edit. After an error, what it appended is
// not to be passed.
func (s *ObjectScanner) Pass(dst, p []byte) ([]byte, error) {
	_, err := s.read(p, &dst)
	return dst, err
}

func (s *ObjectScanner) read(p []byte, out *[]byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	from := 0 // p[from:] is to pass, but for what is held
	for i := 0; i < len(p); {
		// The common case, a long string no one keeps, read apace.
		if s.st == stStr && !s.inKey && !s.capturing {
			j := i
			for j < len(p) && p[j] >= 0x20 && p[j] != '"' && p[j] != '\\' {
				j++
			}
			s.off += int64(j - i)
			if i = j; i == len(p) {
				break
			}
		}
		again, err := s.step(p[i])
		if err != nil {
			s.err = err
			return i, err
		}
		if s.ev != evNone {
			if out != nil {
				switch s.ev {
				case evHold:
					*out = append(*out, p[from:i]...)
				case evHeld: // the value ended before p[i] (a number) or with it
					*out = append(*out, s.repl...)
					if from = i; !again {
						from = i + 1
					}
				case evEnd:
					*out = append(append(*out, p[from:i]...), s.repl...)
					from = i
				}
			}
			s.ev = evNone
		}
		if !again {
			s.off++
			i++
		}
	}
	if out != nil && !s.holding {
		*out = append(*out, p[from:]...)
	}
	return len(p), nil
}

// literalOf is the literal whose first byte is c (t, f or n).
func literalOf(c byte) string {
	switch c {
	case 't':
		return "true"
	case 'f':
		return "false"
	}
	return "null"
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (s *ObjectScanner) fail(c byte, where string) (bool, error) {
	return false, fmt.Errorf("at byte %d: invalid character %q %s", s.off, rune(c), where)
}

// keep adds c to the value being kept.
func (s *ObjectScanner) keep(c byte) {
	if !s.capturing {
		return
	}
	v := &s.vals[s.cur]
	if v.Long {
		return
	}
	if len(v.Raw) >= MaxScanValueLen {
		v.Long, v.Raw = true, nil
		return
	}
	v.Raw = append(v.Raw, c)
}

// step reads one byte; again says it is to be read once more (the byte
// that ended a number).
func (s *ObjectScanner) step(c byte) (again bool, err error) {
	switch s.st {
	case stBegin:
		switch {
		case isSpace(c):
		case c == '{':
			s.stack = append(s.stack, '{')
			s.st = stObjKeyOrEnd
		default:
			return s.fail(c, "looking for the beginning of the object")
		}
	case stEnd:
		if !isSpace(c) {
			return s.fail(c, "after the object")
		}
	case stObjKeyOrEnd, stObjKey:
		switch {
		case isSpace(c):
			s.keep(c)
		case c == '"':
			s.keep(c)
			s.st, s.inKey = stStr, true
			s.key, s.keyLong, s.escaped = s.key[:0], false, false
		case c == '}' && s.st == stObjKeyOrEnd:
			s.keep(c)
			return false, s.closed(true)
		default:
			return s.fail(c, "looking for the beginning of an object key string")
		}
	case stColon:
		switch {
		case isSpace(c):
			s.keep(c)
		case c == ':':
			s.keep(c)
			s.st = stValue
		default:
			return s.fail(c, "after an object key")
		}
	case stValue, stArrValueOrEnd:
		if isSpace(c) {
			s.keep(c)
			return false, nil
		}
		if c == ']' && s.st == stArrValueOrEnd {
			s.keep(c)
			return false, s.closed(false)
		}
		if s.cur >= 0 && len(s.stack) == 1 {
			s.capturing = true // the value kept begins
			if s.held[s.cur] {
				s.holding, s.ev = true, evHold
			}
		}
		s.keep(c)
		switch {
		case c == '{' || c == '[':
			if len(s.stack) >= maxScanDepth {
				return false, fmt.Errorf("at byte %d: nested deeper than %d", s.off, maxScanDepth)
			}
			s.stack = append(s.stack, c)
			s.st = stObjKeyOrEnd
			if c == '[' {
				s.st = stArrValueOrEnd
			}
		case c == '"':
			s.st, s.inKey = stStr, false
		case c == '-':
			s.st = stNumNeg
		case c == '0':
			s.st = stNum0
		case c >= '1' && c <= '9':
			s.st = stNumInt
		case c == 't' || c == 'f' || c == 'n':
			s.lit = literalOf(c)
			s.litAt, s.st = 1, stLit
		default:
			return s.fail(c, "looking for the beginning of a value")
		}
	case stAfterValue:
		top := s.stack[len(s.stack)-1]
		switch {
		case isSpace(c):
			s.keep(c)
		case c == ',':
			s.keep(c)
			if top == '{' {
				s.st = stObjKey
			} else {
				s.st = stValue
			}
		case c == '}' && top == '{', c == ']' && top == '[':
			s.keep(c)
			return false, s.closed(false)
		default:
			if top == '{' {
				return s.fail(c, "after an object key:value pair")
			}
			return s.fail(c, "after an array element")
		}
	case stStr:
		switch {
		case c == '"':
			s.keep(c)
			if s.inKey {
				s.keyRead()
				s.st = stColon
				return false, nil
			}
			return false, s.valueDone()
		case c == '\\':
			s.keyByte(c)
			s.keep(c)
			s.escaped = true
			s.st = stStrEsc
		case c < 0x20:
			return s.fail(c, "in a string literal")
		default:
			s.keyByte(c)
			s.keep(c)
		}
	case stStrEsc:
		switch c {
		case 'b', 'f', 'n', 'r', 't', '\\', '/', '"':
			s.st = stStr
		case 'u':
			s.hexLeft, s.st = 4, stStrHex
		default:
			return s.fail(c, "in a string escape code")
		}
		s.keyByte(c)
		s.keep(c)
	case stStrHex:
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return s.fail(c, "in a \\u hexadecimal character escape")
		}
		s.keyByte(c)
		s.keep(c)
		if s.hexLeft--; s.hexLeft == 0 {
			s.st = stStr
		}
	case stLit:
		if c != s.lit[s.litAt] {
			return s.fail(c, fmt.Sprintf("in the literal %s (expecting %q)", s.lit, rune(s.lit[s.litAt])))
		}
		s.keep(c)
		if s.litAt++; s.litAt == len(s.lit) {
			return false, s.valueDone()
		}
	case stNumNeg:
		switch {
		case c == '0':
			s.st = stNum0
		case c >= '1' && c <= '9':
			s.st = stNumInt
		default:
			return s.fail(c, "in a numeric literal")
		}
		s.keep(c)
	case stNum0, stNumInt, stNumFrac:
		switch {
		case c >= '0' && c <= '9' && s.st != stNum0:
		case c == '.' && s.st != stNumFrac:
			s.st = stNumDot
		case c == 'e' || c == 'E':
			s.st = stNumE
		default:
			return true, s.valueDone() // the number ended before c
		}
		s.keep(c)
	case stNumDot:
		if c < '0' || c > '9' {
			return s.fail(c, "after a decimal point in a numeric literal")
		}
		s.keep(c)
		s.st = stNumFrac
	case stNumE, stNumESign:
		switch {
		case (c == '+' || c == '-') && s.st == stNumE:
			s.st = stNumESign
		case c >= '0' && c <= '9':
			s.st = stNumExp
		default:
			return s.fail(c, "in the exponent of a numeric literal")
		}
		s.keep(c)
	case stNumExp:
		if c < '0' || c > '9' {
			return true, s.valueDone()
		}
		s.keep(c)
	}
	return false, nil
}

// keyByte adds c to the top-level key being read.
func (s *ObjectScanner) keyByte(c byte) {
	if !s.inKey || len(s.stack) != 1 || s.keyLong {
		return
	}
	if len(s.key) >= s.keyMax {
		s.keyLong, s.key = true, s.key[:0]
		return
	}
	s.key = append(s.key, c)
}

// keyRead is a key whole: at the top level, one asked for is counted and
// its value is the one kept next.
func (s *ObjectScanner) keyRead() {
	s.inKey = false
	if len(s.stack) != 1 || s.keyLong {
		return
	}
	k := string(s.key)
	if s.escaped {
		var d string
		if json.Unmarshal(append(append([]byte{'"'}, s.key...), '"'), &d) != nil {
			return
		}
		k = d
	}
	// As encoding/json matches a struct's field (bytes.EqualFold).
	if i := slices.IndexFunc(s.keys, func(key string) bool { return strings.EqualFold(key, k) }); i >= 0 {
		s.vals[i].Seen++
		if s.vals[i].Seen == 1 {
			s.cur = i
		}
	}
}

// closed is the container on top of the stack closed; empty says it
// held nothing.
func (s *ObjectScanner) closed(empty bool) error {
	s.stack = s.stack[:len(s.stack)-1]
	if len(s.stack) == 0 {
		s.st = stEnd
		if s.edit.End != nil {
			s.repl, s.ev = s.edit.End(empty), evEnd
		}
		return nil
	}
	return s.valueDone()
}

// valueDone is a value whole, in its container: a held one passes as the
// edit makes it.
func (s *ObjectScanner) valueDone() error {
	s.st = stAfterValue
	if !s.capturing || len(s.stack) != 1 {
		return nil
	}
	v := &s.vals[s.cur]
	v.done = true
	key := s.keys[s.cur]
	s.cur, s.capturing = -1, false
	if !s.holding {
		return nil
	}
	s.holding = false
	raw := v.Raw
	if v.Long {
		raw = nil
	}
	repl, err := s.edit.Value(key, raw)
	if err != nil {
		return err
	}
	s.repl, s.ev = repl, evHeld
	return nil
}
