package actors

import (
	"errors"
	"reflect"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
	"github.com/ocx-go/ocx/messages/protocol"
)

// The whole tree, on the simulator, against a model of the world: the record
// (launch notes, check-ins and their results), the process table (the
// daemon's children, orphans found at start, terminal sessions) and the
// reaper (paused around a re-exec, its exits then wait as zombies). The world
// answers every effect truthfully, now and then with a failure, in a random
// order, and the mailboxes are served in a random order too.

var (
	wsAna   = messages.WorkspaceKey{Login: "ana", Project: "demo"}
	wsCI    = messages.WorkspaceKey{Login: "ci", Project: "demo"}
	treeWs  = []messages.WorkspaceKey{wsAna, wsCI}
	treeRep = "/srv/demo.fossil"
)

type wproc struct {
	id        protocol.ProcID
	w         messages.WorkspaceKey
	origin    messages.Origin
	launch    protocol.LaunchSpec
	alive     bool
	delivered bool // its exit reached the tree (or its watch saw it gone)
	result    bool // a CI run left a result on its check-in
}

type world struct {
	t   *rapid.T
	s   *sim
	cfg Config

	procs   map[protocol.ProcID]*wproc
	nextPID int
	nextN   int

	launches map[string]protocol.LaunchSpec // launch notes on the record
	posted   []string                       // every hash posted, for duplicates
	checkins map[string]string              // check-in -> branch
	order    []string                       // trunk check-ins, oldest first
	tested   map[string]bool
	// reviewer: the trunk listener's runs leave a verdict (D42); own are
	// the trunk check-ins it may not judge (E6), which its queue skips.
	reviewer bool
	own      map[string]bool

	reaperPaused bool
	zombies      []protocol.ProcessExited
	handoff      *protocol.Handoff
	// spawned are the spawned records on the host (D76), by launch:
	// written once a spawn succeeds, removed with its end note.
	spawnedRec map[string]protocol.Spawned
	// ended are the launches whose end note is on the record; halfDone
	// those whose note a daemon killed before it removed the spawned
	// record wrote.
	ended    map[string]bool
	halfDone map[string]bool
	crashes  int

	// what happened, for the invariants
	delivered   map[string]bool // launch hashes that reached a workspace
	refusals    map[string]int
	spawned     map[string]int
	spawning    map[messages.WorkspaceKey]int
	endsOK      map[protocol.ProcID]int
	stopAsked   map[protocol.ProcID]bool
	writeLaunch int
	failures    bool
}

func newWorld(t *rapid.T, cfg Config) *world {
	w := &world{t: t, cfg: cfg, procs: map[protocol.ProcID]*wproc{}, nextPID: 700,
		launches: map[string]protocol.LaunchSpec{}, checkins: map[string]string{}, tested: map[string]bool{}, own: map[string]bool{},
		delivered: map[string]bool{}, refusals: map[string]int{}, spawned: map[string]int{},
		spawning: map[messages.WorkspaceKey]int{}, endsOK: map[protocol.ProcID]int{}, stopAsked: map[protocol.ProcID]bool{},
		spawnedRec: map[string]protocol.Spawned{}, ended: map[string]bool{}, halfDone: map[string]bool{}}
	w.s = w.newSim(time.Unix(1_000_000, 0))
	return w
}

func (w *world) newSim(now time.Time) *sim {
	s := newSim(w.cfg, now)
	s.pick = func(n int) int { return rapid.IntRange(0, n-1).Draw(w.t, "sched") }
	s.onEffect = w.observe
	s.onDeliver = func(to protocol.ActorAddr, m protocol.DaemonMessage) {
		switch m := m.(type) {
		case protocol.LaunchRequested:
			w.delivered[m.Launch.Hash] = true
		case protocol.LaunchCI:
			w.delivered[m.Launch.Hash] = true
		case protocol.StopSession:
			w.stopAsked[to.Proc] = true
		}
	}
	return s
}

func (w *world) hash() string {
	w.nextN++
	return testHash(w.nextN)
}

func (w *world) liveIn(k messages.WorkspaceKey) []protocol.ProcInfo {
	var ps []protocol.ProcInfo
	for _, p := range w.procs {
		if p.alive && p.w == k {
			ps = append(ps, protocol.ProcInfo{Proc: p.id, Workspace: k, Verb: "serve", Launch: p.launch.Hash, StartedBy: p.origin})
		}
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Proc.PID < ps[j].Proc.PID })
	return ps
}

