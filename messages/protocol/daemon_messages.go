package protocol

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
)

// DaemonMessage is a message one of the daemon's actors takes: an input from the
// pipe reader or the reaper, the result of an effect it asked for, or a message
// from another actor. Commands are imperative, events past tense; all are
// values, immutable once sent, and render as one stable line.
type DaemonMessage interface {
	fmt.Stringer
	daemonMessage()
}

// ---- inputs from the wiring ----

// LineRead is one line read from the daemon's pipe, already parsed.
type LineRead struct {
	Line pipe.Line
}

// ProcessExited is a child's exit, from the reaper: PID and start time, how
// it ended, and the workspace it was spawned for, which the reaper recorded
// with the child when it spawned it (or adopted it from a hand-off), so that
// the exit goes straight there. Start may be zero if the reaper does not know
// it (ProcID.Matches).
type ProcessExited struct {
	Proc      ProcID                `json:"proc"`
	Workspace messages.WorkspaceKey `json:"workspace,omitzero"`
	Status    messages.ExitStatus   `json:"status"`
	At        time.Time             `json:"at"`
}

// Boot starts a fresh daemon: the processes that name a workspace of this
// agents root when it started. It adopts each `workspace serve` among them, to
// record its end, and restarts nothing.
type Boot struct {
	Found []ProcInfo
	// Spawned are the sessions a daemon before this one spawned whose end
	// note is not on the record (D76): each whose process is not among
	// Found ended while no daemon ran, and its end is written now.
	Spawned []Spawned
	// Listeners are the node's branch listeners: each `completes` one looks
	// at what waits on its branch (D42), which may have arrived while no
	// daemon ran.
	Listeners []ListenedBranch
	// Runs are the node's runs the wiring found at start (seed 004,
	// section 10's last paragraph): each in its care, or found lost.
	Runs []RunActorState
}

// Restore starts a daemon from a re-exec hand-off. Listeners and Runs are
// as Boot's: read again by the new image, never handed over (a run's
// process is its holder's, which the exec does not touch).
type Restore struct {
	Handoff   Handoff
	Listeners []ListenedBranch
	Runs      []RunActorState
}

// SnapshotRequest asks the node for the daemon's state once every actor has
// settled what it was doing, without pausing anything; the reply is a
// Handoff. Tests use it as their barrier. The shell fills in Request.
type SnapshotRequest struct {
	Request int
}

// ---- results of effects ----

// ArtifactClassified is ClassifyArtifact's result: exactly one of Launch,
// Checkin and Nothing (why there is nothing to do), or Err.
type ArtifactClassified struct {
	Repository string
	Hash       string
	Launch     *LaunchSpec
	Checkin    *CheckinSpec
	// Refused is a launch note that is not launched and gets a refusal
	// note saying why.
	Refused *LaunchRefused
	// Run is a seed 004 message that is an event of a run (a run for this
	// node, a stop that counts), for the run's actor.
	Run     *RunRouted
	Nothing string
	// Arrival says the artifact is one the node's session runs may be
	// given (a post, a ticket change or a check-in: seed 004, section 9).
	Arrival bool
	Err     error
}

// LaunchResolved is ResolveLaunch's result.
type LaunchResolved struct {
	Proc   ProcInfo
	Launch *LaunchSpec
	// Gone is ResolveLaunch's: the process ended while no daemon ran.
	Gone bool
	Err  error
}

// WorkspaceScanned is ScanWorkspace's result: the processes that name the
// workspace, or Err if the table could not be read (unknown, never "none").
type WorkspaceScanned struct {
	Workspace messages.WorkspaceKey
	Purpose   string
	For       string
	Procs     []ProcInfo
	Err       error
}

// SessionSpawned is SpawnSession's result: the child's identity, or Err.
type SessionSpawned struct {
	Launch string
	Proc   ProcID
	// At is when the process was spawned: its wall limit counts from it.
	At  time.Time
	Err error
}

// ProcessSignaled is SignalProcess's result.
type ProcessSignaled struct {
	Proc   ProcID
	Signal string
	Err    error
}

