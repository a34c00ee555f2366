package actors

import (
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// wsModel is what a workspace's history must add up to.
type wsModel struct {
	c   *workspaceCore
	now time.Time

	children  map[protocol.ActorAddr]bool
	sessions  map[protocol.ProcID]*wsModelSession
	terminals map[protocol.ProcID]bool
	nextPID   int

	delivered map[string]bool // launch hashes the workspace took
	outcomes  map[string]int  // refusals + successful spawns, per launch hash
	spawning  map[string]bool // launch hashes with a spawn in flight
	lastScan  map[string]bool // launch hash -> its scan found nothing and read the table

	await []protocol.DaemonEffect

	forwarded map[protocol.ProcID]int // exits handed to a session actor

	reservedFor string // granted reservation, model side
	collects    int
	replied     bool
}

type wsModelSession struct {
	ended    bool
	finished bool
	child    bool
}

func (m *wsModel) step(t *rapid.T, msg protocol.DaemonMessage) {
	t.Logf("step %s", msg)
	m.apply(t, m.c.Step(m.now, msg))
}

func (m *wsModel) live() int {
	n := 0
	for _, s := range m.sessions {
		if !s.ended {
			n++
		}
	}
	return n
}

func (m *wsModel) apply(t *rapid.T, effs []protocol.DaemonEffect) {
	for _, e := range effs {
		t.Logf("  -> %s", e)
		switch e := e.(type) {
		case protocol.ScanWorkspace:
			if e.Purpose == protocol.ScanForLaunch && len(m.spawning) > 0 {
				t.Fatalf("a launch scan while a spawn is in flight")
			}
			m.await = append(m.await, e)
		case protocol.SpawnSession:
			h := e.Launch.Hash
			if m.live() > 0 || len(m.spawning) > 0 {
				t.Fatalf("a spawn while a session runs (%d) or another spawn is in flight (%d)", m.live(), len(m.spawning))
			}
			if !m.lastScan[h] {
				t.Fatalf("a spawn of %s without a scan that read the table and found nothing", h)
			}
			if m.reservedFor != "" && !(e.Launch.IsCI() && e.Launch.Branch == m.reservedFor) {
				t.Fatalf("a spawn of %s while reserved for %s", h, m.reservedFor)
			}
			m.reservedFor = ""
			m.spawning[h] = true
			m.await = append(m.await, e)
		case protocol.WriteRefusal:
			m.outcomes[e.Launch.Hash]++
			m.await = append(m.await, e)
		case protocol.SignalProcess:
			if e.Group || e.Signal != protocol.SigTERM || !m.terminals[e.Proc] {
				// A workspace signals only what a stop scan found: a terminal
				// session, as a single process. Its own sessions stop themselves.
				if !(m.sessions[e.Proc] != nil && !e.Group) {
					t.Fatalf("a workspace signal that is not TERM to a process a stop scan found: %s", e)
				}
			}
			m.await = append(m.await, e)
		case protocol.StartActor:
			if m.children[e.Addr] {
				t.Fatalf("started twice: %s", e.Addr)
			}
			m.children[e.Addr] = true
			if e.Session != nil {
				if s := m.sessions[e.Session.Proc]; s == nil {
					t.Fatalf("a session actor for a process neither spawned nor adopted: %s", e)
				}
			}
		case protocol.StopActor:
			if !m.children[e.Addr] {
				t.Fatalf("stop of no child: %s", e.Addr)
			}
			if s := m.sessions[e.Addr.Proc]; e.Addr.Kind == protocol.ActorSession && (s == nil || !s.finished) {
				t.Fatalf("a session actor stopped before it finished: %s", e.Addr)
			}
			delete(m.children, e.Addr)
		case protocol.Tell:
			if e.To.Kind != protocol.ActorNode && !m.children[e.To] {
				t.Fatalf("a tell to no child: %s", e)
			}
			switch x := e.Msg.(type) {
			case protocol.ProcessExited:
				if e.To.Kind != protocol.ActorSession || !e.To.Proc.Matches(x.Proc) || m.sessions[e.To.Proc] == nil {
					t.Fatalf("an exit handed to %s, not to the session of %s", e.To, x.Proc)
				}
				m.forwarded[e.To.Proc]++
			case protocol.StateCollected:
				if m.collects == 0 {
					t.Fatalf("an answer to no collection")
				}
				m.collects, m.replied = 0, true
				if x.Workspace == nil || x.Workspace.Workspace != testW {
					t.Fatalf("a workspace's answer without its state")
				}
			case protocol.ReservationGranted:
				if m.live() > 0 || len(m.spawning) > 0 {
					t.Fatalf("a reservation granted while busy")
				}
				m.reservedFor = x.Branch
			}
		case protocol.LogEvent:
		default:
			t.Fatalf("a workspace never asks for %T: %s", e, e)
		}
	}
}

// TestWorkspaceCoreProperties drives a workspace through random launches
// (new and duplicate, by people and by branch listeners), scans answered from
// a process table with terminal sessions in it (or unreadable), spawns that
// work or fail, stops, session ends, reservations and collections.
func TestWorkspaceCoreProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &wsModel{now: time.Unix(1_000_000, 0), nextPID: 700,
			children: map[protocol.ActorAddr]bool{}, sessions: map[protocol.ProcID]*wsModelSession{},
			terminals: map[protocol.ProcID]bool{}, delivered: map[string]bool{}, outcomes: map[string]int{},
			spawning: map[string]bool{}, lastScan: map[string]bool{}, forwarded: map[protocol.ProcID]int{}}
		// The memory of launches is made larger than any run here, so that a
		// launch delivered again is always one it remembers.
		m.c = newWorkspaceCore(Config{RecentLaunches: 100000}, protocol.WorkspaceState{Workspace: testW})
		m.apply(t, m.c.Start(m.now))
		branches := []string{"trunk", "dev"}

		launch := func(t *rapid.T, ci bool) {
			n := rapid.IntRange(0, 6).Draw(t, "launch")
			l := testLaunch(n, false)
			if ci {
				l = testLaunch(n+20, true)
				l.Branch = rapid.SampledFrom(branches).Draw(t, "branch")
				if !m.children[protocol.BranchAddr(testW, l.Branch)] {
					t.Skip("no such listener yet")
				}
			}
			m.delivered[l.Hash] = true
			if ci {
				m.step(t, protocol.LaunchCI{Launch: l})
			} else {
				m.step(t, protocol.LaunchRequested{Launch: l})
			}
		}
		answer := func(t *rapid.T, i int, fail bool) {
			e := m.await[i]
			m.await = append(m.await[:i:i], m.await[i+1:]...)
			var err error
			if fail {
				err = errors.New("no")
			}
			switch e := e.(type) {
			case protocol.ScanWorkspace:
				var procs []protocol.ProcInfo
				for p := range m.terminals {
					procs = append(procs, protocol.ProcInfo{Proc: p, Workspace: testW, Verb: "run", StartedBy: messages.OriginTerminal})
				}
				for p, s := range m.sessions {
					if !s.ended {
						procs = append(procs, protocol.ProcInfo{Proc: p, Workspace: testW, Verb: "serve", StartedBy: messages.OriginDaemon})
					}
				}
				if e.Purpose == protocol.ScanForLaunch {
					m.lastScan[e.For] = err == nil && len(procs) == 0
				}
				if err != nil {
					procs = nil
				}
				m.step(t, protocol.WorkspaceScanned{Workspace: testW, Purpose: e.Purpose, For: e.For, Procs: procs, Err: err})
			case protocol.SpawnSession:
				delete(m.spawning, e.Launch.Hash)
				// The child's exit can come (by the node) before the
				// spawn's result (by the workspace's own effect).
				early := rapid.IntRange(0, 3).Draw(t, "exitFirst") == 0
				p := protocol.ProcID{PID: m.nextPID + 1, Start: 5000}
				if early {
					m.step(t, protocol.ProcessExited{Proc: p, Workspace: testW, Status: messages.ExitStatus{State: messages.EndExited}})
					if m.forwarded[p] != 0 {
						t.Fatalf("the exit of %s handed on before its spawn's result", p)
					}
				}
				if err != nil {
					m.step(t, protocol.SessionSpawned{Launch: e.Launch.Hash, Err: err})
					break
				}
				m.nextPID++
				m.sessions[p] = &wsModelSession{child: true}
				m.outcomes[e.Launch.Hash]++
				m.step(t, protocol.SessionSpawned{Launch: e.Launch.Hash, Proc: p})
				if early && m.forwarded[p] != 1 {
					t.Fatalf("the exit of %s that came before its spawn's result was handed on %d times, want once", p, m.forwarded[p])
				}
			case protocol.WriteRefusal:
				m.step(t, protocol.RefusalWritten{Launch: e.Launch.Hash, Err: err})
			case protocol.SignalProcess:
				m.step(t, protocol.ProcessSignaled{Proc: e.Proc, Signal: e.Signal, Err: err})
			}
		}

		t.Repeat(map[string]func(*rapid.T){
			"launch":   func(t *rapid.T) { launch(t, false) },
			"launchCI": func(t *rapid.T) { launch(t, true) },
			"checkin": func(t *rapid.T) {
				b := rapid.SampledFrom(branches).Draw(t, "branch")
				m.step(t, protocol.CheckinArrived{Checkin: testHash(300), Branch: b, Listener: protocol.BranchListener{Workspace: testW, Lifetime: messages.Completes}})
			},
			"reserve": func(t *rapid.T) {
				b := rapid.SampledFrom(branches).Draw(t, "branch")
				if !m.children[protocol.BranchAddr(testW, b)] {
					t.Skip("no such listener")
				}
				m.step(t, protocol.ReserveWorkspace{Branch: b})
			},
			"release": func(t *rapid.T) {
				b := rapid.SampledFrom(branches).Draw(t, "branch")
				if m.reservedFor == b {
					m.reservedFor = ""
				}
				m.step(t, protocol.ReleaseWorkspace{Branch: b})
			},
			"terminal": func(t *rapid.T) {
				m.nextPID++
				m.terminals[protocol.ProcID{PID: m.nextPID, Start: 6000}] = true
			},
			"terminalEnds": func(t *rapid.T) {
				for p := range m.terminals {
					delete(m.terminals, p)
					return
				}
				t.Skip("no terminal session")
			},
			"adopt": func(t *rapid.T) {
				m.nextPID++
				p := protocol.ProcID{PID: m.nextPID, Start: 4000}
				l := testLaunch(40+m.nextPID, false)
				m.sessions[p] = &wsModelSession{}
				m.step(t, protocol.AdoptSession{Proc: protocol.ProcInfo{Proc: p, Workspace: testW, Verb: "serve", Launch: l.Hash, StartedBy: messages.OriginOrphan}, Launch: l})
			},
			"stop": func(t *rapid.T) { m.step(t, protocol.StopWorkspace{Workspace: testW}) },
			"sessionEnds": func(t *rapid.T) {
				for p, s := range m.sessions {
					if !s.ended {
						s.ended = true
						m.step(t, protocol.SessionEnded{Workspace: testW, Proc: p, Launch: testLaunch(1, false)})
						return
					}
				}
				t.Skip("no session runs")
			},
			"sessionFinishes": func(t *rapid.T) {
				for p, s := range m.sessions {
					if s.ended && !s.finished {
						s.finished = true
						m.step(t, protocol.SessionFinished{Proc: p})
						return
					}
				}
				t.Skip("no session to finish")
			},
			"exit": func(t *rapid.T) {
				m.step(t, protocol.ProcessExited{Proc: protocol.ProcID{PID: rapid.IntRange(700, 710).Draw(t, "pid"), Start: 5000}, Workspace: testW, Status: messages.ExitStatus{State: messages.EndExited}})
			},
			"answer": func(t *rapid.T) {
				if len(m.await) == 0 {
					t.Skip("nothing awaited")
				}
				answer(t, rapid.IntRange(0, len(m.await)-1).Draw(t, "effect"), rapid.IntRange(0, 4).Draw(t, "fail") == 0)
			},
			"collect": func(t *rapid.T) {
				m.collects++
				m.replied = false
				m.step(t, protocol.CollectState{Seq: 1})
			},
			"childAnswers": func(t *rapid.T) {
				if m.c.collect == nil || len(m.c.collect.waiting) == 0 {
					t.Skip("no collection waits")
				}
				for a := range m.c.collect.waiting {
					r := protocol.StateCollected{Seq: 1, Ask: m.c.collect.asks[a], From: a}
					if a.Kind == protocol.ActorBranch {
						r.Branch = &protocol.BranchState{Workspace: testW, Branch: a.Branch, Phase: protocol.BranchIdle}
					}
					m.step(t, r)
					return
				}
			},
			"": func(t *rapid.T) {
				for h, n := range m.outcomes {
					if n > 1 {
						t.Fatalf("launch %s has %d outcomes", h, n)
					}
				}
				if m.c.awaiting != len(m.await) {
					t.Fatalf("the core awaits %d results, the model %d", m.c.awaiting, len(m.await))
				}
				if m.collects > 0 && m.c.Quiescent() && len(m.c.collect.waiting) == 0 {
					t.Fatalf("settled, every child answered, but the collection is not answered")
				}
			},
		})

		// Settle: answer everything, successfully, until nothing is awaited.
		// Then every launch note the workspace took has exactly one outcome.
		for len(m.await) > 0 {
			answer(t, 0, false)
		}
		for h := range m.delivered {
			if m.outcomes[h] != 1 {
				t.Fatalf("launch %s has %d outcomes after everything settled, want 1", h, m.outcomes[h])
			}
		}
	})
}
