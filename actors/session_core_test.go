package actors

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/modelapi"
	"github.com/ocx-go/ocx/messages/protocol"
)

var testW = messages.WorkspaceKey{Login: "ana", Project: "demo"}

// testHash makes a 40-hex hash whose 10-digit short form shows n.
func testHash(n int) string { return fmt.Sprintf("%010d%030x", n, 0) }

func testLaunch(n int, ci bool) protocol.LaunchSpec {
	l := protocol.LaunchSpec{Hash: testHash(n), Repository: "/srv/demo.fossil", Workspace: testW, Record: testHash(900), Lifetime: messages.Stays}
	if ci {
		l.Checkin, l.Branch, l.Lifetime = testHash(500+n), "trunk", messages.Completes
	}
	return l
}

// sessionModel is what a session's history must add up to.
type sessionModel struct {
	c      *sessionCore
	now    time.Time
	child  bool
	ci     bool
	proc   protocol.ProcID
	timers []protocol.StartTimer
	// due is when each timer of timers is due: a timer fires late, never
	// early.
	due []time.Time
	// wall is the launch's wall limit (0: none), started the process's
	// start; wallTerm says the wall timer sent TERM.
	wall     time.Duration
	started  time.Time
	wallTerm bool
	// budget is the limit the end note must name: the wall's, a limit
	// its cgroup's watch reached, or one its close found (D46).
	budget string
	// usage is what the read of its usage gave, for its end note.
	usage        *messages.SessionUsage
	watches      []protocol.WatchProcess
	limitWatches []protocol.WatchLimits
	await        []protocol.DaemonEffect // effects whose result is due
	ended        bool
	exitSeen     int
	stops        int
	// stopBeforeEnd: a stop came while the process ran.
	stopBeforeEnd bool
	terms         int
	kills         int
	graceOK       bool // a current grace timer fired while stopping
	endsOK        int  // end notes written
	endTells      int
	finished      int
	collects      int // collections asked and not answered
	frozen        bool
	gaveUp        bool
	// gone: the session ended while no daemon ran (D76), found so.
	gone bool
}

func (m *sessionModel) step(t *rapid.T, msg protocol.DaemonMessage) {
	t.Logf("step %s", msg)
	m.apply(t, m.c.Step(m.now, msg))
}