// RefusalWritten is WriteRefusal's result.
type RefusalWritten struct {
	Launch string
	Err    error
}

// TimerFired is StartTimer's result.
type TimerFired struct {
	Proc    ProcID
	Purpose string
	Seq     int
}

// ProcessGone is WatchProcess's result: the process is gone (At), or watching
// it failed (Err).
type ProcessGone struct {
	Proc ProcID
	Seq  int
	At   time.Time
	Err  error
}

// LimitReached is WatchLimits' result: the session's cgroup went past
// Limit (LimitMemory or LimitProcesses), Note saying what its counts show
// against its limits; or Err: its limits cannot be watched (it has no
// cgroup: the node makes none, or it was started before the node did).
type LimitReached struct {
	Proc  ProcID
	Seq   int
	Limit string
	Note  string
	At    time.Time
	Err   error
}

// LimitsClosed is CloseLimits' result: the limit the session's cgroup had
// gone past when its process ended ("" for none: then Note is empty), or
// Err: the cgroup could not be read or removed (Limit is what could be
// read). A session without a cgroup closes with neither.
type LimitsClosed struct {
	Proc  ProcID
	Limit string
	Note  string
	Err   error
}

// UsageRead is ReadUsage's result: the session's use of the node (nil when
// nothing was read), and Reached, why its tokens budget is spent as its
// model proxy said ("" when it is not); or Err: it could not be read.
type UsageRead struct {
	Proc    ProcID
	Usage   *messages.SessionUsage
	Reached string
	Err     error
}

// ResultRead is ReadResult's result: the run's result on its check-in
// ("green: ..." or "red: ..."), Found false if there is none.
type ResultRead struct {
	Proc   ProcID
	Found  bool
	Result string
	Err    error
}

// EndWritten is WriteEnd's result.
type EndWritten struct {
	Proc ProcID
	Err  error
}

// UntestedFound is FindUntested's result: the listener's queue, derived
// from the record (D5, D42). Newest is empty if no check-in waits; Waiting
// counts those that wait, Newest among them; Skipped are the check-ins on
// the branch the listener may never judge (E6: a reviewer's own), each
// passed over for good.
type UntestedFound struct {
	Branch  string
	Newest  string
	Waiting int
	Skipped []SkippedCheckin
	Err     error
}

// SkippedCheckin is a check-in a branch listener passes over for good, and
// why (D42).
type SkippedCheckin struct {
	Checkin string `json:"checkin"`
	Why     string `json:"why"`
}

// ListenedBranch is one branch listener the wiring found when the daemon
// started or re-execed: a workspace whose listening index names a branch,
// with its latest listen note there and its session definition, as a
// check-in comes with them (D42).
type ListenedBranch struct {
	Branch   string
	Listener BranchListener
}

// LaunchWritten is WriteLaunch's result: the launch note written, resolved.
type LaunchWritten struct {
	Branch  string
	Checkin string
	Launch  *LaunchSpec
	Err     error
}

// InputsPaused is PauseInputs' result: the bytes the pipe reader had read but
// not yet split into lines.
type InputsPaused struct {
	Remainder []byte
	Err       error
}

// InputsResumed is ResumeInputs' result.
type InputsResumed struct {
	Err error
}

// ExecFailed is ExecRelease's result when the exec did not happen: the old
// image keeps running.
type ExecFailed struct {
	Err error
}

// ---- between actors ----

// LaunchRequested asks a workspace to launch a launch note.
type LaunchRequested struct {
	Launch LaunchSpec
}

// CheckinArrived tells a workspace, then its branch listener, that a check-in
// arrived on a branch one of its `completes` sessions listens to. Checkin is
// empty when the daemon starts or re-execs (ListenersFound): no check-in in
// particular, the listener looks at what waits (D42).
type CheckinArrived struct {
	Checkin  string
	Branch   string
	Listener BranchListener
}

// StopWorkspace asks a workspace to stop its session (`stop LOGIN PROJECT`).
type StopWorkspace struct {
	Workspace messages.WorkspaceKey
}

