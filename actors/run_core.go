package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// runPhase is where a run stands in table 10 of seed 004. none, waiting,
// started and ended are the table's states; preparing and writing are the
// none state on its way to started, and ending is ended decided and being
// written.
type runPhase int

const (
	// runNone: no started or ended counts, and the run is not in care.
	runNone runPhase = iota
	// runWaiting: a manual run waits for a start by admin or setup.
	runWaiting
	// runPreparing: in care; layers 2 to 4 are being made.
	runPreparing
	// runWriting: prepared; started is being written.
	runWriting
	// runStarted: started counts; the process runs, or for a session whose
	// deliveries is start, one process at a time runs for its deliveries.
	runStarted
	// runEnding: the outcome is decided; the last kept logs, then ended,
	// are being written.
	runEnding
	// runEnded: ended is written (or given up on). Nothing more happens.
	runEnded
)

var runPhaseNames = [...]string{"none", "waiting", "preparing", "writing started", "started", "ending", "ended"}

func (p runPhase) String() string { return runPhaseNames[p] }

// sigXCPU is SIGXCPU's name, as an exit status names it: the kernel's signal to a process
// past its cpu limit (seed 004, table 7).
const sigXCPU = "SIGXCPU"

// RunKept is what a run's core is rebuilt from when the node starts (seed
// 004, section 4): what the record says (started, a stop and ended that
// count) and what the node keeps of a run in its care (when it launched,
// its last process's number and whether that process is alive, what its
// session has been given and the deliveries waiting for it).
type RunKept struct {
	StartedCounts bool
	StopCounts    bool
	EndedCounts   bool
	InCare        bool
	LaunchedAt    time.Time
	Proc          int
	Alive         bool
	Given         runGiven
	Queue         []protocol.RunDelivery
	// Cause is what came first of a stop (stopped) and the wall (budget),
	// once the node acted on it, and CauseNote its note: the node keeps it
	// so that a restart ends the run as it would have.
	Cause     runmsg.RunOutcome
	CauseNote string
	// Decided is the run's outcome once decided and until ended is
	// written, so that a node going down between the two writes the same.
	Decided *runDecision
}

// runDecision is a run's decided ended: its outcome, exit and note.
type runDecision struct {
	Outcome runmsg.RunOutcome
	Exit    *int
	Note    string
}

// runCore decides a run's life (seed 004, section 10): from its arrival,
// through started and its process or processes, to exactly one ended. It
// writes started before any launch, so that a process is launched at most
// once for a run, and it decides ended once, from what came first of a
// stop, the wall and the process's exit.
type runCore struct {
	base
	cfg   Config
	run   string
	facts protocol.RunFacts
	phase runPhase

	inCare bool
	values map[string]string
	// startInFlight and endInFlight: a write of started or ended is out.
	startInFlight, endInFlight bool
	// The run's turns, which the node gives (runSchedule, D86): slotAsked
	// and startAsked say it waits for its user's slot or its turn to write
	// started; slotHeld that it holds the slot, until it leaves the
	// node's care; startSettled that it told the node its started is
	// written or it ends.
	slotAsked, slotHeld        bool
	startAsked, startSettled   bool
	startAttempts, endAttempts int
	// startFailures, endFailures and keepFailures count the writes that
	// failed for a reason other than the server's absence
	// (protocol.ErrUnreachable): only they end the tries.
	startFailures, endFailures, keepFailures int

	launchedAt time.Time
	// proc is the number of the run's last process; running says it runs;
	// keeping says its kept logs are to be written (before anything else
	// of the run is), keepInFlight that a write of them is out.
	proc         int
	running      bool
	keeping      bool
	keepInFlight bool
	killSent     bool

	// stop says a stop by admin or setup came before started (it is acted on
	// once the effect in flight answers). cause is what came first, once
	// started, of a stop (stopped) and the wall (budget).
	stop      bool
	cause     runmsg.RunOutcome
	causeNote string

	given runGiven
	queue []protocol.RunDelivery

	// The decision, once made.
	outcome runmsg.RunOutcome
	exit    *int
	note    string

	seq                         int
	wallSeq, graceSeq, retrySeq int
}

// newRunCore makes the core of the run with this hash, which has not
// arrived yet: it is in state none.
func newRunCore(cfg Config, run string) *runCore {
	return &runCore{cfg: cfg.withDefaults(), run: run, facts: protocol.RunFacts{Hash: run}}
}

