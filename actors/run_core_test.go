package actors

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// runH is the hash of the run the tests drive; its short form is R0run00000.
var runH = "R0run00000" + strings.Repeat("0", 30)

var runT0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

var runCfg = Config{Grace: 10 * time.Second, RetryAfter: time.Second, EndAttempts: 3}

// runLines renders effects as lines, the log left out.
func runLines(effs []protocol.DaemonEffect) []string {
	var out []string
	for _, e := range effs {
		if _, ok := e.(protocol.LogEvent); ok {
			continue
		}
		out = append(out, e.String())
	}
	return out
}

// runStep is one message into the core and the effects it must give.
type runStep struct {
	msg     protocol.DaemonMessage
	advance time.Duration
	want    []string
}

func admin() protocol.RunStopRequested {
	return protocol.RunStopRequested{By: "root", Privileged: true}
}

func delivery(n int) protocol.RunDelivered {
	h := strings.Repeat(string(rune('a'+n)), 40)
	return protocol.RunDelivered{Delivery: protocol.RunDelivery{Hash: h, At: protocol.RunPosition{Receipt: int64(10 + n), Row: 1}, Line: `{"post":"` + h + `"}`}}
}

var (
	prepOK      = protocol.RunPrepared{Values: map[string]string{"run": runH, "workspace": "/r/w"}}
	startedOK   = protocol.RunStartedWritten{}
	endedOK     = protocol.RunEndedWritten{}
	keptLogs1   = protocol.RunLogsKept{Proc: 1}
	launched    = []string{"take R0run00000 into care", "prepare R0run00000 (layers 2-4)"}
	writeStart  = []string{"write started R0run00000 values run,workspace"}
	launch1     = []string{"launch R0run00000 process 1"}
	release     = []string{"release R0run00000 from care"}
	plain       = protocol.RunFacts{}
	feedSession = protocol.RunFacts{Session: true, Deliveries: "feed"}
	eachSession = protocol.RunFacts{Session: true, Deliveries: "start", Wall: time.Minute}
	// slotted is a run whose password step sets ana's password, fifth in
	// the server's order of demo.
	slotted = protocol.RunFacts{Project: "demo", At: protocol.RunPosition{Receipt: 5, Row: 1}, Slot: "ana"}
)

// startedRun is the steps that bring a run of these facts to started.
func startedRun(f protocol.RunFacts, launch ...string) []runStep {
	return []runStep{
		{msg: protocol.RunArrived{Facts: f}, want: launched},
		{msg: prepOK, want: writeStart},
		{msg: startedOK, want: launch},
	}
}

func join(ss ...[]string) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s...)
	}
	return out
}

