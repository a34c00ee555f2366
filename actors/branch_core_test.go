package actors

import (
	"errors"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// branchModel is the world of one branch listener: the check-ins on its branch
// and which of them have a result, the workspace's answers, and its runs.
type branchModel struct {
	c   *branchCore
	now time.Time

	completes bool
	// reviewer: its runs leave a verdict (D42); own are the check-ins it
	// may not judge (E6: it sent them), which its queue passes over.
	reviewer bool
	checkins []string // oldest first
	tested   map[string]bool
	own      map[string]bool
	// inFlight is the check-in whose launch note is written and whose run
	// has not ended (or whose launch was refused): its result is pending.
	inFlight map[string]bool
	skipLogs map[string]int

	reserveAsked int // ReserveWorkspace told and not answered
	held         bool
	queries      []protocol.FindUntested
	lastNewest   string
	writes       []protocol.WriteLaunch
	launchCI     []protocol.LaunchSpec // handed to the workspace, no outcome yet
	running      *protocol.LaunchOutcome
	nextPID      int

	// blocked: its own run just ended without a result; it may not look for
	// work again until a check-in arrives or the workspace is freed by
	// something else (D5: a broken CI command cannot loop).
	blocked bool
	// mustReserve: its own run ended with a result; it must look again at once.
	mustReserve bool
}

func (m *branchModel) untested() string {
	q := m.queue()
	if len(q.Waiting) == 0 {
		return ""
	}
	return q.Waiting[len(q.Waiting)-1]
}

// queue is the listener's queue as the record gives it: derived from the
// check-ins and their results, nothing remembered for it.
func (m *branchModel) queue() Queue {
	var q Queue
	for _, h := range m.checkins {
		switch {
		case m.own[h]:
			q.Skipped = append(q.Skipped, protocol.SkippedCheckin{Checkin: h, Why: "sent by the reviewer (E6)"})
		case !m.tested[h]:
			q.Waiting = append(q.Waiting, h)
		}
	}
	return q
}

func (m *branchModel) step(t *rapid.T, msg protocol.DaemonMessage) {
	t.Logf("step %s", msg)
	effs := m.c.Step(m.now, msg)
	reserved := false
	for _, e := range effs {
		t.Logf("  -> %s", e)
		switch e := e.(type) {
		case protocol.FindUntested:
			if !m.held {
				t.Fatalf("a query without holding the workspace")
			}
			m.queries = append(m.queries, e)
		case protocol.WriteLaunch:
			if !m.held {
				t.Fatalf("a launch note written without holding the workspace")
			}
			if e.Checkin != m.lastNewest || m.lastNewest == "" {
				t.Fatalf("a launch note for %s, but the newest untested found was %q", e.Checkin, m.lastNewest)
			}
			if m.tested[e.Checkin] {
				t.Fatalf("a launch note for %s, which already carries its result (a verdict)", e.Checkin)
			}
			if m.own[e.Checkin] {
				t.Fatalf("a launch note for %s, which the reviewer may not judge (E6)", e.Checkin)
			}
			if m.inFlight[e.Checkin] {
				t.Fatalf("a second launch note for %s while its result is pending", e.Checkin)
			}
			m.inFlight[e.Checkin] = true
			m.writes = append(m.writes, e)
		case protocol.Tell:
			if e.To != protocol.WorkspaceAddr(testW) {
				t.Fatalf("a branch listener tells only its workspace: %s", e)
			}
			switch x := e.Msg.(type) {
			case protocol.ReserveWorkspace:
				if !m.completes {
					t.Fatalf("a listener of a stays session asked for the workspace")
				}
				if m.blocked {
					t.Fatalf("looked for work again after its run left no result, with no new check-in")
				}
				if m.reserveAsked > 0 || m.held {
					t.Fatalf("a second reservation while one is asked or held")
				}
				m.reserveAsked++
				reserved = true
			case protocol.ReleaseWorkspace:
				m.held = false
			case protocol.LaunchCI:
				if !m.held {
					t.Fatalf("a CI launch without holding the workspace")
				}
				m.held = false // the workspace's launch takes the reservation
				m.launchCI = append(m.launchCI, x.Launch)
			case protocol.StateCollected:
				if !m.c.Quiescent() {
					t.Fatalf("an answer while not settled")
				}
			default:
				t.Fatalf("a branch listener does not tell %s", e)
			}
		case protocol.LogEvent:
			for _, a := range e.Attrs {
				if a.Key == KeyCheckin && strings.Contains(e.Text, "may not judge") {
					m.skipLogs[a.Value.String()]++
					if m.skipLogs[a.Value.String()] > 1 {
						t.Fatalf("the skip of %s logged twice", a.Value)
					}
				}
			}
		default:
			t.Fatalf("a branch listener never asks for %T: %s", e, e)
		}
	}
	if m.mustReserve && !reserved {
		t.Fatalf("its run ended with a result, but it did not look for the next check-in")
	}
	m.mustReserve = false
}

// TestBranchCoreProperties drives a branch listener through check-ins, the
// workspace's answers, queries and writes that work or fail, launches that
// are refused, and runs that end with or without a result.
func TestBranchCoreProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &branchModel{now: time.Unix(1_000_000, 0), completes: rapid.IntRange(0, 4).Draw(t, "stays") != 0, tested: map[string]bool{}, nextPID: 800,
			own: map[string]bool{}, inFlight: map[string]bool{}, skipLogs: map[string]int{}}
		lifetime := messages.Stays
		if m.completes {
			lifetime = messages.Completes
			m.reviewer = rapid.Bool().Draw(t, "reviewer")
		}
		listener := protocol.BranchListener{Workspace: testW, Repository: "/srv/demo.fossil", Record: testHash(900), ListenNote: testHash(901), Lifetime: lifetime}
		if m.reviewer {
			listener.Result = messages.ResultVerdict
		}
		m.c = newBranchCore(Config{}, protocol.BranchState{Workspace: testW, Branch: "trunk", Listener: listener})
		if effs := m.c.Start(m.now); len(effs) != 0 {
			t.Fatalf("a new listener did something at start: %v", effs)
		}

		t.Repeat(map[string]func(*rapid.T){
			"checkin": func(t *rapid.T) {
				h := testHash(100 + len(m.checkins))
				m.checkins = append(m.checkins, h)
				m.own[h] = m.reviewer && rapid.IntRange(0, 3).Draw(t, "own") == 0
				m.blocked = false
				m.step(t, protocol.CheckinArrived{Checkin: h, Branch: "trunk", Listener: listener})
			},
			// The daemon starts or re-execs: the listener looks at its
			// queue, with no check-in in particular (D42).
			"look": func(t *rapid.T) {
				m.blocked = false
				m.step(t, protocol.CheckinArrived{Branch: "trunk", Listener: listener})
			},
			// A check-in arrives while no daemon runs: nothing tells the
			// listener; the next look or check-in finds it.
			"checkinUnseen": func(t *rapid.T) {
				h := testHash(100 + len(m.checkins))
				m.checkins = append(m.checkins, h)
			},
			"grant": func(t *rapid.T) {
				if m.reserveAsked == 0 {
					t.Skip("no reservation asked")
				}
				m.reserveAsked--
				if rapid.Bool().Draw(t, "busy") {
					m.step(t, protocol.ReservationRefused{Branch: "trunk", Why: "busy"})
					return
				}
				m.held = true
				m.step(t, protocol.ReservationGranted{Branch: "trunk"})
			},
			"query": func(t *rapid.T) {
				if len(m.queries) == 0 {
					t.Skip("no query")
				}
				m.queries = m.queries[1:]
				if rapid.IntRange(0, 4).Draw(t, "fail") == 0 {
					m.lastNewest = ""
					m.step(t, protocol.UntestedFound{Branch: "trunk", Err: errors.New("locked")})
					return
				}
				q := m.queue()
				m.lastNewest = m.untested()
				m.step(t, protocol.UntestedFound{Branch: "trunk", Newest: m.lastNewest, Waiting: len(q.Waiting), Skipped: q.Skipped})
			},
			"write": func(t *rapid.T) {
				if len(m.writes) == 0 {
					t.Skip("no write")
				}
				w := m.writes[0]
				m.writes = m.writes[1:]
				if rapid.IntRange(0, 4).Draw(t, "fail") == 0 {
					delete(m.inFlight, w.Checkin)
					m.step(t, protocol.LaunchWritten{Branch: "trunk", Checkin: w.Checkin, Err: errors.New("401")})
					return
				}
				l := protocol.LaunchSpec{Hash: testHash(200 + len(m.checkins)), Repository: listener.Repository, Workspace: testW, Record: listener.Record, Lifetime: messages.Completes, Checkin: w.Checkin, Branch: "trunk"}
				m.step(t, protocol.LaunchWritten{Branch: "trunk", Checkin: w.Checkin, Launch: &l})
			},
			"outcome": func(t *rapid.T) {
				if len(m.launchCI) == 0 {
					t.Skip("no launch handed over")
				}
				l := m.launchCI[0]
				m.launchCI = m.launchCI[1:]
				if rapid.IntRange(0, 3).Draw(t, "refused") == 0 {
					delete(m.inFlight, l.Checkin)
					m.step(t, protocol.LaunchOutcome{Launch: l, Refused: "a terminal session holds it"})
					return
				}
				m.nextPID++
				o := protocol.LaunchOutcome{Launch: l, Proc: protocol.ProcID{PID: m.nextPID, Start: 1}}
				m.running = &o
				m.step(t, o)
			},
			"runEnds": func(t *rapid.T) {
				if m.running == nil {
					t.Skip("nothing runs")
				}
				left := rapid.Bool().Draw(t, "leftResult")
				if left {
					m.tested[m.running.Launch.Checkin] = true
					m.mustReserve = true
				} else {
					m.blocked = true
				}
				delete(m.inFlight, m.running.Launch.Checkin)
				ended := &protocol.EndedRun{Proc: m.running.Proc, Launch: m.running.Launch, LeftResult: left}
				m.running = nil
				m.step(t, protocol.WorkspaceFreed{Ended: ended})
			},
			"otherFreed": func(t *rapid.T) {
				if m.running != nil {
					t.Skip("its own run holds the workspace")
				}
				m.blocked = false
				m.step(t, protocol.WorkspaceFreed{})
			},
			"collect": func(t *rapid.T) { m.step(t, protocol.CollectState{Seq: 1}) },
			"": func(t *rapid.T) {
				if !m.completes && m.c.st.Phase != protocol.BranchIdle {
					t.Fatalf("a listener of a stays session left idle: %s", m.c.st.Phase)
				}
				if m.c.Quiescent() && m.held {
					t.Fatalf("settled while still holding the workspace")
				}
				if (m.running != nil) != (m.c.st.Phase == protocol.BranchRunning) {
					t.Fatalf("the model runs %v, the listener is %s", m.running != nil, m.c.st.Phase)
				}
				if len(m.inFlight) > 1 {
					t.Fatalf("%d check-ins launched at once: %v", len(m.inFlight), m.inFlight)
				}
			},
		})
	})
}
