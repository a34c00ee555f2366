package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/ocx-go/ocx/host"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// The interfaces below are everything the actors need from the world, each
// declared here by its consumer and kept small. The daemon's wiring (cmd/ocxd)
// implements them with host/ and fossilio/; tests implement them with fakes.
// Every method may block; the shells call them on goroutines of their own,
// never in Receive, and cancel ctx when the actor stops.

// Classification is what a posted artifact is to the daemon (fossilio.Artifact
// is the artifact itself): exactly one of a launch note, a check-in, a launch
// note refused, or nothing (and why).
type Classification struct {
	Launch  *protocol.LaunchSpec
	Checkin *protocol.CheckinSpec
	// Refused is a launch note the record model refuses with a note.
	Refused *protocol.LaunchRefused
	// Run is a seed 004 message that is an event of a run, for its actor.
	Run     *protocol.RunRouted
	Nothing string
	// Arrival says the artifact is one the node's session runs may be
	// given (a post, a ticket change or a check-in: seed 004, section 9).
	Arrival bool
}

// Classifier reads posted artifacts from the record.
type Classifier interface {
	// Classify says what a posted artifact is. A launch note comes resolved
	// (its workspace, record, sandbox, release; for a CI launch its check-in
	// and that check-in's branch); a check-in comes with the `completes`
	// sessions whose listening index names its branch.
	Classify(ctx context.Context, repository, hash string) (Classification, error)
	// ResolveLaunch reads the launch note a `workspace serve` process found
	// at start serves, or a session a daemon before spawned served (its
	// spawned record, D76): what it describes, whether or not it would be
	// launched now (record.Index.Described), its release the one the
	// process ran.
	ResolveLaunch(ctx context.Context, p protocol.ProcInfo) (protocol.LaunchSpec, error)
}

// Queue is a branch listener's queue as the record gives it (decisions D5,
// D42): derived each time, never stored.
type Queue struct {
	// Waiting are the check-ins on the branch received after the listen
	// note that carry no result of the listener's login (a ci tag it sent,
	// or its verdict), in the server's order: the newest last.
	Waiting []string
	// Skipped are the check-ins on the branch the listener may never judge
	// (E6: a reviewer's own), each with why.
	Skipped []protocol.SkippedCheckin
}

// CheckinReader answers a branch listener's questions (decisions D5, D42).
type CheckinReader interface {
	// Queue returns the listener's queue on the branch.
	Queue(ctx context.Context, l protocol.BranchListener, branch string) (Queue, error)
	// RunResult returns the result the launch's login left on the launch's
	// check-in, if any: its `ci` tag's value, or for a reviewer its verdict.
	RunResult(ctx context.Context, l protocol.LaunchSpec) (result string, found bool, err error)
}

// NoteWriter writes the daemon's notes on the record as the node user.
type NoteWriter interface {
	WriteRefusal(ctx context.Context, n protocol.WriteRefusal) error
	// WriteEnd writes nothing if an end note for the same PID and start time
	// is already on the record (D6).
	WriteEnd(ctx context.Context, n protocol.WriteEnd) error
	// WriteLaunch writes a CI launch note and returns it resolved as Classify
	// would.
	WriteLaunch(ctx context.Context, n protocol.WriteLaunch) (protocol.LaunchSpec, error)
}

// WorkspaceProcs answers the actors' one question of the process table
// (host.ProcTable reads the table itself): which processes name a
// workspace, in the daemon's terms.
type WorkspaceProcs interface {
	// Scan returns every process that names the workspace. An error means the
	// answer is unknown, never "none".
	Scan(ctx context.Context, w messages.WorkspaceKey) ([]protocol.ProcInfo, error)
}

// Spawner starts sessions.
type Spawner interface {
	// Spawn starts `workspace serve KEY --root ROOT --launch HASH` as the
	// daemon's child, in a process group of its own, in the workspace's
	// sandbox, and registers it with the reaper before it can exit.
	Spawn(ctx context.Context, l protocol.LaunchSpec) (protocol.ProcID, error)
}

// Signaler signals processes.
type Signaler interface {
	// Signal sends sig ("TERM", "KILL") to the process, or the group it leads,
	// only while its PID still has its start time.
	Signal(ctx context.Context, p protocol.ProcID, group bool, sig string) error
}