// TestRunLifeTable has one case per row of seed 004's table 10 (and a few
// around it), each a sequence of messages and the effects each gives.
func TestRunLifeTable(t *testing.T) {
	cases := []struct {
		row   string
		steps []runStep
		state string
	}{
		{"01 none + refused run: ended refused, the note", []runStep{
			{msg: protocol.RunArrived{Facts: plain, Refusal: "process.user: holds admin"}, want: []string{"write ended R0run00000 refused: process.user: holds admin"}},
			{msg: endedOK},
		}, "ended"},
		{"02 none + run, manual false: care, layers 2-4, started, then launch", join2(startedRun(plain, launch1...),
			runStep{msg: protocol.RunProcessExited{Proc: 1, Status: messages.Exited(0)}, want: []string{"keep logs R0run00000 process 1"}},
			runStep{msg: keptLogs1, want: []string{"write ended R0run00000 exited exit 0"}},
			runStep{msg: endedOK, want: release}), "ended"},
		{"02 a run's wall counts from the launch", join2(startedRun(protocol.RunFacts{Wall: time.Hour}, "start timer wall R0run00000 #1 1h0m0s", "launch R0run00000 process 1")), "started"},
		{"02 no launch before started is on the record; a failed write is tried again", []runStep{
			{msg: protocol.RunArrived{Facts: plain}, want: launched},
			{msg: prepOK, want: writeStart},
			{msg: protocol.RunStartedWritten{Err: errors.New("server down")}, want: []string{"start timer retry R0run00000 #1 1s"}},
			{msg: protocol.RunTimerFired{Purpose: protocol.RunTimerRetry, Seq: 1}, want: []string{"write started R0run00000 values run,workspace (attempt 2)"}},
			{msg: startedOK, want: launch1},
		}, "started"},
		{"02 the server's absence is waited out: a write it kept from the server is tried again past the attempts", func() []runStep {
			down := protocol.RunEndedWritten{Err: fmt.Errorf("%w: dial tcp 127.0.0.1:8080: connect: connection refused", protocol.ErrUnreachable)}
			steps := join2(startedRun(plain, launch1...),
				runStep{msg: protocol.RunProcessExited{Proc: 1, Status: messages.Exited(0)}, want: []string{"keep logs R0run00000 process 1"}},
				runStep{msg: keptLogs1, want: []string{"write ended R0run00000 exited exit 0"}})
			for i := 1; i <= 5; i++ {
				steps = append(steps,
					runStep{msg: down, want: []string{fmt.Sprintf("start timer retry R0run00000 #%d 1s", i)}},
					runStep{msg: protocol.RunTimerFired{Purpose: protocol.RunTimerRetry, Seq: i}, want: []string{fmt.Sprintf("write ended R0run00000 exited exit 0 (attempt %d)", i+1)}})
			}
			return append(steps, runStep{msg: endedOK, want: release})
		}(), "ended"},
		{"02 a write the server refused counts: the tries end after EndAttempts", []runStep{
			{msg: protocol.RunArrived{Facts: plain}, want: launched},
			{msg: prepOK, want: writeStart},
			{msg: protocol.RunStartedWritten{Err: errors.New("not authorized to write")}, want: []string{"start timer retry R0run00000 #1 1s"}},
			{msg: protocol.RunTimerFired{Purpose: protocol.RunTimerRetry, Seq: 1}, want: []string{"write started R0run00000 values run,workspace (attempt 2)"}},
			{msg: protocol.RunStartedWritten{Err: fmt.Errorf("%w: connection refused", protocol.ErrUnreachable)}, want: []string{"start timer retry R0run00000 #2 1s"}},
			{msg: protocol.RunTimerFired{Purpose: protocol.RunTimerRetry, Seq: 2}, want: []string{"write started R0run00000 values run,workspace (attempt 3)"}},
			{msg: protocol.RunStartedWritten{Err: errors.New("not authorized to write")}, want: []string{"start timer retry R0run00000 #3 1s"}},
			{msg: protocol.RunTimerFired{Purpose: protocol.RunTimerRetry, Seq: 3}, want: []string{"write started R0run00000 values run,workspace (attempt 4)"}},
			{msg: protocol.RunStartedWritten{Err: errors.New("not authorized to write")}, want: []string{"write ended R0run00000 refused: started could not be written after 4 attempts: not authorized to write"}},
		}, "ended"},
		{"02/10 a workspace step fails: ended refused, naming it", []runStep{
			{msg: protocol.RunArrived{Facts: plain}, want: launched},
			{msg: protocol.RunPrepared{Failed: "workspace[2] clone: fossil clone: 401"}, want: []string{"write ended R0run00000 refused: workspace[2] clone: fossil clone: 401"}},
			{msg: endedOK, want: release},
		}, "ended"},
		{"03 none + manual run: waiting, nothing", []runStep{
			{msg: protocol.RunArrived{Facts: protocol.RunFacts{Manual: true}}},
		}, "waiting"},
		{"04 waiting + a start by admin or setup: as not manual", []runStep{
			{msg: protocol.RunArrived{Facts: protocol.RunFacts{Manual: true}}},
			{msg: protocol.RunStartRequested{By: "ana", Privileged: false}},
			{msg: protocol.RunStartRequested{By: "root", Privileged: true}, want: launched},
			{msg: prepOK, want: writeStart},
			{msg: startedOK, want: launch1},
		}, "started"},
		{"04 waiting + a start that section 11 refuses now: ended refused", []runStep{
			{msg: protocol.RunArrived{Facts: protocol.RunFacts{Manual: true}}},
			{msg: protocol.RunStartRequested{By: "root", Privileged: true, Refusal: "process.user works for node lab-2"}, want: []string{"write ended R0run00000 refused: process.user works for node lab-2"}},
		}, "ended"},
		{"05 none + a stop: ended stopped", []runStep{
			{msg: admin(), want: []string{"write ended R0run00000 stopped"}},
			{msg: protocol.RunArrived{Facts: plain}},
		}, "ended"},
		{"05 waiting + a stop: ended stopped; a stop by a user without admin is ignored", []runStep{
			{msg: protocol.RunArrived{Facts: protocol.RunFacts{Manual: true}}},
			{msg: protocol.RunStopRequested{By: "bob"}},
			{msg: admin(), want: []string{"write ended R0run00000 stopped"}},
		}, "ended"},
		{"05 a stop while the layers are made: their making ended, ended stopped, nothing launched", []runStep{
			{msg: protocol.RunArrived{Facts: plain}, want: launched},
			{msg: admin(), want: []string{"end preparing R0run00000"}},
			{msg: admin()},
			{msg: prepOK, want: []string{"write ended R0run00000 stopped"}},
			{msg: endedOK, want: release},
		}, "ended"},
		{"05/10 a stop during a command step: the failure it made is read as the stop", []runStep{
			{msg: protocol.RunArrived{Facts: plain}, want: launched},
			{msg: admin(), want: []string{"end preparing R0run00000"}},
			{msg: protocol.RunPrepared{Failed: "runs: prepare R0: workspace[4] command: context canceled"}, want: []string{"write ended R0run00000 stopped"}},
			{msg: endedOK, want: release},
		}, "ended"},
		{"05 a run waits for its user's slot before its layers are made; a stop ends the wait: ended stopped, the wait given up", []runStep{
			{msg: protocol.RunArrived{Facts: slotted}, want: []string{"take R0run00000 into care", "tell node: R0run00000 asks its turn slot user ana"}},
			{msg: admin(), want: []string{"tell node: R0run00000 done with its turn slot", "write ended R0run00000 stopped"}},
			{msg: protocol.RunTurnGiven{Turn: protocol.RunTurnSlot}},
			{msg: endedOK, want: []string{"tell node: R0run00000 done with its turn started", "release R0run00000 from care"}},
		}, "ended"},
		{"05 the slot given: layers, started in its turn, and the slot given back once it leaves the node's care", []runStep{
			{msg: protocol.RunArrived{Facts: slotted}, want: []string{"take R0run00000 into care", "tell node: R0run00000 asks its turn slot user ana"}},
			{msg: protocol.RunTurnGiven{Turn: protocol.RunTurnSlot}, want: []string{"prepare R0run00000 (layers 2-4)"}},
			{msg: prepOK, want: []string{"tell node: R0run00000 asks its turn started in demo at r5.1"}},
			{msg: admin()},
			{msg: protocol.RunTurnGiven{Turn: protocol.RunTurnStarted}, want: writeStart},
			{msg: startedOK, want: []string{"tell node: R0run00000 done with its turn started", "write ended R0run00000 stopped"}},
			{msg: endedOK, want: []string{"release R0run00000 from care", "tell node: R0run00000 done with its turn slot"}},
		}, "ended"},
		{"06 started + a delivery, deliveries feed: to its STDIN", join2(startedRun(feedSession, append(launch1, "read the deliveries of R0run00000")...),
			runStep{msg: delivery(1), want: []string{"deliver bbbbbbbbbb@r11.1 to R0run00000 process 1"}},
			runStep{msg: delivery(1)},
			runStep{msg: delivery(2), want: []string{"deliver cccccccccc@r12.1 to R0run00000 process 1"}}), "started"},
		{"07 started + deliveries, deliveries start: a process each, once the one before exited and its logs are kept, in the server's order", join2(
			startedRun(eachSession, "start timer wall R0run00000 #1 1m0s"),
			runStep{msg: delivery(1), want: []string{"launch R0run00000 process 1 for bbbbbbbbbb@r11.1"}},
			runStep{msg: delivery(2)},
			runStep{msg: delivery(3)},
			runStep{msg: protocol.RunProcessExited{Proc: 1, Status: messages.Exited(3)}, want: []string{"keep logs R0run00000 process 1"}},
			runStep{msg: keptLogs1, want: []string{"launch R0run00000 process 2 for cccccccccc@r12.1"}},
			runStep{msg: protocol.RunProcessExited{Proc: 2}, want: []string{"keep logs R0run00000 process 2"}},
			runStep{msg: delivery(4)},
			runStep{msg: protocol.RunLogsKept{Proc: 2}, want: []string{"launch R0run00000 process 3 for dddddddddd@r13.1"}}), "started"},
		{"08 started + a stop: ends the process, TERM then KILL after the grace; ended stopped once it exits", join2(startedRun(plain, launch1...),
			runStep{msg: admin(), want: []string{"signal TERM R0run00000 process 1", "start timer grace R0run00000 #1 10s"}},
			runStep{msg: admin()},
			runStep{msg: protocol.RunTimerFired{Purpose: protocol.RunTimerGrace, Seq: 1}, advance: 10 * time.Second, want: []string{"signal KILL R0run00000 process 1"}},
			runStep{msg: protocol.RunProcessExited{Proc: 1, Status: messages.Signaled(9)}, want: []string{"keep logs R0run00000 process 1"}},
			runStep{msg: keptLogs1, want: []string{"write ended R0run00000 stopped"}}), "ended"},
		{"09 started + its process exits by a signal: ended exited 128+N", join2(startedRun(plain, launch1...),
			runStep{msg: protocol.RunProcessExited{Proc: 7, Status: messages.Exited(1)}},
			runStep{msg: protocol.RunProcessExited{Proc: 1, Status: messages.Signaled(15)}, want: []string{"keep logs R0run00000 process 1"}},
			runStep{msg: protocol.RunLogsKept{Proc: 1, Err: errors.New("disk full")}, want: []string{"start timer retry R0run00000 #1 1s"}},
			runStep{msg: protocol.RunTimerFired{Purpose: protocol.RunTimerRetry, Seq: 1}, want: []string{"keep logs R0run00000 process 1"}},
			runStep{msg: keptLogs1, want: []string{"write ended R0run00000 exited exit 143"}}), "ended"},
		{"8.2 kept logs the server was not there for: tried until written, past the attempts, and ended only after them", func() []runStep {
			down := protocol.RunLogsKept{Proc: 1, Err: fmt.Errorf("%w: read tcp 127.0.0.1:8080: connection reset by peer", protocol.ErrUnreachable)}
			steps := join2(startedRun(plain, launch1...),
				runStep{msg: protocol.RunProcessExited{Proc: 1, Status: messages.Exited(0)}, want: []string{"keep logs R0run00000 process 1"}})
			for i := 1; i <= 7; i++ {
				steps = append(steps,
					runStep{msg: down, want: []string{fmt.Sprintf("start timer retry R0run00000 #%d 1s", i)}},
					runStep{msg: admin()}, // a stop meanwhile decides, but ended waits for the kept logs
					runStep{msg: protocol.RunTimerFired{Purpose: protocol.RunTimerRetry, Seq: i}, want: []string{"keep logs R0run00000 process 1"}})
			}
			return append(steps, runStep{msg: keptLogs1, want: []string{"write ended R0run00000 exited exit 0"}}, runStep{msg: endedOK, want: release})
		}(), "ended"},
		{"8.2 kept logs refused past the attempts: given up, and the run goes on to ended", func() []runStep {
			steps := join2(startedRun(plain, launch1...),
				runStep{msg: protocol.RunProcessExited{Proc: 1, Status: messages.Exited(2)}, want: []string{"keep logs R0run00000 process 1"}})
			for i := 1; i < runCfg.EndAttempts; i++ {
				steps = append(steps,
					runStep{msg: protocol.RunLogsKept{Proc: 1, Err: errors.New("not authorized to write")}, want: []string{fmt.Sprintf("start timer retry R0run00000 #%d 1s", i)}},
					runStep{msg: protocol.RunTimerFired{Purpose: protocol.RunTimerRetry, Seq: i}, want: []string{"keep logs R0run00000 process 1"}})
			}
			return append(steps, runStep{msg: protocol.RunLogsKept{Proc: 1, Err: errors.New("not authorized to write")}, want: []string{"write ended R0run00000 exited exit 2"}})
		}(), "ended"},
		{"09 started + past wall first, then the exit: ended budget", join2(startedRun(protocol.RunFacts{Wall: time.Minute}, "start timer wall R0run00000 #1 1m0s", "launch R0run00000 process 1"),
			runStep{msg: protocol.RunTimerFired{Purpose: protocol.RunTimerWall, Seq: 1}, advance: time.Minute, want: []string{"signal TERM R0run00000 process 1", "start timer grace R0run00000 #2 10s"}},
			runStep{msg: admin()},
			runStep{msg: protocol.RunProcessExited{Proc: 1, Status: messages.Exited(0)}, want: []string{"keep logs R0run00000 process 1"}},
			runStep{msg: keptLogs1, want: []string{"write ended R0run00000 budget: wall: past limits.wall of 1m0s, counted from the launch at 2026-11-30T09:00:00Z"}}), "ended"},
		{"09 started + killed by SIGXCPU with a cpu limit: ended budget", join2(startedRun(protocol.RunFacts{CPU: true}, launch1...),
			runStep{msg: protocol.RunProcessExited{Proc: 1, Status: messages.Signaled(24)}, want: []string{"keep logs R0run00000 process 1"}},
			runStep{msg: keptLogs1, want: []string{"write ended R0run00000 budget: cpu: its process was ended by SIGXCPU, past limits.cpu"}}), "ended"},
		{"09 started + past its memory (D46): the sandbox ended whole, ended budget", join2(startedRun(plain, launch1...),
			runStep{msg: protocol.RunProcessExited{Proc: 1, Status: messages.ExitStatus{State: messages.EndExited, Code: 137, Limit: messages.LimitMemory, LimitNote: "1 process killed by the kernel at its memory limit of 32 MiB"}},
				want: []string{"keep logs R0run00000 process 1"}},
			runStep{msg: keptLogs1, want: []string{"write ended R0run00000 budget: memory: past limits.memory, its sandbox was ended (1 process killed by the kernel at its memory limit of 32 MiB)"}}), "ended"},
		{"09 started + a fork refused at its processes: no end but its own, ended exited", join2(startedRun(plain, launch1...),
			runStep{msg: protocol.RunProcessExited{Proc: 1, Status: messages.ExitStatus{State: messages.EndExited, Code: 2, Limit: messages.LimitProcesses, LimitNote: "1 new process refused at its processes limit of 5"}},
				want: []string{"keep logs R0run00000 process 1"}},
			runStep{msg: keptLogs1, want: []string{"write ended R0run00000 exited exit 2"}}), "ended"},
		{"10 a process exits in a session whose deliveries is start: kept logs, the run goes on", join2(
			startedRun(eachSession, "start timer wall R0run00000 #1 1m0s"),
			runStep{msg: delivery(1), want: []string{"launch R0run00000 process 1 for bbbbbbbbbb@r11.1"}},
			runStep{msg: protocol.RunProcessExited{Proc: 1, Status: messages.Exited(1)}, want: []string{"keep logs R0run00000 process 1"}},
			runStep{msg: keptLogs1}), "started"},
		{"11 a stop in a session whose deliveries is start: ends its process, kept logs, ended stopped", join2(
			startedRun(eachSession, "start timer wall R0run00000 #1 1m0s"),
			runStep{msg: delivery(1), want: []string{"launch R0run00000 process 1 for bbbbbbbbbb@r11.1"}},
			runStep{msg: delivery(2)},
			runStep{msg: admin(), want: []string{"signal TERM R0run00000 process 1", "start timer grace R0run00000 #2 10s"}},
			runStep{msg: protocol.RunProcessExited{Proc: 1, Status: messages.Signaled(15)}, want: []string{"keep logs R0run00000 process 1"}},
			runStep{msg: keptLogs1, want: []string{"write ended R0run00000 stopped"}},
			runStep{msg: endedOK, want: release}), "ended"},
		{"11 past wall in a session whose deliveries is start, between processes: ended budget", join2(
			startedRun(eachSession, "start timer wall R0run00000 #1 1m0s"),
			runStep{msg: protocol.RunTimerFired{Purpose: protocol.RunTimerWall, Seq: 1}, advance: time.Minute, want: []string{"write ended R0run00000 budget: wall: past limits.wall of 1m0s, counted from the launch at 2026-11-30T09:00:00Z"}}), "ended"},
		{"12 started + the node finds it not in its care: ended lost", join2(startedRun(plain, launch1...),
			runStep{msg: protocol.RunNotInCare{Note: "no such run in care"}},
			runStep{msg: protocol.RunProcessExited{Proc: 1, Status: messages.ExitUnknown}, want: []string{"keep logs R0run00000 process 1"}},
			runStep{msg: keptLogs1, want: []string{"write ended R0run00000 lost: its process ended while the node was not its parent, so how it ended is unknown"}}), "ended"},
		{"12 a restored run with no live process, found by the check: ended lost", []runStep{
			{msg: protocol.RunNotInCare{Note: "gone"}, want: []string{"write ended R0run00000 lost: gone"}},
		}, "restored"},
		{"13 ended + anything: nothing", join2(startedRun(plain, launch1...),
			runStep{msg: protocol.RunProcessExited{Proc: 1}, want: []string{"keep logs R0run00000 process 1"}},
			runStep{msg: keptLogs1, want: []string{"write ended R0run00000 exited exit 0"}},
			runStep{msg: endedOK, want: release},
			runStep{msg: admin()},
			runStep{msg: protocol.RunArrived{Facts: plain}},
			runStep{msg: delivery(1)},
			runStep{msg: protocol.RunNotInCare{}},
			runStep{msg: protocol.RunProcessExited{Proc: 1}},
			runStep{msg: endedOK}), "ended"},
	}
	for _, tc := range cases {
		t.Run(tc.row, func(t *testing.T) {
			now := runT0
			c := newRunCore(runCfg, runH)
			if tc.state == "restored" {
				c = restoreRunCore(runCfg, protocol.RunFacts{Hash: runH}, RunKept{StartedCounts: true, LaunchedAt: runT0})
				if got := runLines(c.Start(now)); len(got) != 0 {
					t.Fatalf("Start: %q", got)
				}
			}
			released := false // ended is written and the care released: nothing more, not even a log line
			for i, s := range tc.steps {
				now = now.Add(s.advance)
				effs := c.Step(now, s.msg)
				if released && len(effs) > 0 {
					t.Fatalf("step %d > %s: the run is ended, yet it gives %v", i, s.msg, effs)
				}
				got := runLines(effs)
				if strings.Join(got, "\n") != strings.Join(s.want, "\n") {
					t.Fatalf("step %d > %s\n--- want\n%s\n--- got\n%s", i, s.msg, strings.Join(s.want, "\n"), strings.Join(got, "\n"))
				}
				for _, e := range effs {
					if strings.Contains(e.String(), "\n") {
						t.Fatalf("an effect of two lines: %q", e.String())
					}
					if _, ok := e.(protocol.RunRelease); ok {
						released = true
					}
				}
			}
			if tc.state != "restored" && c.State() != tc.state {
				t.Fatalf("state %s, want %s", c.State(), tc.state)
			}
		})
	}
}

