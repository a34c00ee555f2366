package runmsg

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// The run engine's messages (seed 004, tables 1 and 3): a fenced JSON block
// whose envelope is {"ocx": 1, "kind": ..., "node": ..., "run": ...}, the
// envelope protocol v1's record shares. ReadMessage reads any of them and
// dispatches on kind: run, stop, started, ended, and record (TaskRecord).

// MessageKind is an "ocx": 1 message's kind.
type MessageKind string

// The kinds of table 3, and protocol v1's record.
const (
	MsgRun     MessageKind = "run"
	MsgStop    MessageKind = "stop"
	MsgStarted MessageKind = "started"
	MsgEnded   MessageKind = "ended"
	// MsgFired is a trigger's firing (beyond the seed, D101).
	MsgFired  MessageKind = "fired"
	MsgRecord MessageKind = recordKind
)

// messageKinds lists the kinds ReadMessage knows: table 3's, then record.
var messageKinds = []MessageKind{MsgRun, MsgStop, MsgStarted, MsgEnded, MsgFired, MsgRecord}

func (k MessageKind) known() bool {
	for _, m := range messageKinds {
		if m == k {
			return true
		}
	}
	return false
}

// Message is one "ocx": 1 message: a run, stop, started or ended, or a
// protocol v1 record.
type Message interface {
	// Kind is the message's kind.
	Kind() MessageKind
	// NodeUser is the node user its envelope names.
	NodeUser() string
	// Encode validates the message and renders its canonical fenced block.
	Encode() ([]byte, error)
}

// MalformedMessage is a message of a kind the reader knows that does not
// decode: a run of this kind is refused by row 2 of section 11, naming
// Err's field; a malformed stop, started or ended is ignored. Node is the
// node its envelope names, when that much reads ("" otherwise), so the
// reader knows whether the message is addressed to it.
type MalformedMessage struct {
	Kind MessageKind
	Node string
	Err  *strictjson.FieldError
}

func (e *MalformedMessage) Error() string { return e.Err.Error() }

// Unwrap gives the *FieldError.
func (e *MalformedMessage) Unwrap() error { return e.Err }

// Run is a run message (table 3): what the node is asked to run. Workspace
// nil is no workspace; Sandbox nil runs unconfined; Limits nil unlimited.
type Run struct {
	Node      string      `json:"node"`
	Objective string      `json:"objective"`
	Workspace []RunStep   `json:"workspace,omitempty"`
	Sandbox   *runSandbox `json:"sandbox,omitempty"`
	Limits    *RunLimits  `json:"limits,omitempty"`
	Process   RunProcess  `json:"process"`
}

// RunStop asks the node to stop a run (table 3); tools write it.
type RunStop struct {
	Node string `json:"node"`
	Run  string `json:"run"`
}

// RunStarted says the node began a run (table 3): every value set, as it
// was, and the limits applied, as written ({} for none).
type RunStarted struct {
	Node   string    `json:"node"`
	Run    string    `json:"run"`
	Values RunValues `json:"values"`
	Limits RunLimits `json:"limits"`
}

// RunEnded says how a run ended (table 12). Exit is present for exited
// alone; Note for refused, budget and lost alone.
type RunEnded struct {
	Node    string     `json:"node"`
	Run     string     `json:"run"`
	Outcome RunOutcome `json:"outcome"`
	Exit    *int       `json:"exit,omitempty"`
	Note    string     `json:"note,omitempty"`
}

func (*Run) Kind() MessageKind        { return MsgRun }
func (*RunStop) Kind() MessageKind    { return MsgStop }
func (*RunStarted) Kind() MessageKind { return MsgStarted }
func (*RunEnded) Kind() MessageKind   { return MsgEnded }

// Kind is record.
func (*TaskRecord) Kind() MessageKind { return MsgRecord }

func (r *Run) NodeUser() string        { return r.Node }
func (s *RunStop) NodeUser() string    { return s.Node }
func (s *RunStarted) NodeUser() string { return s.Node }
func (e *RunEnded) NodeUser() string   { return e.Node }

// NodeUser is the record's node.
func (r *TaskRecord) NodeUser() string { return r.Node }

