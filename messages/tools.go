package messages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/messages/modelapi"
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

// Restrict is a record's restrictions (E10). Each is optional; none is the
// default. branch and own_thread need no_password: an agent that holds its
// password can write past any tool.
type Restrict struct {
	NoPassword bool   `json:"no_password,omitempty"`
	Branch     string `json:"branch,omitempty"`
	OwnThread  bool   `json:"own_thread,omitempty"`
}

// Validate checks the branch's name and that what needs no_password has it.
func (r Restrict) Validate() error {
	if r.Branch != "" {
		if err := CheckBranch("restrict.branch", r.Branch); err != nil {
			return err
		}
		if !r.NoPassword {
			return strictjson.FieldErr("restrict.branch", strictjson.ErrInvalid, "needs restrict.no_password: an agent that holds its password can check in on any branch with Fossil itself")
		}
	}
	if r.OwnThread && !r.NoPassword {
		return strictjson.FieldErr("restrict.own_thread", strictjson.ErrInvalid, "needs restrict.no_password: an agent that holds its password can post anywhere with Fossil itself")
	}
	return nil
}

// Names lists the restrictions asked, in E10's order.
func (r Restrict) Names() []string {
	var out []string
	if r.NoPassword {
		out = append(out, "no_password")
	}
	if r.Branch != "" {
		out = append(out, "branch")
	}
	if r.OwnThread {
		out = append(out, "own_thread")
	}
	return out
}

// recordSandbox is a record's sandbox (E3): whether the agent shares the
// host's network, and the host paths it sees read-only and read-write
// beside what every workspace sees.
type recordSandbox struct {
	Network   bool     `json:"network" why:"a record's sandbox says whether the agent shares the host's network"`
	ReadOnly  []string `json:"read_only" why:"a record's sandbox lists the host paths the agent sees read-only (empty: none)"`
	ReadWrite []string `json:"read_write" why:"a record's sandbox lists the host paths the agent sees read-write (empty: none)"`
}

// DefaultRecordSandbox is create's default sandbox (E8): network as the
// node decides it for the record's runner (D79), no paths beside the
// workspace's.
func DefaultRecordSandbox(network bool) recordSandbox {
	return recordSandbox{Network: network, ReadOnly: []string{}, ReadWrite: []string{}}
}

func (s recordSandbox) validate(field string) error {
	for name, list := range map[string][]string{"read_only": s.ReadOnly, "read_write": s.ReadWrite} {
		for i, p := range list {
			if err := CheckAbsPath(strictjson.IndexField(field+"."+name, i), p); err != nil {
				return err
			}
		}
	}
	return nil
}

// Budget is a record's budget (E3): wall, the longest the agent may run,
// counted from its launch; and tokens (D50), how many tokens its model may
// read and write as the node's model proxy counts them (absent: no
// limit). Closed: a reader that does not know a key refuses the record.
type Budget struct {
	Wall   string `json:"wall" why:"a budget names wall, the longest the agent runs (a whole number and s, m, h or d)"`
	Tokens uint64 `json:"tokens,omitempty"`
}

// WallDuration reads the budget's wall as a duration.
func (b Budget) WallDuration() (time.Duration, error) { return ParseWall("budget.wall", b.Wall) }

// validate checks the wall and the tokens.
func (b Budget) validate() error {
	if _, err := b.WallDuration(); err != nil {
		return err
	}
	if b.Tokens > modelapi.MaxTokens {
		return strictjson.FieldErr("budget.tokens", strictjson.ErrInvalid, fmt.Sprintf("%d is past 2^53-1", b.Tokens))
	}
	return nil
}

// decoded refuses tokens written as 0: a writer leaves out a limit it
// does not set.
func (b *Budget) decoded(o strictjson.Obj) error {
	if o.Has("tokens") && b.Tokens == 0 {
		return strictjson.FieldErr(o.Field("tokens"), strictjson.ErrInvalid, "is 0; leave the key out for no limit")
	}
	return nil
}

// ParseWall reads a wall limit as seed 004 section 7 writes it: a whole
// number above zero, then s, m, h or d.
func ParseWall(field, s string) (time.Duration, error) {
	bad := strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s is not a wall limit: a whole number above 0 and s, m, h or d, as 2h", strictjson.QuoteShort(s)))
	if len(s) < 2 || len(s) > 12 {
		return 0, bad
	}
	unit := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}[s[len(s)-1]]
	num := s[:len(s)-1]
	if unit == 0 || num[0] < '1' || num[0] > '9' {
		return 0, bad
	}
	n, err := strconv.ParseUint(num, 10, 32)
	if err != nil || time.Duration(n) > (1<<62)/unit {
		return 0, bad
	}
	return time.Duration(n) * unit, nil
}