func (w *world) newestUntested() string {
	for i := len(w.order) - 1; i >= 0; i-- {
		if !w.tested[w.order[i]] && !w.own[w.order[i]] {
			return w.order[i]
		}
	}
	return ""
}

// listener is the listener of a branch as the record names it: trunk's
// completes session (a reviewer or CI), dev's stays session.
func (w *world) listener(branch string) protocol.BranchListener {
	l := protocol.BranchListener{Workspace: wsCI, Repository: treeRep, Record: testHash(9001), ListenNote: testHash(9002), Lifetime: messages.Completes}
	if branch == "dev" {
		l.Lifetime = messages.Stays
	} else if w.reviewer {
		l.Result = messages.ResultVerdict
	}
	return l
}

// listeners are the branch listeners the wiring finds when a daemon starts.
func (w *world) listeners() []protocol.ListenedBranch {
	return []protocol.ListenedBranch{{Branch: "trunk", Listener: w.listener("trunk")}, {Branch: "dev", Listener: w.listener("dev")}}
}

// skipped are the trunk check-ins the listener may never judge.
func (w *world) skipped() []protocol.SkippedCheckin {
	var out []protocol.SkippedCheckin
	for _, h := range w.order {
		if w.own[h] {
			out = append(out, protocol.SkippedCheckin{Checkin: h, Why: "sent by the reviewer (E6)"})
		}
	}
	return out
}

// input sends a message to the node and delivers until nothing is queued.
func (w *world) input(m protocol.DaemonMessage) {
	w.t.Logf("input %s", m)
	w.s.input(m)
}

// observe checks each effect as the tree asks for it.
func (w *world) observe(from protocol.ActorAddr, e protocol.DaemonEffect) {
	t := w.t
	if _, ok := e.(protocol.Tell); !ok {
		t.Logf("  %s: %s", from, e)
	}
	switch e := e.(type) {
	case protocol.SpawnSession:
		k := e.Launch.Workspace
		if live := w.liveIn(k); len(live) > 0 {
			t.Fatalf("spawn of %s while %v names %s", e.Launch.Hash, live, k)
		}
		if w.spawning[k] > 0 {
			t.Fatalf("a second spawn in flight for %s", k)
		}
		if _, ok := w.launches[e.Launch.Hash]; !ok {
			t.Fatalf("spawn of a launch nobody wrote: %s", e.Launch.Hash)
		}
		if w.spawned[e.Launch.Hash] > 0 {
			t.Fatalf("launch %s spawned twice", e.Launch.Hash)
		}
		if e.Launch.Lifetime == messages.Stays && e.Launch.IsCI() {
			t.Fatalf("a CI launch of a stays session")
		}
		w.spawning[k]++
	case protocol.WriteRefusal:
		w.refusals[e.Launch.Hash]++
	case protocol.WriteEnd:
		p := w.procs[e.Proc]
		if p == nil || p.alive {
			t.Fatalf("an end note for a process that has not ended: %s", e)
		}
	case protocol.SignalProcess:
		if e.Signal == protocol.SigKILL && !w.stopAsked[e.Proc] {
			t.Fatalf("KILL to %s, which no stop was asked of", e.Proc)
		}
	case protocol.WriteLaunch:
		if w.tested[e.Checkin] {
			t.Fatalf("a launch for %s, which carries its result (a verdict) already", e.Checkin)
		}
		if w.own[e.Checkin] {
			t.Fatalf("a launch for %s, which the reviewer may not judge (E6)", e.Checkin)
		}
		if e.Checkin != w.newestUntested() {
			t.Fatalf("a CI launch for %s, but the newest untested is %s", e.Checkin, w.newestUntested())
		}
		w.writeLaunch++
	case protocol.Tell:
		if r, ok := e.Msg.(protocol.ReserveWorkspace); ok && r.Branch == "dev" {
			t.Fatalf("the listener of a stays session asked for its workspace")
		}
	case protocol.ExecRelease:
		h := e.Handoff
		w.handoff = &h
		var want []protocol.ProcID
		for _, p := range w.procs {
			if p.origin == messages.OriginDaemon && !p.delivered {
				want = append(want, p.id)
			}
		}
		sort.Slice(want, func(i, j int) bool { return want[i].PID < want[j].PID })
		if got := h.Children(); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("the hand-off's children %v, the world's %v", got, want)
		}
	}
}

