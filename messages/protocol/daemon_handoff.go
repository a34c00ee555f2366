package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// The re-exec hand-off's kind and the one version this build reads and writes.
// A release whose ocxd does not read HandoffVersion must not be exec'd into; the
// wiring checks before it execs (docs/daemon.md, "the hand-off").
const (
	HandoffKind    = "ocxd-handoff"
	HandoffVersion = 1
)

// HandoffCheckAnswer is the one line `ocxd --handoff-check` answers once it
// read the hand-off as its new image would (D73): the old image execs a
// release's ocxd only after this answer.
const HandoffCheckAnswer = "ocxd: the hand-off can be taken over"

// Handoff is the daemon's state handed from one image to the next across a
// re-exec, gathered once every actor had settled what it was doing: the
// recent post hashes (so a duplicate line after the exec is still a
// duplicate), the lines read but not acted on, exits not yet claimed, the bytes
// of a line not yet complete, and each workspace with its sessions and branch
// listeners. What the wiring keeps across the exec beside it (descriptors,
// the reaper's state) is the wiring's own, in its own file around this.
type Handoff struct {
	OCX     string `json:"ocx"`
	Version int    `json:"version"`
	// Recent are the post hashes handled, oldest first.
	Recent []string `json:"recent"`
	// Pending are the pipe lines read but not yet acted on, in order.
	Pending []string `json:"pending"`
	// Held are the exits the reaper held back once the inputs paused for
	// the exec: the sessions they end are in Workspaces, not yet ended. (The
	// key is "parked", as older images wrote it.)
	Held          []ProcessExited  `json:"parked"`
	PipeRemainder []byte           `json:"pipe_remainder,omitempty"`
	Workspaces    []WorkspaceState `json:"workspaces"`
}

// WorkspaceState is one workspace's part of the hand-off.
type WorkspaceState struct {
	Workspace messages.WorkspaceKey `json:"workspace"`
	// Sessions are its session processes, running or ended with the end note
	// still to write.
	Sessions []SessionState `json:"sessions"`
	// Branches are its branch listeners.
	Branches []BranchState `json:"branches"`
	// Deferred are the branch listeners refused a reservation while the
	// workspace ran something of its own; they are told when it is idle.
	Deferred []string `json:"deferred,omitempty"`
	// Launches are the launch notes it handled recently, oldest first, so a
	// launch note reaching it twice (from the hook and from its branch
	// listener) is launched once.
	Launches []string `json:"launches,omitempty"`
}

// SessionState is one session process's part of the hand-off.
type SessionState struct {
	Workspace messages.WorkspaceKey `json:"workspace"`
	Proc      ProcID                `json:"proc"`
	// Child says whether the daemon is the process's parent (it reaps it).
	Child  bool       `json:"child"`
	Launch LaunchSpec `json:"launch"`
	// StartedAt is when the process started, from which its launch's wall
	// limit counts (D40): the spawn's time for a child, the process
	// table's start time for one found at start; kept across a re-exec so
	// that the deadline never restarts with the daemon.
	StartedAt time.Time `json:"started_at,omitzero"`
	// StopRequestedAt is when a stop was asked, if one was; TERM went then.
	StopRequestedAt *time.Time `json:"stop_requested_at,omitempty"`
	// Budget names the limit past which the daemon stopped the session
	// (wall, its cgroup's memory or processes, D46, or the tokens its
	// model proxy counted, D50), when that is why
	// TERM went, or the cgroup's limit its end went past; its end note
	// says it.
	Budget string `json:"budget,omitempty"`
	// BudgetNote says, for memory or processes, what the cgroup's counts
	// showed against its limits; for tokens, what the proxy counted.
	BudgetNote string `json:"budget_note,omitempty"`
	// KillSent says KILL went to the group after the grace.
	KillSent bool `json:"kill_sent,omitempty"`
	// Ended, Exit and EndedAt: the process ended, how and when.
	Ended   bool                `json:"ended,omitempty"`
	Exit    messages.ExitStatus `json:"exit,omitzero"`
	EndedAt time.Time           `json:"ended_at,omitzero"`
	// Result and LeftResult: a CI run's result on its check-in, once read.
	Result     string `json:"result,omitempty"`
	LeftResult bool   `json:"left_result,omitempty"`
	// Usage is the session's use of the node as read at its end (D50),
	// for its end note; nil until then, or when nothing was read.
	Usage *messages.SessionUsage `json:"usage,omitempty"`
	// EndAttempts counts the end note's failed writes so far.
	EndAttempts int `json:"end_attempts,omitempty"`
	// EndWritten says the end note is on the record.
	EndWritten bool `json:"end_written,omitempty"`
	// FoundGone says the process ended while no daemon ran: a daemon that
	// started found its spawned record and not the process (D76).
	FoundGone bool `json:"found_gone,omitempty"`
}

