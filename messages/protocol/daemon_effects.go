package protocol

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/messages"
)

// DaemonEffect is what one of the daemon's actor cores asks for: an effect on
// the host or on Fossil, a message to another actor, an actor to start or stop,
// or a line for the log. Cores return effects as values; the actor shells run
// them, and the result of a host effect comes back to the same actor as a
// DaemonMessage. Each renders as one stable line for logs and transcripts.
type DaemonEffect interface {
	fmt.Stringer
	daemonEffect()
}

// ---- effects on Fossil ----

// ClassifyArtifact asks what a posted artifact is to the daemon: a launch note,
// a check-in on a listened branch, or nothing to do. Result: ArtifactClassified.
type ClassifyArtifact struct {
	Repository string
	Hash       string
}

// ResolveLaunch asks for the launch note a running `workspace serve` process
// found at start serves; or, Gone, the launch of a session a daemon before
// spawned that ended while no daemon ran (D76). Result: LaunchResolved.
type ResolveLaunch struct {
	Proc ProcInfo
	Gone bool
}

// WriteRefusal writes a refusal note, as the node user, replying to a launch
// note: the launch did not start, Reason says why, Holders are the processes
// that name the workspace; Why is Reason's kind, one of the Refused words,
// which the daemon's metrics count. Result: RefusalWritten.
type WriteRefusal struct {
	Launch  LaunchSpec
	Holders []ProcInfo
	Reason  string
	Why     string
}

// The kinds of a launch's refusal (WriteRefusal.Why).
const (
	// RefusedBusy: a session, a launch starting or a CI hold has the
	// workspace.
	RefusedBusy = "busy"
	// RefusedRecord: the record refuses the launch note (a definition that
	// does not count or read, a terminated workspace, a field at fault).
	RefusedRecord = "record"
	// RefusedHost: the host could not say or do (the process table did not
	// read, the session did not start).
	RefusedHost = "host"
)

// WriteEnd writes an end note, as the node user, replying to the launch note
// of a session process that ended. The note is the session core's: every
// field decided there (D6, D20). The writer first looks for an end note for
// the same (PID, start time) on the record and writes none if there is one
// (decisions D6), so a retry or a restart never writes a second. Result:
// EndWritten.
type WriteEnd struct {
	Launch LaunchSpec
	Proc   ProcID
	End    messages.EndNote
	// StopRequested and KilledAfterGrace tell, for the log, a stop from an
	// end by itself.
	StopRequested    bool
	KilledAfterGrace bool
	Attempt          int
	// FoundGone says the session ended while no daemon ran (D76): an end
	// note answering its launch, of whatever process, is its end, written
	// by a daemon that adopted it; none is written beside it.
	FoundGone bool
}

// ReadUsage asks, once a session's process has ended, for its use of the
// node (D50): the node's count of its model (the model proxy's file for
// its launch) and its own account of its turns. Result: UsageRead.
type ReadUsage struct {
	Workspace messages.WorkspaceKey
	Proc      ProcID
	Launch    string
}

// ReadResult asks for the result a CI run's login left on the check-in it was
// launched for: the value of a `ci` tag sent by that login (decisions D5).
// Result: ResultRead.
type ReadResult struct {
	Proc   ProcID
	Launch LaunchSpec
}

// FindUntested asks for the newest check-in on a branch that the node received
// after the listen note and that carries no `ci` tag sent by the listener's
// login (decisions D5). Result: UntestedFound.
type FindUntested struct {
	Listener BranchListener
	Branch   string
}

// WriteLaunch writes a launch note, as the node user, on a CI session's record,
// naming the check-in to test. Result: LaunchWritten.
type WriteLaunch struct {
	Listener BranchListener
	Branch   string
	Checkin  string
}

// ---- effects on the host ----

// Purposes of a workspace scan.
const (
	ScanForLaunch  = "launch"  // before a launch: does any process name the workspace?
	ScanForReserve = "reserve" // before a CI launch note is written
	ScanForStop    = "stop"    // a stop with no session of the daemon's: TERM each
)