func join2(steps []runStep, more ...runStep) []runStep { return append(steps, more...) }

// runModel is what a run's history must add up to: the record (started, a
// stop, ended), the node's care, the processes alive, the effects whose
// results are due, and what came first of the things that end a run.
type runModel struct {
	c     *runCore
	facts protocol.RunFacts
	now   time.Time

	recStarted, recStop, recEnded bool
	startedWrites, endedWrites    int
	inCare                        bool
	launchedAt                    time.Time
	startAllowed                  bool // a privileged start of a manual run was taken

	launches int
	alive    map[int]bool
	lastProc int
	exited   map[int]bool // exited, logs not yet asked for
	// keepFailed: its kept logs failed and are to be tried again
	keepFailed map[int]bool

	prepare, startWrite, endWrite bool
	keepLogs                      []int
	timers                        []protocol.RunStartTimer
	due                           []time.Time
	wallSeq                       int

	pos        int64
	sent       []protocol.RunDelivery
	given      runGiven
	accepted   []protocol.RunDelivery // for a session whose deliveries is start
	started    []string               // the deliveries processes were launched for, in order
	feedWanted *protocol.RunDelivery  // the delivery a feed must deliver in this step

	trigger  runmsg.RunOutcome
	wantExit int
	ended    bool

	// The run's turns, as the node gives them (runSchedule): it asks for
	// its user's slot, holds it, asks for its turn to write started, has
	// it.
	slotAsked, slotHeld, startAsked, startTurn bool
}

