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

// Reading a post: the one note among its blocks, decoded as its kind says.

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