// restoreRunCore rebuilds a run's core from its message's facts, the record
// and what the node keeps (section 4); Start then arms what it needs. A run
// in care whose started does not count never launched (a launch waits for
// started on the record), so it is prepared again; one whose started counts
// but which has no live process (and is not a session between processes)
// waits for the node's check (runsLost) to say RunNotInCare.
func restoreRunCore(cfg Config, facts protocol.RunFacts, k RunKept) *runCore {
	c := &runCore{cfg: cfg.withDefaults(), run: facts.Hash, facts: facts, inCare: k.InCare, given: k.Given}
	// A run in care whose started counts holds its user's slot: the node
	// gave it to it (runSchedule.Hold).
	c.slotHeld = k.InCare && k.StartedCounts && facts.Slot != ""
	switch {
	case k.EndedCounts:
		c.phase = runEnded
	case k.Decided != nil:
		c.phase = runEnding
		c.outcome, c.exit, c.note = k.Decided.Outcome, k.Decided.Exit, k.Decided.Note
		c.launchedAt, c.proc = k.LaunchedAt, k.Proc
	case k.StartedCounts:
		c.phase = runStarted
		c.launchedAt, c.proc = k.LaunchedAt, k.Proc
		c.running = k.Alive && k.InCare
		if facts.StartsEach() {
			c.queue = append([]protocol.RunDelivery(nil), k.Queue...)
		}
		c.cause, c.causeNote = k.Cause, k.CauseNote
		if c.cause == "" && k.StopCounts {
			c.cause = runmsg.RunStopped
		}
	case k.InCare:
		c.phase = runPreparing
		c.stop = k.StopCounts || k.Cause == runmsg.RunStopped
	case k.StopCounts || k.Cause == runmsg.RunStopped:
		c.phase = runNone
		c.stop = true
	default:
		c.phase = runNone
	}
	return c
}

// Start arms what a restored state needs: the care to release of an ended
// run, the preparation to do again, the wall timer, the stop to carry out,
// the next delivery's process.
func (c *runCore) Start(now time.Time) []protocol.DaemonEffect {
	switch c.phase {
	case runEnded:
		if c.inCare {
			c.release()
		}
	case runEnding:
		c.writeEnded()
	case runNone:
		if c.stop {
			c.decide(runmsg.RunStopped, nil, "")
		}
	case runPreparing:
		if c.stop {
			c.decide(runmsg.RunStopped, nil, "")
			break
		}
		c.prepare()
	case runStarted:
		if c.launchedAt.IsZero() {
			c.log(slog.LevelWarn, "the run's launch time is unknown; its wall counts from now", runAttr(c.run))
			c.launchedAt = now
		}
		switch {
		case c.cause != "" && c.running:
			c.endProcess()
		case c.cause != "" && c.inCare && c.facts.StartsEach():
			c.decide(c.cause, nil, c.causeNote)
		case c.cause == "" && c.facts.Wall > 0 && !now.Before(c.launchedAt.Add(c.facts.Wall)) && (c.running || c.inCare):
			// Past its wall while the node was down: ended now.
			c.pastWall()
		case c.cause == "":
			c.armWall(now)
			if c.inCare && c.facts.StartsEach() {
				c.next()
			}
		}
	}
	return c.take()
}

// Kept is what the node keeps of the run while it is in its care (section
// 4), for restoreRunCore; the record's part is read from the repository.
func (c *runCore) Kept() RunKept {
	k := RunKept{
		StartedCounts: !c.launchedAt.IsZero(), InCare: c.inCare, LaunchedAt: c.launchedAt,
		Proc: c.proc, Alive: c.running, Given: c.given, Queue: append([]protocol.RunDelivery(nil), c.queue...),
	}
	if c.stop {
		k.Cause = runmsg.RunStopped
	}
	if c.cause != "" {
		k.Cause, k.CauseNote = c.cause, c.causeNote
	}
	if c.phase == runEnding {
		k.Decided = &runDecision{Outcome: c.outcome, Exit: c.exit, Note: c.note}
	}
	return k
}

// Ended says ended is written (or given up on): the core does nothing more.
func (c *runCore) Ended() bool { return c.phase == runEnded }