// CreateArgs is create's input: a record's own fields but node (E8).
// Absent fields take their defaults when the record is written: user a new
// one (RUNNER-6 hex digits), runner claude, checkins [], hears every user
// holding admin or setup now, remote true when the runner offers it,
// restrict {}, sandbox DefaultRecordSandbox (its network false where the
// node serves the runner's model, D79).
type CreateArgs struct {
	User      string         `json:"user,omitempty"`
	Runner    string         `json:"runner,omitempty"`
	Model     string         `json:"model,omitempty"`
	Objective string         `json:"objective" why:"a record says what its agent is for, and what counts as passing"`
	Checkins  []string       `json:"checkins,omitempty"`
	Hears     []string       `json:"hears,omitempty"`
	Remote    *bool          `json:"remote,omitempty"`
	Restrict  *Restrict      `json:"restrict,omitempty" ocx:"closed"`
	Sandbox   *recordSandbox `json:"sandbox,omitempty" ocx:"closed"`
	Budget    Budget         `json:"budget" why:"a record's budget names at least wall" ocx:"closed"`
	DryRun    bool           `json:"dry_run,omitempty"`
}

// ToolName is "create".
func (*CreateArgs) ToolName() string { return ToolCreate }

// Dry says whether it is a dry run.
func (a *CreateArgs) Dry() bool { return a.DryRun }

// Validate checks every field create checks before it looks at the node.
func (a *CreateArgs) Validate() error {
	if a.Model != "" {
		if err := CheckLine("model", a.Model, true, MaxShortLen); err != nil {
			return err
		}
	}
	if a.User != "" {
		if err := CheckLogin("user", a.User); err != nil {
			return err
		}
	}
	if a.Runner != "" && !slices.Contains(Runners, a.Runner) {
		return strictjson.FieldErr("runner", strictjson.ErrInvalid, fmt.Sprintf("%s is not a runner this node offers (%s)", strictjson.QuoteShort(a.Runner), strictjson.ListWords(Runners)))
	}
	if err := checkText("objective", a.Objective, true, MaxTextLen); err != nil {
		return err
	}
	if strings.TrimSpace(a.Objective) == "" {
		return strictjson.FieldErr("objective", strictjson.ErrMissing, "is blank; a record says what its agent is for")
	}
	if err := CheckBranches("checkins", a.Checkins); err != nil {
		return err
	}
	if err := CheckHears("hears", a.Hears); err != nil {
		return err
	}
	if a.Restrict != nil {
		if err := a.Restrict.Validate(); err != nil {
			return err
		}
	}
	if a.Sandbox != nil {
		if err := a.Sandbox.validate("sandbox"); err != nil {
			return err
		}
	}
	return a.Budget.validate()
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
	if err := CheckHashPrefix("to", a.To); err != nil {
		return err
	}
	if strings.TrimSpace(a.Text) == "" {
		return strictjson.FieldErr("text", strictjson.ErrMissing, "is blank; a post says something")
	}
	return checkText("text", a.Text, true, strictjson.MaxNoteLen)
}

// The two verdicts (E6).
const (
	VerdictPass = "pass"
	VerdictFail = "fail"
)

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
	if err := CheckHashPrefix("checkin", a.Checkin); err != nil {
		return err
	}
	if a.Verdict != VerdictPass && a.Verdict != VerdictFail {
		return strictjson.FieldErr("verdict", strictjson.ErrInvalid, fmt.Sprintf("%s is not a verdict (pass, fail)", strictjson.QuoteShort(a.Verdict)))
	}
	if strings.TrimSpace(a.Reason) == "" {
		return strictjson.FieldErr("reason", strictjson.ErrMissing, "is blank; a verdict gives its reason")
	}
	if err := CheckLine("reason", a.Reason, true, MaxShortLen); err != nil {
		return err
	}
	if AgainstRecord(a.Against) {
		return nil
	}
	return checkAgainstPath("against", a.Against)
}

// AgainstRecord says whether a verdict's against names a record (hex
// digits, 10 or more) rather than a path.
func AgainstRecord(s string) bool {
	return len(s) >= minHashPrefix && len(s) <= 64 && checkHex("", strings.ToLower(s)) == nil
}

