package messages

import (
	"fmt"

	"github.com/ocx-go/ocx/messages/modelapi"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// SessionKind says what runs a session's turns.
type SessionKind string

// The kinds of session (seed 000): a command, or a runner with a model.
const (
	Mechanical SessionKind = "mechanical"
	LLM        SessionKind = "llm"
)

// Lifetime says when a session ends by itself.
type Lifetime string

// The lifetimes (seed 000, D4).
const (
	// Completes: the session exits once its report is on the record.
	Completes Lifetime = "completes"
	// Stays: the session runs until it is stopped.
	Stays Lifetime = "stays"
)

// ResultKind is what a `completes` session's run on a check-in of a branch
// it listens to leaves on that check-in (D5, D42): a ci tag, or its login's
// verdict.
type ResultKind string

// The results a branch listener's run leaves.
const (
	// ResultCI: a `ci` tag, green or red with the command's last line (CI,
	// D5). It is the default: a definition without result.
	ResultCI ResultKind = "ci"
	// ResultVerdict: the `audited` tag, pass or fail with the command's last
	// line, as the session's agent login: its verdict (seed 001 E6). Such a
	// session is a reviewer (D42).
	ResultVerdict ResultKind = "verdict"
)

// Or returns the result, ResultCI when it is empty.
func (k ResultKind) Or() ResultKind {
	if k == "" {
		return ResultCI
	}
	return k
}

// TagName is the raw tag a run of this result writes on its check-in.
func (k ResultKind) TagName() string {
	if k == ResultVerdict {
		return AuditedTag
	}
	return CITagName
}

// The runners an llm session may name (seed 000's runners). A reader refuses a
// runner it does not offer (E9).
const (
	RunnerClaude = "claude"
	RunnerCodex  = "codex"
	RunnerNative = "native"
)

// Runners lists the runners this release offers.
var Runners = []string{RunnerClaude, RunnerCodex, RunnerNative}

// SessionDefinition says what a session is: mechanical (a command) or llm (a
// runner and a model), and whether it completes or stays. It is on the
// session's own record.
type SessionDefinition struct {
	Version  int         `json:"-" ocx:"version"`
	Kind     SessionKind `json:"kind" why:"a session is mechanical (a command) or llm (a runner and a model)"`
	Command  []string    `json:"command,omitempty"`
	Runner   string      `json:"runner,omitempty" ocx:"empty"`
	Model    string      `json:"model,omitempty" ocx:"empty"`
	Lifetime Lifetime    `json:"lifetime" why:"a session completes (ends on its report) or stays (runs until stopped)"`
	// Hears names the users whose posts and ticket changes wake the session
	// (protocol v1 E3, seed 004 section 8): logins, or ["*"] for every user
	// the server knows. nil (absent) is the default: every user holding
	// admin or setup when the session starts, as the tools write it out;
	// an empty list hears nobody. The session's own posts never wake it.
	Hears []string `json:"hears,omitzero"`
	// Checkins names the branches whose check-ins are given to the running
	// session (protocol v1 E4 and E7, seed 004's process.checkins): the
	// hook wakes it with each check-in on one of them that its own login
	// did not send. Empty or absent: none.
	Checkins []string `json:"checkins,omitempty"`
	// Limits are the session's limits (seed 004's limits layer; a
	// protocol v1 record's budget): nil for none. A reader of a release
	// before this one refuses a definition that carries limits rather
	// than drop them (E9), and this one refuses a key it does not know
	// inside them.
	Limits *SessionLimits `json:"limits,omitempty" ocx:"closed"`
	// Result is what each run on a check-in of a branch the session listens
	// to leaves there (D42): ci (absent: the default) or verdict, which
	// makes the session a reviewer. Only a `completes` session says it.
	Result ResultKind `json:"result,omitempty"`
}

// SessionLimits are the limits a session runs under: at least one.
// Each key is a limit, and the object is closed: a reader that does not
// know one refuses the definition (E9), so that no limit is dropped.
type SessionLimits struct {
	// Wall is the longest the session runs, counted from its start: a
	// whole number and s, m, h or d. Past it the daemon ends it (D40).
	Wall string `json:"wall,omitempty"`
	// Tokens is how many tokens an llm session's model may read and
	// write, as the node's model proxy counts them (D50). Once they are
	// spent the proxy refuses its requests and the daemon ends it. 0 (or
	// absent): none.
	Tokens uint64 `json:"tokens,omitempty"`
	// Disk is the size of the file system the workspace's directory is
	// on while the session runs (D82): a whole number and K, M or G
	// ("4G"), or bytes, always a string. The node sizes the workspace's
	// disk to it at the launch; the kernel holds the session to it (a
	// write past it fails with ENOSPC in the sandbox). Absent: node.json's
	// session_limits.disk.
	Disk string `json:"disk,omitempty"`
}

// Wall returns the definition's wall limit, "" when it has none.
func (d *SessionDefinition) Wall() string {
	if d.Limits == nil {
		return ""
	}
	return d.Limits.Wall
}

// Disk returns the definition's disk limit as written, "" when it has
// none.
func (d *SessionDefinition) Disk() string {
	if d.Limits == nil {
		return ""
	}
	return d.Limits.Disk
}

// Tokens returns the definition's tokens limit, 0 when it has none.
func (d *SessionDefinition) Tokens() uint64 {
	if d.Limits == nil {
		return 0
	}
	return d.Limits.Tokens
}

// validate checks the limits: a wall that reads, a tokens limit above 0
// and only for an llm session, and at least one of the two.
func (l *SessionLimits) validate(kind SessionKind) error {
	if l.Wall == "" && l.Tokens == 0 && l.Disk == "" {
		return strictjson.FieldErr("limits", strictjson.ErrMissing, "names no limit; limits name wall (the longest the session runs), tokens (what its model may read and write) or disk (the size of its workspace's file system), or are left out")
	}
	if l.Disk != "" {
		if _, err := ParseDisk("limits.disk", l.Disk); err != nil {
			return err
		}
	}
	if l.Wall != "" {
		if _, err := ParseWall("limits.wall", l.Wall); err != nil {
			return err
		}
	}
	if l.Tokens > modelapi.MaxTokens {
		return strictjson.FieldErr("limits.tokens", strictjson.ErrInvalid, fmt.Sprintf("%d is past 2^53-1", l.Tokens))
	}
	if l.Tokens > 0 && kind != LLM {
		return strictjson.FieldErr("limits.tokens", strictjson.ErrInvalid, "a mechanical session has no model; tokens is an llm session's limit")
	}
	return nil
}

// Decoded refuses a tokens limit written as 0: a writer leaves out a
// limit it does not set.
func (l *SessionLimits) Decoded(o strictjson.Obj) error {
	if o.Has("tokens") && l.Tokens == 0 {
		return strictjson.FieldErr(o.Field("tokens"), strictjson.ErrInvalid, "is 0; leave the key out for no limit")
	}
	return nil
}

// HearsEveryone is the one entry of a hears list that stands for every user.
const HearsEveryone = "*"

// CheckHears checks a hears list: each entry a user's login, or "*" alone,
// none twice.
func CheckHears(field string, hears []string) error {
	seen := make(map[string]bool, len(hears))
	for i, u := range hears {
		f := strictjson.IndexField(field, i)
		if u == HearsEveryone {
			if len(hears) != 1 {
				return strictjson.FieldErr(f, strictjson.ErrInvalid, `"*" stands for every user and comes alone`)
			}
			continue
		}
		if err := CheckUser(f, u); err != nil {
			return err
		}
		if seen[u] {
			return strictjson.FieldErr(f, strictjson.ErrInvalid, fmt.Sprintf("%s is named twice", strictjson.QuoteShort(u)))
		}
		seen[u] = true
	}
	return nil
}

// NoteKind is "session".
func (*SessionDefinition) NoteKind() NoteKind { return KindSession }

func (n *SessionDefinition) version() int { return n.Version }

// Validate checks that a mechanical session has a command and no runner, an llm
// session a runner it offers and a model and no command, and the lifetime.
func (d *SessionDefinition) Validate() error {
	if err := checkVersion(d.Version); err != nil {
		return err
	}
	switch d.Kind {
	case Mechanical:
		if len(d.Command) == 0 {
			return strictjson.FieldErr("command", strictjson.ErrMissing, "is missing or empty; a mechanical session runs a command: the program, then its arguments")
		}
		for i, a := range d.Command {
			if err := CheckArg(strictjson.IndexField("command", i), a); err != nil {
				return err
			}
		}
		if d.Command[0] == "" {
			return strictjson.FieldErr("command[0]", strictjson.ErrInvalid, "is empty; it names the program to run")
		}
		if d.Runner != "" {
			return strictjson.FieldErr("runner", strictjson.ErrInvalid, "a mechanical session has no runner; its command is what runs")
		}
		if d.Model != "" {
			return strictjson.FieldErr("model", strictjson.ErrInvalid, "a mechanical session has no model; its command is what runs")
		}
	case LLM:
		if d.Runner == "" {
			return strictjson.FieldErr("runner", strictjson.ErrMissing, fmt.Sprintf("is missing; an llm session names its runner (%s)", strictjson.ListWords(Runners)))
		}
		known := false
		for _, r := range Runners {
			known = known || r == d.Runner
		}
		if !known {
			return strictjson.FieldErr("runner", strictjson.ErrInvalid, fmt.Sprintf("%s is not a runner this node offers (%s)", strictjson.QuoteShort(d.Runner), strictjson.ListWords(Runners)))
		}
		if err := CheckLine("model", d.Model, true, MaxShortLen); err != nil {
			if d.Model == "" {
				return strictjson.FieldErr("model", strictjson.ErrMissing, "is missing; an llm session names the model its runner uses")
			}
			return err
		}
		if d.Command != nil {
			return strictjson.FieldErr("command", strictjson.ErrInvalid, "an llm session has no command; its runner is what runs")
		}
	case "":
		return strictjson.FieldErr("kind", strictjson.ErrMissing, "is missing; a session is mechanical (a command) or llm (a runner and a model)")
	default:
		return strictjson.FieldErr("kind", strictjson.ErrInvalid, fmt.Sprintf("%s is not a kind of session (mechanical, llm)", strictjson.QuoteShort(string(d.Kind))))
	}
	switch d.Lifetime {
	case Completes, Stays:
	case "":
		return strictjson.FieldErr("lifetime", strictjson.ErrMissing, "is missing; a session completes (ends on its report) or stays (runs until stopped)")
	default:
		return strictjson.FieldErr("lifetime", strictjson.ErrInvalid, fmt.Sprintf("%s is not a lifetime (completes, stays)", strictjson.QuoteShort(string(d.Lifetime))))
	}
	if d.Limits != nil {
		if err := d.Limits.validate(d.Kind); err != nil {
			return err
		}
	}
	if err := CheckBranches("checkins", d.Checkins); err != nil {
		return err
	}
	switch d.Result {
	case "", ResultCI:
	case ResultVerdict:
		if d.Lifetime != Completes {
			return strictjson.FieldErr("result", strictjson.ErrInvalid, "a verdict is the result of a `completes` session's run on a check-in; a `stays` session has none")
		}
	default:
		return strictjson.FieldErr("result", strictjson.ErrInvalid, fmt.Sprintf("%s is not a run's result (ci, verdict)", strictjson.QuoteShort(string(d.Result))))
	}
	return CheckHears("hears", d.Hears)
}

// CheckBranches checks a list of branch names: each a branch, none twice.
func CheckBranches(field string, branches []string) error {
	seen := make(map[string]bool, len(branches))
	for i, b := range branches {
		f := strictjson.IndexField(field, i)
		if err := CheckBranch(f, b); err != nil {
			return err
		}
		if seen[b] {
			return strictjson.FieldErr(f, strictjson.ErrInvalid, fmt.Sprintf("%s is named twice", strictjson.QuoteShort(b)))
		}
		seen[b] = true
	}
	return nil
}

// Encode renders the canonical block.
func (d *SessionDefinition) Encode() ([]byte, error) {
	if err := d.Validate(); err != nil {
		return nil, strictjson.At(KindSession.where(), err)
	}
	return encodeNote(KindSession, d.Version, d)
}

// String renders the definition on one line.
func (d *SessionDefinition) String() string {
	l := Render(KindSession).version(d.Version).Word(string(d.Kind))
	if d.Kind == LLM || d.Runner != "" || d.Model != "" {
		l.KV("runner", d.Runner).KV("model", d.Model)
	}
	if d.Kind == Mechanical || d.Command != nil {
		l.List("command", d.Command)
	}
	l.KV("lifetime", string(d.Lifetime))
	if d.Hears != nil {
		l.List("hears", d.Hears)
	}
	if len(d.Checkins) > 0 {
		l.List("checkins", d.Checkins)
	}
	l.OptKV("wall", d.Wall())
	if d.Tokens() > 0 {
		l.num("tokens", d.Tokens())
	}
	l.OptKV("disk", d.Disk())
	return l.OptKV("result", string(d.Result)).String()
}

// Decoded refuses the keys of the other kind of session. Presence counts,
// not only value: "model": "" on a mechanical session is as wrong as a
// model name, and the schema says so too.
func (d *SessionDefinition) Decoded(o strictjson.Obj) error {
	switch d.Kind {
	case Mechanical:
		for _, k := range []string{"runner", "model"} {
			if o.Has(k) {
				return strictjson.FieldErr(k, strictjson.ErrInvalid, "a mechanical session has no "+k+"; its command is what runs")
			}
		}
	case LLM:
		if o.Has("command") {
			return strictjson.FieldErr("command", strictjson.ErrInvalid, "an llm session has no command; its runner is what runs")
		}
	}
	return nil
}