// The phases of a branch listener (docs/daemon.md).
const (
	BranchIdle      = "idle"
	BranchReserving = "reserving"
	BranchQuerying  = "querying"
	BranchWriting   = "writing"
	BranchLaunching = "launching"
	BranchRunning   = "running"
)

// BranchState is one branch listener's part of the hand-off.
type BranchState struct {
	Workspace messages.WorkspaceKey `json:"workspace"`
	Branch    string                `json:"branch"`
	Listener  BranchListener        `json:"listener"`
	Phase     string                `json:"phase"`
	// Waiting says a check-in arrived that no run has picked up.
	Waiting bool `json:"waiting,omitempty"`
	// Checkin, Launch and Proc: the check-in being launched or run, its launch
	// note and its process.
	Checkin string `json:"checkin,omitempty"`
	Launch  string `json:"launch,omitempty"`
	Proc    ProcID `json:"proc,omitzero"`
}

// Summary renders the hand-off in one line.
func (h Handoff) Summary() string {
	sessions, children, branches := 0, 0, 0
	for _, w := range h.Workspaces {
		sessions += len(w.Sessions)
		for _, s := range w.Sessions {
			if s.Child {
				children++
			}
		}
		branches += len(w.Branches)
	}
	return fmt.Sprintf("hand-off v%d: %d workspaces, %d sessions (%d children), %d branch listeners, %d recent, %d pending, %d held exits",
		h.Version, len(h.Workspaces), sessions, children, branches, len(h.Recent), len(h.Pending), len(h.Held))
}

// Summary renders the workspace's state in one line.
func (w WorkspaceState) Summary() string {
	var parts []string
	for _, s := range w.Sessions {
		parts = append(parts, s.Summary())
	}
	for _, b := range w.Branches {
		parts = append(parts, b.Summary())
	}
	if len(w.Deferred) > 0 {
		parts = append(parts, "deferred "+strings.Join(w.Deferred, ","))
	}
	if len(parts) == 0 {
		return w.Workspace.String() + " idle"
	}
	return w.Workspace.String() + " " + strings.Join(parts, "; ")
}

// Summary renders the session's state in one line.
func (s SessionState) Summary() string {
	var b strings.Builder
	b.WriteString("session " + s.Proc.String())
	switch {
	case s.Child:
		b.WriteString(" child")
	case s.FoundGone:
		b.WriteString(" found gone")
	default:
		b.WriteString(" adopted")
	}
	b.WriteString(" launch " + daemonShort(s.Launch.Hash))
	if s.StopRequestedAt != nil {
		b.WriteString(" stopping")
	}
	if s.KillSent {
		b.WriteString(" killed")
	}
	if s.Ended {
		b.WriteString(" ended " + s.Exit.String())
		if s.EndWritten {
			b.WriteString(" noted")
		} else {
			b.WriteString(" note pending")
		}
	}
	return b.String()
}