// checkAgainstPath checks a path as a verdict names it: relative to the
// check-in's root, clean, one line.
func checkAgainstPath(field, s string) error {
	if err := CheckLine(field, s, true, maxPathLen); err != nil {
		return err
	}
	if strings.HasPrefix(s, "/") || path.Clean(s) != s || s == "." || s == ".." || strings.HasPrefix(s, "../") {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s is neither a record's hash (10 or more hex digits) nor a clean path inside the check-in, as PLAN.md", strictjson.QuoteShort(s)))
	}
	return nil
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
func (a *StopArgs) Validate() error { return CheckHashPrefix("record", a.Record) }

// minHashPrefix is the fewest hex digits a tool takes for a hash (E8).
const minHashPrefix = 10

// CheckHashPrefix checks a hash as a tool takes it: 10 to 64 hex digits.
// Whether it names one artifact is the repository's to say.
func CheckHashPrefix(field, s string) error {
	if s == "" {
		return strictjson.FieldErr(field, strictjson.ErrMissing, "is empty; give a hash, or 10 or more of its first hex digits")
	}
	if len(s) < minHashPrefix || len(s) > 64 {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s is %d characters; give a hash, or 10 or more of its first hex digits (at most 64)", strictjson.QuoteShort(s), len(s)))
	}
	return checkHex(field, strings.ToLower(s))
}

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
	known := planOf(argsType(p)).keys
	if err := onlyToolKeys(o, p.ToolName(), known); err != nil {
		return nil, strictjson.At(where, err)
	}
	if err := Fill(o, p); err != nil {
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
	if k, ok := unknownKey(o, known); ok {
		return strictjson.FieldErr(o.Field(k), strictjson.ErrUnknownKey, fmt.Sprintf("is not a field of %s, which takes %s", tool, strictjson.ListWords(known)))
	}
	return nil
}

func argsType(a toolArgs) reflect.Type { return reflect.TypeOf(a).Elem() }

// toolFields lists the fields a tool takes, as its input names them.
func toolFields(a toolArgs) []string {
	return slices.Clone(planOf(argsType(a)).keys)
}

// TaskRecord is protocol v1's record (E3): the first post of a new thread,
// holding one fenced block {"ocx": 1, "kind": "record", ...}. create writes
// it with every default written out; only one that a user holding admin
// or setup sent counts. A reader ignores keys it does not know, but inside
// restrict, sandbox and budget, where an unknown key may be a limit.
type TaskRecord struct {
	User   string `json:"user" why:"a record names its agent's user"`
	Node   string `json:"node" why:"a record names the node user of the node that runs it"`
	Runner string `json:"runner" why:"a record names its runner"`
	// Model is the model its runner asks (E3 admits a key version 1 does
	// not name; a reader that does not know it ignores it). create writes
	// it out (D52): the node's default when create names none; "" only in
	// a record written before.
	Model     string        `json:"model,omitempty"`
	Objective string        `json:"objective" why:"a record says what its agent is for"`
	Checkins  []string      `json:"checkins" why:"a record lists the branches whose check-ins its agent is given (empty: none)"`
	Hears     []string      `json:"hears" why:"a record lists whose posts its agent is given, written out"`
	Remote    bool          `json:"remote" why:"a record says whether its agent offers remote control"`
	Restrict  Restrict      `json:"restrict" why:"a record states its restrictions ({} for none)" ocx:"closed"`
	Sandbox   recordSandbox `json:"sandbox" why:"a record states its sandbox" ocx:"closed"`
	Budget    Budget        `json:"budget" why:"a record states its budget" ocx:"closed"`
}

// recordKind is the kind of a protocol v1 record block.
const recordKind = "record"

// Validate checks every field.
func (r *TaskRecord) Validate() error {
	if err := CheckLogin("user", r.User); err != nil {
		return err
	}
	if err := CheckLogin("node", r.Node); err != nil {
		return err
	}
	a := CreateArgs{User: r.User, Runner: r.Runner, Model: r.Model, Objective: r.Objective, Checkins: r.Checkins, Hears: r.Hears,
		Restrict: &r.Restrict, Sandbox: &r.Sandbox, Budget: r.Budget}
	if r.Runner == "" {
		return strictjson.FieldErr("runner", strictjson.ErrMissing, "is empty; a record names its runner")
	}
	return a.Validate()
}

// Encode renders the record's fenced block.
func (r *TaskRecord) Encode() ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, strictjson.At("record", err)
	}
	c := *r
	for _, l := range []*[]string{&c.Checkins, &c.Hears, &c.Sandbox.ReadOnly, &c.Sandbox.ReadWrite} {
		if *l == nil {
			*l = []string{}
		}
	}
	body, err := json.Marshal(struct {
		Ocx  int    `json:"ocx"`
		Kind string `json:"kind"`
		*TaskRecord
	}{version, recordKind, &c})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.WriteString("```json\n")
	if err := json.Indent(&out, body, "", "  "); err != nil {
		return nil, err
	}
	out.WriteString("\n```\n")
	return out.Bytes(), nil
}