// Outcome is the decided outcome, empty until it is decided.
func (c *runCore) Outcome() runmsg.RunOutcome { return c.outcome }

// State is the run's state in table 10's words: none, waiting, started or
// ended (ended once decided).
func (c *runCore) State() string {
	switch c.phase {
	case runNone, runPreparing, runWriting:
		return "none"
	case runWaiting:
		return "waiting"
	case runStarted:
		return "started"
	}
	return "ended"
}

// Step takes one message. An ended run takes anything and does nothing.
func (c *runCore) Step(now time.Time, msg protocol.DaemonMessage) []protocol.DaemonEffect {
	c.settle(msg)
	if c.phase == runEnded {
		return nil
	}
	switch m := msg.(type) {
	case protocol.RunArrived:
		c.arrived(m)
	case protocol.RunStartRequested:
		c.startRequested(m)
	case protocol.RunStopRequested:
		c.stopRequested(m)
	case protocol.RunPrepared:
		c.prepared(m)
	case protocol.RunStartedWritten:
		c.startedWritten(now, m)
	case protocol.RunProcessExited:
		c.exited(m)
	case protocol.RunLogsKept:
		c.logsKept(m)
	case protocol.RunEndedWritten:
		c.endedWritten(m)
	case protocol.RunDelivered:
		c.delivered(m.Delivery)
	case protocol.DeliveriesRead:
		c.deliveriesRead(m)
	case protocol.RunNotInCare:
		c.notInCare(m)
	case protocol.RunTimerFired:
		c.timer(now, m)
	case protocol.RunTurnGiven:
		c.turnGiven(m)
	default:
		c.log(slog.LevelWarn, "message not for a run ignored", runAttr(c.run), slog.String(keyMessage, msg.String()))
	}
	return c.take()
}

// arrived: table 10, rows 1 to 3.
func (c *runCore) arrived(m protocol.RunArrived) {
	if c.phase != runNone || c.inCare || c.stop {
		c.log(slog.LevelInfo, "the run arrived again; ignored", runAttr(c.run))
		return
	}
	m.Facts.Hash = c.run
	c.facts = m.Facts
	switch {
	case m.Refusal != "":
		c.decide(runmsg.RunRefused, nil, m.Refusal)
	case m.Facts.Manual:
		c.phase = runWaiting
		c.log(slog.LevelInfo, "a manual run waits for a start by admin or setup", runAttr(c.run))
	default:
		c.begin()
	}
}

// startRequested: table 10, row 4.
func (c *runCore) startRequested(m protocol.RunStartRequested) {
	switch {
	case c.phase != runWaiting:
		c.log(slog.LevelInfo, "a start of a run that does not wait for one; ignored", runAttr(c.run), slog.String("state", c.phase.String()))
	case !m.Privileged:
		c.log(slog.LevelWarn, "a start by a user holding neither admin nor setup; ignored", runAttr(c.run), slog.String("by", m.By))
	case m.Refusal != "":
		c.decide(runmsg.RunRefused, nil, m.Refusal)
	default:
		c.begin()
	}
}

// begin takes the run into care and makes layers 2 to 4.
func (c *runCore) begin() {
	c.inCare = true
	c.emit(protocol.RunTakeIntoCare{Run: c.run})
	c.phase = runPreparing
	c.prepare()
}

// prepare makes layers 2 to 4, once the run holds its user's slot if its
// password step sets the user's password (seed 004 §5): the node gives it
// the slot (runSchedule), and while it waits the runs after it go on.
func (c *runCore) prepare() {
	if c.facts.Slot != "" && !c.slotHeld {
		c.slotAsked = true
		c.tell(protocol.NodeAddr(), protocol.RunTurnRequested{Run: c.run, Turn: protocol.RunTurnSlot, User: c.facts.Slot})
		return
	}
	c.emit(protocol.RunPrepare{Run: c.run})
}

// turnGiven: the node gave the run the turn it asked for.
func (c *runCore) turnGiven(m protocol.RunTurnGiven) {
	switch {
	case m.Turn == protocol.RunTurnSlot && c.slotAsked && c.phase == runPreparing:
		c.slotAsked, c.slotHeld = false, true
		c.emit(protocol.RunPrepare{Run: c.run})
	case m.Turn == protocol.RunTurnStarted && c.startAsked && c.phase == runWriting:
		c.startAsked = false
		c.writeStartedNow()
	default:
		c.log(slog.LevelInfo, "a turn the run does not wait for; ignored", runAttr(c.run), slog.String("turn", m.Turn), slog.String("state", c.phase.String()))
	}
}

