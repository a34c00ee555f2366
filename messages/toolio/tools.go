package toolio

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// The protocol v1 tools (seed 001 E8): create, post, audit, push, stop.
// Each takes one JSON object, read in the notes' two passes (strictjson.Parse,
// then fill) with one more rule: a key the tool does not know is refused,
// naming it. Every error is a *FieldError naming the field at fault.

// The tools' names.
const (
	ToolCreate = "create"
	ToolPost   = "post"
	ToolAudit  = "audit"
	ToolPush   = "push"
	ToolStop   = "stop"
)

// ToolNames lists the tools in the order seed 001 E8 gives them.
var ToolNames = []string{ToolCreate, ToolPost, ToolAudit, ToolPush, ToolStop}

// MaxToolInputLen bounds one tool input.
const MaxToolInputLen = strictjson.MaxNoteLen

// toolArgs is one tool's decoded input.
type toolArgs interface {
	// ToolName names the tool the input is for.
	ToolName() string
	// Dry says whether the call is a dry run.
	Dry() bool
	// Validate checks what fill cannot tell from the tags.
	Validate() error
}

// CreateArgs is create's input: a record's own fields but node (E8).
// Absent fields take their defaults when the record is written: user a new
// one (RUNNER-6 hex digits), runner claude, checkins [], hears every user
// holding admin or setup now, remote true when the runner offers it,
// restrict {}, sandbox DefaultRecordSandbox (its network false where the
// node serves the runner's model, D79).
type CreateArgs struct {
	User      string                `json:"user,omitempty"`
	Runner    string                `json:"runner,omitempty"`
	Model     string                `json:"model,omitempty"`
	Objective string                `json:"objective" why:"a record says what its agent is for, and what counts as passing"`
	Checkins  []string              `json:"checkins,omitempty"`
	Hears     []string              `json:"hears,omitempty"`
	Remote    *bool                 `json:"remote,omitempty"`
	Restrict  *runmsg.Restrict      `json:"restrict,omitempty" ocx:"closed"`
	Sandbox   *runmsg.RecordSandbox `json:"sandbox,omitempty" ocx:"closed"`
	Budget    runmsg.Budget         `json:"budget" why:"a record's budget names at least wall" ocx:"closed"`
	DryRun    bool                  `json:"dry_run,omitempty"`
}

// ToolName is "create".
func (*CreateArgs) ToolName() string { return ToolCreate }

// Dry says whether it is a dry run.
func (a *CreateArgs) Dry() bool { return a.DryRun }

// Validate checks every field create checks before it looks at the node.
func (a *CreateArgs) Validate() error {
	r := runmsg.TaskRecord{User: a.User, Runner: a.Runner, Model: a.Model, Objective: a.Objective, Checkins: a.Checkins, Hears: a.Hears, Budget: a.Budget}
	if a.Restrict != nil {
		r.Restrict = *a.Restrict
	}
	if a.Sandbox != nil {
		r.Sandbox = *a.Sandbox
	}
	return r.ValidateCreate()
}

// PostArgs is post's input: the post to reply to and the text.
type PostArgs struct {
	To     string `json:"to" why:"post replies to a post: give its hash, or 10 or more of its first hex digits"`
	Text   string `json:"text" why:"post writes a text, in Markdown"`
	DryRun bool   `json:"dry_run,omitempty"`
}

// ToolName is "post".
func (*PostArgs) ToolName() string { return ToolPost }

// Dry says whether it is a dry run.
func (a *PostArgs) Dry() bool { return a.DryRun }

// Validate checks the hash and the text.
func (a *PostArgs) Validate() error {
	if err := messages.CheckHashPrefix("to", a.To); err != nil {
		return err
	}
	if strings.TrimSpace(a.Text) == "" {
		return strictjson.FieldErr("text", strictjson.ErrMissing, "is blank; a post says something")
	}
	return messages.CheckText("text", a.Text, true, strictjson.MaxNoteLen)
}

// AuditArgs is audit's input: the check-in, pass or fail, the reason on one
// line, and what it was judged against: a record's hash or a path.
type AuditArgs struct {
	Checkin string `json:"checkin" why:"audit judges a check-in: give its hash, or 10 or more of its first hex digits"`
	Verdict string `json:"verdict" why:"a verdict is pass or fail"`
	Reason  string `json:"reason" why:"a verdict gives its reason, on one line"`
	Against string `json:"against" why:"a verdict names what it was judged against: a record's hash, or the path of a file in the check-in"`
	DryRun  bool   `json:"dry_run,omitempty"`
}

// ToolName is "audit".
func (*AuditArgs) ToolName() string { return ToolAudit }

// Dry says whether it is a dry run.
func (a *AuditArgs) Dry() bool { return a.DryRun }