// answer answers a pending effect as the world is now; fail makes a failing
// answer where the effect can fail. It reports whether it answered.
func (w *world) answer(p *pendingEffect, fail bool) bool {
	var err error
	if fail {
		err = errors.New("injected failure")
		w.failures = true
	}
	s := w.s
	var r protocol.DaemonMessage
	switch e := p.eff.(type) {
	case protocol.ClassifyArtifact:
		res := protocol.ArtifactClassified{Repository: e.Repository, Hash: e.Hash, Err: err}
		if err == nil {
			if l, ok := w.launches[e.Hash]; ok {
				res.Launch = &l
			} else if b, ok := w.checkins[e.Hash]; ok {
				c := protocol.CheckinSpec{Hash: e.Hash, Repository: treeRep, Branch: b}
				c.Listeners = []protocol.BranchListener{w.listener(b)}
				res.Checkin = &c
			} else {
				res.Nothing = "not a note of the daemon's"
			}
		}
		r = res
	case protocol.ResolveLaunch:
		l := w.launches[e.Proc.Launch]
		r = protocol.LaunchResolved{Proc: e.Proc, Launch: &l, Gone: e.Gone}
	case protocol.ScanWorkspace:
		res := protocol.WorkspaceScanned{Workspace: e.Workspace, Purpose: e.Purpose, For: e.For, Err: err}
		if err == nil {
			res.Procs = w.liveIn(e.Workspace)
		}
		r = res
	case protocol.SpawnSession:
		w.spawning[e.Launch.Workspace]--
		if err != nil {
			r = protocol.SessionSpawned{Launch: e.Launch.Hash, Err: err}
			break
		}
		w.nextPID++
		id := protocol.ProcID{PID: w.nextPID, Start: 5000}
		w.procs[id] = &wproc{id: id, w: e.Launch.Workspace, origin: messages.OriginDaemon, launch: e.Launch, alive: true}
		w.spawned[e.Launch.Hash]++
		w.spawnedRec[e.Launch.Hash] = protocol.Spawned{Workspace: e.Launch.Workspace, Launch: e.Launch.Hash, Proc: id}
		r = protocol.SessionSpawned{Launch: e.Launch.Hash, Proc: id, At: s.now}
	case protocol.SignalProcess:
		r = protocol.ProcessSignaled{Proc: e.Proc, Signal: e.Signal}
	case protocol.WriteRefusal:
		r = protocol.RefusalWritten{Launch: e.Launch.Hash}
	case protocol.WriteEnd:
		if err == nil {
			// As the writer: an end note of the launch on the record
			// already (D6, D76) is not written again.
			switch {
			case !w.ended[e.Launch.Hash]:
				w.endsOK[e.Proc]++
				w.ended[e.Launch.Hash] = true
			case !w.halfDone[e.Launch.Hash]:
				w.t.Fatalf("a second end written for launch %s, whose end is on the record: %s", e.Launch.Hash, e)
			}
			delete(w.halfDone, e.Launch.Hash)
			delete(w.spawnedRec, e.Launch.Hash)
		}
		r = protocol.EndWritten{Proc: e.Proc, Err: err}
	case protocol.ReadResult:
		pr := w.procs[e.Proc]
		r = protocol.ResultRead{Proc: e.Proc, Found: pr != nil && pr.result, Result: "green: ok", Err: err}
	case protocol.FindUntested:
		r = protocol.UntestedFound{Branch: e.Branch, Newest: w.newestUntested(), Skipped: w.skipped(), Err: err}
	case protocol.WriteLaunch:
		if err != nil {
			r = protocol.LaunchWritten{Branch: e.Branch, Checkin: e.Checkin, Err: err}
			break
		}
		l := protocol.LaunchSpec{Hash: w.hash(), Repository: treeRep, Workspace: e.Listener.Workspace, Record: e.Listener.Record,
			Lifetime: messages.Completes, Checkin: e.Checkin, Branch: e.Branch}
		w.launches[l.Hash] = l
		w.posted = append(w.posted, l.Hash)
		r = protocol.LaunchWritten{Branch: e.Branch, Checkin: e.Checkin, Launch: &l}
	case protocol.WatchProcess:
		pr := w.procs[e.Proc]
		if pr.alive {
			return false // it is not gone yet
		}
		pr.delivered = true
		r = protocol.ProcessGone{Proc: e.Proc, Seq: e.Seq, At: s.now}
	case protocol.WatchLimits:
		if pr := w.procs[e.Proc]; pr != nil && pr.alive {
			return false // within its limits while it runs
		}
		r = protocol.LimitReached{Proc: e.Proc, Seq: e.Seq, Err: errors.New("the cgroup is gone")}
	case protocol.CloseLimits:
		r = protocol.LimitsClosed{Proc: e.Proc}
	case protocol.ReadUsage:
		r = protocol.UsageRead{Proc: e.Proc}
	case protocol.PauseInputs:
		w.reaperPaused = true
		r = protocol.InputsPaused{}
	case protocol.ResumeInputs:
		w.reaperPaused = false
		r = protocol.InputsResumed{}
	case protocol.StartTimer:
		r = protocol.TimerFired{Proc: e.Proc, Purpose: e.Purpose, Seq: e.Seq}
	case protocol.ExecRelease:
		return w.exec(p, fail)
	default:
		w.t.Fatalf("no answer for %s", p.eff)
	}
	w.t.Logf("answer [%d] %s", p.id, r)
	if err := s.answer(p.id, r); err != nil {
		w.t.Fatal(err)
	}
	w.deliverZombies()
	return true
}