// ScanWorkspace reads the process table for the processes that name a
// workspace. Result: WorkspaceScanned.
type ScanWorkspace struct {
	Workspace messages.WorkspaceKey
	Purpose   string
	// For names what the scan is for, for the log: a launch hash or a branch.
	For string
}

// SpawnSession starts `workspace serve KEY --root ROOT --launch HASH` as the
// daemon's child, in a process group of its own, inside the workspace's
// sandbox, on the launch's release. Result: SessionSpawned.
type SpawnSession struct {
	Launch LaunchSpec
}

// The signals the daemon sends.
const (
	SigTERM = "TERM"
	SigKILL = "KILL"
)

// SignalProcess sends a signal to a process, or to the process group it leads,
// only while the PID still has that start time. Result: ProcessSignaled.
type SignalProcess struct {
	Proc   ProcID
	Group  bool
	Signal string
}

// Purposes of a session's timer.
const (
	TimerGrace      = "grace"       // TERM was sent; KILL when it fires
	TimerWatchRetry = "watch-retry" // watching a process failed; try again
	TimerEndRetry   = "end-retry"   // writing the end note failed; try again
	TimerWall       = "wall"        // the launch's wall limit is reached; TERM (D40)
)

// StartTimer asks for TimerFired after a duration. Seq tells a current timer
// from one a later decision made stale.
type StartTimer struct {
	Proc    ProcID
	Purpose string
	Seq     int
	After   time.Duration
}

// WatchProcess watches a process the daemon is not the parent of (a session
// found at start) until it is gone. Result: ProcessGone.
type WatchProcess struct {
	Proc ProcID
	Seq  int
}

// WatchLimits follows a session's cgroup (D46) until one of its limits is
// reached: memory (an OOM kill in it) or processes (a fork refused at its
// pids.max). Like a watch it lasts as long as its session; Seq tells a
// current one from one a freeze made stale. Result: LimitReached.
type WatchLimits struct {
	Workspace messages.WorkspaceKey
	Proc      ProcID
	Seq       int
}

// CloseLimits is asked once a session's process has ended: the cgroup's
// counts are read (a limit its end went past), what is left in it is
// ended, and it is removed (D46). Result: LimitsClosed.
type CloseLimits struct {
	Workspace messages.WorkspaceKey
	Proc      ProcID
}

// PauseInputs stops the pipe reader and the reaper before a re-exec, so that no
// line and no exit is taken by the old image after its state is gathered.
// Result: InputsPaused, which must come after every message they sent.
type PauseInputs struct{}

// ResumeInputs restarts the pipe reader (with the bytes it had read but not
// yet split into lines) and the reaper after a re-exec failed. Result:
// InputsResumed.
type ResumeInputs struct {
	Remainder []byte
}

// ExecRelease execs the current release's ocxd in place with the hand-off.
// It has a result only when it fails: ExecFailed.
type ExecRelease struct {
	Handoff Handoff
}

// ---- effects within the daemon ----

// Tell sends a message to another actor.
type Tell struct {
	To  ActorAddr
	Msg DaemonMessage
}

// StartActor starts a child actor at an address with its first state: exactly
// one of Workspace, Session and Branch is set, as the address's kind says.
type StartActor struct {
	Addr      ActorAddr
	Workspace *WorkspaceState
	Session   *SessionState
	Branch    *BranchState
	// Run is a run actor's first state (ActorRun).
	Run *RunActorState
}

// StopActor stops a child actor that has nothing left to do.
type StopActor struct {
	Addr ActorAddr
}

// ReplySnapshot answers a SnapshotRequest with the daemon's state.
type ReplySnapshot struct {
	Request int
	Handoff Handoff
}

// LogEvent is a line for the daemon's log: a decision worth reading later.
type LogEvent struct {
	Level slog.Level
	Text  string
	Attrs []slog.Attr
}

// Asking is an effect that sends exactly one result back to the actor that
// asked for it (and so holds up a hand-off until it does): Answer names that
// result's type, as its zero value, so that each effect is paired with its
// result on the type itself.
type Asking interface {
	DaemonEffect
	Answer() Answer
}