// ReadTaskRecord reads the record a post's text holds: its one JSON block
// with "ocx": 1 and "kind": "record".
func ReadTaskRecord(text []byte) (*TaskRecord, error) {
	b, v, err := noteBlock(text)
	if err != nil {
		return nil, err
	}
	where := fmt.Sprintf("record (block at line %d)", b.Line)
	m, _ := v.(map[string]any)
	o := strictjson.Obj{Map: m}
	if n, ok := m["ocx"].(json.Number); !ok || n.String() != strconv.Itoa(version) {
		return nil, &strictjson.FieldError{Where: where, Field: "ocx", Problem: fmt.Sprintf(`is not 1; a protocol v1 record says "ocx": 1`), Err: strictjson.ErrUnknownVersion}
	}
	if k, _ := m["kind"].(string); k != recordKind {
		return nil, &strictjson.FieldError{Where: where, Field: "kind", Problem: `is not "record"`, Err: strictjson.ErrWrongKind}
	}
	r, err := decodeTaskRecord(o)
	if err != nil {
		return nil, strictjson.At(where, err)
	}
	return r, nil
}

// decodeTaskRecord reads a record's fields from its parsed block, whose
// ocx and kind the caller has read; ReadMessage dispatches here too.
func decodeTaskRecord(o strictjson.Obj) (*TaskRecord, error) {
	r := new(TaskRecord)
	if err := Fill(o, r); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return r, nil
}

// AuditedTag is the raw name of a verdict's tag (E6).
const AuditedTag = "audited"

// Verdict is one verdict, as an audited tag's value says it: pass: or
// fail:, the reason on one line, then (against X).
type Verdict struct {
	Pass    bool
	Reason  string
	Against string // a record's full hash, or a path in the check-in
}

// TagValue renders the tag's value.
func (v Verdict) TagValue() string {
	word := VerdictFail
	if v.Pass {
		word = VerdictPass
	}
	return fmt.Sprintf("%s: %s (against %s)", word, v.Reason, v.Against)
}

// NamesRecord says whether the verdict's X names a record (a full hash)
// rather than the path of a file in the check-in (E6).
func (v Verdict) NamesRecord() bool { return CheckHash("", v.Against) == nil }

// ParseVerdict reads an audited tag's value.
func ParseVerdict(value string) (Verdict, error) {
	var v Verdict
	rest, ok := strings.CutPrefix(value, VerdictPass+": ")
	v.Pass = ok
	if !ok {
		if rest, ok = strings.CutPrefix(value, VerdictFail+": "); !ok {
			return Verdict{}, strictjson.FieldErr("audited", strictjson.ErrInvalid, fmt.Sprintf("%s does not start with pass: or fail:", strictjson.QuoteShort(value)))
		}
	}
	i := strings.LastIndex(rest, " (against ")
	if i < 0 || !strings.HasSuffix(rest, ")") {
		return Verdict{}, strictjson.FieldErr("audited", strictjson.ErrInvalid, fmt.Sprintf("%s does not end with (against X)", strictjson.QuoteShort(value)))
	}
	v.Reason, v.Against = rest[:i], rest[i+len(" (against "):len(rest)-1]
	if strings.TrimSpace(v.Reason) == "" || v.Against == "" || CheckLine("audited", value, true, MaxTextLen) != nil {
		return Verdict{}, strictjson.FieldErr("audited", strictjson.ErrInvalid, fmt.Sprintf("%s has no reason or no X", strictjson.QuoteShort(value)))
	}
	// X is a record's full hash or a path of the check-in (E6), as the
	// audit tool writes it and the status shows it: anything else (5 KB of
	// it, an absolute path) is no verdict, which every reader passes over.
	if CheckHash("audited", v.Against) != nil && checkAgainstPath("audited", v.Against) != nil {
		return Verdict{}, strictjson.FieldErr("audited", strictjson.ErrInvalid, fmt.Sprintf("%s names %s, which is neither a record's full hash nor a path of the check-in (at most %d bytes, relative, clean)",
			strictjson.QuoteShort(value), strictjson.QuoteShort(v.Against), maxPathLen))
	}
	return v, nil
}
