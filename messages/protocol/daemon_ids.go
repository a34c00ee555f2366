package protocol

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// This file and the other daemon_*.go files hold the vocabulary of ocxd's actors:
// what the pipe reader and the reaper tell them, what they tell each other, the
// effects they ask of the host and of Fossil with the results that come back, and
// the re-exec hand-off. The actors package interprets them; nothing here does I/O.

// ProcID identifies a process as decision D6 does: its PID and its start time
// (field 22 of /proc/PID/stat, clock ticks since boot). A PID alone is reused;
// the pair is not.
type ProcID struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// String renders PID@START, the form the daemon's logs and transcripts use.
func (p ProcID) String() string {
	return strconv.Itoa(p.PID) + "@" + strconv.FormatUint(p.Start, 10)
}

// IsZero reports whether p names no process.
func (p ProcID) IsZero() bool { return p.PID == 0 && p.Start == 0 }

// Matches reports whether a report about q is about p: the PIDs are equal and
// the start times are equal, or q's start time is unknown (zero). A reaper that
// waited on its own child may not know the start time; a child's PID cannot be
// reused before it is reaped, so the PID alone is then unambiguous.
func (p ProcID) Matches(q ProcID) bool {
	return p.PID == q.PID && (q.Start == 0 || p.Start == q.Start)
}

// Validate checks that p names a process.
func (p ProcID) Validate() error {
	if p.PID <= 0 {
		return strictjson.FieldErr("pid", strictjson.ErrInvalid, fmt.Sprintf("is %d; a process's PID is positive", p.PID))
	}
	if p.Start == 0 {
		return strictjson.FieldErr("start", strictjson.ErrMissing, "is 0; a process is known by its PID and its start time (D6)")
	}
	return nil
}

// ParseProcID reads PID@START.
func ParseProcID(s string) (ProcID, error) {
	pid, start, ok := strings.Cut(s, "@")
	if !ok {
		return ProcID{}, &strictjson.FieldError{Where: "process", Problem: strictjson.QuoteShort(s) + " is not PID@START", Err: strictjson.ErrSyntax}
	}
	n, err := strconv.Atoi(pid)
	if err != nil {
		return ProcID{}, &strictjson.FieldError{Where: "process", Field: "pid", Problem: strictjson.QuoteShort(pid) + " is not a number", Err: strictjson.ErrSyntax}
	}
	st, err := strconv.ParseUint(start, 10, 64)
	if err != nil {
		return ProcID{}, &strictjson.FieldError{Where: "process", Field: "start", Problem: strictjson.QuoteShort(start) + " is not a number", Err: strictjson.ErrSyntax}
	}
	p := ProcID{PID: n, Start: st}
	if err := p.Validate(); err != nil {
		return ProcID{}, strictjson.At("process", err)
	}
	return p, nil
}

// ProcInfo is one process that names a workspace, as the process table shows it.
type ProcInfo struct {
	Proc      ProcID                `json:"proc"`
	Workspace messages.WorkspaceKey `json:"workspace"`
	// Verb is the session command's verb: serve, run or start (D1).
	Verb string `json:"verb,omitempty"`
	// Launch is the launch note a `workspace serve` process serves (its
	// --launch HASH), empty for any other.
	Launch    string          `json:"launch,omitempty"`
	StartedBy messages.Origin `json:"started_by"`
	// Started is when the process started, read from the process table
	// (its start time after the host's boot); zero when unknown. A
	// session's wall limit counts from it (D40).
	Started time.Time `json:"started,omitzero"`
	// Command is the command line, cleaned to one line, for a refusal note.
	Command string `json:"command,omitempty"`
}

// String renders the process in one line.
func (p ProcInfo) String() string {
	s := "pid " + p.Proc.String() + " (" + string(p.StartedBy)
	if p.Verb != "" {
		s += " " + p.Verb
	}
	if p.Launch != "" {
		s += " launch " + daemonShort(p.Launch)
	}
	return s + ")"
}

// actorKind names the kind of one of the daemon's actors.
type actorKind string

// The daemon's actors (docs/daemon.md).
const (
	ActorNode      actorKind = "node"
	ActorWorkspace actorKind = "workspace"
	ActorSession   actorKind = "session"
	ActorBranch    actorKind = "branch"
	// ActorRun is a run of seed 004, one actor per run hash, a child of
	// the node.
	ActorRun actorKind = "run"
)

// ActorAddr is the logical address of an actor: the node, a workspace (login ×
// project), a session (its workspace and process) or a branch listener (its
// workspace and branch). Cores address each other by these; the shells map
// them to protoactor PIDs.
type ActorAddr struct {
	Kind      actorKind             `json:"kind"`
	Workspace messages.WorkspaceKey `json:"workspace"`
	Proc      ProcID                `json:"proc"`
	Branch    string                `json:"branch,omitempty"`
	// Run is a run actor's run hash.
	Run string `json:"run,omitempty"`
}

// NodeAddr is the root actor's address.
func NodeAddr() ActorAddr { return ActorAddr{Kind: ActorNode} }

// WorkspaceAddr is the address of workspace w's actor.
func WorkspaceAddr(w messages.WorkspaceKey) ActorAddr {
	return ActorAddr{Kind: ActorWorkspace, Workspace: w}
}

// SessionAddr is the address of the actor of session process p in workspace w.
func SessionAddr(w messages.WorkspaceKey, p ProcID) ActorAddr {
	return ActorAddr{Kind: ActorSession, Workspace: w, Proc: p}
}

// BranchAddr is the address of the listener of branch b in workspace w.
func BranchAddr(w messages.WorkspaceKey, b string) ActorAddr {
	return ActorAddr{Kind: ActorBranch, Workspace: w, Branch: b}
}

// RunAddr is the address of the actor of the run with hash h.
func RunAddr(h string) ActorAddr { return ActorAddr{Kind: ActorRun, Run: h} }

// String renders the address: "node", "workspace ci/demo",
// "session ci/demo 123@456", "branch ci/demo trunk".
func (a ActorAddr) String() string {
	switch a.Kind {
	case ActorNode:
		return "node"
	case ActorWorkspace:
		return "workspace " + a.Workspace.String()
	case ActorSession:
		return "session " + a.Workspace.String() + " " + a.Proc.String()
	case ActorBranch:
		return "branch " + a.Workspace.String() + " " + messages.Token(a.Branch)
	case ActorRun:
		return "run " + daemonShort(a.Run)
	default:
		return "actor " + messages.Token(string(a.Kind))
	}
}

// short abbreviates a hash to its first 10 digits for a one-line rendering, as
// Fossil's own short hashes do.
func daemonShort(h string) string {
	if len(h) > 10 {
		return h[:10]
	}
	if h == "" {
		return `""`
	}
	return messages.Token(h)
}