// Answer is the result of an Asking effect.
type Answer interface {
	DaemonMessage
	answer()
}

// Answer is LimitsClosed.
func (CloseLimits) Answer() Answer { return LimitsClosed{} }

// Answer is UsageRead.
func (ReadUsage) Answer() Answer { return UsageRead{} }

// Answer is ArtifactClassified.
func (ClassifyArtifact) Answer() Answer { return ArtifactClassified{} }

// Answer is LaunchResolved.
func (ResolveLaunch) Answer() Answer { return LaunchResolved{} }

// Answer is RefusalWritten.
func (WriteRefusal) Answer() Answer { return RefusalWritten{} }

// Answer is EndWritten.
func (WriteEnd) Answer() Answer { return EndWritten{} }

// Answer is ResultRead.
func (ReadResult) Answer() Answer { return ResultRead{} }

// Answer is UntestedFound.
func (FindUntested) Answer() Answer { return UntestedFound{} }

// Answer is LaunchWritten.
func (WriteLaunch) Answer() Answer { return LaunchWritten{} }

// Answer is WorkspaceScanned.
func (ScanWorkspace) Answer() Answer { return WorkspaceScanned{} }

// Answer is SessionSpawned.
func (SpawnSession) Answer() Answer { return SessionSpawned{} }

// Answer is ProcessSignaled.
func (SignalProcess) Answer() Answer { return ProcessSignaled{} }

// Answer is InputsPaused.
func (PauseInputs) Answer() Answer { return InputsPaused{} }

// Answer is InputsResumed.
func (ResumeInputs) Answer() Answer { return InputsResumed{} }

func (ClassifyArtifact) daemonEffect() {}
func (ResolveLaunch) daemonEffect()    {}
func (WriteRefusal) daemonEffect()     {}
func (WriteEnd) daemonEffect()         {}
func (ReadResult) daemonEffect()       {}
func (FindUntested) daemonEffect()     {}
func (WriteLaunch) daemonEffect()      {}
func (ScanWorkspace) daemonEffect()    {}
func (SpawnSession) daemonEffect()     {}
func (SignalProcess) daemonEffect()    {}
func (StartTimer) daemonEffect()       {}
func (WatchProcess) daemonEffect()     {}
func (WatchLimits) daemonEffect()      {}
func (CloseLimits) daemonEffect()      {}
func (ReadUsage) daemonEffect()        {}
func (PauseInputs) daemonEffect()      {}
func (ResumeInputs) daemonEffect()     {}
func (ExecRelease) daemonEffect()      {}
func (Tell) daemonEffect()             {}
func (StartActor) daemonEffect()       {}
func (StopActor) daemonEffect()        {}
func (ReplySnapshot) daemonEffect()    {}
func (LogEvent) daemonEffect()         {}

func (e ClassifyArtifact) String() string {
	return "classify " + messages.Token(e.Repository) + " " + daemonShort(e.Hash)
}

func (e ResolveLaunch) String() string {
	s := "resolve launch " + daemonShort(e.Proc.Launch) + " of " + e.Proc.Workspace.String() + " pid " + e.Proc.Proc.String()
	if e.Gone {
		s += ", ended while no daemon ran"
	}
	return s
}

func (e WriteRefusal) String() string {
	s := "write refusal on launch " + daemonShort(e.Launch.Hash) + " " + e.Launch.Workspace.String() + ": " + e.Reason
	if len(e.Holders) > 0 {
		hs := make([]string, len(e.Holders))
		for i, h := range e.Holders {
			hs[i] = h.String()
		}
		s += " [held by " + strings.Join(hs, ", ") + "]"
	}
	return s
}

