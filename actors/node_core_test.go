package actors

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
	"github.com/ocx-go/ocx/messages/protocol"
)

// nodeModel is what the node's history must add up to.
type nodeModel struct {
	c   *nodeCore
	now time.Time

	started   map[messages.WorkspaceKey]bool
	classify  []protocol.ClassifyArtifact // awaiting a result
	known     map[string]bool             // hashes classified or seen: a post of them is a duplicate
	launched  map[string]int              // LaunchRequested told, per hash
	refused   map[string]int              // refusal notes asked for, per hash
	refusing  []string                    // refusal notes being written
	exits     map[protocol.ProcID]int     // exits forwarded, per process
	expect    map[protocol.ProcID]int     // exits that must have been forwarded
	exited    map[protocol.ProcID]bool
	collects  map[messages.WorkspaceKey]protocol.CollectState // the latest asked
	answered  map[messages.WorkspaceKey]bool
	phase     string // running, pausing, paused, collecting, execing
	deferred  []string
	pauseAsk  bool
	resumes   int
	execs     []protocol.Handoff
	snapshots int
	replies   int
}

var nodeWs = []messages.WorkspaceKey{{Login: "ana", Project: "demo"}, {Login: "bob", Project: "demo"}}

func (m *nodeModel) step(t *rapid.T, msg protocol.DaemonMessage) {
	t.Logf("step %s", msg)
	for _, e := range m.c.Step(m.now, msg) {
		t.Logf("  -> %s", e)
		switch e := e.(type) {
		case protocol.ClassifyArtifact:
			if m.known[e.Hash] {
				t.Fatalf("a duplicate post classified again: %s", e.Hash)
			}
			for _, c := range m.classify {
				if c.Hash == e.Hash {
					t.Fatalf("two classifications of one hash in flight")
				}
			}
			if m.phase != "running" {
				t.Fatalf("a post acted on during a re-exec (%s)", m.phase)
			}
			m.classify = append(m.classify, e)
		case protocol.StartActor:
			if m.started[e.Addr.Workspace] {
				t.Fatalf("workspace started twice: %s", e.Addr)
			}
			m.started[e.Addr.Workspace] = true
		case protocol.Tell:
			w := e.To.Workspace
			if !m.started[w] {
				t.Fatalf("a tell to a workspace not started: %s", e)
			}
			switch x := e.Msg.(type) {
			case protocol.LaunchRequested:
				m.launched[x.Launch.Hash]++
			case protocol.ProcessExited:
				if x.Workspace != w {
					t.Fatalf("an exit sent to %s, not to the workspace it was spawned for: %s", w, x)
				}
				m.exits[x.Proc]++
			case protocol.CollectState:
				m.collects[w] = x
				m.answered[w] = false
				if x.Freeze && m.phase != "paused" {
					t.Fatalf("a freezing collection in phase %s, before the inputs paused", m.phase)
				}
			}
		case protocol.PauseInputs:
			if m.phase != "pausing" {
				t.Fatalf("inputs paused in phase %s", m.phase)
			}
			m.pauseAsk = true
		case protocol.ExecRelease:
			if m.phase != "paused" || len(m.classify) > 0 || len(m.refusing) > 0 {
				t.Fatalf("exec asked in phase %s with %d classifications and %d refusal notes in flight", m.phase, len(m.classify), len(m.refusing))
			}
			for _, w := range nodeWsStarted(m) {
				if !m.answered[w] {
					t.Fatalf("exec asked before %s answered", w)
				}
			}
			if got := e.Handoff.Pending; !reflect.DeepEqual(got, m.deferred) && !(len(got) == 0 && len(m.deferred) == 0) {
				t.Fatalf("hand-off pending %q, the lines read after reexec were %q", got, m.deferred)
			}
			m.phase = "execing"
			m.execs = append(m.execs, e.Handoff)
		case protocol.ResumeInputs:
			if m.phase != "running" {
				t.Fatalf("inputs resumed in phase %s", m.phase)
			}
			m.resumes++
		case protocol.ReplySnapshot:
			m.replies++
		case protocol.WriteRefusal:
			m.refused[e.Launch.Hash]++
			m.refusing = append(m.refusing, e.Launch.Hash)
			if m.refused[e.Launch.Hash] > 1 {
				t.Fatalf("a second refusal note for launch %s", e.Launch.Hash)
			}
			if e.Reason == "" || e.Launch.Workspace.Project == "" {
				t.Fatalf("a refusal that names no reason or project: %s", e)
			}
		case protocol.ResolveLaunch, protocol.LogEvent:
		default:
			t.Fatalf("the node never asks for %T: %s", e, e)
		}
	}
}