// Watcher watches processes the daemon is not the parent of.
type Watcher interface {
	// Watch returns nil once the process is gone (at once if it already is),
	// or an error if it cannot watch it; it returns ctx's error when ctx ends.
	Watch(ctx context.Context, p protocol.ProcID) error
}

// Limits follows the sessions' cgroups (D46): each session the daemon
// spawns is in one of its own, holding the node's session limits.
type Limits interface {
	// Watch returns once the session's cgroup has gone past one of its
	// limits: the limit (messages.LimitMemory, LimitProcesses) and what
	// its counts show; an error when it has none or cannot be watched;
	// ctx's error when ctx ends.
	Watch(ctx context.Context, w messages.WorkspaceKey, p protocol.ProcID) (limit, note string, err error)
	// Close is asked once the session's process has ended: it reads the
	// cgroup (the limit its end went past, "" for none), ends what is left
	// in it and removes it. A session without a cgroup closes with nothing.
	Close(ctx context.Context, w messages.WorkspaceKey, p protocol.ProcID) (limit, note string, err error)
}

// Usage reads a session's use of the node once it has ended (D50).
type Usage interface {
	// Read returns the session's usage: the node's count of its model
	// for its launch (what its model proxy wrote) and its own account of
	// its turns; nil when there is neither. reached is why its tokens
	// budget is spent, as its proxy said, "" when it is not.
	Read(ctx context.Context, w messages.WorkspaceKey, launch string) (u *messages.SessionUsage, reached string, err error)
}

// Inputs is the pipe reader and the reaper, paused around a re-exec.
type Inputs interface {
	// Pause stops reading the pipe and reaping, returning the bytes read but
	// not yet split into lines. Every line and exit they sent before must be
	// in the node's mailbox when Pause returns.
	Pause(ctx context.Context) (remainder []byte, err error)
	// Resume starts them again after a failed re-exec.
	Resume(ctx context.Context, remainder []byte) error
}

// Execer replaces the daemon's image.
type Execer interface {
	// Exec execs the current release's ocxd with the hand-off; it returns only
	// if the exec did not happen.
	Exec(ctx context.Context, h protocol.Handoff) error
}

// RunHost carries out the effects of seed 004's runs: the daemon's run
// engine. Each method may block; a run actor's effects run one at a time,
// in the order its core asked for them. A run is named by its hash: the
// engine reads its message from the record.
type RunHost interface {
	// Care records that the run is in the node's care (RunTakeIntoCare),
	// or takes it out (RunRelease), on the node's own host.
	Care(ctx context.Context, run string, in bool) error
	// Prepare makes layers 2 to 4 (RunPrepare): the values set, or the
	// note naming what failed, or that a stop ended it.
	Prepare(ctx context.Context, run string) protocol.RunPrepared
	// Write writes started or ended as the node user where the run is
	// (RunWriteStarted, RunWriteEnded), or the kept logs (RunKeepLogs).
	Write(ctx context.Context, e protocol.DaemonEffect) error
	// Process launches, feeds or signals a process of the run (RunLaunch,
	// RunDeliver, RunEndProcess), or ends its preparation in flight
	// (RunEndPreparing, D99). A launched process's exit comes back to
	// the node later as a RunRouted RunProcessExited, exactly once.
	Process(ctx context.Context, e protocol.DaemonEffect) error
	// Check is the node's check of its runs (`runs check`): the runs to end
	// lost, each as the RunNotInCare for its actor.
	Check(ctx context.Context) ([]protocol.RunRouted, error)
	// Start is a start of a manual run (`run start`): the events for the
	// run's actor, read from the record now (By's standing, section 11
	// again), or nothing and why.
	Start(ctx context.Context, e protocol.StartRun) (routed []protocol.RunRouted, nothing string, err error)
	// Deliveries reads what the session runs in care of the repository
	// (every repository when ""), or the one run when run is not "", are to
	// be given (ReadDeliveries), each as the RunDelivered for its run's
	// actor.
	Deliveries(ctx context.Context, repository, run string) ([]protocol.RunRouted, error)
}