// exec answers an exec: a failure keeps the old image; a success starts a new
// tree from the hand-off, through its JSON form, and the reaper of the new
// image reaps what died during the exec.
func (w *world) exec(p *pendingEffect, fail bool) bool {
	if fail {
		if err := w.s.answer(p.id, protocol.ExecFailed{Err: errors.New("exec: no such file")}); err != nil {
			w.t.Fatal(err)
		}
		return true
	}
	h := p.eff.(protocol.ExecRelease).Handoff
	b, err := protocol.EncodeHandoff(h)
	if err != nil {
		w.t.Fatalf("encode the hand-off: %v", err)
	}
	h2, err := protocol.DecodeHandoff(b)
	if err != nil {
		w.t.Fatalf("decode the hand-off: %v", err)
	}
	old := w.s
	for k := range w.spawning {
		if w.spawning[k] != 0 {
			w.t.Fatalf("exec with a spawn in flight")
		}
	}
	w.s = w.newSim(old.now)
	w.s.nextID = old.nextID
	w.input(protocol.Restore{Handoff: h2, Listeners: w.listeners()})
	// The new image knows the same children.
	known := map[protocol.ProcID]bool{}
	for a, c := range w.s.cores {
		if sc, ok := c.(*sessionCore); ok && sc.st.Child && !sc.st.Ended {
			known[a.Proc] = true
		}
	}
	for _, c := range h.Children() {
		if !known[c] {
			w.t.Fatalf("the new image does not know child %s", c)
		}
	}
	if len(known) != len(h.Children()) {
		w.t.Fatalf("the new image knows %d children, the hand-off %d", len(known), len(h.Children()))
	}
	w.reaperPaused = false
	w.deliverZombies()
	return true
}