// Summary renders the branch listener's state in one line.
func (b BranchState) Summary() string {
	s := "branch " + messages.Token(b.Branch) + " " + b.Phase
	if b.Checkin != "" {
		s += " " + daemonShort(b.Checkin)
	}
	if !b.Proc.IsZero() {
		s += " " + b.Proc.String()
	}
	if b.Waiting {
		s += " waiting"
	}
	return s
}

// ChildWorkspaces maps each child the hand-off's sessions run to its
// workspace: where the new image sends the child's exit.
func (h Handoff) ChildWorkspaces() map[ProcID]messages.WorkspaceKey {
	out := map[ProcID]messages.WorkspaceKey{}
	for _, w := range h.Workspaces {
		for _, s := range w.Sessions {
			if s.Child && !s.Ended {
				out[s.Proc] = w.Workspace
			}
		}
	}
	return out
}

// Children are the session processes whose parent is the daemon, sorted by
// PID: what a re-exec must keep (and the new image reap).
func (h Handoff) Children() []ProcID {
	var out []ProcID
	for _, w := range h.Workspaces {
		for _, s := range w.Sessions {
			if s.Child && !s.Ended {
				out = append(out, s.Proc)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

// Validate checks the hand-off: its kind and version, and every name, process
// and phase in it, naming the field at fault.
func (h Handoff) Validate() error {
	if h.OCX != HandoffKind {
		return &strictjson.FieldError{Where: "hand-off", Field: "ocx", Problem: strictjson.QuoteShort(h.OCX) + " is not " + strconv.Quote(HandoffKind), Err: strictjson.ErrInvalid}
	}
	if h.Version != HandoffVersion {
		return &strictjson.FieldError{Where: "hand-off", Field: "version", Problem: fmt.Sprintf("is %d; this ocxd reads version %d only", h.Version, HandoffVersion), Err: strictjson.ErrInvalid}
	}
	for i, r := range h.Recent {
		if err := messages.CheckHash(strictjson.IndexField("recent", i), r); err != nil {
			return strictjson.At("hand-off", err)
		}
	}
	for i, p := range h.Pending {
		if _, err := pipe.Parse([]byte(p)); err != nil {
			return &strictjson.FieldError{Where: "hand-off", Field: strictjson.IndexField("pending", i), Problem: err.Error(), Err: strictjson.ErrInvalid}
		}
	}
	for i, e := range h.Held {
		if e.Proc.PID <= 0 {
			return strictjson.At("hand-off", strictjson.FieldErr(strictjson.IndexField("parked", i)+".proc.pid", strictjson.ErrInvalid, "is not a PID"))
		}
		if err := e.Status.Validate(); err != nil {
			return &strictjson.FieldError{Where: "hand-off", Field: strictjson.IndexField("parked", i) + ".status", Problem: err.Error(), Err: strictjson.ErrInvalid}
		}
		if e.Workspace != (messages.WorkspaceKey{}) {
			if err := e.Workspace.Validate(); err != nil {
				return &strictjson.FieldError{Where: "hand-off", Field: strictjson.IndexField("parked", i) + ".workspace", Problem: err.Error(), Err: strictjson.ErrInvalid}
			}
		}
	}
	seen := map[messages.WorkspaceKey]bool{}
	for i, w := range h.Workspaces {
		f := strictjson.IndexField("workspaces", i)
		if err := w.Workspace.Validate(); err != nil {
			return &strictjson.FieldError{Where: "hand-off", Field: f + ".workspace", Problem: err.Error(), Err: strictjson.ErrInvalid}
		}
		if seen[w.Workspace] {
			return strictjson.At("hand-off", strictjson.FieldErr(f+".workspace", strictjson.ErrInvalid, w.Workspace.String()+" appears twice"))
		}
		seen[w.Workspace] = true
		for j, s := range w.Sessions {
			if err := s.validate(w.Workspace); err != nil {
				return &strictjson.FieldError{Where: "hand-off", Field: strictjson.IndexField(f+".sessions", j), Problem: err.Error(), Err: strictjson.ErrInvalid}
			}
		}
		for j, b := range w.Branches {
			if err := b.validate(w.Workspace); err != nil {
				return &strictjson.FieldError{Where: "hand-off", Field: strictjson.IndexField(f+".branches", j), Problem: err.Error(), Err: strictjson.ErrInvalid}
			}
		}
	}
	return nil
}

func (s SessionState) validate(w messages.WorkspaceKey) error {
	if s.Workspace != w {
		return fmt.Errorf("names workspace %s inside %s", s.Workspace, w)
	}
	if err := s.Proc.Validate(); err != nil {
		return err
	}
	if err := s.Launch.Validate(); err != nil {
		return err
	}
	if s.Launch.Workspace != w {
		return fmt.Errorf("its launch names workspace %s inside %s", s.Launch.Workspace, w)
	}
	if s.Ended {
		if err := s.Exit.Validate(); err != nil {
			return err
		}
	}
	return nil
}

func (b BranchState) validate(w messages.WorkspaceKey) error {
	if b.Workspace != w {
		return fmt.Errorf("names workspace %s inside %s", b.Workspace, w)
	}
	if err := messages.CheckBranch("branch", b.Branch); err != nil {
		return err
	}
	switch b.Phase {
	case BranchIdle, BranchReserving, BranchQuerying, BranchWriting, BranchLaunching:
	case BranchRunning:
		if err := b.Proc.Validate(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("phase %s is not one of idle, reserving, querying, writing, launching, running", strictjson.QuoteShort(b.Phase))
	}
	return nil
}

// EncodeHandoff validates and renders the hand-off as JSON.
func EncodeHandoff(h Handoff) ([]byte, error) {
	if err := h.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("hand-off: encode: %w", err)
	}
	return b, nil
}

// DecodeHandoff reads a hand-off. A key this version does not know refuses the
// whole hand-off rather than dropping state silently, and so does a version
// other than HandoffVersion.
func DecodeHandoff(data []byte) (Handoff, error) {
	var h Handoff
	if err := DecodeHandoffInto(data, &h); err != nil {
		return Handoff{}, err
	}
	return h, nil
}

// DecodeHandoffInto reads a hand-off into v: a *Handoff, or the wiring's
// struct that embeds one beside its own fields. The kind and version are
// checked first; a key v does not have refuses the whole file; the Handoff
// part is validated (the wiring checks its own fields).
func DecodeHandoffInto(data []byte, v any) error {
	var probe struct {
		OCX     string `json:"ocx"`
		Version int    `json:"version"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return &strictjson.FieldError{Where: "hand-off", Problem: "is not JSON: " + err.Error(), Err: strictjson.ErrSyntax}
	}
	if probe.OCX != HandoffKind {
		return &strictjson.FieldError{Where: "hand-off", Field: "ocx", Problem: strictjson.QuoteShort(probe.OCX) + " is not " + strconv.Quote(HandoffKind), Err: strictjson.ErrInvalid}
	}
	if probe.Version != HandoffVersion {
		return &strictjson.FieldError{Where: "hand-off", Field: "version", Problem: fmt.Sprintf("is %d; this ocxd reads version %d only", probe.Version, HandoffVersion), Err: strictjson.ErrInvalid}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &strictjson.FieldError{Where: "hand-off", Problem: err.Error(), Err: strictjson.ErrInvalid}
	}
	if dec.More() {
		return &strictjson.FieldError{Where: "hand-off", Problem: "has data after its JSON object", Err: strictjson.ErrSyntax}
	}
	var h Handoff
	switch x := v.(type) {
	case *Handoff:
		h = *x
	case interface{ HandoffPart() Handoff }:
		h = x.HandoffPart()
	default:
		return fmt.Errorf("hand-off: %T holds no Handoff", v)
	}
	return h.Validate()
}