func nodeWsStarted(m *nodeModel) []messages.WorkspaceKey {
	var ws []messages.WorkspaceKey
	for w := range m.started {
		ws = append(ws, w)
	}
	return ws
}

// TestNodeCoreProperties drives the node through posts (duplicates among them),
// classifications that work or fail, stops, exits for a workspace started or
// not, or for none (duplicates, unknown start times), re-execs that pause,
// collect and exec or fail, with lines arriving all along.
func TestNodeCoreProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &nodeModel{now: time.Unix(1_000_000, 0), started: map[messages.WorkspaceKey]bool{}, known: map[string]bool{},
			launched: map[string]int{}, refused: map[string]int{}, exits: map[protocol.ProcID]int{},
			exited: map[protocol.ProcID]bool{}, expect: map[protocol.ProcID]int{}, collects: map[messages.WorkspaceKey]protocol.CollectState{}, answered: map[messages.WorkspaceKey]bool{}, phase: "running"}
		m.c = newNodeCore(Config{})
		line := func(t *rapid.T, l pipe.Line) {
			if m.phase != "running" {
				if _, ok := l.(pipe.ReexecLine); !ok {
					b, _ := l.Encode()
					m.deferred = append(m.deferred, strings.TrimSuffix(string(b), "\n"))
				}
			} else if _, ok := l.(pipe.ReexecLine); ok {
				m.phase = "pausing"
			}
			m.step(t, protocol.LineRead{Line: l})
		}

		t.Repeat(map[string]func(*rapid.T){
			"post": func(t *rapid.T) {
				line(t, pipe.PostLine{Repository: "/srv/demo.fossil", Hash: testHash(rapid.IntRange(0, 5).Draw(t, "hash"))})
			},
			"stop": func(t *rapid.T) {
				w := rapid.SampledFrom(nodeWs).Draw(t, "w")
				line(t, pipe.StopLine{Login: w.Login, Project: w.Project})
			},
			"reexec": func(t *rapid.T) { line(t, pipe.ReexecLine{}) },
			"classified": func(t *rapid.T) {
				if len(m.classify) == 0 {
					t.Skip("no classification in flight")
				}
				c := m.classify[0]
				m.classify = m.classify[1:]
				r := protocol.ArtifactClassified{Repository: c.Repository, Hash: c.Hash}
				switch rapid.IntRange(0, 4).Draw(t, "kind") {
				case 0:
					r.Err = errors.New("locked")
				case 1:
					l := testLaunch(0, false)
					l.Hash, l.Workspace = c.Hash, rapid.SampledFrom(nodeWs).Draw(t, "w")
					r.Launch = &l
					m.known[c.Hash] = true
				case 2:
					r.Checkin = &protocol.CheckinSpec{Hash: c.Hash, Branch: "trunk", Listeners: []protocol.BranchListener{{Workspace: nodeWs[0], Lifetime: messages.Completes}}}
					m.known[c.Hash] = true
				case 3:
					r.Refused = &protocol.LaunchRefused{Hash: c.Hash, Repository: c.Repository, Workspace: rapid.SampledFrom(nodeWs).Draw(t, "w"), Reason: "its workspace definition does not read"}
					m.known[c.Hash] = true
				default:
					r.Nothing = "a reply"
					m.known[c.Hash] = true
				}
				m.step(t, r)
			},
			"seen": func(t *rapid.T) {
				h := testHash(rapid.IntRange(0, 5).Draw(t, "hash"))
				m.known[h] = true
				m.step(t, protocol.LaunchSeen{Hash: h})
			},
			"exit": func(t *rapid.T) {
				p := protocol.ProcID{PID: rapid.IntRange(700, 706).Draw(t, "pid"), Start: 5000}
				if m.exited[p] && rapid.Bool().Draw(t, "dup") == false {
					t.Skip("a reaper reports an exit once; duplicates are drawn rarely")
				}
				m.exited[p] = true
				q := p
				if rapid.IntRange(0, 5).Draw(t, "nostart") == 0 {
					q.Start = 0
				}
				var w messages.WorkspaceKey
				if rapid.IntRange(0, 5).Draw(t, "noworkspace") != 0 {
					w = rapid.SampledFrom(nodeWs).Draw(t, "w")
					m.expect[q]++
				}
				m.step(t, protocol.ProcessExited{Proc: q, Workspace: w, Status: messages.ExitStatus{State: messages.EndExited}})
			},
			"paused": func(t *rapid.T) {
				if !m.pauseAsk {
					t.Skip("no pause asked")
				}
				m.pauseAsk = false
				if rapid.IntRange(0, 4).Draw(t, "fail") == 0 {
					m.phase = "running"
					m.deferredDispatched(t)
					m.step(t, protocol.InputsPaused{Err: errors.New("stuck")})
					return
				}
				m.phase = "paused"
				m.step(t, protocol.InputsPaused{Remainder: []byte("pos")})
			},
			"wsAnswers": func(t *rapid.T) {
				for w, x := range m.collects {
					if !m.answered[w] {
						m.answered[w] = true
						m.step(t, protocol.StateCollected{Seq: x.Seq, Ask: x.Ask, From: protocol.WorkspaceAddr(w), Workspace: &protocol.WorkspaceState{Workspace: w}})
						return
					}
				}
				t.Skip("no collection to answer")
			},
			"execFails": func(t *rapid.T) {
				if m.phase != "execing" {
					t.Skip("no exec asked")
				}
				m.phase = "running"
				m.deferredDispatched(t)
				m.step(t, protocol.ExecFailed{Err: errors.New("ENOENT")})
			},
			"resumed": func(t *rapid.T) {
				if m.resumes == 0 {
					t.Skip("no resume asked")
				}
				m.resumes--
				m.step(t, protocol.InputsResumed{})
			},
			"refusalWritten": func(t *rapid.T) {
				if len(m.refusing) == 0 {
					t.Skip("no refusal note in flight")
				}
				h := m.refusing[0]
				m.refusing = m.refusing[1:]
				var err error
				if rapid.Bool().Draw(t, "fails") {
					err = errors.New("server gone")
				}
				m.step(t, protocol.RefusalWritten{Launch: h, Err: err})
			},
			"snapshot": func(t *rapid.T) {
				m.snapshots++
				m.step(t, protocol.SnapshotRequest{Request: m.snapshots})
			},
			"": func(t *rapid.T) {
				if m.replies > m.snapshots {
					t.Fatalf("%d snapshot replies to %d requests", m.replies, m.snapshots)
				}
				for h, n := range m.launched {
					if n > 1 {
						t.Fatalf("launch %s handed to its workspace %d times", h, n)
					}
				}
				for _, p := range append(keys(m.exits), keys(m.expect)...) {
					if m.exits[p] != m.expect[p] {
						t.Fatalf("the exit of %s forwarded %d times, want %d", p, m.exits[p], m.expect[p])
					}
				}
				if want := len(m.classify) + len(m.refusing) + boolInt(m.pauseAsk) + m.resumes; m.c.awaiting != want {
					t.Fatalf("the node awaits %d results, the model %d", m.c.awaiting, want)
				}
			},
		})
	})
}