// BudgetSpent tells a workspace, then the session serving Launch, that its
// model proxy says its Limit (tokens) is spent, Used counted (D50): from a
// budget line on the daemon's pipe.
type BudgetSpent struct {
	Workspace messages.WorkspaceKey
	Launch    string
	Limit     string
	Used      uint64
}

// AdoptSession gives a workspace a `workspace serve` process found at
// start; or, Gone, a session a daemon before spawned that ended while no
// daemon ran (D76), whose end is to be written.
type AdoptSession struct {
	Proc   ProcInfo
	Launch LaunchSpec
	Gone   bool
}

// StopSession asks a session to stop: TERM, then KILL after the grace if the
// daemon is its parent.
type StopSession struct{}

// SessionEnded tells a workspace that its session process ended. LeftResult says whether a CI run left a result on its check-in.
type SessionEnded struct {
	Workspace  messages.WorkspaceKey
	Proc       ProcID
	Launch     LaunchSpec
	LeftResult bool
}

// SessionFinished tells a workspace that a session has written its end note
// and has nothing left to do.
type SessionFinished struct {
	Proc ProcID
}

// ReserveWorkspace asks a workspace to hold itself for a branch listener's CI
// launch: granted only while nothing names the workspace.
type ReserveWorkspace struct {
	Branch string
}

// ReleaseWorkspace gives a reservation back unused.
type ReleaseWorkspace struct {
	Branch string
}

// ReservationGranted answers ReserveWorkspace: the workspace is held.
type ReservationGranted struct {
	Branch string
}

// ReservationRefused answers ReserveWorkspace: something holds the workspace;
// the check-in waits.
type ReservationRefused struct {
	Branch string
	Why    string
}

// LaunchCI asks a workspace to launch a CI launch note its branch listener
// wrote under a reservation.
type LaunchCI struct {
	Launch LaunchSpec
}

// LaunchSeen tells the node a launch note's hash, so that the hook's later
// `post` line for it is a duplicate.
type LaunchSeen struct {
	Hash string
}

// LaunchOutcome tells a branch listener how a CI launch for its branch went:
// launched as Proc, or refused (Refused says why).
type LaunchOutcome struct {
	Launch  LaunchSpec
	Proc    ProcID
	Refused string
}

// EndedRun is a session run that just ended, for a branch listener's decision.
type EndedRun struct {
	Proc       ProcID
	Launch     LaunchSpec
	LeftResult bool
}

// WorkspaceFreed tells a branch listener that its workspace no longer runs
// anything of the daemon's: Ended is the run that ended, if one did.
type WorkspaceFreed struct {
	Ended *EndedRun
}

// CollectState asks an actor for its state once it has settled what it was
// doing. Freeze (a re-exec) also stops its timers and watches until ResumeWork.
// Ask numbers the requests of one collection to one actor: a parent that tells
// a child anything during a collection asks it again, and only the answer to
// its latest ask counts, so that no answer can predate a message.
type CollectState struct {
	Seq    int
	Ask    int
	Freeze bool
}

// StateCollected answers CollectState: exactly one of the states, as From's
// kind says; a session that has finished sends none.
type StateCollected struct {
	Seq       int
	Ask       int
	From      ActorAddr
	Workspace *WorkspaceState
	Session   *SessionState
	Branch    *BranchState
}

// ResumeWork undoes a freeze after a re-exec failed.
type ResumeWork struct{}

// ChildStopped tells an actor that one of its children stopped (the shell maps
// protoactor's Terminated to it).
type ChildStopped struct {
	Addr ActorAddr
}

func (LineRead) daemonMessage()        {}
func (ProcessExited) daemonMessage()   {}
func (Boot) daemonMessage()            {}
func (Restore) daemonMessage()         {}
func (SnapshotRequest) daemonMessage() {}
func (ArtifactClassified) answer()     {}
func (LimitsClosed) answer()           {}
func (UsageRead) answer()              {}
func (LaunchResolved) answer()         {}
func (RefusalWritten) answer()         {}
func (EndWritten) answer()             {}
func (ResultRead) answer()             {}
func (UntestedFound) answer()          {}
func (LaunchWritten) answer()          {}
func (WorkspaceScanned) answer()       {}
func (SessionSpawned) answer()         {}
func (ProcessSignaled) answer()        {}
func (InputsPaused) answer()           {}
func (InputsResumed) answer()          {}