// crash kills the daemon with KILL: its pending effects are lost (an end
// note being written may be on the record, its spawned record not yet
// removed), its children go on as orphans, and each session ends, or not,
// while no daemon runs; then a new daemon starts with what it finds: the
// processes that run, and the spawned records (D76).
func (w *world) crash() {
	w.crashes++
	for _, p := range w.s.pending {
		if e, ok := p.eff.(protocol.WriteEnd); ok && !w.ended[e.Launch.Hash] && rapid.Bool().Draw(w.t, "noteWritten") {
			w.t.Logf("crash: the end of %s is on the record, its spawned record left", e.Launch.Hash)
			w.endsOK[e.Proc]++
			w.ended[e.Launch.Hash] = true
			w.halfDone[e.Launch.Hash] = true
		}
	}
	for k := range w.spawning {
		w.spawning[k] = 0
	}
	// A launch handed to a workspace that had not spawned it or refused
	// it yet is lost with the daemon (D76 records the end of what was
	// spawned); the hook hands the next daemon only what arrives after.
	for h := range w.delivered {
		if w.refusals[h]+w.spawned[h] == 0 {
			w.t.Logf("crash: launch %s is lost with the daemon", h)
			delete(w.delivered, h)
		}
	}
	w.posted = nil
	w.zombies, w.reaperPaused = nil, false // the dead stay dead, unreaped
	var ps []*wproc
	for _, p := range w.procs {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].id.PID < ps[j].id.PID })
	var found []protocol.ProcInfo
	for _, p := range ps {
		if p.origin == messages.OriginDaemon {
			p.origin = messages.OriginOrphan
		}
		if p.alive && p.origin != messages.OriginTerminal && rapid.Bool().Draw(w.t, "endsMeanwhile") {
			w.t.Logf("world: %s ends while no daemon runs", p.id)
			p.alive = false
			if p.launch.IsCI() && rapid.Bool().Draw(w.t, "leftResult") {
				w.tested[p.launch.Checkin] = true
				p.result = true
			}
		}
		switch {
		case !p.alive:
		case p.origin == messages.OriginTerminal:
			found = append(found, protocol.ProcInfo{Proc: p.id, Workspace: p.w, Verb: "run", StartedBy: messages.OriginTerminal})
		default:
			found = append(found, protocol.ProcInfo{Proc: p.id, Workspace: p.w, Verb: "serve", Launch: p.launch.Hash, StartedBy: messages.OriginOrphan})
		}
	}
	old := w.s
	w.s = w.newSim(old.now)
	w.s.nextID = old.nextID
	w.input(protocol.Boot{Found: found, Spawned: w.spawnedList(), Listeners: w.listeners()})
}

// spawnedList is the spawned records on the host, in the order of their
// launches.
func (w *world) spawnedList() []protocol.Spawned {
	var out []protocol.Spawned
	for _, s := range w.spawnedRec {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Launch < out[j].Launch })
	return out
}

func (w *world) deliverZombies() {
	if w.reaperPaused {
		return
	}
	for len(w.zombies) > 0 {
		z := w.zombies[0]
		w.zombies = w.zombies[1:]
		w.procs[z.Proc].delivered = true
		w.input(z)
	}
}

// exit ends a child (a CI run first leaves its result, or not).
func (w *world) exit(p *wproc, leftResult bool) {
	w.t.Logf("world: %s (%s) exits, left a result: %v", p.id, p.origin, leftResult)
	p.alive = false
	if p.launch.IsCI() && leftResult {
		w.tested[p.launch.Checkin] = true
		p.result = true
	}
	if p.origin != messages.OriginDaemon {
		return // its watch will see it gone
	}
	e := protocol.ProcessExited{Proc: p.id, Workspace: p.w, Status: messages.ExitStatus{State: messages.EndExited}, At: w.s.now}
	if w.reaperPaused {
		w.t.Logf("exit %s: a zombie until the reaper runs again", p.id)
		w.zombies = append(w.zombies, e)
		return
	}
	p.delivered = true
	w.input(e)
}

func (w *world) check() {
	t := w.t
	if len(w.s.deadLetters) > 0 {
		t.Fatalf("dead letters: %v", w.s.deadLetters)
	}
	for h, n := range w.refusals {
		if n > 1 || n+w.spawned[h] > 1 {
			t.Fatalf("launch %s: %d refusals, %d spawns", h, n, w.spawned[h])
		}
	}
	for p, n := range w.endsOK {
		if n > 1 {
			t.Fatalf("%d end notes for %s", n, p)
		}
	}
	for _, k := range treeWs {
		n := 0
		for _, p := range w.procs {
			if p.alive && p.w == k && p.origin == messages.OriginDaemon {
				n++
			}
		}
		if n > 1 {
			t.Fatalf("%d sessions of the daemon's run in %s", n, k)
		}
	}
}