func keys[K comparable, V any](m map[K]V) []K {
	var ks []K
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// deferredDispatched clears the model's deferred lines: after a failed
// re-exec the node acts on them itself, and step checks what it does.
func (m *nodeModel) deferredDispatched(*rapid.T) { m.deferred = nil }

// TestNodeCoreAsksForDeliveries: the node, not the classifier, decides
// that the session runs are to be given what arrived (seed 004, section
// 9): after an arrival's own event, and only while it has a run's actor;
// what the run engine reads is routed to each run's actor.
func TestNodeCoreAsksForDeliveries(t *testing.T) {
	c := newNodeCore(Config{})
	c.Start(time.Time{})
	names := func(effs []protocol.DaemonEffect) []string {
		var out []string
		for _, e := range effs {
			switch e := e.(type) {
			case protocol.ClassifyArtifact, protocol.StartActor, protocol.ReadDeliveries:
				out = append(out, e.String())
			case protocol.Tell:
				out = append(out, "tell "+e.To.String()+": "+e.Msg.String())
			}
		}
		return out
	}
	step := func(msg protocol.DaemonMessage, want ...string) {
		t.Helper()
		if got := names(c.Step(time.Time{}, msg)); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("%s\n--- got\n%s\n--- want\n%s", msg, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	post := func(h string) protocol.LineRead {
		return protocol.LineRead{Line: pipe.PostLine{Repository: "/srv/demo.fossil", Hash: h}}
	}
	// No run's actor: a post is classified, and nobody is asked for its deliveries.
	step(post("aaaaaaaaaa"), "classify /srv/demo.fossil aaaaaaaaaa")
	step(protocol.ArtifactClassified{Repository: "/srv/demo.fossil", Hash: "aaaaaaaaaa", Nothing: "a post", Arrival: true})
	// A run arrives: its actor hears it first, then the deliveries are read.
	run := protocol.RunRouted{Run: "R0run00000", Event: protocol.RunArrived{Facts: protocol.RunFacts{Hash: "R0run00000"}}}
	addr := protocol.RunAddr("R0run00000")
	step(post("bbbbbbbbbb"), "classify /srv/demo.fossil bbbbbbbbbb")
	step(protocol.ArtifactClassified{Repository: "/srv/demo.fossil", Hash: "bbbbbbbbbb", Run: &run, Arrival: true},
		protocol.StartActor{Addr: addr}.String(), "tell "+addr.String()+": "+run.Event.String(), "read the deliveries of /srv/demo.fossil")
	// A check-in that is no arrival (a wiki page, say) asks for nothing.
	step(post("cccccccccc"), "classify /srv/demo.fossil cccccccccc")
	step(protocol.ArtifactClassified{Repository: "/srv/demo.fossil", Hash: "cccccccccc", Nothing: "a wiki page"})
	// What the run engine read goes to the run's actor.
	d := protocol.RunDelivered{Delivery: protocol.RunDelivery{Hash: "dddddddddd"}}
	step(protocol.DeliveriesRead{Routed: []protocol.RunRouted{{Run: "R0run00000", Event: d}}}, "tell "+addr.String()+": "+d.String())
}

// TestNodeCoreActsInTheOrderOfItsLines: posts are acted on in the order
// their lines were read, the server's, whatever order their
// classifications come back in: the runs they bring reach their actors in
// that order (seed 004 section 10, D72). A duplicate line classifies
// nothing again.
func TestNodeCoreActsInTheOrderOfItsLines(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := newNodeCore(Config{})
		c.Start(time.Time{})
		n := rapid.IntRange(1, 12).Draw(t, "posts")
		var hashes []string
		for i := range n {
			hashes = append(hashes, strings.Repeat(string(rune('a'+i)), 10))
		}
		var started []string
		var inFlight []string
		record := func(effs []protocol.DaemonEffect) {
			for _, e := range effs {
				switch e := e.(type) {
				case protocol.ClassifyArtifact:
					inFlight = append(inFlight, e.Hash)
				case protocol.StartActor:
					if e.Addr.Kind == protocol.ActorRun {
						started = append(started, e.Addr.Run)
					}
				}
			}
		}
		read, answered := 0, 0
		for answered < n {
			if read < n && (len(inFlight) == 0 || rapid.Bool().Draw(t, "read")) {
				h := hashes[read]
				read++
				record(c.Step(time.Time{}, protocol.LineRead{Line: pipe.PostLine{Repository: "/srv/demo.fossil", Hash: h}}))
				if rapid.Bool().Draw(t, "again") {
					before := len(inFlight)
					record(c.Step(time.Time{}, protocol.LineRead{Line: pipe.PostLine{Repository: "/srv/demo.fossil", Hash: h}}))
					if len(inFlight) != before {
						t.Fatalf("a post read twice is classified twice")
					}
				}
				continue
			}
			i := rapid.IntRange(0, len(inFlight)-1).Draw(t, "which")
			h := inFlight[i]
			inFlight = append(inFlight[:i], inFlight[i+1:]...)
			run := "R" + h[1:]
			m := protocol.ArtifactClassified{Repository: "/srv/demo.fossil", Hash: h, Arrival: true,
				Run: &protocol.RunRouted{Run: run, Event: protocol.RunArrived{Facts: protocol.RunFacts{Hash: run}}}}
			if rapid.IntRange(0, 4).Draw(t, "kind") == 0 {
				m.Run, m.Nothing = nil, "a plain post"
			}
			answered++
			record(c.Step(time.Time{}, m))
		}
		// The runs started, in the order of their lines.
		var want []string
		for _, h := range hashes {
			want = append(want, "R"+h[1:])
		}
		for i, j := 0, 0; i < len(started); i++ {
			for j < len(want) && want[j] != started[i] {
				j++
			}
			if j == len(want) {
				t.Fatalf("runs started in the order %v, their posts were read %v", started, want)
			}
		}
		if len(c.order) != 0 || len(c.early) != 0 || len(c.classifying) != 0 {
			t.Fatalf("every post answered, and the node still holds %d in order, %d early", len(c.order), len(c.early))
		}
	})
}

// TestNodeCoreRestoresTheRunsFoundLater: a node on another host finds its
// runs in care once its clone is fresh (RunsFound, D72): each gets its
// actor from the state found, one found lost is told so, and the
// deliveries are read; a run whose actor runs already keeps it.
func TestNodeCoreRestoresTheRunsFoundLater(t *testing.T) {
	c := newNodeCore(Config{})
	c.Start(time.Time{})
	c.Step(time.Time{}, protocol.Boot{})
	running := protocol.RunRouted{Run: "R1run00000", Event: protocol.RunArrived{Facts: protocol.RunFacts{Hash: "R1run00000"}}}
	c.Step(time.Time{}, running)
	held := protocol.RunActorState{Facts: protocol.RunFacts{Hash: "R2run00000"}, StartedCounts: true, InCare: true, Alive: true, Proc: 1}
	lost := protocol.RunActorState{Facts: protocol.RunFacts{Hash: "R3run00000"}, StartedCounts: true, Lost: "its holder is gone"}
	again := protocol.RunActorState{Facts: protocol.RunFacts{Hash: "R1run00000"}, InCare: true}
	var got []string
	for _, e := range c.Step(time.Time{}, protocol.RunsFound{Project: "demo", Runs: []protocol.RunActorState{held, lost, again}}) {
		switch e := e.(type) {
		case protocol.StartActor:
			got = append(got, "start "+e.Addr.String()+fmt.Sprintf(" restored=%v", e.Run != nil))
		case protocol.Tell:
			got = append(got, "tell "+e.To.String()+": "+e.Msg.String())
		case protocol.ReadDeliveries:
			got = append(got, e.String())
		}
	}
	want := []string{
		"start " + protocol.RunAddr("R2run00000").String() + " restored=true",
		"start " + protocol.RunAddr("R3run00000").String() + " restored=true",
		"tell " + protocol.RunAddr("R3run00000").String() + ": " + protocol.RunNotInCare{Note: "its holder is gone"}.String(),
		"read the deliveries of every repository",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("--- got\n%s\n--- want\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestNodeCoreBootFindsTheGone (D76): at start the node reads the launch
// of every `workspace serve` found, and of every spawned record whose
// session runs no more (neither the process it names nor a serve of its
// launch is found), each once; it hands the workspace a session that ended
// while no daemon ran only for a spawned record, once its launch reads, and
// never one that runs on; its launch is then handled (a post of it is a
// duplicate).
func TestNodeCoreBootFindsTheGone(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := newNodeCore(Config{})
		now := time.Unix(1_000_000, 0)
		var found []protocol.ProcInfo
		var spawned []protocol.Spawned
		running := map[string]bool{} // launches whose session runs on
		serving := map[string]bool{} // launches a found serve serves
		pid := 600
		for i := rapid.IntRange(0, 6).Draw(t, "sessions"); i > 0; i-- {
			pid++
			w := rapid.SampledFrom(nodeWs).Draw(t, "w")
			l := testHash(pid)
			proc := protocol.ProcID{PID: pid, Start: 4000}
			switch rapid.IntRange(0, 4).Draw(t, "kind") {
			case 0: // a serve found, no spawned record (an older daemon's)
				found = append(found, protocol.ProcInfo{Proc: proc, Workspace: w, Verb: "serve", Launch: l})
				serving[l], running[l] = true, true
			case 1: // a serve found, the record naming its sandbox's bwrap
				found = append(found, protocol.ProcInfo{Proc: proc, Workspace: w, Verb: "serve", Launch: l})
				spawned = append(spawned, protocol.Spawned{Workspace: w, Launch: l, Proc: protocol.ProcID{PID: pid + 1000, Start: 4000}})
				serving[l], running[l] = true, true
			case 2: // the process the record names runs on, no serve
				found = append(found, protocol.ProcInfo{Proc: proc, Workspace: w, Verb: "bind"})
				spawned = append(spawned, protocol.Spawned{Workspace: w, Launch: l, Proc: proc})
				running[l] = true
			case 3: // gone; its PID reused by a terminal session now
				found = append(found, protocol.ProcInfo{Proc: protocol.ProcID{PID: pid, Start: 9000}, Workspace: w, Verb: "run"})
				spawned = append(spawned, protocol.Spawned{Workspace: w, Launch: l, Proc: proc})
			default: // gone
				spawned = append(spawned, protocol.Spawned{Workspace: w, Launch: l, Proc: proc})
			}
		}
		if len(spawned) > 0 && rapid.Bool().Draw(t, "twice") {
			spawned = append(spawned, rapid.SampledFrom(spawned).Draw(t, "again"))
		}
		rapid.Permutation(spawned).Draw(t, "order")

		resolving := map[string]protocol.ResolveLaunch{}
		adopted := map[string]int{}
		step := func(msg protocol.DaemonMessage) {
			for _, e := range c.Step(now, msg) {
				switch e := e.(type) {
				case protocol.ResolveLaunch:
					l := e.Proc.Launch
					if _, twice := resolving[l]; twice {
						t.Fatalf("launch %s read twice", l)
					}
					if e.Gone == running[l] {
						t.Fatalf("launch %s read as gone %v, but its session runs on: %v", l, e.Gone, running[l])
					}
					if !e.Gone && !serving[l] {
						t.Fatalf("launch %s read for a process that serves nothing", l)
					}
					resolving[l] = e
				case protocol.Tell:
					if a, ok := e.Msg.(protocol.AdoptSession); ok {
						adopted[a.Launch.Hash]++
						if a.Gone != !running[a.Launch.Hash] || a.Proc.Workspace != e.To.Workspace {
							t.Fatalf("adopted %s to %s; its session runs on: %v", a, e.To, running[a.Launch.Hash])
						}
					}
				case protocol.ClassifyArtifact:
					t.Fatalf("a launch handled at start classified again: %s", e)
				}
			}
		}
		step(protocol.Boot{Found: found, Spawned: spawned})
		for l := range serving {
			if _, ok := resolving[l]; !ok {
				t.Fatalf("the serve of %s is not read", l)
			}
		}
		for _, s := range spawned {
			if _, ok := resolving[s.Launch]; !ok && !running[s.Launch] {
				t.Fatalf("the spawned record of %s, gone, is not read", s.Launch)
			}
		}
		reads := make([]string, 0, len(resolving))
		for l := range resolving {
			reads = append(reads, l)
		}
		sort.Strings(reads)
		ok := map[string]bool{}
		for _, l := range rapid.Permutation(reads).Draw(t, "answers") {
			e := resolving[l]
			if rapid.IntRange(0, 3).Draw(t, "fails") == 0 {
				step(protocol.LaunchResolved{Proc: e.Proc, Gone: e.Gone, Err: errors.New("no such artifact")})
				continue
			}
			spec := testLaunch(0, false)
			spec.Hash, spec.Workspace = l, e.Proc.Workspace
			ok[l] = true
			step(protocol.LaunchResolved{Proc: e.Proc, Launch: &spec, Gone: e.Gone})
		}
		for _, l := range reads {
			if want := boolInt(ok[l]); adopted[l] != want {
				t.Fatalf("launch %s handed to its workspace %d times, want %d", l, adopted[l], want)
			}
			if ok[l] {
				step(protocol.LineRead{Line: pipe.PostLine{Repository: "/srv/demo.fossil", Hash: l}})
			}
		}
	})
}

// TestNodeCoreGivesRunsTheirTurns (D86): the node keeps the place of a run
// its classification found to begin, holds the slot of a run found in care
// whose started counts, and answers the runs' asks from that state: a run
// after one not yet started waits, its user's run before it holds the slot.
func TestNodeCoreGivesRunsTheirTurns(t *testing.T) {
	c := newNodeCore(Config{})
	c.Start(time.Time{})
	at := func(n int64) protocol.RunPosition { return protocol.RunPosition{Receipt: n, Row: 1} }
	held := protocol.RunActorState{Facts: protocol.RunFacts{Hash: "R0run00000", Slot: "ana"}, StartedCounts: true, InCare: true, Alive: true, Proc: 1}
	c.Step(time.Time{}, protocol.Boot{Runs: []protocol.RunActorState{held}})
	for i, h := range []string{"R1run00000", "R2run00000"} {
		c.Step(time.Time{}, protocol.LineRead{Line: pipe.PostLine{Repository: "/r/demo.fossil", Hash: h}})
		f := protocol.RunFacts{Hash: h, Project: "demo", At: at(int64(i + 1)), Slot: "ana"}
		c.Step(time.Time{}, protocol.ArtifactClassified{Repository: "/r/demo.fossil", Hash: h,
			Run: &protocol.RunRouted{Run: h, Event: protocol.RunArrived{Facts: f, InOrder: true}}})
	}
	turns := func(m protocol.DaemonMessage) []string {
		var got []string
		for _, e := range c.Step(time.Time{}, m) {
			switch e := e.(type) {
			case protocol.Tell:
				got = append(got, e.To.String()+": "+e.Msg.String())
			case protocol.RunStartTimer:
				got = append(got, e.String())
			}
		}
		return got
	}
	ask := func(run, turn string, n int64) protocol.RunTurnRequested {
		return protocol.RunTurnRequested{Run: run, Turn: turn, Project: "demo", At: at(n), User: "ana"}
	}
	for _, step := range []struct {
		msg  protocol.DaemonMessage
		want []string
	}{
		{ask("R2run00000", protocol.RunTurnStarted, 2), []string{"start timer order R2run00000 #1 30s"}},
		// R0 holds ana's slot: R1 waits for it, and R2 after it goes on.
		{ask("R1run00000", protocol.RunTurnSlot, 1), []string{"run R2run00000: turn started given"}},
		{protocol.RunTurnDone{Run: "R0run00000", Turn: protocol.RunTurnSlot}, []string{"run R1run00000: turn slot given"}},
	} {
		if got := turns(step.msg); strings.Join(got, "\n") != strings.Join(step.want, "\n") {
			t.Fatalf("%s:\n--- got\n%s\n--- want\n%s", step.msg, strings.Join(got, "\n"), strings.Join(step.want, "\n"))
		}
	}
}