func (ArtifactClassified) daemonMessage() {}
func (LaunchResolved) daemonMessage()     {}
func (WorkspaceScanned) daemonMessage()   {}
func (SessionSpawned) daemonMessage()     {}
func (ProcessSignaled) daemonMessage()    {}
func (RefusalWritten) daemonMessage()     {}
func (TimerFired) daemonMessage()         {}
func (ProcessGone) daemonMessage()        {}
func (LimitReached) daemonMessage()       {}
func (LimitsClosed) daemonMessage()       {}
func (UsageRead) daemonMessage()          {}
func (BudgetSpent) daemonMessage()        {}
func (ResultRead) daemonMessage()         {}
func (EndWritten) daemonMessage()         {}
func (UntestedFound) daemonMessage()      {}
func (LaunchWritten) daemonMessage()      {}
func (InputsPaused) daemonMessage()       {}
func (InputsResumed) daemonMessage()      {}
func (ExecFailed) daemonMessage()         {}
func (LaunchRequested) daemonMessage()    {}
func (CheckinArrived) daemonMessage()     {}
func (StopWorkspace) daemonMessage()      {}
func (AdoptSession) daemonMessage()       {}
func (StopSession) daemonMessage()        {}
func (SessionEnded) daemonMessage()       {}
func (SessionFinished) daemonMessage()    {}
func (ReserveWorkspace) daemonMessage()   {}
func (ReleaseWorkspace) daemonMessage()   {}
func (ReservationGranted) daemonMessage() {}
func (ReservationRefused) daemonMessage() {}
func (LaunchCI) daemonMessage()           {}
func (LaunchSeen) daemonMessage()         {}
func (LaunchOutcome) daemonMessage()      {}
func (WorkspaceFreed) daemonMessage()     {}
func (CollectState) daemonMessage()       {}
func (StateCollected) daemonMessage()     {}
func (ResumeWork) daemonMessage()         {}
func (ChildStopped) daemonMessage()       {}

// errSuffix renders an effect's error as the tail of a result's line.
func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return ": error: " + messages.CleanText(err.Error())
}

func (m LineRead) String() string {
	if m.Line == nil {
		return "read nothing"
	}
	return "read " + m.Line.String()
}

func (m ProcessExited) String() string { return "exited " + m.Proc.String() + " " + m.Status.String() }

func (m Boot) String() string {
	s := "boot, found " + strconv.Itoa(len(m.Found))
	for _, p := range m.Found {
		s += "; " + p.Workspace.String() + " " + p.String()
	}
	for _, sp := range m.Spawned {
		s += "; " + sp.String()
	}
	return s + listenedSuffix(m.Listeners)
}

func (m Restore) String() string {
	return "restore " + m.Handoff.Summary() + listenedSuffix(m.Listeners)
}

func listenedSuffix(ls []ListenedBranch) string {
	if len(ls) == 0 {
		return ""
	}
	s := ", listeners " + strconv.Itoa(len(ls))
	for _, l := range ls {
		s += "; " + messages.Token(l.Branch) + " " + l.Listener.String()
	}
	return s
}

func (m SnapshotRequest) String() string { return "snapshot request #" + strconv.Itoa(m.Request) }

func (m ArtifactClassified) String() string {
	s := "classified " + daemonShort(m.Hash)
	switch {
	case m.Err != nil:
		return s + errSuffix(m.Err)
	case m.Launch != nil:
		return s + " as " + m.Launch.String()
	case m.Checkin != nil:
		return s + " as " + m.Checkin.String()
	case m.Refused != nil:
		return s + " as " + m.Refused.String()
	case m.Run != nil:
		return s + " as " + m.Run.String()
	default:
		return s + " as nothing: " + m.Nothing
	}
}