// Deps is every dependency of the actor tree.
type Deps struct {
	Classifier Classifier
	Checkins   CheckinReader
	Notes      NoteWriter
	Procs      WorkspaceProcs
	Spawner    Spawner
	Signaler   Signaler
	Watcher    Watcher
	// Clock is the time the shells stamp messages with, and their timers.
	Clock  host.Clock
	Inputs Inputs
	Execer Execer
	// Runs is the run engine (seed 004); nil on a node that runs none:
	// run events are then logged and dropped.
	Runs RunHost
	// Limits follows the sessions' cgroups; nil on a node that makes
	// none: no limit is watched, and a close finds nothing.
	Limits Limits
	// Usage reads a session's usage at its end; nil: none is read.
	Usage Usage
	// Logger receives the actors' log lines; protoactor's own go through it
	// too when the system is made with NewSystem.
	Logger *slog.Logger
	// Observe, when set, is told of each host effect the tree ran and its
	// result (the daemon's metrics), on the effect's goroutine, before the
	// result goes to its actor.
	Observe func(e protocol.DaemonEffect, result protocol.DaemonMessage)
}

// Validate reports the dependencies that are missing.
func (d Deps) Validate() error {
	var errs []error
	check := func(name string, ok bool) {
		if !ok {
			errs = append(errs, fmt.Errorf("actors: dependency %s is missing", name))
		}
	}
	check("Classifier", d.Classifier != nil)
	check("Checkins", d.Checkins != nil)
	check("Notes", d.Notes != nil)
	check("Procs", d.Procs != nil)
	check("Spawner", d.Spawner != nil)
	check("Signaler", d.Signaler != nil)
	check("Watcher", d.Watcher != nil)
	check("Clock", d.Clock != nil)
	check("Inputs", d.Inputs != nil)
	check("Execer", d.Execer != nil)
	check("Logger", d.Logger != nil)
	return errors.Join(errs...)
}

// run performs one host effect and returns its result, or nil if it has none
// (an exec that happened). It blocks; the shells call it on a goroutine.
func (d *Deps) run(ctx context.Context, e protocol.DaemonEffect) protocol.DaemonMessage {
	switch e := e.(type) {
	case protocol.ClassifyArtifact:
		a, err := d.Classifier.Classify(ctx, e.Repository, e.Hash)
		return protocol.ArtifactClassified{Repository: e.Repository, Hash: e.Hash, Launch: a.Launch, Checkin: a.Checkin, Refused: a.Refused, Run: a.Run, Nothing: a.Nothing, Arrival: a.Arrival, Err: err}
	case protocol.ResolveLaunch:
		l, err := d.Classifier.ResolveLaunch(ctx, e.Proc)
		if err != nil {
			return protocol.LaunchResolved{Proc: e.Proc, Gone: e.Gone, Err: err}
		}
		return protocol.LaunchResolved{Proc: e.Proc, Launch: &l, Gone: e.Gone}
	case protocol.WriteRefusal:
		return protocol.RefusalWritten{Launch: e.Launch.Hash, Err: d.Notes.WriteRefusal(ctx, e)}
	case protocol.WriteEnd:
		return protocol.EndWritten{Proc: e.Proc, Err: d.Notes.WriteEnd(ctx, e)}
	case protocol.WriteLaunch:
		l, err := d.Notes.WriteLaunch(ctx, e)
		if err != nil {
			return protocol.LaunchWritten{Branch: e.Branch, Checkin: e.Checkin, Err: err}
		}
		return protocol.LaunchWritten{Branch: e.Branch, Checkin: e.Checkin, Launch: &l}
	case protocol.ReadResult:
		r, found, err := d.Checkins.RunResult(ctx, e.Launch)
		return protocol.ResultRead{Proc: e.Proc, Found: found, Result: r, Err: err}
	case protocol.FindUntested:
		q, err := d.Checkins.Queue(ctx, e.Listener, e.Branch)
		r := protocol.UntestedFound{Branch: e.Branch, Waiting: len(q.Waiting), Skipped: q.Skipped, Err: err}
		if err == nil && len(q.Waiting) > 0 {
			r.Newest = q.Waiting[len(q.Waiting)-1]
		}
		return r
	case protocol.ScanWorkspace:
		ps, err := d.Procs.Scan(ctx, e.Workspace)
		return protocol.WorkspaceScanned{Workspace: e.Workspace, Purpose: e.Purpose, For: e.For, Procs: ps, Err: err}
	case protocol.SpawnSession:
		at := d.Clock.Now() // the wall counts from the spawn (D40)
		p, err := d.Spawner.Spawn(ctx, e.Launch)
		return protocol.SessionSpawned{Launch: e.Launch.Hash, Proc: p, At: at, Err: err}
	case protocol.SignalProcess:
		return protocol.ProcessSignaled{Proc: e.Proc, Signal: e.Signal, Err: d.Signaler.Signal(ctx, e.Proc, e.Group, e.Signal)}
	case protocol.WatchProcess:
		err := d.Watcher.Watch(ctx, e.Proc)
		return protocol.ProcessGone{Proc: e.Proc, Seq: e.Seq, At: d.Clock.Now(), Err: err}
	case protocol.WatchLimits:
		if d.Limits == nil {
			return nil
		}
		limit, note, err := d.Limits.Watch(ctx, e.Workspace, e.Proc)
		return protocol.LimitReached{Proc: e.Proc, Seq: e.Seq, Limit: limit, Note: note, At: d.Clock.Now(), Err: err}
	case protocol.CloseLimits:
		if d.Limits == nil {
			return protocol.LimitsClosed{Proc: e.Proc}
		}
		limit, note, err := d.Limits.Close(ctx, e.Workspace, e.Proc)
		return protocol.LimitsClosed{Proc: e.Proc, Limit: limit, Note: note, Err: err}
	case protocol.ReadUsage:
		if d.Usage == nil {
			return protocol.UsageRead{Proc: e.Proc}
		}
		u, reached, err := d.Usage.Read(ctx, e.Workspace, e.Launch)
		return protocol.UsageRead{Proc: e.Proc, Usage: u, Reached: reached, Err: err}
	case protocol.PauseInputs:
		rem, err := d.Inputs.Pause(ctx)
		return protocol.InputsPaused{Remainder: rem, Err: err}
	case protocol.ResumeInputs:
		return protocol.InputsResumed{Err: d.Inputs.Resume(ctx, e.Remainder)}
	case protocol.ExecRelease:
		if err := d.Execer.Exec(ctx, e.Handoff); err != nil {
			return protocol.ExecFailed{Err: err}
		}
		return nil
	}
	return d.runEffect(ctx, e)
}