// HasPasswordStep says whether the workspace takes the user's password.
func (r *Run) HasPasswordStep() bool {
	for _, s := range r.Workspace {
		if s.Step == StepPassword {
			return true
		}
	}
	return false
}

// SetsWorkspace says whether a step sets the workspace value.
func (r *Run) SetsWorkspace() bool {
	for _, s := range r.Workspace {
		if s.Step == StepDirectory {
			return true
		}
	}
	return false
}

func (r *Run) String() string {
	steps := make([]string, len(r.Workspace))
	for i, s := range r.Workspace {
		steps[i] = s.Step
	}
	l := messages.Render("run").KV("node", r.Node).KV("user", r.Process.User).List("steps", steps)
	l.Flag("sandbox", r.Sandbox != nil).List("limits", r.Limits.Names()).List("command", r.Process.Command)
	return l.Flag("manual", r.Process.Manual).Flag("session", r.Process.Session).String()
}

func (s *RunStop) String() string {
	return messages.Render("stop").KV("node", s.Node).KV("run", s.Run).String()
}

func (s *RunStarted) String() string {
	return messages.Render("started").KV("node", s.Node).KV("run", s.Run).List("values", s.Values.Names()).List("limits", s.Limits.Names()).String()
}

func (e *RunEnded) String() string {
	l := messages.Render("ended").KV("node", e.Node).KV("run", e.Run).KV("outcome", string(e.Outcome))
	if e.Exit != nil {
		l.KV("exit", strconv.Itoa(*e.Exit))
	}
	return l.Text("note", e.Note).String()
}

// Validate checks every field but the values named (CheckRunValues) and
// the refusals that need the node (RunRefusal).
func (r *Run) Validate() error {
	if err := messages.CheckUser("node", r.Node); err != nil {
		return err
	}
	if err := checkObjective(r.Objective); err != nil {
		return err
	}
	for i, s := range r.Workspace {
		if err := s.validate(strictjson.IndexField("workspace", i)); err != nil {
			return err
		}
	}
	if r.Sandbox != nil {
		if err := r.Sandbox.validate("sandbox"); err != nil {
			return err
		}
	}
	if r.Limits != nil {
		if err := r.Limits.validate("limits"); err != nil {
			return err
		}
	}
	return r.Process.validate("process")
}

func checkObjective(s string) error {
	if err := messages.CheckText("objective", s, true, messages.MaxTextLen); err != nil {
		return err
	}
	if strings.TrimSpace(s) == "" {
		return strictjson.FieldErr("objective", strictjson.ErrMissing, "is blank; a run says what it is for, and what counts as passing")
	}
	return nil
}

// Validate checks the node and the run's hash.
func (s *RunStop) Validate() error {
	if err := messages.CheckUser("node", s.Node); err != nil {
		return err
	}
	return messages.CheckHash("run", s.Run)
}

// Validate checks the envelope, each value's name and the limits.
func (s *RunStarted) Validate() error {
	if err := messages.CheckUser("node", s.Node); err != nil {
		return err
	}
	if err := messages.CheckHash("run", s.Run); err != nil {
		return err
	}
	for k, v := range s.Values {
		if !validValueName(k) {
			return strictjson.FieldErr(strictjson.JoinField("values", k), strictjson.ErrInvalid, "is not a value's name: letters, digits or _")
		}
		if err := messages.CheckArg(strictjson.JoinField("values", k), v); err != nil {
			return err
		}
	}
	return s.Limits.validate("limits")
}