// TestTreeProperties drives the whole tree on the simulator.
func TestTreeProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// Enough end-note attempts that a run's injected failures never
		// exhaust them; the memory of launches larger than any run.
		cfg := Config{Grace: 10 * time.Second, EndAttempts: 1000, RecentLaunches: 100000}
		w := newWorld(t, cfg)
		w.reviewer = rapid.Bool().Draw(t, "reviewer")

		// The daemon starts with what it finds: orphans of a previous daemon
		// (with the spawned records it wrote) and terminal sessions.
		var found []protocol.ProcInfo
		for i := rapid.IntRange(0, 2).Draw(t, "orphans"); i > 0; i-- {
			k := rapid.SampledFrom(treeWs).Draw(t, "w")
			l := protocol.LaunchSpec{Hash: w.hash(), Repository: treeRep, Workspace: k, Record: testHash(8000), Lifetime: messages.Stays}
			w.launches[l.Hash] = l
			w.nextPID++
			id := protocol.ProcID{PID: w.nextPID, Start: 4000}
			w.procs[id] = &wproc{id: id, w: k, origin: messages.OriginOrphan, launch: l, alive: true}
			w.spawnedRec[l.Hash] = protocol.Spawned{Workspace: k, Launch: l.Hash, Proc: id}
			found = append(found, protocol.ProcInfo{Proc: id, Workspace: k, Verb: "serve", Launch: l.Hash, StartedBy: messages.OriginOrphan})
		}
		w.input(protocol.Boot{Found: found, Spawned: w.spawnedList(), Listeners: w.listeners()})

		t.Repeat(map[string]func(*rapid.T){
			"postLaunch": func(t *rapid.T) {
				k := rapid.SampledFrom(treeWs).Draw(t, "w")
				l := protocol.LaunchSpec{Hash: w.hash(), Repository: treeRep, Workspace: k, Record: testHash(8001), Lifetime: rapid.SampledFrom([]messages.Lifetime{messages.Stays, messages.Completes}).Draw(t, "lifetime")}
				w.launches[l.Hash] = l
				w.posted = append(w.posted, l.Hash)
				w.input(protocol.LineRead{Line: pipe.PostLine{Repository: treeRep, Hash: l.Hash}})
			},
			"repost": func(t *rapid.T) {
				if len(w.posted) == 0 {
					t.Skip("nothing posted")
				}
				h := rapid.SampledFrom(w.posted).Draw(t, "hash")
				w.input(protocol.LineRead{Line: pipe.PostLine{Repository: treeRep, Hash: h}})
			},
			"checkin": func(t *rapid.T) {
				b := rapid.SampledFrom([]string{"trunk", "trunk", "dev"}).Draw(t, "branch")
				h := w.hash()
				w.checkins[h] = b
				if b == "trunk" {
					w.order = append(w.order, h)
					w.own[h] = w.reviewer && rapid.IntRange(0, 3).Draw(t, "own") == 0
				}
				w.posted = append(w.posted, h)
				w.input(protocol.LineRead{Line: pipe.PostLine{Repository: treeRep, Hash: h}})
			},
			// A check-in whose hook line never reaches the daemon (it
			// arrived while none ran): only a look at the queue finds it.
			"checkinUnheard": func(t *rapid.T) {
				h := w.hash()
				w.checkins[h] = "trunk"
				w.order = append(w.order, h)
			},
			"stop": func(t *rapid.T) {
				k := rapid.SampledFrom(treeWs).Draw(t, "w")
				w.input(protocol.LineRead{Line: pipe.StopLine{Login: k.Login, Project: k.Project}})
			},
			"terminal": func(t *rapid.T) {
				k := rapid.SampledFrom(treeWs).Draw(t, "w")
				w.nextPID++
				id := protocol.ProcID{PID: w.nextPID, Start: 6000}
				w.procs[id] = &wproc{id: id, w: k, origin: messages.OriginTerminal, alive: true, delivered: true}
			},
			"exit": func(t *rapid.T) {
				var live []*wproc
				for _, p := range w.procs {
					if p.alive {
						live = append(live, p)
					}
				}
				if len(live) == 0 {
					t.Skip("nothing runs")
				}
				sort.Slice(live, func(i, j int) bool { return live[i].id.PID < live[j].id.PID })
				p := rapid.SampledFrom(live).Draw(t, "proc")
				w.exit(p, rapid.Bool().Draw(t, "leftResult"))
			},
			"duplicateExit": func(t *rapid.T) {
				for _, p := range w.procs {
					if p.origin == messages.OriginDaemon && p.delivered && !w.reaperPaused {
						w.input(protocol.ProcessExited{Proc: p.id, Workspace: p.w, Status: messages.ExitStatus{State: messages.EndExited}, At: w.s.now})
						return
					}
				}
				t.Skip("no exit to repeat")
			},
			"answer": func(t *rapid.T) {
				if len(w.s.pending) == 0 {
					t.Skip("nothing pending")
				}
				p := rapid.SampledFrom(w.s.pending).Draw(t, "effect")
				if !w.answer(p, rapid.IntRange(0, 7).Draw(t, "fail") == 0) {
					t.Skip("not answerable yet")
				}
			},
			"advance": func(t *rapid.T) {
				w.s.now = w.s.now.Add(time.Duration(rapid.IntRange(1, 15).Draw(t, "secs")) * time.Second)
			},
			"reexec": func(t *rapid.T) {
				w.input(protocol.LineRead{Line: pipe.ReexecLine{}})
			},
			"crash": func(t *rapid.T) {
				if w.crashes >= 2 {
					t.Skip("two crashes are enough")
				}
				w.crash()
			},
			"": func(t *rapid.T) { w.check() },
		})

		// Settle: no new input but one fresh check-in; every terminal session
		// ends; every effect is answered successfully; every session exits
		// (CI runs leaving their result). Then every launch note that reached
		// a workspace has exactly one outcome, every session process exactly
		// one end note, and no check-in on the listened branch waits.
		settle := func() {
			for i := 0; ; i++ {
				if i > 5000 {
					t.Fatalf("the tree does not settle:\n%s", w.s.describe())
				}
				w.check()
				answered := false
				for _, p := range append([]*pendingEffect(nil), w.s.pending...) {
					if w.answer(p, false) {
						answered = true
						break
					}
				}
				if answered {
					continue
				}
				var live []*wproc
				for _, p := range w.procs {
					if p.alive {
						live = append(live, p)
					}
				}
				if len(live) == 0 {
					return
				}
				sort.Slice(live, func(i, j int) bool { return live[i].id.PID < live[j].id.PID })
				w.exit(live[0], true)
			}
		}
		settle()
		h := w.hash()
		w.checkins[h] = "trunk"
		w.order = append(w.order, h)
		w.input(protocol.LineRead{Line: pipe.PostLine{Repository: treeRep, Hash: h}})
		settle()

		for hash := range w.delivered {
			if n := w.refusals[hash] + w.spawned[hash]; n != 1 {
				t.Fatalf("launch %s reached a workspace and has %d outcomes", hash, n)
			}
		}
		for _, p := range w.procs {
			if p.origin == messages.OriginTerminal {
				continue
			}
			if w.endsOK[p.id] != 1 {
				t.Fatalf("%s (%s) has %d end notes", p.id, p.origin, w.endsOK[p.id])
			}
		}
		if left := w.spawnedList(); len(left) > 0 {
			t.Fatalf("spawned records left once every end is written: %v", left)
		}
		if u := w.newestUntested(); u != "" {
			t.Fatalf("check-in %s still waits on the listened branch after everything settled:\n%s", u, w.s.describe())
		}

		// The daemon stops; check-ins arrive while none runs (their hook
		// lines lost); a new daemon starts. Nothing was stored for the
		// queue: the new daemon derives it, launches for each check-in
		// that waits, and for none already judged (the launch check above).
		launchedBefore := w.writeLaunch
		unheard := rapid.IntRange(0, 3).Draw(t, "unheard")
		for range unheard {
			h := w.hash()
			w.checkins[h] = "trunk"
			w.order = append(w.order, h)
		}
		old := w.s
		w.s = w.newSim(old.now)
		w.s.nextID = old.nextID
		w.input(protocol.Boot{Spawned: w.spawnedList(), Listeners: w.listeners()})
		settle()
		if u := w.newestUntested(); u != "" {
			t.Fatalf("check-in %s, arrived while no daemon ran, still waits after the next daemon settled:\n%s", u, w.s.describe())
		}
		if got := w.writeLaunch - launchedBefore; got != unheard {
			t.Fatalf("the next daemon wrote %d launch notes for %d check-ins that arrived while none ran", got, unheard)
		}
	})
}
