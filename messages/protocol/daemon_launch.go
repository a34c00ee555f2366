package protocol

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/modelapi"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// LaunchSpec is a launch note as the daemon acts on it, already resolved by the
// wiring from the record: the note itself, the workspace it launches into, the
// session's own record, the session definition's kind and lifetime, the
// workspace definition's sandbox and the release to run. The actors read only
// the workspace, the hash, the record and the CI fields; the rest passes through
// to the spawner.
type LaunchSpec struct {
	// Hash is the launch note's artifact hash; the session process serves it
	// (`workspace serve KEY --root ROOT --launch HASH`, D1).
	Hash string `json:"hash"`
	// Repository is the repository file the note is in.
	Repository string                `json:"repository"`
	Workspace  messages.WorkspaceKey `json:"workspace"`
	// Record is the session's own record: a thread's root post or a ticket.
	Record string               `json:"record"`
	Kind   messages.SessionKind `json:"kind,omitempty"`
	// Runner is an llm session's runner (its definition's), which the
	// spawner checks its release offers (E9).
	Runner string `json:"runner,omitempty"`
	// Model is an llm session's model (its definition's): the one model
	// the node's model proxy beside the session serves it.
	Model    string            `json:"model,omitempty"`
	Lifetime messages.Lifetime `json:"lifetime,omitempty"`
	Release  string            `json:"release,omitempty"` // current or previous
	// ReleaseDir is the release directory the wiring resolved Release to when
	// it read the launch (links followed: RELEASE_ROOT/releases/ID, or a
	// developer build's directory), or the directory a process found at start
	// runs from. The spawner runs that release, and the end note names it, so
	// that what a session ran is known even after current has moved on. Empty
	// when it could not be resolved (the spawn then says why).
	ReleaseDir string `json:"release_dir,omitempty"`
	// ReleaseName is what an end note calls that release: its name under
	// the release root's releases/, or the directory of a developer's
	// build; resolved with ReleaseDir.
	ReleaseName string `json:"release_name,omitempty"`
	// Checkin is, for a CI launch, the check-in the run tests (D5); empty
	// otherwise.
	Checkin string `json:"checkin,omitempty"`
	// Branch is, for a CI launch, the branch of that check-in: the branch
	// listener the launch belongs to.
	Branch string `json:"branch,omitempty"`
	// Result is, for a CI launch, what the run leaves on its check-in: the
	// session definition's result (empty: ci; verdict: a reviewer, D42).
	Result messages.ResultKind `json:"result,omitempty"`
	// Sandbox is the workspace definition's sandbox as written on the record;
	// the actors never look inside it.
	Sandbox json.RawMessage `json:"sandbox,omitempty"`
	// Wall is the session definition's limits.wall as written ("" for
	// none): the daemon ends the session once it has run that long,
	// counted from its process's start (D40).
	Wall string `json:"wall,omitempty"`
	// Tokens is the session definition's limits.tokens (0 for none): the
	// spawner gives it to the session's model proxy, which counts its
	// model's tokens and refuses its requests once they are spent, and
	// tells the daemon, which ends it (D50).
	Tokens uint64 `json:"tokens,omitempty"`
	// Disk is the session definition's limits.disk as written ("" for
	// none: node.json's session_limits.disk): the spawner sizes the
	// workspace's own file system to it before the session starts (D82).
	Disk string `json:"disk,omitempty"`
	// Hears is the session definition's hears (nil: the default, every user
	// holding admin or setup when the session starts), which the spawner
	// resolves and writes for the hook (AGENTS/LOGIN/held/PROJECT/hears).
	Hears []string `json:"hears,omitzero"`
	// Checkins is the session definition's checkins: the branches whose
	// check-ins the hook gives the session, which the spawner writes for
	// it (AGENTS/LOGIN/held/PROJECT/checkins).
	Checkins []string `json:"checkins,omitempty"`
}

// IsCI reports whether the launch is a CI run for a check-in.
func (l LaunchSpec) IsCI() bool { return l.Checkin != "" }

// String renders the launch in one line.
func (l LaunchSpec) String() string {
	var b strings.Builder
	b.WriteString("launch " + daemonShort(l.Hash) + " " + l.Workspace.String() + " record " + daemonShort(l.Record))
	if l.Lifetime != "" {
		b.WriteString(" " + string(l.Lifetime))
	}
	if l.Wall != "" {
		b.WriteString(" wall " + messages.Token(l.Wall))
	}
	if l.Tokens > 0 {
		b.WriteString(" tokens " + strconv.FormatUint(l.Tokens, 10))
	}
	if l.IsCI() {
		b.WriteString(" ci " + messages.Token(l.Branch) + " " + daemonShort(l.Checkin))
		if l.Result != "" && l.Result != messages.ResultCI {
			b.WriteString(" result " + string(l.Result))
		}
	}
	return b.String()
}