// release takes the run out of the node's care, and gives back its
// user's slot, or ends its wait for it.
func (c *runCore) release() {
	c.inCare = false
	c.emit(protocol.RunRelease{Run: c.run})
	c.doneWithSlot()
}

// doneWithSlot tells the node the run no longer holds or waits for its
// user's slot.
func (c *runCore) doneWithSlot() {
	if c.slotHeld || c.slotAsked {
		c.slotHeld, c.slotAsked = false, false
		c.tell(protocol.NodeAddr(), protocol.RunTurnDone{Run: c.run, Turn: protocol.RunTurnSlot})
	}
}

// doneWithStart tells the node, once, that the run's started is written
// or that it ends: the runs after it in the server's order go on.
func (c *runCore) doneWithStart() {
	if !c.startSettled && !c.facts.At.IsZero() {
		c.startSettled = true
		c.tell(protocol.NodeAddr(), protocol.RunTurnDone{Run: c.run, Turn: protocol.RunTurnStarted})
	}
}

// stopRequested: table 10, rows 5, 8 and 11.
func (c *runCore) stopRequested(m protocol.RunStopRequested) {
	if !m.Privileged {
		c.log(slog.LevelWarn, "a stop by a user holding neither admin nor setup; ignored", runAttr(c.run), slog.String("by", m.By))
		return
	}
	switch c.phase {
	case runNone, runWaiting:
		c.stop = true
		c.decide(runmsg.RunStopped, nil, "")
	case runPreparing:
		if c.stop {
			c.log(slog.LevelInfo, "a second stop while the layers are made; nothing more to do", runAttr(c.run))
			return
		}
		c.stop = true
		if c.slotAsked {
			// It waits for its user's run before it: the stop ends the
			// wait, and the run.
			c.decide(runmsg.RunStopped, nil, "")
			return
		}
		// Otherwise decided when the layers answer, which the stop
		// hastens: a command step's process is ended (D99).
		c.emit(protocol.RunEndPreparing{Run: c.run})
	case runWriting:
		c.stop = true
		if !c.startInFlight && !c.startAsked {
			c.decide(runmsg.RunStopped, nil, "")
		}
	case runStarted:
		if c.cause != "" {
			c.log(slog.LevelInfo, "the run is already being ended; the stop changes nothing", runAttr(c.run))
			return
		}
		c.cause = runmsg.RunStopped
		c.wallSeq = 0
		if c.running {
			c.endProcess()
			return
		}
		c.decide(runmsg.RunStopped, nil, "")
	default:
		c.log(slog.LevelInfo, "stop of a run whose end is decided; ignored", runAttr(c.run))
	}
}

func (c *runCore) prepared(m protocol.RunPrepared) {
	if c.phase != runPreparing {
		c.log(slog.LevelWarn, "a preparation's result out of turn; ignored", runAttr(c.run))
		return
	}
	switch {
	case c.stop:
		c.decide(runmsg.RunStopped, nil, "")
	case m.Failed != "":
		c.decide(runmsg.RunRefused, nil, m.Failed)
	default:
		c.values = m.Values
		c.phase = runWriting
		c.writeStarted()
	}
}

// writeStarted writes started once the node gives the run its turn, in the
// server's order (runSchedule); a run with no place in it writes at once.
func (c *runCore) writeStarted() {
	if !c.facts.At.IsZero() {
		c.startAsked = true
		c.tell(protocol.NodeAddr(), protocol.RunTurnRequested{Run: c.run, Turn: protocol.RunTurnStarted, Project: c.facts.Project, At: c.facts.At})
		return
	}
	c.writeStartedNow()
}

func (c *runCore) writeStartedNow() {
	c.startAttempts++
	c.startInFlight = true
	c.emit(protocol.RunWriteStarted{Run: c.run, Values: c.values, Attempt: c.startAttempts})
}

