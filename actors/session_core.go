package actors

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// sessionPhase is where a session actor stands.
type sessionPhase int

const (
	// sessRunning: the process runs (a stop may have been asked).
	sessRunning sessionPhase = iota
	// sessClosing: the process ended; its cgroup is being read and
	// removed (D46).
	sessClosing
	// sessCounting: the process ended; its use of the node is being read
	// (D50).
	sessCounting
	// sessReading: the process ended; a CI run's result is being read.
	sessReading
	// sessWriting: the end note is being written.
	sessWriting
	// sessWaitingRetry: writing the end note failed; a timer will try again.
	sessWaitingRetry
	// sessDone: the end note is written (or given up on); nothing is left.
	sessDone
)

// sessionCore decides for one session process, launched by the daemon (a
// child) or found at start (adopted), or one a daemon before spawned that
// ended while no daemon ran (found gone, D76: its end alone is written). On a stop, once the process has run
// past its launch's wall limit (D40), once its cgroup has gone past its
// memory or processes limit (D46), or once its model proxy says its tokens
// are spent (D50), it sends TERM to the process group, and for a child
// KILL after the grace; on the end, from the reaper or from a watch, it
// closes the cgroup, reads its use of the node, then writes exactly one
// end note (naming the budget when a limit ended it, and the usage) and
// tells its workspace. It never launches anything.
type sessionCore struct {
	base
	cfg   Config
	st    protocol.SessionState
	phase sessionPhase
	// seq numbers the timers and the watch; one fired under an older number
	// is stale and changes nothing.
	seq int
	// limitSeq is the number of the limits' watch in flight, on its own
	// since a stop re-arms the timers but not the watch: 0 for none (one
	// is armed with the timers), -1 once it answered (none is armed again
	// until a freeze: the session is being stopped, or has no cgroup).
	limitSeq int
	frozen   bool
	// collect is a CollectState waiting for the core to settle.
	collect *protocol.CollectState
	// finished says SessionFinished was told.
	finished bool
}

// newSessionCore makes the core of session st: a new one (a child just
// spawned, or a process adopted at start) or one restored from a hand-off.
func newSessionCore(cfg Config, st protocol.SessionState) *sessionCore {
	c := &sessionCore{cfg: cfg.withDefaults(), st: st}
	switch {
	case !st.Ended:
		c.phase = sessRunning
	case st.EndWritten:
		c.phase = sessDone
	default:
		c.phase = sessWaitingRetry
	}
	return c
}

// State is the session's part of a hand-off.
func (c *sessionCore) State() protocol.SessionState { return c.st }

func (c *sessionCore) parent() protocol.ActorAddr { return protocol.WorkspaceAddr(c.st.Workspace) }

// Start arms what the state needs: a watch for an adopted process, the grace
// timer for a child being stopped, the end note if it is still to write.
func (c *sessionCore) Start(now time.Time) []protocol.DaemonEffect {
	switch c.phase {
	case sessRunning:
		if c.st.FoundGone {
			// It ended while no daemon ran (D76): nothing to watch, and
			// how it ended is unknown; its end is written now.
			c.end(now, messages.ExitUnknown, now)
			break
		}
		if c.st.StartedAt.IsZero() && c.st.Launch.Wall != "" {
			// A process whose start could not be read: its wall counts
			// from now, and the hand-off keeps it from here on.
			c.log(slog.LevelWarn, "the session's start is unknown; its wall limit counts from now", pidAttr(c.st.Proc))
			c.st.StartedAt = now
		}
		c.arm(now)
	case sessWaitingRetry:
		c.writeEnd()
	case sessDone:
		c.finish()
	}
	return c.take()
}

// arm starts the timers and the watch the running state calls for.
func (c *sessionCore) arm(now time.Time) {
	if c.frozen {
		return
	}
	c.seq++
	switch c.phase {
	case sessRunning:
		if !c.st.Child {
			c.emit(protocol.WatchProcess{Proc: c.st.Proc, Seq: c.seq})
		}
		if c.limitSeq == 0 {
			c.limitSeq = c.seq
			c.emit(protocol.WatchLimits{Workspace: c.st.Workspace, Proc: c.st.Proc, Seq: c.seq})
		}
		if c.st.Child && c.st.StopRequestedAt != nil && !c.st.KillSent {
			left := c.cfg.Grace - now.Sub(*c.st.StopRequestedAt)
			if left < 0 {
				left = 0
			}
			c.emit(protocol.StartTimer{Proc: c.st.Proc, Purpose: protocol.TimerGrace, Seq: c.seq, After: left})
		}
		if at, ok := c.wallDeadline(); ok && c.st.StopRequestedAt == nil {
			left := at.Sub(now)
			if left < 0 {
				left = 0
			}
			c.emit(protocol.StartTimer{Proc: c.st.Proc, Purpose: protocol.TimerWall, Seq: c.seq, After: left})
		}
	case sessWaitingRetry:
		c.emit(protocol.StartTimer{Proc: c.st.Proc, Purpose: protocol.TimerEndRetry, Seq: c.seq, After: c.cfg.RetryAfter})
	}
}