// turn checks a run's ask of the node, or its giving back of a turn.
func (m *runModel) turn(t *rapid.T, e protocol.Tell) {
	if e.To != protocol.NodeAddr() {
		t.Fatalf("a run tells another than its node: %s", e)
	}
	switch x := e.Msg.(type) {
	case protocol.RunTurnRequested:
		switch x.Turn {
		case protocol.RunTurnSlot:
			if m.facts.Slot == "" || x.User != m.facts.Slot || m.slotAsked || m.slotHeld || !m.inCare {
				t.Fatalf("a slot asked for by a run with none, twice, or out of care: %s", e)
			}
			m.slotAsked = true
		case protocol.RunTurnStarted:
			if m.facts.At.IsZero() || x.At != m.facts.At || m.startAsked || m.startTurn || m.startWrite || m.recStarted {
				t.Fatalf("a turn to write started asked for out of place: %s", e)
			}
			m.startAsked = true
		default:
			t.Fatalf("a turn the node does not give: %s", e)
		}
	case protocol.RunTurnDone:
		if x.Turn == protocol.RunTurnSlot {
			if !m.slotAsked && !m.slotHeld {
				t.Fatalf("a slot given back that the run neither held nor asked for")
			}
			m.slotAsked, m.slotHeld = false, false
		}
	default:
		t.Fatalf("a run tells its node %s", e)
	}
}