func (m LaunchResolved) String() string {
	s := "resolved " + m.Proc.String()
	if m.Gone {
		s += " (ended while no daemon ran)"
	}
	if m.Err != nil {
		return s + errSuffix(m.Err)
	}
	if m.Launch != nil {
		s += " as " + m.Launch.String()
	}
	return s
}

func (m WorkspaceScanned) String() string {
	s := "scanned " + m.Workspace.String() + " for " + m.Purpose
	if m.Err != nil {
		return s + errSuffix(m.Err)
	}
	if len(m.Procs) == 0 {
		return s + ": none"
	}
	ps := make([]string, len(m.Procs))
	for i, p := range m.Procs {
		ps[i] = p.String()
	}
	return s + ": " + strings.Join(ps, ", ")
}

func (m SessionSpawned) String() string {
	if m.Err != nil {
		return "spawn of launch " + daemonShort(m.Launch) + " failed" + errSuffix(m.Err)
	}
	return "spawned launch " + daemonShort(m.Launch) + " as " + m.Proc.String()
}

func (m ProcessSignaled) String() string {
	return "signaled " + m.Signal + " " + m.Proc.String() + errSuffix(m.Err)
}

func (m RefusalWritten) String() string {
	return "refusal written on launch " + daemonShort(m.Launch) + errSuffix(m.Err)
}

func (m TimerFired) String() string {
	return "timer " + m.Purpose + " " + m.Proc.String() + " #" + strconv.Itoa(m.Seq) + " fired"
}

func (m ProcessGone) String() string {
	if m.Err != nil {
		return "watch of " + m.Proc.String() + " #" + strconv.Itoa(m.Seq) + " failed" + errSuffix(m.Err)
	}
	return "gone " + m.Proc.String() + " #" + strconv.Itoa(m.Seq)
}

func (m LimitReached) String() string {
	if m.Err != nil {
		return "limits of " + m.Proc.String() + " #" + strconv.Itoa(m.Seq) + " not watched" + errSuffix(m.Err)
	}
	return "limit " + messages.Token(m.Limit) + " reached by " + m.Proc.String() + " #" + strconv.Itoa(m.Seq) + ": " + m.Note
}

func (m LimitsClosed) String() string {
	s := "limits of " + m.Proc.String() + " closed"
	if m.Limit != "" {
		s += ": past " + messages.Token(m.Limit) + ": " + m.Note
	}
	return s + errSuffix(m.Err)
}

func (m UsageRead) String() string {
	s := "usage of " + m.Proc.String()
	switch {
	case m.Err != nil:
		return s + errSuffix(m.Err)
	case m.Usage == nil:
		s += ": none"
	default:
		s += ": " + m.Usage.String()
	}
	if m.Reached != "" {
		s += "; budget spent: " + m.Reached
	}
	return s
}

func (m BudgetSpent) String() string {
	return "budget " + m.Workspace.String() + " launch " + daemonShort(m.Launch) + " " + messages.Token(m.Limit) + " spent, " + strconv.FormatUint(m.Used, 10) + " counted"
}

func (m ResultRead) String() string {
	s := "result of " + m.Proc.String()
	switch {
	case m.Err != nil:
		return s + errSuffix(m.Err)
	case m.Found:
		return s + ": " + m.Result
	default:
		return s + ": none"
	}
}

func (m EndWritten) String() string { return "end written " + m.Proc.String() + errSuffix(m.Err) }

func (m UntestedFound) String() string {
	s := "untested on " + messages.Token(m.Branch)
	switch {
	case m.Err != nil:
		return s + errSuffix(m.Err)
	case m.Newest == "":
		s += ": none"
	default:
		s += ": " + daemonShort(m.Newest)
		if m.Waiting > 1 {
			s += " of " + strconv.Itoa(m.Waiting)
		}
	}
	for _, k := range m.Skipped {
		s += "; skipped " + daemonShort(k.Checkin) + ": " + messages.CleanText(k.Why)
	}
	return s
}

