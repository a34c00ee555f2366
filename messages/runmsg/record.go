package runmsg

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/modelapi"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// version is the "ocx" of every message this package reads: protocol v1.
const version = 1

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
		if err := messages.CheckBranch("restrict.branch", r.Branch); err != nil {
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

// RecordSandbox is a record's sandbox (E3): whether the agent shares the
// host's network, and the host paths it sees read-only and read-write
// beside what every workspace sees.
type RecordSandbox struct {
	Network   bool     `json:"network" why:"a record's sandbox says whether the agent shares the host's network"`
	ReadOnly  []string `json:"read_only" why:"a record's sandbox lists the host paths the agent sees read-only (empty: none)"`
	ReadWrite []string `json:"read_write" why:"a record's sandbox lists the host paths the agent sees read-write (empty: none)"`
}

// DefaultRecordSandbox is create's default sandbox (E8): network as the
// node decides it for the record's runner (D79), no paths beside the
// workspace's.
func DefaultRecordSandbox(network bool) RecordSandbox {
	return RecordSandbox{Network: network, ReadOnly: []string{}, ReadWrite: []string{}}
}

func (s RecordSandbox) validate(field string) error {
	for name, list := range map[string][]string{"read_only": s.ReadOnly, "read_write": s.ReadWrite} {
		for i, p := range list {
			if err := messages.CheckAbsPath(strictjson.IndexField(field+"."+name, i), p); err != nil {
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
func (b Budget) WallDuration() (time.Duration, error) {
	return messages.ParseWall("budget.wall", b.Wall)
}

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

// Decoded refuses tokens written as 0: a writer leaves out a limit it
// does not set.
func (b *Budget) Decoded(o strictjson.Obj) error {
	if o.Has("tokens") && b.Tokens == 0 {
		return strictjson.FieldErr(o.Field("tokens"), strictjson.ErrInvalid, "is 0; leave the key out for no limit")
	}
	return nil
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
	Sandbox   RecordSandbox `json:"sandbox" why:"a record states its sandbox" ocx:"closed"`
	Budget    Budget        `json:"budget" why:"a record states its budget" ocx:"closed"`
}

// recordKind is the kind of a protocol v1 record block.
const recordKind = "record"

// Validate checks every field.
func (r *TaskRecord) Validate() error {
	if err := messages.CheckLogin("user", r.User); err != nil {
		return err
	}
	if err := messages.CheckLogin("node", r.Node); err != nil {
		return err
	}
	if r.Runner == "" {
		return strictjson.FieldErr("runner", strictjson.ErrMissing, "is empty; a record names its runner")
	}
	return r.ValidateCreate()
}

// ValidateCreate checks the fields create's input gives a record, as create
// takes them (E8): user and runner may be empty, create's defaults standing
// for them; node is not checked.
func (r *TaskRecord) ValidateCreate() error {
	if r.Model != "" {
		if err := messages.CheckLine("model", r.Model, true, messages.MaxShortLen); err != nil {
			return err
		}
	}
	if r.User != "" {
		if err := messages.CheckLogin("user", r.User); err != nil {
			return err
		}
	}
	if r.Runner != "" && !slices.Contains(messages.Runners, r.Runner) {
		return strictjson.FieldErr("runner", strictjson.ErrInvalid, fmt.Sprintf("%s is not a runner this node offers (%s)", strictjson.QuoteShort(r.Runner), strictjson.ListWords(messages.Runners)))
	}
	if err := messages.CheckText("objective", r.Objective, true, messages.MaxTextLen); err != nil {
		return err
	}
	if strings.TrimSpace(r.Objective) == "" {
		return strictjson.FieldErr("objective", strictjson.ErrMissing, "is blank; a record says what its agent is for")
	}
	if err := messages.CheckBranches("checkins", r.Checkins); err != nil {
		return err
	}
	if err := messages.CheckHears("hears", r.Hears); err != nil {
		return err
	}
	if err := r.Restrict.Validate(); err != nil {
		return err
	}
	if err := r.Sandbox.validate("sandbox"); err != nil {
		return err
	}
	return r.Budget.validate()
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
	b, v, err := messages.NoteBlock(text)
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
	if err := messages.Fill(o, r); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return r, nil
}