// wallDeadline is when the session is past its launch's wall limit, counted
// from its process's start (D40), and whether it has one.
func (c *sessionCore) wallDeadline() (time.Time, bool) {
	if c.st.Launch.Wall == "" {
		return time.Time{}, false
	}
	d, err := messages.ParseWall("wall", c.st.Launch.Wall)
	if err != nil {
		return time.Time{}, false // the launch was validated; a bad wall cannot get here
	}
	return c.st.StartedAt.Add(d), true
}

// Step takes one message.
func (c *sessionCore) Step(now time.Time, msg protocol.DaemonMessage) []protocol.DaemonEffect {
	c.settle(msg)
	switch m := msg.(type) {
	case protocol.StopSession:
		c.stop(now)
	case protocol.TimerFired:
		c.timer(now, m)
	case protocol.ProcessExited:
		c.processExited(now, m)
	case protocol.ProcessGone:
		c.processGone(now, m)
	case protocol.LimitReached:
		c.limitReached(now, m)
	case protocol.BudgetSpent:
		c.budgetSpent(now, m)
	case protocol.UsageRead:
		c.usageRead(m)
	case protocol.LimitsClosed:
		c.limitsClosed(m)
	case protocol.ResultRead:
		c.resultRead(m)
	case protocol.EndWritten:
		c.endWritten(now, m)
	case protocol.ProcessSignaled:
		if m.Err != nil {
			c.log(slog.LevelWarn, "signal not sent", pidAttr(m.Proc), slog.String("signal", m.Signal), errAttr(m.Err))
		}
	case protocol.CollectState:
		c.collectState(m)
	case protocol.ResumeWork:
		if c.frozen {
			c.frozen = false
			c.arm(now)
		}
	default:
		c.log(slog.LevelWarn, "message not for a session ignored", slog.String(keyMessage, msg.String()))
	}
	if c.phase == sessDone && !c.finished {
		c.finish()
	}
	c.maybeReply()
	return c.take()
}

func (c *sessionCore) processExited(now time.Time, m protocol.ProcessExited) {
	if !c.st.Proc.Matches(m.Proc) {
		c.log(slog.LevelWarn, "exit of another process ignored", pidAttr(m.Proc))
		return
	}
	if c.st.Ended {
		c.log(slog.LevelInfo, "second exit of the same process ignored", pidAttr(c.st.Proc))
		return
	}
	c.end(now, m.Status, m.At)
}

func (c *sessionCore) processGone(now time.Time, m protocol.ProcessGone) {
	if m.Seq != c.seq || c.st.Ended {
		return // a watch from before a freeze or an end: stale
	}
	if m.Err != nil {
		c.log(slog.LevelWarn, "cannot watch the session; trying again", pidAttr(c.st.Proc), errAttr(m.Err))
		if !c.frozen {
			c.emit(protocol.StartTimer{Proc: c.st.Proc, Purpose: protocol.TimerWatchRetry, Seq: c.seq, After: c.cfg.RetryAfter})
		}
		return
	}
	c.end(now, messages.ExitStatus{State: messages.EndUnknown}, m.At)
}

func (c *sessionCore) usageRead(m protocol.UsageRead) {
	if c.phase != sessCounting {
		return
	}
	if m.Err != nil {
		c.log(slog.LevelWarn, "the session's usage was not read; its end note says none", pidAttr(c.st.Proc), errAttr(m.Err))
	}
	c.st.Usage = m.Usage
	if m.Reached != "" && c.st.Budget == "" && c.st.StopRequestedAt == nil {
		// Its proxy found its tokens spent, and the daemon did not
		// hear it (it was not running): the end went past them.
		c.st.Budget, c.st.BudgetNote = messages.LimitTokens, m.Reached
	}
	c.closed()
}