// startedWritten: started is on the record, so the command may be launched
// (for a node on another host, the server has it).
func (c *runCore) startedWritten(now time.Time, m protocol.RunStartedWritten) {
	if c.phase != runWriting || !c.startInFlight {
		c.log(slog.LevelWarn, "a started write's result out of turn; ignored", runAttr(c.run))
		return
	}
	c.startInFlight = false
	if m.Err != nil {
		if !errors.Is(m.Err, protocol.ErrUnreachable) {
			c.startFailures++ // the server's absence is waited out, not counted
		}
		switch {
		case c.stop:
			c.decide(runmsg.RunStopped, nil, "")
		case c.startFailures >= c.cfg.EndAttempts:
			c.decide(runmsg.RunRefused, nil, fmt.Sprintf("started could not be written after %d attempts: %s", c.startAttempts, messages.CleanText(m.Err.Error())))
		default:
			c.log(slog.LevelWarn, "started not written; trying again", runAttr(c.run), errAttr(m.Err))
			c.retry()
		}
		return
	}
	c.phase = runStarted
	c.launchedAt = now
	c.doneWithStart()
	if c.stop {
		// The stop came before the launch: started is on the record, and
		// nothing is launched.
		c.cause = runmsg.RunStopped
		c.decide(runmsg.RunStopped, nil, "")
		return
	}
	c.armWall(now)
	if c.facts.StartsEach() {
		c.next()
		return
	}
	c.launch(nil)
}

func (c *runCore) launch(d *protocol.RunDelivery) {
	c.proc++
	c.running, c.killSent = true, false
	c.emit(protocol.RunLaunch{Run: c.run, Proc: c.proc, Delivery: d})
	if c.facts.Session && !c.facts.StartsEach() {
		// A process fed each delivery: what arrived between its started
		// and this launch (read once the launch is done, the run's
		// effects being one after the other).
		c.emit(protocol.ReadDeliveries{Run: c.run})
	}
}

// next launches a process for the first delivery waiting, if none runs.
func (c *runCore) next() {
	if c.running || c.keeping || c.cause != "" || len(c.queue) == 0 {
		return
	}
	d := c.queue[0]
	c.queue = c.queue[1:]
	c.launch(&d)
}

func (c *runCore) armWall(now time.Time) {
	if c.facts.Wall <= 0 {
		return
	}
	c.seq++
	c.wallSeq = c.seq
	c.emit(protocol.RunStartTimer{Run: c.run, Purpose: protocol.RunTimerWall, Seq: c.seq, After: max(c.launchedAt.Add(c.facts.Wall).Sub(now), 0)})
}

func (c *runCore) retry() {
	c.seq++
	c.retrySeq = c.seq
	c.emit(protocol.RunStartTimer{Run: c.run, Purpose: protocol.RunTimerRetry, Seq: c.seq, After: c.cfg.RetryAfter})
}

// pastWall ends the run past its wall: its process first, if one runs.
func (c *runCore) pastWall() {
	c.wallSeq = 0
	c.cause = runmsg.RunBudget
	c.causeNote = fmt.Sprintf("wall: past limits.wall of %s, counted from the launch at %s", c.facts.Wall, c.launchedAt.UTC().Format(time.RFC3339))
	c.log(slog.LevelWarn, "the run is past its wall; ending it", runAttr(c.run))
	if c.running {
		c.endProcess()
		return
	}
	c.decide(runmsg.RunBudget, nil, c.causeNote)
}

// endProcess sends TERM to the running process, and KILL after the grace.
func (c *runCore) endProcess() {
	c.emit(protocol.RunEndProcess{Run: c.run, Proc: c.proc, Signal: protocol.SigTERM})
	c.seq++
	c.graceSeq = c.seq
	c.emit(protocol.RunStartTimer{Run: c.run, Purpose: protocol.RunTimerGrace, Seq: c.seq, After: c.cfg.Grace})
}

