package messages

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// NoteKind is what a note's "ocx" key says it is (decision D3).
type NoteKind string

// The kinds of note on the record, and the state served as JSON.
const (
	KindWorkspace  NoteKind = "workspace"
	KindSession    NoteKind = "session"
	KindLaunch     NoteKind = "launch"
	kindRefusal    NoteKind = "refusal"
	kindEnd        NoteKind = "end"
	KindStop       NoteKind = "stop"
	KindStopped    NoteKind = "stopped"
	KindTerminated NoteKind = "terminated"
	KindListen     NoteKind = "listen"
	KindUnlisten   NoteKind = "unlisten"
	kindUnheard    NoteKind = "unheard"
	KindReport     NoteKind = "report"
	KindCI         NoteKind = "ci"
	kindState      NoteKind = "state"
)

// version is the one version of the notes this package reads and writes. A note
// may say "version": 1 or leave it out.
const version = 1

// StopText is the plain post that asks a session to stop, as a stop note does.
const StopText = "OCX stop"

// Note is a note on the record: one fenced JSON block in a post or a ticket
// change, whose "ocx" names its kind.
type Note interface {
	// NoteKind is the note's "ocx".
	NoteKind() NoteKind
	// Validate checks every field; its error names the field at fault.
	Validate() error
	// Encode validates the note and renders its canonical fenced block:
	// "```json\n", the JSON indented by two spaces with "ocx" first, "\n```\n".
	Encode() ([]byte, error)
	// String renders the note on one stable line, for logs and transcripts.
	String() string
	// version is the note's Version field.
	version() int
}

func (k NoteKind) where() string {
	switch k {
	case "note":
		return "note"
	case KindWorkspace:
		return "workspace definition"
	case KindSession:
		return "session definition"
	case kindState:
		return "state"
	}
	return string(k) + " note"
}

// readVersion refuses a version this reader does not know, naming it.
func readVersion(o strictjson.Obj) error {
	v, ok := o.Map["version"]
	if !ok {
		return nil
	}
	num, isNum := v.(json.Number)
	if !isNum {
		return strictjson.FieldErr("version", strictjson.ErrInvalid, "must be a whole number, not "+strictjson.JSONType(v))
	}
	if num.String() != strconv.Itoa(version) {
		return strictjson.FieldErr("version", strictjson.ErrUnknownVersion, fmt.Sprintf("%s is not a version this reader knows (it reads version %d)", strictjson.ShortToken(num.String()), version))
	}
	return nil
}

// versionOf reads the version field after readVersion accepted it.
func versionOf(o strictjson.Obj) int {
	if o.Has("version") {
		return version
	}
	return 0
}

// checkVersion checks a note's Version field before it is written: 0 (left
// out, version 1 implied) or 1.
func checkVersion(v int) error {
	if v != 0 && v != version {
		return strictjson.FieldErr("version", strictjson.ErrUnknownVersion, fmt.Sprintf("%d is not a version this writer knows (0 leaves it out, or %d)", v, version))
	}
	return nil
}

// encodeNote renders a note's canonical fenced block. body is the note's
// fields as a struct with JSON tags (without "ocx" and "version"), which
// encodeNote puts first.
func encodeNote(kind NoteKind, version int, body any) ([]byte, error) {
	head := `{"ocx":` + strconv.Quote(string(kind))
	if version != 0 {
		head += `,"version":` + strconv.Itoa(version)
	}
	b, err := ObjectAfter(head, body)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", kind.where(), err)
	}
	out := FencedJSON(b)
	if len(out) > strictjson.MaxNoteLen {
		return nil, &strictjson.FieldError{Where: kind.where(), Problem: fmt.Sprintf("encodes to %d bytes; a note is at most %d", len(out), strictjson.MaxNoteLen), Err: strictjson.ErrTooLong}
	}
	return out, nil
}

// rendering builds a note's or a message's one-line rendering (its String):
// its kind, then key=value pairs, each value a plain token or quoted.
type rendering struct{ b strings.Builder }

// Render starts a rendering with its kind.
func Render(kind NoteKind) *rendering {
	l := &rendering{}
	l.b.WriteString(string(kind))
	return l
}

// Word adds a bare value.
func (l *rendering) Word(s string) *rendering {
	l.b.WriteByte(' ')
	l.b.WriteString(Token(s))
	return l
}

// KV adds k=v.
func (l *rendering) KV(k, v string) *rendering {
	l.b.WriteByte(' ')
	l.b.WriteString(k)
	l.b.WriteByte('=')
	l.b.WriteString(Token(v))
	return l
}

// OptKV adds k=v unless v is empty.
func (l *rendering) OptKV(k, v string) *rendering {
	if v == "" {
		return l
	}
	return l.KV(k, v)
}

// Text adds k=v with v quoted, unless v is empty.
func (l *rendering) Text(k, v string) *rendering {
	if v == "" {
		return l
	}
	l.b.WriteByte(' ')
	l.b.WriteString(k)
	l.b.WriteByte('=')
	l.b.WriteString(strconv.Quote(v))
	return l
}

// List adds k=[a b "c d"].
func (l *rendering) List(k string, vs []string) *rendering {
	l.b.WriteByte(' ')
	l.b.WriteString(k)
	l.b.WriteByte('=')
	l.b.WriteString(tokens(vs))
	return l
}

// tokens renders a list as [a b "c d"].
func tokens(vs []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, v := range vs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(Token(v))
	}
	b.WriteByte(']')
	return b.String()
}

func (l *rendering) num(k string, n uint64) *rendering {
	return l.KV(k, strconv.FormatUint(n, 10))
}

// Flag adds k=true or k=false.
func (l *rendering) Flag(k string, b bool) *rendering { return l.KV(k, strconv.FormatBool(b)) }

func (l *rendering) version(v int) *rendering {
	if v != 0 {
		l.KV("version", strconv.Itoa(v))
	}
	return l
}

// String is the rendering.
func (l *rendering) String() string { return l.b.String() }

func checkHeader(version int, login, project string) error {
	if err := checkVersion(version); err != nil {
		return err
	}
	if err := CheckLogin("login", login); err != nil {
		return err
	}
	return CheckProject("project", project)
}

func checkOptHash(field, s string) error {
	if s == "" {
		return nil
	}
	return CheckHash(field, s)
}

// encodeChecked validates a note and renders it.
func encodeChecked(n Note) ([]byte, error) {
	if err := n.Validate(); err != nil {
		return nil, strictjson.At(n.NoteKind().where(), err)
	}
	return encodeNote(n.NoteKind(), n.version(), n)
}

// limitKeys are the keys whose objects hold limits (seed 001 E9, seed 004): a
// note that carries one this reader does not enforce is refused, never read
// without it.
var limitKeys = []string{"budget", "limits", "restrict", "sandbox"}

// refuseLimitKeys refuses a limit-bearing key at the top of a note that does not
// define it, naming the key.
func refuseLimitKeys(o strictjson.Obj, kind NoteKind, except string) error {
	for _, k := range limitKeys {
		if k == except || !o.Has(k) {
			continue
		}
		return strictjson.FieldErr(o.Field(k), strictjson.ErrUnknownKey, fmt.Sprintf("a %s has no %s; a reader that does not enforce one refuses the note rather than drop a limit", kind.where(), k))
	}
	return nil
}