func (c *sessionCore) limitsClosed(m protocol.LimitsClosed) {
	if c.phase != sessClosing {
		return
	}
	if m.Err != nil {
		c.log(slog.LevelWarn, "the session's cgroup was not closed", pidAttr(c.st.Proc), errAttr(m.Err))
	}
	if m.Limit != "" && c.st.Budget == "" && c.st.StopRequestedAt == nil {
		// Past a limit nobody stopped it for: the kernel's OOM kill
		// ended it, or it ended before the watch said so.
		c.st.Budget, c.st.BudgetNote = m.Limit, m.Note
	}
	c.phase = sessCounting
	c.emit(protocol.ReadUsage{Workspace: c.st.Workspace, Proc: c.st.Proc, Launch: c.st.Launch.Hash})
}

func (c *sessionCore) resultRead(m protocol.ResultRead) {
	if c.phase != sessReading {
		return
	}
	switch {
	case m.Err != nil:
		c.log(slog.LevelWarn, "cannot read the run's result; it counts as none", pidAttr(c.st.Proc), errAttr(m.Err))
	case m.Found:
		c.st.Result, c.st.LeftResult = m.Result, true
	}
	c.ended()
}

func (c *sessionCore) endWritten(now time.Time, m protocol.EndWritten) {
	if c.phase != sessWriting {
		return
	}
	if m.Err == nil {
		c.st.EndWritten = true
		c.phase = sessDone
		return
	}
	c.st.EndAttempts++
	if c.st.EndAttempts >= c.cfg.EndAttempts {
		c.log(slog.LevelError, fmt.Sprintf("end note not written after %d attempts; giving up", c.st.EndAttempts), pidAttr(c.st.Proc), errAttr(m.Err))
		c.phase = sessDone
		return
	}
	c.log(slog.LevelWarn, "end note not written; trying again", pidAttr(c.st.Proc), errAttr(m.Err))
	c.phase = sessWaitingRetry
	c.arm(now)
}

func (c *sessionCore) collectState(m protocol.CollectState) {
	if m.Freeze && !c.frozen {
		c.frozen = true
		c.seq++ // every timer and watch armed so far is now stale
		c.limitSeq = 0
	}
	c.collect = &m
}

func (c *sessionCore) stop(now time.Time) {
	if c.st.Ended {
		c.log(slog.LevelInfo, "stop of a session that already ended", pidAttr(c.st.Proc))
		return
	}
	if c.st.StopRequestedAt != nil {
		c.log(slog.LevelInfo, "stop already requested", pidAttr(c.st.Proc))
		return
	}
	t := now
	c.st.StopRequestedAt = &t
	c.emit(protocol.SignalProcess{Proc: c.st.Proc, Group: true, Signal: protocol.SigTERM})
	if c.st.Child {
		c.arm(now)
	}
}

func (c *sessionCore) timer(now time.Time, m protocol.TimerFired) {
	if m.Seq != c.seq {
		return // stale: a later decision replaced it
	}
	switch m.Purpose {
	case protocol.TimerGrace:
		if c.st.Ended || !c.st.Child || c.st.KillSent || c.st.StopRequestedAt == nil {
			return
		}
		c.st.KillSent = true
		c.log(slog.LevelWarn, "the stop grace ran out; sending KILL to the group", pidAttr(c.st.Proc))
		c.emit(protocol.SignalProcess{Proc: c.st.Proc, Group: true, Signal: protocol.SigKILL})
	case protocol.TimerWatchRetry:
		if !c.st.Ended && !c.st.Child && !c.frozen {
			c.emit(protocol.WatchProcess{Proc: c.st.Proc, Seq: c.seq})
		}
	case protocol.TimerEndRetry:
		if c.phase == sessWaitingRetry {
			c.writeEnd()
		}
	case protocol.TimerWall:
		if c.st.Ended || c.st.StopRequestedAt != nil {
			return
		}
		c.log(slog.LevelWarn, "the session ran past its wall limit of "+c.st.Launch.Wall+"; stopping it", pidAttr(c.st.Proc))
		c.st.Budget = messages.LimitWall
		c.stop(now)
	}
}