// Validate checks what the actors rely on: the hash, the workspace and the record.
func (l LaunchSpec) Validate() error {
	if err := messages.CheckHash("hash", l.Hash); err != nil {
		return strictjson.At("launch", err)
	}
	if err := l.Workspace.Validate(); err != nil {
		return strictjson.At("launch", err)
	}
	if l.Record == "" {
		return strictjson.At("launch", strictjson.FieldErr("record", strictjson.ErrMissing, "is empty; a launch names its session's record"))
	}
	if l.ReleaseDir != "" {
		if err := messages.CheckAbsPath("release_dir", l.ReleaseDir); err != nil {
			return strictjson.At("launch", err)
		}
	}
	if l.IsCI() {
		if err := messages.CheckHash("checkin", l.Checkin); err != nil {
			return strictjson.At("launch", err)
		}
		if err := messages.CheckBranch("branch", l.Branch); err != nil {
			return strictjson.At("launch", err)
		}
	}
	if err := messages.CheckBranches("checkins", l.Checkins); err != nil {
		return strictjson.At("launch", err)
	}
	if l.Wall != "" {
		if _, err := messages.ParseWall("wall", l.Wall); err != nil {
			return strictjson.At("launch", err)
		}
	}
	if l.Tokens > modelapi.MaxTokens {
		return strictjson.At("launch", strictjson.FieldErr("tokens", strictjson.ErrInvalid, "is past 2^53-1"))
	}
	return strictjson.At("launch", messages.CheckHears("hears", l.Hears))
}

// BranchListener is a `completes` session listening to a branch: the listen
// note on the session's own record, as the listening index names it (seed 000,
// "listeners"; decisions D5).
type BranchListener struct {
	Workspace messages.WorkspaceKey `json:"workspace"`
	// Repository is the repository whose branch is listened to.
	Repository string `json:"repository"`
	// Record is the session's own record, where its launch notes go.
	Record string `json:"record"`
	// ListenNote is the listen note's hash: only check-ins received after it wait.
	ListenNote string            `json:"listen_note"`
	Lifetime   messages.Lifetime `json:"lifetime"`
	// Result is what each run leaves on its check-in, from the session
	// definition: empty (ci) or verdict (a reviewer, D42).
	Result messages.ResultKind `json:"result,omitempty"`
}

// String renders the listener in one line.
func (b BranchListener) String() string {
	s := "listener " + b.Workspace.String() + " record " + daemonShort(b.Record) + " since " + daemonShort(b.ListenNote) + " " + string(b.Lifetime)
	if b.Result != "" && b.Result != messages.ResultCI {
		s += " result " + string(b.Result)
	}
	return s
}

// LaunchRefused is a launch note the daemon will not act on, as the record
// model decided it: sent by a user holding admin or setup (or the node
// user), but naming what cannot be launched (a definition that does not
// count or does not decode, a field at fault, a terminated workspace). The
// daemon answers it with a refusal note naming why; a launch from anyone
// else is only logged (D7). Workspace.Login is empty when the note names no
// login the daemon could read.
type LaunchRefused struct {
	Hash       string                `json:"hash"`
	Repository string                `json:"repository"`
	Workspace  messages.WorkspaceKey `json:"workspace"`
	Reason     string                `json:"reason"`
}

// String renders the refusal on one line.
func (r LaunchRefused) String() string {
	return "launch " + daemonShort(r.Hash) + " " + r.Workspace.String() + " refused: " + r.Reason
}

// CheckinSpec is a check-in as the daemon acts on it: its branch and the
// `completes` sessions whose listening index names that branch.
type CheckinSpec struct {
	Hash       string           `json:"hash"`
	Repository string           `json:"repository"`
	Branch     string           `json:"branch"`
	Listeners  []BranchListener `json:"listeners,omitempty"`
}

// String renders the check-in in one line.
func (c CheckinSpec) String() string {
	var b strings.Builder
	b.WriteString("checkin " + daemonShort(c.Hash) + " on " + messages.Token(c.Branch))
	for i, l := range c.Listeners {
		if i == 0 {
			b.WriteString(" for")
		}
		b.WriteString(" " + l.Workspace.String())
	}
	return b.String()
}

// RecordFirstEnv names, in a session's environment, its own record's first
// post or ticket change in the server's order, which the daemon reads from
// the node's repository when it spawns the session (D47): the session,
// reading a clone whose receipts are its own pulls', takes a ticket's
// objective from that change, never from the change whose D card is the
// earliest. An environment variable rather than a flag, so that a release
// from before it runs as it did.
const RecordFirstEnv = "OCX_RECORD_FIRST"