// Validate checks table 12: which of exit and note each outcome has.
func (e *RunEnded) Validate() error {
	if err := messages.CheckUser("node", e.Node); err != nil {
		return err
	}
	if err := messages.CheckHash("run", e.Run); err != nil {
		return err
	}
	exit, note := endedFields(e.Outcome)
	if exit == "" {
		return strictjson.FieldErr("outcome", strictjson.ErrInvalid, fmt.Sprintf("%s is not an outcome (%s)", strictjson.QuoteShort(string(e.Outcome)), strictjson.ListWords(outcomeWords())))
	}
	switch {
	case exit == fieldRequired && e.Exit == nil:
		return strictjson.FieldErr("exit", strictjson.ErrMissing, "is missing; an exited run gives its exit code, 128 and N for signal N")
	case exit == fieldAbsent && e.Exit != nil:
		return strictjson.FieldErr("exit", strictjson.ErrInvalid, fmt.Sprintf("is present; a run %s has no exit", e.Outcome))
	case e.Exit != nil && (*e.Exit < 0 || *e.Exit > 255):
		return strictjson.FieldErr("exit", strictjson.ErrInvalid, fmt.Sprintf("%d is not an exit code from 0 to 255", *e.Exit))
	}
	switch {
	case note == fieldRequired && strings.TrimSpace(e.Note) == "":
		return strictjson.FieldErr("note", strictjson.ErrMissing, fmt.Sprintf("is missing; a run %s says why in a note", e.Outcome))
	case note == fieldAbsent && e.Note != "":
		return strictjson.FieldErr("note", strictjson.ErrInvalid, fmt.Sprintf("is present; a run %s has no note", e.Outcome))
	}
	if e.Note != "" {
		return messages.CheckText("note", e.Note, true, messages.MaxTextLen)
	}
	return nil
}

const (
	fieldRequired = "required"
	fieldAbsent   = "absent"
)

// endedFields gives table 12's rule for exit and note of an outcome, or ""
// for an outcome the table does not have.
func endedFields(o RunOutcome) (exit, note string) {
	switch o {
	case RunRefused, RunBudget, RunLost:
		return fieldAbsent, fieldRequired
	case RunStopped:
		return fieldAbsent, fieldAbsent
	case RunExited:
		return fieldRequired, fieldAbsent
	}
	return "", ""
}

func outcomeWords() []string {
	out := make([]string, len(runOutcomes))
	for i, o := range runOutcomes {
		out[i] = string(o)
	}
	return out
}

// Encode renders the run's canonical block.
func (r *Run) Encode() ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, strictjson.At("run", err)
	}
	c := *r
	if c.Sandbox != nil {
		s := *c.Sandbox
		for _, l := range []*[]string{&s.Capabilities, &s.ReadOnly, &s.ReadWrite, &s.Homes} {
			if *l == nil {
				*l = []string{}
			}
		}
		if s.Files == nil {
			s.Files = []runFile{}
		}
		c.Sandbox = &s
	}
	return encodeMessage(MsgRun, &c)
}

// Encode renders the stop's canonical block.
func (s *RunStop) Encode() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, strictjson.At("stop", err)
	}
	return encodeMessage(MsgStop, s)
}

// Encode renders the started's canonical block.
func (s *RunStarted) Encode() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, strictjson.At("started", err)
	}
	c := *s
	if c.Values == nil {
		c.Values = RunValues{}
	}
	return encodeMessage(MsgStarted, &c)
}

// Encode renders the ended's canonical block.
func (e *RunEnded) Encode() ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, strictjson.At("ended", err)
	}
	return encodeMessage(MsgEnded, e)
}

// encodeMessage renders "```json\n", the JSON indented by two spaces with
// ocx and kind first, then body's fields in their order, and "\n```\n".
func encodeMessage(kind MessageKind, body any) ([]byte, error) {
	b, err := messages.ObjectAfter(fmt.Sprintf(`{"ocx":%d,"kind":%q`, version, kind), body)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", kind, err)
	}
	out := messages.FencedJSON(b)
	if len(out) > strictjson.MaxNoteLen {
		return nil, &strictjson.FieldError{Where: string(kind), Problem: fmt.Sprintf("encodes to %d bytes; a message is at most %d", len(out), strictjson.MaxNoteLen), Err: strictjson.ErrTooLong}
	}
	return out, nil
}

// ReadMessage reads the "ocx": 1 message a post's or ticket change's text
// holds (from the first version of the post: the caller passes that). It
// tells apart:
//
//   - no message: errors.Is(err, ErrNotANote), also for a session design
//     note ("ocx": "workspace"), which is not one of these;
//   - another version (ErrUnknownVersion) or a kind it does not know,
//     kind missing included (ErrUnknownKind): ignored, table 3;
//   - a known kind that does not decode: a *MalformedMessage, whose Err
//     names the field (a run so is refused by section 11, row 2);
//   - the message: *Run, *RunStop, *RunStarted, *RunEnded or *TaskRecord.
//
// A post whose blocks cannot be told apart (an unclosed fence, a JSON block
// that does not parse, two blocks with "ocx") gives the *FieldError of
// NoteBlock; no reader acts on it.
func ReadMessage(text []byte) (Message, error) {
	b, v, err := messages.NoteBlock(text)
	if err != nil {
		return nil, err
	}
	return decodeMessage(v, fmt.Sprintf("message (block at line %d)", b.Line))
}