func (m *runModel) undecided() bool { return m.c.phase < runEnding }

func (m *runModel) first(o runmsg.RunOutcome) {
	if m.trigger == "" && m.undecided() {
		m.trigger = o
	}
}

func (m *runModel) anyAlive() bool {
	for _, a := range m.alive {
		if a {
			return true
		}
	}
	return false
}

func (m *runModel) step(t *rapid.T, msg protocol.DaemonMessage) {
	t.Logf("step %s (%s)", msg, m.c.phase)
	wasEnded := m.c.Ended()
	effs := m.c.Step(m.now, msg)
	if wasEnded && len(effs) > 0 {
		t.Fatalf("an ended run did something: %v", effs)
	}
	m.apply(t, effs)
	if m.feedWanted != nil {
		t.Fatalf("the delivery %s was not given to the feeding process", m.feedWanted)
	}
}

func (m *runModel) apply(t *rapid.T, effs []protocol.DaemonEffect) {
	for _, e := range effs {
		t.Logf("  -> %s", e)
		switch e := e.(type) {
		case protocol.RunTakeIntoCare:
			if m.facts.Manual && !m.startAllowed {
				t.Fatalf("a manual run taken into care before a start by admin or setup")
			}
			m.inCare = true
		case protocol.RunPrepare:
			if !m.inCare || m.prepare {
				t.Fatalf("layers made for a run not in care, or twice at once")
			}
			if m.facts.Slot != "" && !m.slotHeld {
				t.Fatalf("layers made for a run that does not hold its user's slot")
			}
			m.prepare = true
		case protocol.RunWriteStarted:
			if m.recStarted || m.startWrite || !m.inCare {
				t.Fatalf("a second started, or one for a run not in care")
			}
			if !m.facts.At.IsZero() && !m.startTurn {
				t.Fatalf("started written out of its turn")
			}
			m.startTurn = false
			m.startWrite = true
		case protocol.RunLaunch:
			if !m.recStarted {
				t.Fatalf("a launch before started is on the record")
			}
			if m.anyAlive() {
				t.Fatalf("a launch while a process of the run is alive")
			}
			if e.Proc <= m.lastProc {
				t.Fatalf("process %d launched after process %d", e.Proc, m.lastProc)
			}
			if m.facts.StartsEach() {
				if e.Delivery == nil || len(m.started) >= len(m.accepted) || m.accepted[len(m.started)].Hash != e.Delivery.Hash {
					t.Fatalf("a process for %v; the deliveries taken are %v, those started %v", e.Delivery, m.accepted, m.started)
				}
				m.started = append(m.started, e.Delivery.Hash)
			} else if m.launches > 0 || e.Delivery != nil {
				t.Fatalf("a second launch of a run")
			}
			m.launches++
			m.alive[e.Proc], m.lastProc = true, e.Proc
		case protocol.RunDeliver:
			if !m.facts.Session || m.facts.StartsEach() || !m.alive[e.Proc] || e.Proc != m.lastProc {
				t.Fatalf("a delivery to no feeding process: %s", e)
			}
			if m.feedWanted == nil || m.feedWanted.Hash != e.Delivery.Hash {
				t.Fatalf("delivered %s, want %v", e.Delivery, m.feedWanted)
			}
			m.feedWanted = nil
		case protocol.RunEndPreparing:
			if !m.prepare {
				t.Fatalf("a preparation ended when none is in flight: %s", e)
			}
		case protocol.RunEndProcess:
			if !m.alive[e.Proc] {
				t.Fatalf("a signal to a process that is not alive: %s", e)
			}
		case protocol.RunStartTimer:
			if e.Purpose == protocol.RunTimerWall {
				if m.facts.Wall == 0 || !m.recStarted {
					t.Fatalf("a wall timer for a run with no wall or not started")
				}
				if want := max(m.launchedAt.Add(m.facts.Wall).Sub(m.now), 0); e.After != want {
					t.Fatalf("the wall is due in %s, want %s", e.After, want)
				}
				m.wallSeq = e.Seq
			}
			m.timers = append(m.timers, e)
			m.due = append(m.due, m.now.Add(e.After))
		case protocol.RunKeepLogs:
			if !m.exited[e.Proc] && !m.keepFailed[e.Proc] {
				t.Fatalf("kept logs of a process that has not exited, or twice: %s", e)
			}
			delete(m.exited, e.Proc)
			delete(m.keepFailed, e.Proc)
			m.keepLogs = append(m.keepLogs, e.Proc)
		case protocol.RunWriteEnded:
			if m.recEnded || m.endWrite {
				t.Fatalf("a second ended")
			}
			if m.anyAlive() || len(m.keepLogs) > 0 || len(m.keepFailed) > 0 || m.prepare || m.startWrite {
				t.Fatalf("ended while a process runs, its logs are being kept, or a write is out")
			}
			if m.trigger == "" && !(e.Outcome == runmsg.RunRefused && strings.HasPrefix(e.Note, "started could not be written")) {
				t.Fatalf("ended %s with nothing to end it", e.Outcome)
			}
			if m.trigger != "" && e.Outcome != m.trigger {
				t.Fatalf("ended %s, but %s came first", e.Outcome, m.trigger)
			}
			switch e.Outcome {
			case runmsg.RunExited:
				if e.Exit == nil || *e.Exit != m.wantExit || e.Note != "" {
					t.Fatalf("exited with exit %v note %q, want %d", e.Exit, e.Note, m.wantExit)
				}
			case runmsg.RunStopped:
				if e.Exit != nil || e.Note != "" {
					t.Fatalf("stopped with an exit or a note")
				}
			default:
				if e.Exit != nil || e.Note == "" {
					t.Fatalf("%s needs a note and no exit", e.Outcome)
				}
			}
			m.endWrite = true
		case protocol.RunRelease:
			if !m.inCare || m.endWrite || !m.c.Ended() {
				t.Fatalf("released a run not in care, or before its end was written")
			}
			m.inCare = false
			defer func() {
				if m.slotHeld || m.slotAsked {
					t.Fatalf("a run out of care kept its user's slot")
				}
			}()
		case protocol.Tell:
			m.turn(t, e)
		case protocol.ReadDeliveries:
			if !m.facts.Session || m.facts.StartsEach() || e.Run == "" {
				t.Fatalf("deliveries read after the launch of a process that is not fed them: %s", e)
			}
		case protocol.LogEvent:
		default:
			t.Fatalf("a run never asks for %T: %s", e, e)
		}
	}
}