// runEffect performs a run's effect through the run engine, and returns its
// result, or nil for an effect that has none.
func (d *Deps) runEffect(ctx context.Context, e protocol.DaemonEffect) protocol.DaemonMessage {
	if d.Runs == nil {
		if _, ok := e.(protocol.CheckRuns); ok {
			return protocol.RunsChecked{Err: errors.New("this node has no run engine")}
		}
		if s, ok := e.(protocol.StartRun); ok {
			return protocol.RunStartChecked{Run: s.Run, Err: errors.New("this node has no run engine")}
		}
		if _, ok := e.(protocol.ReadDeliveries); ok {
			return protocol.DeliveriesRead{}
		}
		return nil
	}
	switch e := e.(type) {
	case protocol.RunTakeIntoCare:
		if err := d.Runs.Care(ctx, e.Run, true); err != nil {
			d.Logger.Error("the run could not be recorded in the node's care", slog.String(KeyRun, e.Run), errAttr(err))
		}
	case protocol.RunRelease:
		if err := d.Runs.Care(ctx, e.Run, false); err != nil {
			d.Logger.Error("the run could not be taken out of the node's care", slog.String(KeyRun, e.Run), errAttr(err))
		}
	case protocol.RunPrepare:
		return d.Runs.Prepare(ctx, e.Run)
	case protocol.RunWriteStarted:
		return protocol.RunStartedWritten{Err: d.Runs.Write(ctx, e)}
	case protocol.RunWriteEnded:
		return protocol.RunEndedWritten{Err: d.Runs.Write(ctx, e)}
	case protocol.RunKeepLogs:
		return protocol.RunLogsKept{Proc: e.Proc, Err: d.Runs.Write(ctx, e)}
	case protocol.RunLaunch, protocol.RunDeliver, protocol.RunEndProcess, protocol.RunEndPreparing:
		if err := d.Runs.Process(ctx, e); err != nil {
			d.Logger.Warn("a run's process effect failed", slog.String(keyEffect, e.String()), errAttr(err))
		}
	case protocol.CheckRuns:
		lost, err := d.Runs.Check(ctx)
		return protocol.RunsChecked{Lost: lost, Err: err}
	case protocol.StartRun:
		routed, nothing, err := d.Runs.Start(ctx, e)
		return protocol.RunStartChecked{Run: e.Run, Routed: routed, Nothing: nothing, Err: err}
	case protocol.ReadDeliveries:
		routed, err := d.Runs.Deliveries(ctx, e.Repository, e.Run)
		return protocol.DeliveriesRead{Routed: routed, Err: err}
	}
	return nil
}