// delivered: table 10, rows 6 and 7.
func (c *runCore) delivered(d protocol.RunDelivery) {
	switch {
	case c.phase != runStarted:
		c.log(slog.LevelInfo, "a delivery for a run that is not started; ignored", runAttr(c.run), slog.String("delivery", d.String()), slog.String("state", c.phase.String()))
		return
	case !c.facts.Session:
		c.log(slog.LevelWarn, "a delivery for a run that is not a session; ignored", runAttr(c.run), slog.String("delivery", d.String()))
		return
	case c.cause != "":
		c.log(slog.LevelInfo, "a delivery for a run being ended; not given", runAttr(c.run), slog.String("delivery", d.String()))
		return
	case !c.facts.StartsEach() && !c.running:
		c.log(slog.LevelWarn, "a delivery for a session with no process to feed; not given", runAttr(c.run), slog.String("delivery", d.String()))
		return
	case !c.given.Give(d.At):
		c.log(slog.LevelInfo, "a delivery given already, or behind one given; ignored", runAttr(c.run), slog.String("delivery", d.String()))
		return
	}
	if !c.facts.StartsEach() {
		c.emit(protocol.RunDeliver{Run: c.run, Proc: c.proc, Delivery: d})
		return
	}
	c.queue = append(c.queue, d)
	c.next()
}

// deliveriesRead gives the run what was read for it after its launch.
func (c *runCore) deliveriesRead(m protocol.DeliveriesRead) {
	if m.Err != nil {
		c.log(slog.LevelWarn, "the session's deliveries cannot be read; they are read again at the next arrival", runAttr(c.run), errAttr(m.Err))
	}
	for _, r := range m.Routed {
		if d, ok := r.Event.(protocol.RunDelivered); ok && r.Run == c.run {
			c.delivered(d.Delivery)
		}
	}
}

// exited: table 10, rows 9 to 11.
func (c *runCore) exited(m protocol.RunProcessExited) {
	if c.phase != runStarted || !c.running || m.Proc != c.proc {
		c.log(slog.LevelInfo, "an exit of no process of the run's that runs; ignored", runAttr(c.run), slog.Int("proc", m.Proc))
		return
	}
	c.running = false
	c.graceSeq = 0
	c.keeping = true
	c.keepFailures = 0
	c.keepLogs()
	switch {
	case c.cause == runmsg.RunStopped:
		c.decide(runmsg.RunStopped, nil, "")
	case c.cause == runmsg.RunBudget:
		c.decide(runmsg.RunBudget, nil, c.causeNote)
	case m.Status.State == messages.EndUnknown && !c.facts.StartsEach():
		c.decide(runmsg.RunLost, nil, "its process ended while the node was not its parent, so how it ended is unknown")
	case m.Status.Signal == sigXCPU && c.facts.CPU:
		c.decide(runmsg.RunBudget, nil, "cpu: its process was ended by SIGXCPU, past limits.cpu")
	case m.Status.Limit == messages.LimitMemory:
		c.decide(runmsg.RunBudget, nil, "memory: past limits.memory, its sandbox was ended ("+m.Status.LimitNote+")")
	case !c.facts.StartsEach():
		code := m.Exit()
		c.decide(runmsg.RunExited, &code, "")
	}
}

func (c *runCore) keepLogs() {
	c.keepInFlight = true
	c.emit(protocol.RunKeepLogs{Run: c.run, Proc: c.proc})
}

// logsKept: the kept logs come before the next process and before ended
// (section 8.2). A write the server was not there for is tried again for
// as long as it takes, as ended is; any other failure is tried again up
// to the attempts of ended, then given up, logged, and the run goes on.
func (c *runCore) logsKept(m protocol.RunLogsKept) {
	if !c.keeping || !c.keepInFlight || m.Proc != c.proc {
		c.log(slog.LevelWarn, "a kept logs' result out of turn; ignored", runAttr(c.run))
		return
	}
	c.keepInFlight = false
	if m.Err != nil {
		if !errors.Is(m.Err, protocol.ErrUnreachable) {
			c.keepFailures++ // the server's absence is waited out, not counted
		}
		if c.keepFailures < c.cfg.EndAttempts {
			c.log(slog.LevelWarn, "kept logs not written; trying again", runAttr(c.run), slog.Int("proc", m.Proc), errAttr(m.Err))
			c.retry()
			return
		}
		c.log(slog.LevelError, fmt.Sprintf("kept logs not written after %d failures; given up", c.keepFailures), runAttr(c.run), slog.Int("proc", m.Proc), errAttr(m.Err))
	}
	c.keeping = false
	switch {
	case c.phase == runEnding:
		c.writeEnded()
	case c.cause != "":
		c.decide(c.cause, nil, c.causeNote)
	default:
		c.next()
	}
}

