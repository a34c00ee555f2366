package messages

import (
	"bytes"
	"encoding/json"
	"errors"
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

// noteKinds lists every kind of note, in a stable order.
func noteKinds() []NoteKind {
	return []NoteKind{KindWorkspace, KindSession, KindLaunch, kindRefusal, kindEnd, KindStop, KindStopped,
		KindTerminated, KindListen, KindUnlisten, kindUnheard, KindReport, KindCI}
}

// newNote returns an empty note of a kind, or nil for a kind this package does not know.
func newNote(kind NoteKind) Note {
	switch kind {
	case KindWorkspace:
		return &WorkspaceDefinition{}
	case KindSession:
		return &SessionDefinition{}
	case KindLaunch:
		return &LaunchNote{}
	case kindRefusal:
		return &RefusalNote{}
	case kindEnd:
		return &EndNote{}
	case KindStop:
		return &StopNote{}
	case KindStopped:
		return &StoppedNote{}
	case KindTerminated:
		return &TerminatedNote{}
	case KindListen:
		return &ListenNote{}
	case KindUnlisten:
		return &UnlistenNote{}
	case kindUnheard:
		return &UnheardNote{}
	case KindReport:
		return &ReportNote{}
	case KindCI:
		return &CINote{}
	}
	return nil
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

// decodeNote reads one note from the JSON of a block (without its fences) and
// validates it. Unknown keys are ignored, except inside sandbox and for the
// limit-bearing keys budget, limits and restrict, which refuse the note (E9). A
// version other than 1 gives ErrUnknownVersion and an unknown kind
// ErrUnknownKind, each naming what it found; a run-engine message ("ocx": 1)
// gives ErrRunMessage, and JSON without "ocx" gives ErrNotANote.
func decodeNote(block []byte) (Note, error) {
	v, err := strictjson.Parse(block, strictjson.MaxNoteLen)
	if err != nil {
		return nil, strictjson.At(kindHint(block).where(), err)
	}
	return decodeTree(v, "")
}

// kindHint guesses, for an error message only, what kind of note a block that
// did not parse strictly meant to be; "note" when it cannot tell.
func kindHint(block []byte) NoteKind {
	var head struct {
		OCX any `json:"ocx"`
	}
	if json.Unmarshal(block, &head) == nil {
		if k, ok := head.OCX.(string); ok && newNote(NoteKind(k)) != nil {
			return NoteKind(k)
		}
	}
	return "note"
}

// DecodeNoteAs reads a note that must be of type T, such as *WorkspaceDefinition.
func DecodeNoteAs[T Note](block []byte) (T, error) {
	var zero T
	n, err := decodeNote(block)
	if err != nil {
		return zero, err
	}
	t, ok := n.(T)
	if !ok {
		wantKind := "another kind of"
		if nn := newOf[T](); nn != nil {
			wantKind = string(nn.NoteKind())
		}
		return zero, &strictjson.FieldError{Where: "note", Field: "ocx", Problem: fmt.Sprintf("is %q; a %s note is expected here", n.NoteKind(), wantKind), Err: strictjson.ErrWrongKind}
	}
	return t, nil
}

// newOf finds the kind of note a pointer type T stands for.
func newOf[T Note]() Note {
	for _, k := range noteKinds() {
		if _, ok := newNote(k).(T); ok {
			return newNote(k)
		}
	}
	return nil
}

// decodeTree reads a note from a parsed value. suffix is appended to the
// "where" of errors (" at line 7" when read from a post).
func decodeTree(v any, suffix string) (Note, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &strictjson.FieldError{Where: "note" + suffix, Problem: "is " + strictjson.JSONType(v) + "; a note is a JSON object", Err: strictjson.ErrNotANote}
	}
	o := strictjson.Obj{Map: m}
	raw, ok := m["ocx"]
	if !ok {
		return nil, &strictjson.FieldError{Where: "note" + suffix, Field: "ocx", Problem: `is missing; a JSON block without "ocx" is not an OCX note`, Err: strictjson.ErrNotANote}
	}
	var kind NoteKind
	switch x := raw.(type) {
	case json.Number:
		return nil, &strictjson.FieldError{Where: "note" + suffix, Field: "ocx", Problem: fmt.Sprintf(`is %s: a run-engine message (seed 004), which this reader does not read`, strictjson.ShortToken(x.String())), Err: strictjson.ErrRunMessage}
	case string:
		kind = NoteKind(x)
	default:
		return nil, &strictjson.FieldError{Where: "note" + suffix, Field: "ocx", Problem: "must be a string naming the note's kind, not " + strictjson.JSONType(raw), Err: strictjson.ErrInvalid}
	}
	n := newNote(kind)
	if n == nil {
		return nil, &strictjson.FieldError{Where: "note" + suffix, Field: "ocx", Problem: fmt.Sprintf("%s is not a kind of note this reader knows", strictjson.QuoteShort(string(kind))), Err: strictjson.ErrUnknownKind}
	}
	where := kind.where() + suffix
	if err := readVersion(o); err != nil {
		return nil, strictjson.At(where, err)
	}
	except := ""
	switch kind {
	case KindWorkspace:
		except = "sandbox"
	case KindSession:
		except = "limits"
	case kindEnd, KindStopped:
		// budget there names the limit a session ran past (D40), which
		// this reader knows.
		except = "budget"
	}
	if err := refuseLimitKeys(o, kind, except); err != nil {
		return nil, strictjson.At(where, err)
	}
	if err := Fill(o, n); err != nil {
		return nil, strictjson.At(where, err)
	}
	if err := n.Validate(); err != nil {
		return nil, strictjson.At(where, err)
	}
	return n, nil
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

// NoteBlock finds the one OCX note among a post's ```json blocks. A block
// counts as a note when it is a JSON object with an "ocx" key; other JSON
// blocks are not notes and are passed over. The post is refused when a ```json
// block is never closed or does not parse (it might have been a note), and when
// two blocks or more are notes (ErrSeveralNotes): no reader acts on a post whose
// meaning depends on which note it picks. A post with no note gives ErrNotANote.
// The note comes with the value strictjson.Parse made of it.
func NoteBlock(text []byte) (block, any, error) {
	blocks, err := Blocks(text)
	if err != nil {
		return block{}, nil, err
	}
	var (
		notes  []block
		values []any
	)
	for _, b := range blocks {
		v, err := strictjson.Parse(b.JSON, strictjson.MaxNoteLen)
		if err != nil {
			return block{}, nil, strictjson.At(fmt.Sprintf("post: block at line %d", b.Line), err)
		}
		if m, ok := v.(map[string]any); ok {
			if _, ok := m["ocx"]; ok {
				notes = append(notes, b)
				values = append(values, v)
			}
		}
	}
	switch len(notes) {
	case 0:
		return block{}, nil, &strictjson.FieldError{Where: "post", Problem: fmt.Sprintf("holds no OCX note (%d ```json block(s), none with \"ocx\")", len(blocks)), Err: strictjson.ErrNotANote}
	case 1:
		return notes[0], values[0], nil
	}
	lines := make([]string, len(notes))
	for i, b := range notes {
		lines[i] = strconv.Itoa(b.Line)
	}
	return block{}, nil, &strictjson.FieldError{Where: "post", Problem: fmt.Sprintf("holds %d OCX notes (blocks at lines %s); a post carries at most one, so none of them counts", len(notes), strings.Join(lines, ", ")), Err: strictjson.ErrSeveralNotes}
}

// ReadPost reads the note a post or ticket comment carries: a plain post whose
// text, trimmed, is "OCX stop" is a stop note; otherwise its one note block is
// decoded (see NoteBlock and decodeNote for what is refused). Errors name the
// block's line.
func ReadPost(text []byte) (Note, error) {
	if string(bytes.TrimSpace(text)) == StopText {
		return &StopNote{}, nil
	}
	b, v, err := NoteBlock(text)
	if err != nil {
		return nil, err
	}
	return decodeTree(v, fmt.Sprintf(" (block at line %d)", b.Line))
}

// Ignorable says whether a reader that only acts on what it knows (the hook, the
// daemon) passes over a post that gave err without a word of complaint: it holds
// no note, or a note of a version or kind this reader does not know (E9). Other
// errors are faults worth a line in the log; a tool refuses every error.
func Ignorable(err error) bool {
	return errors.Is(err, strictjson.ErrNotANote) || errors.Is(err, strictjson.ErrUnknownVersion) ||
		errors.Is(err, strictjson.ErrUnknownKind) || errors.Is(err, strictjson.ErrRunMessage)
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

// Rendering builds a note's or a message's one-line rendering (its String):
// its kind, then key=value pairs, each value a plain token or quoted.
type Rendering struct{ b strings.Builder }

// Render starts a rendering with its kind.
func Render(kind NoteKind) *Rendering {
	l := &Rendering{}
	l.b.WriteString(string(kind))
	return l
}

// Word adds a bare value.
func (l *Rendering) Word(s string) *Rendering {
	l.b.WriteByte(' ')
	l.b.WriteString(Token(s))
	return l
}

// KV adds k=v.
func (l *Rendering) KV(k, v string) *Rendering {
	l.b.WriteByte(' ')
	l.b.WriteString(k)
	l.b.WriteByte('=')
	l.b.WriteString(Token(v))
	return l
}

// OptKV adds k=v unless v is empty.
func (l *Rendering) OptKV(k, v string) *Rendering {
	if v == "" {
		return l
	}
	return l.KV(k, v)
}

// Text adds k=v with v quoted, unless v is empty.
func (l *Rendering) Text(k, v string) *Rendering {
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
func (l *Rendering) List(k string, vs []string) *Rendering {
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

func (l *Rendering) num(k string, n uint64) *Rendering {
	return l.KV(k, strconv.FormatUint(n, 10))
}

// Flag adds k=true or k=false.
func (l *Rendering) Flag(k string, b bool) *Rendering { return l.KV(k, strconv.FormatBool(b)) }

func (l *Rendering) version(v int) *Rendering {
	if v != 0 {
		l.KV("version", strconv.Itoa(v))
	}
	return l
}

// String is the rendering.
func (l *Rendering) String() string { return l.b.String() }

// Claim is what one fenced block of a post says it is, read loosely: its
// kind ("ocx") and, when they are strings, the login and project it names.
type Claim struct {
	Line    int
	Kind    NoteKind
	Login   string
	Project string
}

// Claims lists the blocks of a post that claim to be OCX notes: each ```json
// block that parses as an object whose "ocx" is a string, whether or not it
// decodes as a note. A reader uses it to tell what a post that ReadPost
// refused was meant as (two launch notes, or a launch with a field at
// fault), so that its refusal can name the workspace and the fault.
func Claims(text []byte) []Claim {
	blocks, _ := Blocks(text)
	var out []Claim
	for _, b := range blocks {
		v, err := strictjson.Parse(b.JSON, strictjson.MaxNoteLen)
		if err != nil {
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		kind, ok := m["ocx"].(string)
		if !ok {
			continue
		}
		c := Claim{Line: b.Line, Kind: NoteKind(kind)}
		c.Login, _ = m["login"].(string)
		c.Project, _ = m["project"].(string)
		out = append(out, c)
	}
	return out
}
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