// DecodeMessage reads one message from the JSON of a block without its
// fences, as ReadMessage does.
func DecodeMessage(block []byte) (Message, error) {
	v, err := strictjson.Parse(block, strictjson.MaxNoteLen)
	if err != nil {
		return nil, strictjson.At("message", err)
	}
	return decodeMessage(v, "message")
}

func decodeMessage(v any, where string) (Message, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &strictjson.FieldError{Where: where, Problem: "is " + strictjson.JSONType(v) + "; a message is a JSON object", Err: strictjson.ErrNotANote}
	}
	raw, ok := m["ocx"]
	if !ok {
		return nil, &strictjson.FieldError{Where: where, Field: "ocx", Problem: `is missing; a JSON block without "ocx" is not an OCX message`, Err: strictjson.ErrNotANote}
	}
	switch x := raw.(type) {
	case string:
		return nil, &strictjson.FieldError{Where: where, Field: "ocx", Problem: fmt.Sprintf("is %s: a note of the session design, not a run engine message", strictjson.QuoteShort(x)), Err: strictjson.ErrNotANote}
	case json.Number:
		if x.String() != strconv.Itoa(version) {
			return nil, &strictjson.FieldError{Where: where, Field: "ocx", Problem: fmt.Sprintf("%s is not a version this reader knows (it reads %d)", strictjson.ShortToken(x.String()), version), Err: strictjson.ErrUnknownVersion}
		}
	default:
		return nil, &strictjson.FieldError{Where: where, Field: "ocx", Problem: "is " + strictjson.JSONType(raw) + ", not a version", Err: strictjson.ErrNotANote}
	}
	kraw, ok := m["kind"]
	kind, isStr := kraw.(string)
	if !ok || !isStr || !MessageKind(kind).known() {
		what := "is missing"
		if ok {
			what = "is " + strictjson.JSONType(kraw)
			if isStr {
				what = strictjson.QuoteShort(kind)
			}
		}
		return nil, &strictjson.FieldError{Where: where, Field: "kind", Problem: fmt.Sprintf("%s: not a kind this reader knows (%s), so the message is ignored", what, strictjson.ListWords(kindWords())), Err: strictjson.ErrUnknownKind}
	}
	k := MessageKind(kind)
	o := strictjson.Obj{Map: m}
	if k == MsgRecord {
		r, err := decodeTaskRecord(o)
		if err != nil {
			return nil, strictjson.At(where, err)
		}
		return r, nil
	}
	where = kind + strings.TrimPrefix(where, "message")
	msg, err := decodeRunKind(k, o)
	if err != nil {
		var fe *strictjson.FieldError
		if !errors.As(err, &fe) {
			fe = &strictjson.FieldError{Problem: err.Error(), Err: strictjson.ErrInvalid}
		}
		if fe.Where == "" {
			fe.Where = where
		}
		node, _ := m["node"].(string)
		if messages.CheckUser("node", node) != nil {
			node = ""
		}
		return nil, &MalformedMessage{Kind: k, Node: node, Err: fe}
	}
	return msg, nil
}

func kindWords() []string {
	out := make([]string, len(messageKinds))
	for i, k := range messageKinds {
		out[i] = string(k)
	}
	return out
}

var envelopeKeys = []string{"ocx", "kind", "node"}