// restart rebuilds the core from the record and what the node keeps, as a
// node does when it starts, then runs the node's check of its runs.
func (m *runModel) restart(t *rapid.T) {
	if m.startWrite && rapid.Bool().Draw(t, "started landed") {
		m.recStarted = true
		m.startedWrites++
	}
	if m.endWrite && rapid.Bool().Draw(t, "ended landed") {
		m.recEnded = true
		m.endedWrites++
	}
	kept := m.c.Kept()
	k := RunKept{StartedCounts: m.recStarted, StopCounts: m.recStop, EndedCounts: m.recEnded, InCare: m.inCare,
		LaunchedAt: m.launchedAt, Proc: m.lastProc, Alive: m.alive[m.lastProc], Given: kept.Given, Queue: kept.Queue, Cause: kept.Cause, CauseNote: kept.CauseNote, Decided: kept.Decided}
	t.Logf("restart %+v", k)
	m.prepare, m.startWrite, m.endWrite, m.keepLogs, m.timers, m.due, m.wallSeq = false, false, false, nil, nil, nil, 0
	m.exited, m.keepFailed = map[int]bool{}, map[int]bool{}
	// The node's schedule starts afresh: it holds the slot of a run in
	// care whose started counts (runSchedule.Hold).
	m.slotAsked, m.startAsked, m.startTurn = false, false, false
	m.slotHeld = m.inCare && m.recStarted && m.facts.Slot != ""
	gaveUp := m.c.Ended() && !m.recEnded
	m.c = restoreRunCore(runCfg, m.facts, k)
	if gaveUp {
		// Its ended never reached the record: the run is decided afresh,
		// from what the record says.
		m.trigger = ""
		if m.recStop {
			m.first(runmsg.RunStopped)
		}
	}
	if m.recStarted && m.launchedAt.IsZero() {
		m.launchedAt = m.now // unknown: counted from now
	}
	if m.facts.Wall > 0 && m.recStarted && !m.recEnded && k.Decided == nil && k.Cause == "" && !m.recStop && (m.alive[m.lastProc] || m.inCare) && !m.now.Before(m.launchedAt.Add(m.facts.Wall)) {
		m.first(runmsg.RunBudget)
	}
	m.apply(t, m.c.Start(m.now))
	var care []runInCare
	if m.inCare {
		care = append(care, runInCare{Hash: runH, Alive: m.alive[m.lastProc], StartsEach: m.facts.StartsEach()})
	}
	for _, l := range runsLost([]runOnRecord{{Hash: runH, StartedCounts: m.recStarted, EndedCounts: m.recEnded}}, care) {
		m.first(runmsg.RunLost)
		m.step(t, protocol.RunNotInCare{Note: l.Note})
	}
}