// Validate checks each field's form.
func (a *AuditArgs) Validate() error {
	if err := messages.CheckHashPrefix("checkin", a.Checkin); err != nil {
		return err
	}
	if a.Verdict != messages.VerdictPass && a.Verdict != messages.VerdictFail {
		return strictjson.FieldErr("verdict", strictjson.ErrInvalid, fmt.Sprintf("%s is not a verdict (pass, fail)", strictjson.QuoteShort(a.Verdict)))
	}
	if strings.TrimSpace(a.Reason) == "" {
		return strictjson.FieldErr("reason", strictjson.ErrMissing, "is blank; a verdict gives its reason")
	}
	if err := messages.CheckLine("reason", a.Reason, true, messages.MaxShortLen); err != nil {
		return err
	}
	return messages.CheckAgainst("against", a.Against)
}

// PushArgs is push's input: nothing but dry_run; what it pushes is the
// caller's own clone.
type PushArgs struct {
	DryRun bool `json:"dry_run,omitempty"`
}

// ToolName is "push".
func (*PushArgs) ToolName() string { return ToolPush }

// Dry says whether it is a dry run.
func (a *PushArgs) Dry() bool { return a.DryRun }

// Validate has nothing to check.
func (a *PushArgs) Validate() error { return nil }

// StopArgs is stop's input: the record whose agent to stop.
type StopArgs struct {
	Record string `json:"record" why:"stop names the record whose agent it stops: its hash, or 10 or more of its first hex digits"`
	DryRun bool   `json:"dry_run,omitempty"`
}

// ToolName is "stop".
func (*StopArgs) ToolName() string { return ToolStop }

// Dry says whether it is a dry run.
func (a *StopArgs) Dry() bool { return a.DryRun }

// Validate checks the hash.
func (a *StopArgs) Validate() error { return messages.CheckHashPrefix("record", a.Record) }

// decodeToolArgs reads one tool's input: one JSON object (blank input is
// {}), no key twice, no key the tool does not know, each field of its type.
func decodeToolArgs[T any, P interface {
	*T
	toolArgs
}](data []byte) (P, error) {
	p := P(new(T))
	where := p.ToolName() + " input"
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("{}")
	}
	v, err := strictjson.Parse(data, MaxToolInputLen)
	if err != nil {
		return nil, strictjson.At(where, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &strictjson.FieldError{Where: where, Problem: "is " + strictjson.JSONType(v) + "; a tool's input is a JSON object", Err: strictjson.ErrInvalid}
	}
	o := strictjson.Obj{Map: m}
	known := messages.FieldKeys(argsType(p))
	if err := onlyToolKeys(o, p.ToolName(), known); err != nil {
		return nil, strictjson.At(where, err)
	}
	if err := messages.Fill(o, p); err != nil {
		return nil, strictjson.At(where, err)
	}
	if err := p.Validate(); err != nil {
		return nil, strictjson.At(where, err)
	}
	return p, nil
}

// DecodeTool reads the input of the tool named name.
func DecodeTool(name string, data []byte) (toolArgs, error) {
	switch name {
	case ToolCreate:
		return decodeToolArgs[CreateArgs](data)
	case ToolPost:
		return decodeToolArgs[PostArgs](data)
	case ToolAudit:
		return decodeToolArgs[AuditArgs](data)
	case ToolPush:
		return decodeToolArgs[PushArgs](data)
	case ToolStop:
		return decodeToolArgs[StopArgs](data)
	}
	return nil, &strictjson.FieldError{Where: "tool", Problem: fmt.Sprintf("%s is not a tool (%s)", strictjson.QuoteShort(name), strictjson.ListWords(ToolNames)), Err: strictjson.ErrUnknownKind}
}

// ToolDryRun reads only whether an input asks a dry run, for an answer to a
// call whose input does not decode: false unless the input is an object
// whose dry_run is true.
func ToolDryRun(data []byte) bool {
	v, err := strictjson.Parse(data, MaxToolInputLen)
	if err != nil {
		return false
	}
	m, _ := v.(map[string]any)
	b, _ := m["dry_run"].(bool)
	return b
}

// onlyToolKeys refuses a key the tool does not take, naming it.
func onlyToolKeys(o strictjson.Obj, tool string, known []string) error {
	if k, ok := o.UnknownKey(known); ok {
		return strictjson.FieldErr(o.Field(k), strictjson.ErrUnknownKey, fmt.Sprintf("is not a field of %s, which takes %s", tool, strictjson.ListWords(known)))
	}
	return nil
}

func argsType(a toolArgs) reflect.Type { return reflect.TypeOf(a).Elem() }

// toolFields lists the fields a tool takes, as its input names them.
func toolFields(a toolArgs) []string {
	return messages.FieldKeys(argsType(a))
}