func decodeRunKind(k MessageKind, o strictjson.Obj) (Message, error) {
	node, err := o.Str("node", true, "a message names the node it is for")
	if err != nil {
		return nil, err
	}
	var run string
	if k != MsgRun {
		if run, err = o.Str("run", true, "a message about a run names the run's hash in full"); err != nil {
			return nil, err
		}
	}
	switch k {
	case MsgRun:
		if err := closed(o, "a run", append(envelopeKeys, "objective", "workspace", "sandbox", "limits", "process")...); err != nil {
			return nil, err
		}
		r := &Run{Node: node}
		if r.Objective, err = o.Str("objective", true, "a run says what it is for, and what counts as passing"); err != nil {
			return nil, err
		}
		steps, err := o.Objects("workspace", false, "")
		if err != nil {
			return nil, err
		}
		for _, so := range steps {
			s, err := readStep(so)
			if err != nil {
				return nil, err
			}
			r.Workspace = append(r.Workspace, s)
		}
		if so, present, err := o.Object("sandbox", false, ""); err != nil {
			return nil, err
		} else if present {
			if r.Sandbox, err = readSandbox(so); err != nil {
				return nil, err
			}
		}
		if lo, present, err := o.Object("limits", false, ""); err != nil {
			return nil, err
		} else if present {
			if r.Limits, err = readLimits(lo); err != nil {
				return nil, err
			}
		}
		po, _, err := o.Object("process", true, "a run names its process: its user and command at least")
		if err != nil {
			return nil, err
		}
		if r.Process, err = readProcess(po); err != nil {
			return nil, err
		}
		if err := messages.CheckUser("node", r.Node); err != nil {
			return nil, err
		}
		if err := checkObjective(r.Objective); err != nil {
			return nil, err
		}
		return r, nil
	case MsgStop:
		if err := closed(o, "a stop", append(envelopeKeys, "run")...); err != nil {
			return nil, err
		}
		s := &RunStop{Node: node, Run: run}
		return s, s.Validate()
	case MsgStarted:
		if err := closed(o, "a started", append(envelopeKeys, "run", "values", "limits")...); err != nil {
			return nil, err
		}
		s := &RunStarted{Node: node, Run: run, Values: RunValues{}}
		vo, _, err := o.Object("values", true, "a started lists every value set")
		if err != nil {
			return nil, err
		}
		for name, v := range vo.Map {
			str, ok := v.(string)
			if !ok {
				return nil, vo.WrongType(name, "a string", v)
			}
			s.Values[name] = str
		}
		lo, _, err := o.Object("limits", true, "a started lists the limits applied ({} for none)")
		if err != nil {
			return nil, err
		}
		l, err := readLimits(lo)
		if err != nil {
			return nil, err
		}
		s.Limits = *l
		return s, s.Validate()
	case MsgFired:
		if err := closed(o, "a fired", append(envelopeKeys, "run", "checkin", "at")...); err != nil {
			return nil, err
		}
		f := &RunFired{Node: node, Run: run}
		if f.Checkin, err = o.OptStr("checkin"); err != nil {
			return nil, err
		}
		if at, err := o.OptStr("at"); err != nil {
			return nil, err
		} else if at != "" {
			t, err := time.Parse(time.RFC3339, at)
			if err != nil || t.Format(FiredTimeLayout) != at {
				return nil, strictjson.FieldErr("at", strictjson.ErrInvalid, fmt.Sprintf("%s is not a minute in UTC, as 2026-12-08T00:05:00Z", strictjson.QuoteShort(at)))
			}
			f.At = t
		}
		return f, f.Validate()
	case MsgEnded:
		if err := closed(o, "an ended", append(envelopeKeys, "run", "outcome", "exit", "note")...); err != nil {
			return nil, err
		}
		e := &RunEnded{Node: node, Run: run}
		out, err := o.Str("outcome", true, "an ended says how the run ended ("+strictjson.ListWords(outcomeWords())+")")
		if err != nil {
			return nil, err
		}
		e.Outcome = RunOutcome(out)
		if n, present, err := o.Uint("exit", false, 255, ""); err != nil {
			return nil, err
		} else if present {
			x := int(n)
			e.Exit = &x
		}
		if e.Note, err = o.Str("note", false, ""); err != nil {
			return nil, err
		}
		if o.Has("note") && e.Note == "" {
			return nil, strictjson.FieldErr("note", strictjson.ErrInvalid, "is empty; leave the key out instead")
		}
		return e, e.Validate()
	}
	return nil, strictjson.FieldErr("kind", strictjson.ErrUnknownKind, "is not a kind of the run engine")
}