// TestRunCoreProperties drives a run through random arrivals, starts, stops
// (a second one, by users without the right), answers (failures included,
// in any order they can come), exits (stray ones too), timers firing late,
// deliveries (replayed, late, before started) and restarts from the record
// and what the node keeps.
func TestRunCoreProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &runModel{now: runT0, alive: map[int]bool{}, exited: map[int]bool{}, keepFailed: map[int]bool{}}
		m.facts = protocol.RunFacts{Hash: runH, Manual: rapid.Bool().Draw(t, "manual"), Session: rapid.Bool().Draw(t, "session"),
			Deliveries: rapid.SampledFrom([]string{"", "feed", "start"}).Draw(t, "deliveries"),
			Wall:       time.Duration(rapid.SampledFrom([]int{0, 30, 60}).Draw(t, "wall")) * time.Second, CPU: rapid.Bool().Draw(t, "cpu"),
			Slot: rapid.SampledFrom([]string{"", "ana"}).Draw(t, "slot")}
		if rapid.Bool().Draw(t, "in order") {
			m.facts.Project, m.facts.At = "demo", protocol.RunPosition{Receipt: 5, Row: 1}
		}
		m.c = newRunCore(runCfg, runH)
		t.Repeat(map[string]func(*rapid.T){
			"arrive": func(t *rapid.T) {
				refusal := rapid.SampledFrom([]string{"", "", "process.user: holds setup"}).Draw(t, "refusal")
				if m.c.phase == runNone && !m.c.stop && !m.c.inCare && refusal != "" {
					m.first(runmsg.RunRefused)
				}
				m.step(t, protocol.RunArrived{Facts: m.facts, Refusal: refusal})
			},
			"start": func(t *rapid.T) {
				priv := rapid.Bool().Draw(t, "privileged")
				refusal := rapid.SampledFrom([]string{"", "", "process.user works for lab-2"}).Draw(t, "refusal")
				if m.c.phase == runWaiting && priv {
					if refusal != "" {
						m.first(runmsg.RunRefused)
					} else {
						m.startAllowed = true
					}
				}
				m.step(t, protocol.RunStartRequested{By: "u", Privileged: priv, Refusal: refusal})
			},
			"turn": func(t *rapid.T) {
				switch {
				case m.slotAsked:
					m.slotAsked, m.slotHeld = false, true
					m.step(t, protocol.RunTurnGiven{Turn: protocol.RunTurnSlot})
				case m.startAsked:
					m.startAsked, m.startTurn = false, true
					m.step(t, protocol.RunTurnGiven{Turn: protocol.RunTurnStarted})
				default:
					// A turn the run does not wait for changes nothing.
					turn := rapid.SampledFrom([]string{protocol.RunTurnSlot, protocol.RunTurnStarted}).Draw(t, "stray turn")
					if effs := runLines(m.c.Step(m.now, protocol.RunTurnGiven{Turn: turn})); len(effs) > 0 {
						t.Fatalf("a turn not asked for did %v", effs)
					}
				}
			},
			"stop": func(t *rapid.T) {
				priv := rapid.Bool().Draw(t, "privileged")
				if priv {
					m.first(runmsg.RunStopped)
					m.recStop = true
				}
				m.step(t, protocol.RunStopRequested{By: "u", Privileged: priv})
			},
			"prepared": func(t *rapid.T) {
				if !m.prepare {
					t.Skip("no preparation out")
				}
				m.prepare = false
				failed := rapid.SampledFrom([]string{"", "", "workspace[1] password: none for builder"}).Draw(t, "failed")
				if failed != "" && !m.c.stop {
					m.first(runmsg.RunRefused)
				}
				m.step(t, protocol.RunPrepared{Values: map[string]string{"run": runH}, Failed: failed})
			},
			"started written": func(t *rapid.T) {
				if !m.startWrite {
					t.Skip("no started out")
				}
				m.startWrite = false
				var err error
				if rapid.IntRange(0, 3).Draw(t, "fails") == 0 {
					err = errors.New("server unreachable")
				} else {
					m.recStarted = true
					m.startedWrites++
					m.launchedAt = m.now
				}
				m.step(t, protocol.RunStartedWritten{Err: err})
			},
			"logs kept": func(t *rapid.T) {
				if len(m.keepLogs) == 0 {
					t.Skip("no logs out")
				}
				p := m.keepLogs[0]
				m.keepLogs = m.keepLogs[1:]
				var err error
				switch rapid.IntRange(0, 5).Draw(t, "fails") {
				case 0:
					err = errors.New("disk full")
				case 1:
					err = fmt.Errorf("%w: connection refused", protocol.ErrUnreachable)
				}
				if err != nil {
					m.keepFailed[p] = true // tried again, or given up
				}
				m.step(t, protocol.RunLogsKept{Proc: p, Err: err})
				if !m.c.keeping {
					delete(m.keepFailed, p) // written, or given up: the run went on
				}
			},
			"ended written": func(t *rapid.T) {
				if !m.endWrite {
					t.Skip("no ended out")
				}
				m.endWrite = false
				var err error
				if rapid.IntRange(0, 3).Draw(t, "fails") == 0 {
					err = errors.New("server unreachable")
				} else {
					m.recEnded = true
					m.endedWrites++
				}
				m.step(t, protocol.RunEndedWritten{Err: err})
			},
			"exit": func(t *rapid.T) {
				p := rapid.IntRange(0, m.lastProc+1).Draw(t, "proc")
				if !m.alive[p] && rapid.IntRange(0, 3).Draw(t, "stray") != 0 {
					t.Skip("not alive")
				}
				st := messages.Exited(rapid.SampledFrom([]int{0, 1, 127}).Draw(t, "code"))
				if n := rapid.SampledFrom([]int{0, 0, 9, 15, 24}).Draw(t, "signal"); n != 0 {
					st = messages.Signaled(n)
				}
				if rapid.IntRange(0, 9).Draw(t, "unknown") == 0 {
					st = messages.ExitUnknown
				}
				st.Limit = rapid.SampledFrom([]string{"", "", "", messages.LimitMemory, messages.LimitProcesses}).Draw(t, "limit")
				x := protocol.RunProcessExited{Proc: p, Status: st}
				if m.alive[p] {
					m.alive[p] = false
					m.exited[p] = true
					if m.c.phase == runStarted && p == m.c.proc {
						switch {
						case x.Status.State == messages.EndUnknown && !m.facts.StartsEach():
							m.first(runmsg.RunLost)
						case x.Status.Signal == sigXCPU && m.facts.CPU:
							m.first(runmsg.RunBudget)
						case x.Status.Limit == messages.LimitMemory:
							m.first(runmsg.RunBudget)
						case !m.facts.StartsEach():
							m.first(runmsg.RunExited)
							m.wantExit = x.Exit()
						}
					}
				}
				m.step(t, x)
			},
			"fire": func(t *rapid.T) {
				if len(m.timers) == 0 {
					t.Skip("no timer")
				}
				i := rapid.IntRange(0, len(m.timers)-1).Draw(t, "timer")
				tm, due := m.timers[i], m.due[i]
				m.timers = append(m.timers[:i:i], m.timers[i+1:]...)
				m.due = append(m.due[:i:i], m.due[i+1:]...)
				if m.now.Before(due) {
					m.now = due
				}
				if tm.Purpose == protocol.RunTimerWall && tm.Seq == m.wallSeq && m.c.phase == runStarted {
					m.first(runmsg.RunBudget)
				}
				m.step(t, protocol.RunTimerFired{Purpose: tm.Purpose, Seq: tm.Seq})
			},
			"advance": func(t *rapid.T) {
				m.now = m.now.Add(time.Duration(rapid.IntRange(1, 40).Draw(t, "secs")) * time.Second)
			},
			"deliver": func(t *rapid.T) {
				var d protocol.RunDelivery
				switch kind := rapid.IntRange(0, 5).Draw(t, "kind"); {
				case kind == 0 && len(m.sent) > 0:
					d = m.sent[rapid.IntRange(0, len(m.sent)-1).Draw(t, "replay")]
				case kind == 1:
					m.pos += 2
					d = protocol.RunDelivery{Hash: testHash(int(m.pos - 1)), At: protocol.RunPosition{Receipt: m.pos - 1, Row: 1}}
				default:
					m.pos += 2
					d = protocol.RunDelivery{Hash: testHash(int(m.pos)), At: protocol.RunPosition{Receipt: m.pos, Row: 1}}
					m.sent = append(m.sent, d)
				}
				feeds := m.facts.Session && !m.facts.StartsEach() && m.alive[m.lastProc] && m.lastProc == m.c.proc
				if m.c.phase == runStarted && m.facts.Session && m.c.cause == "" && (m.facts.StartsEach() || feeds) && m.given.Give(d.At) {
					if m.facts.StartsEach() {
						m.accepted = append(m.accepted, d)
					} else {
						m.feedWanted = &d
					}
				}
				m.step(t, protocol.RunDelivered{Delivery: d})
			},
			"not in care": func(t *rapid.T) {
				if m.c.phase == runStarted && !m.anyAlive() && len(m.keepLogs) == 0 {
					m.first(runmsg.RunLost)
				}
				m.step(t, protocol.RunNotInCare{Note: "checked"})
			},
			"restart": func(t *rapid.T) { m.restart(t) },
			"": func(t *rapid.T) {
				if m.startedWrites > 1 || m.endedWrites > 1 {
					t.Fatalf("started written %d times, ended %d", m.startedWrites, m.endedWrites)
				}
				if m.recEnded && !m.c.Ended() && m.c.phase != runEnding {
					t.Fatalf("ended is on the record; the core is %s", m.c.phase)
				}
				if !m.facts.StartsEach() && m.launches > 1 {
					t.Fatalf("%d launches", m.launches)
				}
				n := 0
				for _, a := range m.alive {
					if a {
						n++
					}
				}
				if n > 1 {
					t.Fatalf("%d processes alive at once", n)
				}
				if m.facts.StartsEach() {
					for i, h := range m.started {
						if m.accepted[i].Hash != h {
							t.Fatalf("deliveries started out of order: %v of %v", m.started, m.accepted)
						}
					}
					if m.trigger == "" && m.c.phase == runStarted {
						q := m.c.Kept().Queue
						if len(m.started)+len(q) != len(m.accepted) {
							t.Fatalf("deliveries lost or doubled: %d started, %d waiting, %d taken", len(m.started), len(q), len(m.accepted))
						}
						for i, d := range q {
							if m.accepted[len(m.started)+i].Hash != d.Hash {
								t.Fatalf("the deliveries waiting are not in the server's order")
							}
						}
					}
				}
			},
		})
	})
}