func (m *sessionModel) apply(t *rapid.T, effs []protocol.DaemonEffect) {
	for _, e := range effs {
		t.Logf("  -> %s", e)
		switch e := e.(type) {
		case protocol.StartTimer:
			if e.Purpose == protocol.TimerWall {
				if m.wall == 0 {
					t.Fatalf("a wall timer for a launch with no wall: %s", e)
				}
				// Counted from the process's start, whenever it is armed:
				// a re-exec never restarts it.
				want := max(m.started.Add(m.wall).Sub(m.now), 0)
				if e.After != want {
					t.Fatalf("the wall timer is due in %s, want %s (start %s, wall %s, now %s)", e.After, want, m.started, m.wall, m.now)
				}
			}
			m.timers = append(m.timers, e)
			m.due = append(m.due, m.now.Add(e.After))
		case protocol.WatchProcess:
			if m.child {
				t.Fatalf("a watch on a child: %s", e)
			}
			m.watches = append(m.watches, e)
		case protocol.WatchLimits:
			if m.ended || e.Proc != m.proc || e.Workspace != testW {
				t.Fatalf("a limits watch after the end, or not its own: %s", e)
			}
			for _, w := range m.limitWatches {
				if w.Seq == m.c.limitSeq {
					t.Fatalf("a second current limits watch: %s", e)
				}
			}
			m.limitWatches = append(m.limitWatches, e)
		case protocol.CloseLimits:
			if !m.ended || e.Proc != m.proc {
				t.Fatalf("a close of its limits before the end: %s", e)
			}
			m.await = append(m.await, e)
		case protocol.ReadUsage:
			if !m.ended || e.Proc != m.proc || e.Launch != m.c.st.Launch.Hash {
				t.Fatalf("a read of its usage before the end, or not its own: %s", e)
			}
			for _, a := range m.await {
				if _, ok := a.(protocol.CloseLimits); ok {
					t.Fatalf("its usage read before its cgroup is closed: %s", e)
				}
			}
			m.await = append(m.await, e)
		case protocol.SignalProcess:
			if m.ended {
				t.Fatalf("a signal after the end: %s", e)
			}
			if !e.Group || e.Proc != m.proc {
				t.Fatalf("a session signals its own process group only: %s", e)
			}
			switch e.Signal {
			case protocol.SigTERM:
				m.terms++
			case protocol.SigKILL:
				if !m.child || !m.graceOK {
					t.Fatalf("KILL without the grace running out on a child: %s", e)
				}
				m.kills++
			}
			m.await = append(m.await, e)
		case protocol.ReadResult:
			if !m.ended || !m.ci {
				t.Fatalf("a result read before the end or for a run that is not CI: %s", e)
			}
			m.await = append(m.await, e)
		case protocol.WriteEnd:
			if !m.ended {
				t.Fatalf("an end note before the end: %s", e)
			}
			for _, a := range m.await {
				if _, ok := a.(protocol.WriteEnd); ok {
					t.Fatalf("two end notes in flight")
				}
			}
			if (e.End.Status == messages.EndUnknown) == m.child {
				t.Fatalf("an end note with the wrong status for a child=%v: %s", m.child, e)
			}
			if e.FoundGone != m.gone || (m.gone && !strings.Contains(e.End.Note, "ended while no daemon ran")) {
				t.Fatalf("the end of a session found gone=%v: %s (%s)", m.gone, e, e.End.Note)
			}
			if e.End.Budget != m.budget {
				t.Fatalf("the end note says budget %q, want %q", e.End.Budget, m.budget)
			}
			if (e.End.Usage == nil) != (m.usage == nil) || (m.usage != nil && e.End.Usage.Turns != m.usage.Turns) {
				t.Fatalf("the end note says usage %v, want %v", e.End.Usage, m.usage)
			}
			m.await = append(m.await, e)
		case protocol.Tell:
			switch x := e.Msg.(type) {
			case protocol.SessionEnded:
				m.endTells++
			case protocol.SessionFinished:
				m.finished++
			case protocol.StateCollected:
				if m.collects == 0 {
					t.Fatalf("an answer to no collection")
				}
				if !m.c.Quiescent() {
					t.Fatalf("an answer while waiting for a result")
				}
				m.collects = 0
				if x.Session != nil && x.Session.Ended != m.ended {
					t.Fatalf("the answer says ended=%v, the model %v", x.Session.Ended, m.ended)
				}
			default:
				t.Fatalf("a session tells only its workspace of its end and state, not %s", e)
			}
			if e.To != protocol.WorkspaceAddr(testW) {
				t.Fatalf("a session tells only its workspace: %s", e)
			}
		case protocol.LogEvent:
			if strings.Contains(e.Text, "giving up") {
				m.gaveUp = true
			}
		default:
			t.Fatalf("a session never asks for %T: %s", e, e)
		}
	}
}

// TestSessionCoreProperties drives a session through random stops, exits
// (stale, duplicate, of other processes), timers firing late, watches, results
// and failures, collections and restores from its own hand-off.
func TestSessionCoreProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { sessionProperty(t, false) })
}

// TestSessionCoreFoundGone is TestSessionCoreProperties for a session a
// daemon before spawned that ended while no daemon ran (D76): its end is
// written at once, once, unknown and saying so; nothing is watched or
// signaled, whatever comes.
func TestSessionCoreFoundGone(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { sessionProperty(t, true) })
}