// notInCare: table 10, row 12. The node's check (runsLost) is the one that
// finds it; a run whose process the core knows runs is not lost.
func (c *runCore) notInCare(m protocol.RunNotInCare) {
	if c.phase != runStarted || c.running || c.keeping {
		c.log(slog.LevelWarn, "the run is not lost: it is not started, or its process runs", runAttr(c.run), slog.String("state", c.phase.String()))
		return
	}
	if c.cause != "" {
		c.decide(c.cause, nil, c.causeNote) // a stop or the wall came first
		return
	}
	note := m.Note
	if note == "" {
		note = "the node found it not in its care"
	}
	c.decide(runmsg.RunLost, nil, note)
}

func (c *runCore) timer(now time.Time, m protocol.RunTimerFired) {
	if m.Seq == 0 {
		return
	}
	switch m.Purpose {
	case protocol.RunTimerWall:
		if m.Seq != c.wallSeq || c.phase != runStarted || c.cause != "" {
			return
		}
		c.pastWall()
	case protocol.RunTimerGrace:
		if m.Seq != c.graceSeq || !c.running || c.killSent {
			return
		}
		c.killSent = true
		c.log(slog.LevelWarn, "the stop grace ran out; sending KILL", runAttr(c.run), slog.Int("proc", c.proc))
		c.emit(protocol.RunEndProcess{Run: c.run, Proc: c.proc, Signal: protocol.SigKILL})
	case protocol.RunTimerRetry:
		if m.Seq != c.retrySeq {
			return
		}
		switch {
		case c.keeping && !c.keepInFlight:
			c.keepLogs()
		case c.phase == runWriting && !c.startInFlight && !c.startAsked:
			c.writeStarted()
		case c.phase == runEnding && !c.endInFlight && !c.keeping:
			c.writeEnded()
		}
	}
}

// decide makes the run's one decision: its outcome, then ended once the
// last process's kept logs are written.
func (c *runCore) decide(o runmsg.RunOutcome, exit *int, note string) {
	if c.phase >= runEnding {
		return
	}
	c.phase = runEnding
	c.outcome, c.exit, c.note = o, exit, messages.ClipText(messages.CleanText(note), messages.MaxTextLen)
	if c.slotAsked {
		c.doneWithSlot() // it never takes the slot now
	}
	c.wallSeq, c.graceSeq = 0, 0
	if n := len(c.queue); n > 0 {
		c.log(slog.LevelInfo, fmt.Sprintf("the run ends; %d deliveries waiting are not given", n), runAttr(c.run))
		c.queue = nil
	}
	if !c.keeping {
		c.writeEnded()
	}
}

func (c *runCore) writeEnded() {
	c.endAttempts++
	c.endInFlight = true
	c.emit(protocol.RunWriteEnded{Run: c.run, Outcome: c.outcome, Exit: c.exit, Note: c.note, Attempt: c.endAttempts})
}

func (c *runCore) endedWritten(m protocol.RunEndedWritten) {
	if c.phase != runEnding || !c.endInFlight {
		c.log(slog.LevelWarn, "an ended write's result out of turn; ignored", runAttr(c.run))
		return
	}
	c.endInFlight = false
	c.doneWithStart()
	if m.Err != nil {
		if !errors.Is(m.Err, protocol.ErrUnreachable) {
			c.endFailures++ // the server's absence is waited out, not counted
		}
		if c.endFailures < c.cfg.EndAttempts {
			c.log(slog.LevelWarn, "ended not written; trying again", runAttr(c.run), errAttr(m.Err))
			c.retry()
			return
		}
		c.log(slog.LevelError, fmt.Sprintf("ended not written after %d attempts; giving up", c.endAttempts), runAttr(c.run), errAttr(m.Err))
	}
	c.phase = runEnded
	if c.inCare {
		c.release()
	}
}

func runAttr(h string) slog.Attr { return slog.String(KeyRun, h) }

func (c *runCore) addr() protocol.ActorAddr { return protocol.RunAddr(c.run) }

// runKept is what the node keeps of a run, as the wiring found it at start.
func runKept(s protocol.RunActorState) RunKept {
	return RunKept{StartedCounts: s.StartedCounts, StopCounts: s.StopCounts, EndedCounts: s.EndedCounts,
		InCare: s.InCare, LaunchedAt: s.LaunchedAt, Proc: s.Proc, Alive: s.Alive, Given: runGiven{Last: s.Given}}
}