func (e WriteEnd) String() string {
	s := "write end " + e.Proc.String() + " launch " + daemonShort(e.Launch.Hash) + " " + e.Launch.Workspace.String() + ": " + e.End.StatusString()
	switch {
	case e.End.Budget != "" && e.KilledAfterGrace:
		s += ", past its " + messages.Token(e.End.Budget) + ", killed after the grace"
	case e.End.Budget != "":
		s += ", past its " + messages.Token(e.End.Budget)
	case e.KilledAfterGrace:
		s += ", killed after the grace"
	case e.StopRequested:
		s += ", stop requested"
	}
	if e.FoundGone {
		s += ", ended while no daemon ran"
	}
	if e.End.Checkin != "" {
		s += ", tested " + daemonShort(e.End.Checkin) + ": " + string(e.End.Result)
	}
	if e.Attempt > 1 {
		s += " (attempt " + strconv.Itoa(e.Attempt) + ")"
	}
	return s
}

func (e ReadResult) String() string {
	return "read result of " + daemonShort(e.Launch.Checkin) + " by " + messages.Token(e.Launch.Workspace.Login)
}

func (e FindUntested) String() string {
	return "find untested on " + messages.Token(e.Branch) + " for " + e.Listener.Workspace.String() + " since " + daemonShort(e.Listener.ListenNote)
}

func (e WriteLaunch) String() string {
	return "write launch on " + daemonShort(e.Listener.Record) + " for " + e.Listener.Workspace.String() + " ci " + messages.Token(e.Branch) + " " + daemonShort(e.Checkin)
}

func (e ScanWorkspace) String() string {
	s := "scan " + e.Workspace.String() + " for " + e.Purpose
	if e.For != "" {
		s += " " + daemonShort(e.For)
	}
	return s
}

func (e SpawnSession) String() string {
	s := "spawn workspace serve " + e.Launch.Workspace.String() + " --launch " + daemonShort(e.Launch.Hash)
	if e.Launch.Release != "" {
		s += " (release " + messages.Token(e.Launch.Release) + ")"
	}
	return s
}

func (e SignalProcess) String() string {
	if e.Group {
		return "signal " + e.Signal + " group " + e.Proc.String()
	}
	return "signal " + e.Signal + " " + e.Proc.String()
}

func (e StartTimer) String() string {
	return "start timer " + e.Purpose + " " + e.Proc.String() + " #" + strconv.Itoa(e.Seq) + " " + e.After.String()
}

func (e WatchProcess) String() string {
	return "watch " + e.Proc.String() + " #" + strconv.Itoa(e.Seq)
}

func (e WatchLimits) String() string {
	return "watch limits " + e.Workspace.String() + " " + e.Proc.String() + " #" + strconv.Itoa(e.Seq)
}

func (e ReadUsage) String() string {
	return "read usage " + e.Workspace.String() + " " + e.Proc.String() + " launch " + daemonShort(e.Launch)
}

func (e CloseLimits) String() string {
	return "close limits " + e.Workspace.String() + " " + e.Proc.String()
}

func (PauseInputs) String() string { return "pause inputs" }

func (e ResumeInputs) String() string {
	return "resume inputs (" + strconv.Itoa(len(e.Remainder)) + " bytes pending)"
}

func (e ExecRelease) String() string { return "exec release with " + e.Handoff.Summary() }

func (e Tell) String() string {
	if e.Msg == nil {
		return "tell " + e.To.String() + ": nothing"
	}
	return "tell " + e.To.String() + ": " + e.Msg.String()
}

func (e StartActor) String() string {
	s := "start " + e.Addr.String()
	switch {
	case e.Session != nil:
		s += " (" + e.Session.Summary() + ")"
	case e.Branch != nil:
		s += " (" + e.Branch.Summary() + ")"
	case e.Workspace != nil && (len(e.Workspace.Sessions) > 0 || len(e.Workspace.Branches) > 0):
		s += " (" + e.Workspace.Summary() + ")"
	}
	return s
}

func (e StopActor) String() string { return "stop " + e.Addr.String() }

func (e ReplySnapshot) String() string {
	return "reply snapshot #" + strconv.Itoa(e.Request) + " " + e.Handoff.Summary()
}

func (e LogEvent) String() string {
	var b strings.Builder
	b.WriteString("log " + strings.ToLower(e.Level.String()) + ": " + e.Text)
	for _, a := range e.Attrs {
		b.WriteString(" " + a.Key + "=" + messages.Token(a.Value.String()))
	}
	return b.String()
}