func sessionProperty(t *rapid.T, gone bool) {
	{
		m := &sessionModel{now: time.Unix(1_000_000, 0), child: rapid.Bool().Draw(t, "child"), ci: rapid.Bool().Draw(t, "ci")}
		m.proc = protocol.ProcID{PID: 700, Start: 5000}
		cfg := Config{Grace: 10 * time.Second, RetryAfter: time.Second, EndAttempts: 3}
		st := protocol.SessionState{Workspace: testW, Proc: m.proc, Child: m.child, Launch: testLaunch(1, m.ci)}
		if wall := rapid.SampledFrom([]string{"", "5s", "30s", "1m"}).Draw(t, "wall"); wall != "" {
			st.Launch.Wall = wall
			m.wall, _ = messages.ParseWall("wall", wall)
			m.started = m.now.Add(-time.Duration(rapid.IntRange(0, 90).Draw(t, "age")) * time.Second)
			st.StartedAt = m.started
		}
		if gone {
			st.Child, m.child = false, false
			st.FoundGone, m.gone, m.ended = true, true, true
		}
		m.c = newSessionCore(cfg, st)
		m.apply(t, m.c.Start(m.now))

		t.Repeat(map[string]func(*rapid.T){
			"stop": func(t *rapid.T) {
				m.stops++
				if !m.ended {
					m.stopBeforeEnd = true
				}
				m.step(t, protocol.StopSession{})
			},
			"advance": func(t *rapid.T) {
				m.now = m.now.Add(time.Duration(rapid.IntRange(1, 20).Draw(t, "secs")) * time.Second)
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
				current := tm.Seq == m.c.seq && !m.ended && !m.frozen
				if tm.Purpose == protocol.TimerGrace && current {
					m.graceOK = true
				}
				if tm.Purpose == protocol.TimerWall && current && m.terms == 0 {
					if m.now.Before(m.started.Add(m.wall)) {
						t.Fatalf("the wall timer fired at %s, before the deadline %s", m.now, m.started.Add(m.wall))
					}
					m.wallTerm, m.stopBeforeEnd, m.budget = true, true, messages.LimitWall
				}
				m.step(t, protocol.TimerFired{Proc: tm.Proc, Purpose: tm.Purpose, Seq: tm.Seq})
			},
			"exit": func(t *rapid.T) {
				p := m.proc
				if rapid.IntRange(0, 4).Draw(t, "other") == 0 {
					p = protocol.ProcID{PID: 701, Start: 5000}
				}
				st := messages.ExitStatus{State: messages.EndExited, Code: rapid.IntRange(0, 3).Draw(t, "code")}
				if !m.child {
					t.Skip("only children are reaped")
				}
				if p == m.proc {
					m.exitSeen++
					m.ended = true
				}
				m.step(t, protocol.ProcessExited{Proc: p, Status: st, At: m.now})
			},
			"watch": func(t *rapid.T) {
				if len(m.watches) == 0 {
					t.Skip("no watch")
				}
				i := rapid.IntRange(0, len(m.watches)-1).Draw(t, "watch")
				w := m.watches[i]
				m.watches = append(m.watches[:i:i], m.watches[i+1:]...)
				var err error
				if rapid.IntRange(0, 3).Draw(t, "fail") == 0 {
					err = errors.New("pidfd_open: EMFILE")
				} else if w.Seq == m.c.seq {
					m.ended = true
				}
				m.step(t, protocol.ProcessGone{Proc: w.Proc, Seq: w.Seq, At: m.now, Err: err})
			},
			"limit": func(t *rapid.T) {
				if len(m.limitWatches) == 0 {
					t.Skip("no limits watch")
				}
				i := rapid.IntRange(0, len(m.limitWatches)-1).Draw(t, "watch")
				w := m.limitWatches[i]
				m.limitWatches = append(m.limitWatches[:i:i], m.limitWatches[i+1:]...)
				r := protocol.LimitReached{Proc: w.Proc, Seq: w.Seq, At: m.now,
					Limit: rapid.SampledFrom([]string{messages.LimitMemory, messages.LimitProcesses}).Draw(t, "limit"), Note: "counts"}
				if rapid.IntRange(0, 3).Draw(t, "fail") == 0 {
					r = protocol.LimitReached{Proc: w.Proc, Seq: w.Seq, Err: errors.New("no cgroup")}
				}
				if r.Err == nil && w.Seq == m.c.limitSeq && !m.ended && m.terms == 0 {
					m.stopBeforeEnd, m.budget = true, r.Limit
				}
				m.step(t, r)
			},
			"budget": func(t *rapid.T) {
				// Its model proxy says its tokens are spent (D50), or a
				// line for the launch before it comes late.
				launch := m.c.st.Launch.Hash
				if rapid.IntRange(0, 3).Draw(t, "other") == 0 {
					launch = testHash(2)
				}
				if launch == m.c.st.Launch.Hash && !m.ended && m.terms == 0 {
					m.stopBeforeEnd, m.budget = true, messages.LimitTokens
				}
				m.step(t, protocol.BudgetSpent{Workspace: testW, Launch: launch, Limit: messages.LimitTokens, Used: 1042})
			},
			"answer": func(t *rapid.T) {
				if len(m.await) == 0 {
					t.Skip("nothing awaited")
				}
				i := rapid.IntRange(0, len(m.await)-1).Draw(t, "effect")
				e := m.await[i]
				m.await = append(m.await[:i:i], m.await[i+1:]...)
				var err error
				if rapid.IntRange(0, 3).Draw(t, "fail") == 0 {
					err = errors.New("the server said no")
				}
				switch e := e.(type) {
				case protocol.SignalProcess:
					m.step(t, protocol.ProcessSignaled{Proc: e.Proc, Signal: e.Signal, Err: err})
				case protocol.ReadResult:
					found := rapid.Bool().Draw(t, "found")
					m.step(t, protocol.ResultRead{Proc: e.Proc, Found: found, Result: "green: ok", Err: err})
				case protocol.WriteEnd:
					if err == nil {
						m.endsOK++
					}
					m.step(t, protocol.EndWritten{Proc: e.Proc, Err: err})
				case protocol.CloseLimits:
					r := protocol.LimitsClosed{Proc: e.Proc, Err: err,
						Limit: rapid.SampledFrom([]string{"", messages.LimitMemory, messages.LimitProcesses}).Draw(t, "past")}
					if r.Limit != "" {
						r.Note = "counts"
						if m.budget == "" && m.terms == 0 {
							m.budget = r.Limit
						}
					}
					m.step(t, r)
				case protocol.ReadUsage:
					r := protocol.UsageRead{Proc: e.Proc, Err: err}
					if err == nil && rapid.Bool().Draw(t, "usage") {
						r.Usage = &messages.SessionUsage{Turns: 2, Model: &messages.ModelCount{Requests: 1}}
						m.usage = r.Usage
					}
					if err == nil && rapid.Bool().Draw(t, "reached") {
						r.Reached = "its model proxy counted 12 tokens against its limits.tokens of 10"
						if m.budget == "" && m.terms == 0 {
							m.budget = messages.LimitTokens
						}
					}
					m.step(t, r)
				}
			},
			"collect": func(t *rapid.T) {
				freeze := rapid.Bool().Draw(t, "freeze")
				if freeze {
					m.frozen = true
				}
				m.collects++
				m.step(t, protocol.CollectState{Seq: 1, Freeze: freeze})
			},
			"resume": func(t *rapid.T) {
				m.frozen = false
				m.step(t, protocol.ResumeWork{})
			},
			"restore": func(t *rapid.T) {
				// A re-exec: the state, taken while nothing is awaited,
				// through its JSON form, into a new core.
				if !m.c.Quiescent() || m.c.phase == sessDone {
					t.Skip("not settled")
				}
				h := protocol.Handoff{OCX: protocol.HandoffKind, Version: protocol.HandoffVersion,
					Workspaces: []protocol.WorkspaceState{{Workspace: testW, Sessions: []protocol.SessionState{m.c.State()}}}}
				b, err := protocol.EncodeHandoff(h)
				if err != nil {
					t.Fatal(err)
				}
				h2, err := protocol.DecodeHandoff(b)
				if err != nil {
					t.Fatal(err)
				}
				m.c = newSessionCore(cfg, h2.Workspaces[0].Sessions[0])
				m.timers, m.due, m.watches, m.await, m.limitWatches = nil, nil, nil, nil, nil
				m.frozen, m.collects, m.graceOK = false, 0, false
				t.Logf("restore")
				m.apply(t, m.c.Start(m.now))
			},
			"": func(t *rapid.T) {
				if m.c.st.Ended != m.ended {
					t.Fatalf("core ended=%v, model %v", m.c.st.Ended, m.ended)
				}
				if m.endsOK > 1 {
					t.Fatalf("%d end notes written", m.endsOK)
				}
				if m.endTells > 1 || m.finished > 1 {
					t.Fatalf("told its end %d times, finished %d times", m.endTells, m.finished)
				}
				if m.terms > 1 || m.kills > 1 {
					t.Fatalf("%d TERM, %d KILL", m.terms, m.kills)
				}
				if m.stopBeforeEnd != (m.terms == 1) {
					t.Fatalf("a stop before the end: %v; TERM sent: %d", m.stopBeforeEnd, m.terms)
				}
				if m.finished == 1 && m.endsOK == 0 && !m.gaveUp {
					t.Fatalf("finished without its end note")
				}
				if m.collects > 0 && m.c.Quiescent() {
					t.Fatalf("settled but the collection is not answered")
				}
				if m.c.awaiting != len(m.await) {
					t.Fatalf("the core awaits %d results, the model %d", m.c.awaiting, len(m.await))
				}
				if m.wall > 0 && !m.ended && m.terms == 0 && !m.frozen {
					// A running session with a wall always has its
					// wall timer armed: the daemon ends it in time.
					armed := false
					for _, tm := range m.timers {
						armed = armed || tm.Purpose == protocol.TimerWall && tm.Seq == m.c.seq
					}
					if !armed {
						t.Fatalf("running with a wall of %s and no current wall timer", m.wall)
					}
				}
				if m.wallTerm && m.c.st.Budget != messages.LimitWall {
					t.Fatalf("the wall sent TERM, but the state says budget %q", m.c.st.Budget)
				}
				if !m.ended && !m.frozen && m.c.limitSeq != -1 {
					// A running session's cgroup is always watched, until
					// its watch answered.
					watched := false
					for _, w := range m.limitWatches {
						watched = watched || w.Seq == m.c.limitSeq && m.c.limitSeq != 0
					}
					if !watched {
						t.Fatalf("running with no current limits watch (%d watches, current #%d)", len(m.limitWatches), m.c.limitSeq)
					}
				}
			},
		})
	}
}