// limitReached: past its memory or processes (D46), the session is
// stopped as past its wall: TERM, and KILL after the grace for a child.
func (c *sessionCore) limitReached(now time.Time, m protocol.LimitReached) {
	if m.Seq != c.limitSeq || c.limitSeq <= 0 || c.st.Ended {
		return // a watch from before a freeze or an end: stale
	}
	c.limitSeq = -1
	if m.Err != nil {
		c.log(slog.LevelInfo, "the session's limits are not watched", pidAttr(c.st.Proc), errAttr(m.Err))
		return
	}
	if c.st.StopRequestedAt != nil {
		c.log(slog.LevelInfo, "the session went past its "+m.Limit+" limit while being stopped: "+m.Note, pidAttr(c.st.Proc))
		return
	}
	c.log(slog.LevelWarn, "the session went past its "+m.Limit+" limit ("+m.Note+"); stopping it", pidAttr(c.st.Proc))
	c.st.Budget, c.st.BudgetNote = m.Limit, m.Note
	c.stop(now)
}

// budgetSpent: its model proxy says the session's tokens are spent (D50):
// stopped as past its wall. A line for another launch (a session this
// workspace ran before) stops nothing.
func (c *sessionCore) budgetSpent(now time.Time, m protocol.BudgetSpent) {
	if m.Launch != c.st.Launch.Hash || c.st.Ended {
		return
	}
	note := fmt.Sprintf("its model proxy counted %d tokens against its limits.tokens of %d", m.Used, c.st.Launch.Tokens)
	switch {
	case c.st.Budget != "":
		return // told again: the proxy says it until the session is gone
	case c.st.StopRequestedAt != nil:
		c.log(slog.LevelInfo, "the session spent its "+m.Limit+" while being stopped: "+note, pidAttr(c.st.Proc))
		return
	}
	c.log(slog.LevelWarn, "the session spent its "+m.Limit+" ("+note+"); stopping it", pidAttr(c.st.Proc))
	c.st.Budget, c.st.BudgetNote = m.Limit, note
	c.stop(now)
}

// end records the end and asks for what the end note needs. The status is
// what the note says (D20): unknown for a process the daemon is not the
// parent of, and a sandbox's 137 after the daemon's own KILL is that KILL.
// The cgroup is closed first: it may say a limit the end went past.
func (c *sessionCore) end(now time.Time, status messages.ExitStatus, at time.Time) {
	if !c.st.Child {
		status = messages.ExitStatus{State: messages.EndUnknown}
	}
	if at.IsZero() {
		at = now
	}
	c.st.Ended = true
	c.st.Exit = status.AfterKill(c.st.KillSent)
	c.st.EndedAt = at
	c.seq++ // the grace timer and the watch are over
	c.limitSeq = 0
	c.phase = sessClosing
	c.emit(protocol.CloseLimits{Workspace: c.st.Workspace, Proc: c.st.Proc})
}

// closed goes on once the cgroup is closed: a CI run's result, then the
// end note.
func (c *sessionCore) closed() {
	if c.st.Launch.IsCI() {
		c.phase = sessReading
		c.emit(protocol.ReadResult{Proc: c.st.Proc, Launch: c.st.Launch})
		return
	}
	c.ended()
}

// ended tells the workspace and writes the end note.
func (c *sessionCore) ended() {
	c.tell(c.parent(), protocol.SessionEnded{Workspace: c.st.Workspace, Proc: c.st.Proc, Launch: c.st.Launch, LeftResult: c.st.LeftResult})
	c.writeEnd()
}

func (c *sessionCore) writeEnd() {
	c.phase = sessWriting
	c.emit(protocol.WriteEnd{
		Launch:           c.st.Launch,
		Proc:             c.st.Proc,
		End:              c.endNote(),
		StopRequested:    c.st.StopRequestedAt != nil,
		KilledAfterGrace: c.st.KillSent,
		Attempt:          c.st.EndAttempts + 1,
		FoundGone:        c.st.FoundGone,
	})
}