func (m LaunchWritten) String() string {
	s := "launch written on " + messages.Token(m.Branch) + " for " + daemonShort(m.Checkin)
	if m.Err != nil {
		return s + errSuffix(m.Err)
	}
	if m.Launch != nil {
		s += " as " + daemonShort(m.Launch.Hash)
	}
	return s
}

func (m InputsPaused) String() string {
	return "inputs paused (" + strconv.Itoa(len(m.Remainder)) + " bytes pending)" + errSuffix(m.Err)
}

func (m InputsResumed) String() string { return "inputs resumed" + errSuffix(m.Err) }

func (m ExecFailed) String() string { return "exec failed" + errSuffix(m.Err) }

func (m LaunchRequested) String() string { return "launch requested: " + m.Launch.String() }

func (m CheckinArrived) String() string {
	if m.Checkin == "" {
		return "look at " + messages.Token(m.Branch) + " for " + m.Listener.String()
	}
	return "checkin " + daemonShort(m.Checkin) + " on " + messages.Token(m.Branch) + " for " + m.Listener.String()
}

func (m StopWorkspace) String() string { return "stop workspace " + m.Workspace.String() }

func (m AdoptSession) String() string {
	s := "adopt " + m.Proc.String() + " " + m.Launch.String()
	if m.Gone {
		s += ", ended while no daemon ran"
	}
	return s
}

func (StopSession) String() string { return "stop session" }

func (m SessionEnded) String() string {
	s := "session ended " + m.Workspace.String() + " " + m.Proc.String() + " launch " + daemonShort(m.Launch.Hash)
	if m.Launch.IsCI() {
		if m.LeftResult {
			s += ", left a result"
		} else {
			s += ", left no result"
		}
	}
	return s
}

func (m SessionFinished) String() string { return "session finished " + m.Proc.String() }

func (m ReserveWorkspace) String() string { return "reserve for " + messages.Token(m.Branch) }

func (m ReleaseWorkspace) String() string { return "release from " + messages.Token(m.Branch) }

func (m ReservationGranted) String() string { return "reserved for " + messages.Token(m.Branch) }

func (m ReservationRefused) String() string {
	return "reservation for " + messages.Token(m.Branch) + " refused: " + m.Why
}

func (m LaunchCI) String() string { return "launch ci: " + m.Launch.String() }

func (m LaunchSeen) String() string { return "launch seen " + daemonShort(m.Hash) }

func (m LaunchOutcome) String() string {
	if m.Refused != "" {
		return "launch " + daemonShort(m.Launch.Hash) + " refused: " + m.Refused
	}
	return "launch " + daemonShort(m.Launch.Hash) + " launched as " + m.Proc.String()
}

func (m WorkspaceFreed) String() string {
	if m.Ended == nil {
		return "workspace freed"
	}
	s := "workspace freed, " + m.Ended.Proc.String() + " ended"
	if m.Ended.Launch.IsCI() {
		if m.Ended.LeftResult {
			s += ", left a result on " + daemonShort(m.Ended.Launch.Checkin)
		} else {
			s += ", left no result on " + daemonShort(m.Ended.Launch.Checkin)
		}
	}
	return s
}

func (m CollectState) String() string {
	s := "collect #" + strconv.Itoa(m.Seq) + "." + strconv.Itoa(m.Ask)
	if m.Freeze {
		s += " and freeze"
	}
	return s
}

func (m StateCollected) String() string {
	s := "collected #" + strconv.Itoa(m.Seq) + "." + strconv.Itoa(m.Ask) + " from " + m.From.String()
	switch {
	case m.Workspace != nil:
		s += ": " + m.Workspace.Summary()
	case m.Session != nil:
		s += ": " + m.Session.Summary()
	case m.Branch != nil:
		s += ": " + m.Branch.Summary()
	default:
		s += ": finished"
	}
	return s
}

func (ResumeWork) String() string { return "resume" }

func (m ChildStopped) String() string { return "child stopped: " + m.Addr.String() }
