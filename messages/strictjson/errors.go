package strictjson

import (
	"errors"
	"strconv"
	"strings"
)

// The sentinel errors say what kind of fault a *FieldError reports, so that a
// caller can decide with errors.Is whether to ignore the input (the hook, the
// daemon) or refuse it (a tool), while the message still names the field.
var (
	// ErrInvalid: a value has the wrong type, form or range.
	ErrInvalid = errors.New("invalid")
	// ErrMissing: a required field or argument is absent.
	ErrMissing = errors.New("missing")
	// ErrUnknownKey: an unknown key inside sandbox, or a limit-bearing key
	// (budget, limits, restrict) that this reader does not enforce (seed 001 E9).
	ErrUnknownKey = errors.New("unknown key")
	// ErrDuplicateKey: a JSON object names the same key twice.
	ErrDuplicateKey = errors.New("duplicate key")
	// ErrSyntax: the input is not well-formed (JSON syntax, UTF-8, line shape).
	ErrSyntax = errors.New("syntax error")
	// ErrTooLong: the input exceeds its bound (a pipe line, a block, a name).
	ErrTooLong = errors.New("too long")
	// ErrUnknownVersion: a note says a version this reader does not know. The
	// hook and the daemon ignore such a note; a tool refuses it (seed 001 E9).
	ErrUnknownVersion = errors.New("unknown version")
	// ErrUnknownKind: a note's "ocx" names a kind this reader does not know.
	// Readers treat it like an unknown version.
	ErrUnknownKind = errors.New("unknown kind")
	// ErrRunMessage: the block is a run-engine message ("ocx": 1, seed 004),
	// which this package does not read yet.
	ErrRunMessage = errors.New("run-engine message")
	// ErrNotANote: a post holds no OCX note. It is not a fault of the post; a
	// reader simply has nothing to act on.
	ErrNotANote = errors.New("not a note")
	// ErrSeveralNotes: a post holds more than one OCX note. No reader acts on it.
	ErrSeveralNotes = errors.New("several notes")
	// ErrUnclosedFence: a ```json block is never closed: a truncated post.
	ErrUnclosedFence = errors.New("unclosed fence")
	// ErrWrongKind: a note of one kind was read where another was expected.
	ErrWrongKind = errors.New("wrong kind")
)

// FieldError reports a refused input and names the field at fault (protocol v1,
// E8). Where says what was read ("workspace note", "pipe line"), Field is the
// path inside it in the form sandbox.read_write[1] (empty when the fault is the
// input as a whole), Problem says what is wrong in words, and Err is one of the
// sentinels above.
type FieldError struct {
	Where   string
	Field   string
	Problem string
	Err     error
}

// Error renders "where: field: problem", leaving out the empty parts.
func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Where != "" {
		b.WriteString(e.Where)
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Problem)
	return b.String()
}

// Unwrap returns the sentinel, so errors.Is(err, ErrUnknownVersion) works.
func (e *FieldError) Unwrap() error { return e.Err }

// JSONPointer renders Field as an RFC 6901 pointer (sandbox.read_write[1] becomes
// /sandbox/read_write/1), the form JSON Schema validators use for locations.
func (e *FieldError) JSONPointer() string {
	return fieldToPointer(e.Field)
}

func fieldToPointer(field string) string {
	if field == "" {
		return ""
	}
	var b strings.Builder
	for _, part := range strings.Split(field, ".") {
		name, rest, _ := strings.Cut(part, "[")
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1"))
		for rest != "" {
			idx, after, _ := strings.Cut(rest, "]")
			b.WriteByte('/')
			b.WriteString(idx)
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return b.String()
}

// FieldErr builds a *FieldError without a Where; the decoders fill Where in.
func FieldErr(field string, sentinel error, problem string) *FieldError {
	return &FieldError{Field: field, Problem: problem, Err: sentinel}
}

// At sets Where on a *FieldError (if err is one) and returns it; other errors
// are returned unchanged.
func At(where string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) && fe.Where == "" {
		fe.Where = where
	}
	return err
}

// JoinField appends a key to a field path. A key that is not a plain word
// (letters, digits, '_' and '-') is quoted, and a long one shortened, so that a
// hostile key cannot put a newline or a megabyte into an error message.
func JoinField(path, key string) string {
	if !plainKey(key) {
		key = QuoteShort(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func plainKey(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '*') {
			return false
		}
	}
	return true
}

// IndexField appends a list index to a field path.
func IndexField(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// QuoteShort quotes s for an error message, eliding the middle of a long one so
// that a hostile 5,000-byte value does not make a 5,000-byte message.
func QuoteShort(s string) string {
	const keep = 48
	if len(s) <= 2*keep {
		return strconv.Quote(s)
	}
	head, tail := s[:keep], s[len(s)-keep:]
	return strconv.Quote(strings.ToValidUTF8(head, "")) + "…" + strconv.Quote(strings.ToValidUTF8(tail, ""))
}