// endNote is the end note, every field decided here (docs/design/notes.md
// §5.3): the status and its code or signal, killed when the daemon's KILL
// after the grace ended it, the release it ran, when it was seen to end,
// for a CI run the check-in and its result (none when it left none).
func (c *sessionCore) endNote() messages.EndNote {
	st := c.st.Exit
	release := c.st.Launch.ReleaseName
	if release == "" {
		release = "unknown"
	}
	e := messages.EndNote{Launch: c.st.Launch.Hash, Login: c.st.Launch.Workspace.Login, Project: c.st.Launch.Workspace.Project,
		PID: c.st.Proc.PID, StartTime: c.st.Proc.Start, Status: st.State, Release: release,
		Seen: c.st.EndedAt.UTC(), Note: messages.ClipText(messages.CleanText(c.endWords()), messages.MaxTextLen)}
	if st.State != messages.EndSandboxFailed {
		e.Budget = c.st.Budget
	}
	if c.st.Usage != nil {
		u := *c.st.Usage
		e.Usage = &u
	}
	switch st.State {
	case messages.EndExited, messages.EndSandboxFailed:
		if code := st.Code; code >= 0 && code <= 255 {
			e.ExitCode = &code
		}
		if st.State == messages.EndExited && e.ExitCode == nil {
			zero := 0
			e.ExitCode = &zero
		}
	case messages.EndSignaled:
		e.Signal = st.Signal
		e.Killed = c.st.KillSent && st.Signal == "SIGKILL"
	}
	if c.st.Launch.IsCI() {
		e.Checkin, e.Result = c.st.Launch.Checkin, messages.RunResultOf(c.st.Result)
	}
	return e
}

// endWords says in words how the session ended, for the end note.
func (c *sessionCore) endWords() string {
	var s string
	switch c.st.Exit.State {
	case messages.EndExited:
		s = fmt.Sprintf("exited with code %d", c.st.Exit.Code)
	case messages.EndSignaled:
		s = "ended by " + c.st.Exit.Signal
	case messages.EndSandboxFailed:
		s = fmt.Sprintf("its sandbox failed to start (exit %d), so the session never ran", c.st.Exit.Code)
	case messages.EndUnknown:
		if c.st.FoundGone {
			s = "ended while no daemon ran (found gone when the daemon started), so how it ended is unknown"
			break
		}
		fallthrough
	default:
		s = "seen gone; the daemon was not its parent, so how it ended is unknown"
	}
	switch {
	case c.st.KillSent:
		s += fmt.Sprintf(", after KILL when the stop grace of %s ran out", c.cfg.Grace)
	case c.st.StopRequestedAt != nil && c.st.Budget == "":
		s += ", after a stop was requested"
	}
	switch {
	case c.st.Budget == messages.LimitWall:
		s += fmt.Sprintf("; the daemon ended it past its %s limit of %s, counted from its start at %s", c.st.Budget, c.st.Launch.Wall,
			c.st.StartedAt.UTC().Format(time.RFC3339))
	case c.st.Budget != "" && c.st.StopRequestedAt != nil:
		s += fmt.Sprintf("; the daemon ended it past its %s limit: %s", c.st.Budget, c.st.BudgetNote)
	case c.st.Budget != "":
		s += fmt.Sprintf("; it went past its %s limit: %s", c.st.Budget, c.st.BudgetNote)
	}
	if c.st.Usage != nil {
		s += "; " + c.st.Usage.String()
	}
	if c.st.Launch.IsCI() {
		if c.st.LeftResult {
			s += "; it left " + c.st.Result + " on check-in " + c.st.Launch.Checkin
		} else {
			s += "; it left no result on check-in " + c.st.Launch.Checkin + ", so it is not launched again for its branch (D5)"
		}
	}
	return s
}

// finish tells the workspace the session has nothing left to do, once no
// effect's result is outstanding, so that stopping the actor loses nothing.
func (c *sessionCore) finish() {
	if c.awaiting > 0 {
		return
	}
	c.finished = true
	c.tell(c.parent(), protocol.SessionFinished{Proc: c.st.Proc})
}

// Quiescent reports whether the session waits for no result: a running
// process (its timers and watch are re-armed from the state), or an end note
// waiting for its retry, or nothing left.
func (c *sessionCore) Quiescent() bool {
	return c.awaiting == 0 && (c.phase == sessRunning || c.phase == sessWaitingRetry || c.phase == sessDone)
}

func (c *sessionCore) maybeReply() {
	if c.collect == nil || !c.Quiescent() {
		return
	}
	r := protocol.StateCollected{Seq: c.collect.Seq, Ask: c.collect.Ask, From: c.addr()}
	if c.phase != sessDone {
		st := c.st
		r.Session = &st
	}
	c.collect = nil
	c.tell(c.parent(), r)
}

func (c *sessionCore) addr() protocol.ActorAddr {
	return protocol.SessionAddr(c.st.Workspace, c.st.Proc)
}