// TestEndNote: the end note's fields are the session core's (issue 11,
// item 5), every one: the status and its code or signal, killed, the
// release it ran, when it was seen, a CI run's check-in and result; and a
// sandbox's 137 after the daemon's own KILL is that KILL, the one place of
// the rule (messages.ExitStatus.AfterKill).
func TestEndNote(t *testing.T) {
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	proc := protocol.ProcID{PID: 42, Start: 4242}
	launch := testLaunch(1, false)
	launch.ReleaseName = "r7"
	end := func(child, killed bool, launch protocol.LaunchSpec, st messages.ExitStatus, result, past string) messages.EndNote {
		t.Helper()
		c := newSessionCore(Config{}.withDefaults(), protocol.SessionState{Workspace: testW, Proc: proc, Child: child, Launch: launch, KillSent: killed})
		c.Step(at, protocol.ProcessExited{Proc: proc, Status: st, At: at})
		closed := protocol.LimitsClosed{Proc: proc, Limit: past, Note: "1 process killed by the kernel at its memory limit of 64 MiB"}
		if past == messages.LimitTokens {
			closed = protocol.LimitsClosed{Proc: proc} // the cgroup's close finds nothing; the usage read finds the tokens spent
		}
		c.Step(at, closed)
		u := protocol.UsageRead{Proc: proc}
		if past == messages.LimitTokens {
			u.Usage = &messages.SessionUsage{Model: &messages.ModelCount{Requests: 2, Tokens: modelapi.Tokens{Input: 900, Output: 142}}, Limit: 1000, Turns: 1, WallMS: 1500, CPUMS: 200}
			u.Reached = "its model proxy counted 1042 tokens (900 in, 142 out) against its limits.tokens of 1000"
		}
		effects := c.Step(at, u)
		if launch.IsCI() {
			effects = c.Step(at, protocol.ResultRead{Proc: proc, Result: result, Found: result != ""})
		}
		for _, e := range effects {
			if w, ok := e.(protocol.WriteEnd); ok {
				if err := w.End.Validate(); err != nil {
					t.Errorf("%s: %v", (&w.End).String(), err)
				}
				return w.End
			}
		}
		t.Fatalf("no end note among %v", effects)
		return messages.EndNote{}
	}
	h := launch.Hash
	for _, c := range []struct {
		name          string
		child, killed bool
		st            messages.ExitStatus
		past          string // the limit the cgroup's close finds the end past
		want          string
	}{
		{"exited", true, false, messages.ExitStatus{State: messages.EndExited, Code: 0}, "",
			`end ana/demo launch=` + h + ` pid=42 start_time=4242 status=exited exit_code=0 killed=false release=r7 seen=2026-11-30T09:00:00Z note="exited with code 0"`},
		{"killed after the grace, as bwrap says it", true, true, messages.ExitStatus{State: messages.EndExited, Code: 137, Sandboxed: true}, "",
			`end ana/demo launch=` + h + ` pid=42 start_time=4242 status=signaled signal=SIGKILL killed=true release=r7 seen=2026-11-30T09:00:00Z note="ended by SIGKILL, after KILL when the stop grace of 10s ran out"`},
		{"137 by itself, unsandboxed or without our KILL", true, false, messages.ExitStatus{State: messages.EndExited, Code: 137, Sandboxed: true}, "",
			`end ana/demo launch=` + h + ` pid=42 start_time=4242 status=exited exit_code=137 killed=false release=r7 seen=2026-11-30T09:00:00Z note="exited with code 137"`},
		{"not the daemon's child", false, false, messages.ExitStatus{State: messages.EndExited, Code: 3}, "",
			`end ana/demo launch=` + h + ` pid=42 start_time=4242 status=unknown killed=false release=r7 seen=2026-11-30T09:00:00Z note="seen gone; the daemon was not its parent, so how it ended is unknown"`},
		{"OOM-killed in its cgroup (D46)", true, false, messages.ExitStatus{State: messages.EndSignaled, Signal: "SIGKILL"}, messages.LimitMemory,
			`end ana/demo launch=` + h + ` pid=42 start_time=4242 status=signaled signal=SIGKILL killed=false release=r7 seen=2026-11-30T09:00:00Z budget=memory note="ended by SIGKILL; it went past its memory limit: 1 process killed by the kernel at its memory limit of 64 MiB"`},
		{"its tokens spent, the daemon not running to hear it (D50)", true, false, messages.ExitStatus{State: messages.EndExited, Code: 0}, messages.LimitTokens,
			`end ana/demo launch=` + h + ` pid=42 start_time=4242 status=exited exit_code=0 killed=false release=r7 seen=2026-11-30T09:00:00Z budget=tokens note="exited with code 0; it went past its tokens limit: its model proxy counted 1042 tokens (900 in, 142 out) against its limits.tokens of 1000; its model: 2 requests, 900 in, 142 out, 1042 of its 1000 tokens; 1 turn, 1.5 s wall, 0.2 s CPU"`},
	} {
		n := end(c.child, c.killed, launch, c.st, "", c.past)
		if got := n.String(); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
	ci := testLaunch(2, true)
	for result, want := range map[string]messages.CIResult{"green: ok": messages.CIGreen, "red: FAIL": messages.CIRed, "": messages.CINone} {
		n := end(true, false, ci, messages.ExitStatus{State: messages.EndExited}, result, "")
		if n.Result != want || n.Checkin != ci.Checkin || n.Release != "unknown" {
			t.Errorf("CI result %q: %s", result, (&n).String())
		}
	}
}
