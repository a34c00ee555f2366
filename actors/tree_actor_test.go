package actors

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
	"github.com/ocx-go/ocx/messages/protocol"
)

// liveTree is the actor tree on a real protoactor system.
type liveTree struct {
	sys   *actor.ActorSystem
	node  *actor.PID
	sub   *eventstream.Subscription
	world *fakeWorld

	mu   sync.Mutex
	dead []string
}

type fatalf interface {
	Fatalf(format string, args ...any)
	Helper()
}

// startTree makes a fresh actor system (its dead-letter throttle short, so its
// goroutine ends within goleak's patience), counts dead letters, spawns the
// node on the fake world and sends it first.
func startTree(t fatalf, f *fakeWorld, cfg Config, first protocol.DaemonMessage) *liveTree {
	t.Helper()
	return startTreeLogging(t, f, cfg, first, slog.New(slog.DiscardHandler))
}

// startTreeLogging is startTree with the tree's logger given.
func startTreeLogging(t fatalf, f *fakeWorld, cfg Config, first protocol.DaemonMessage, logger *slog.Logger) *liveTree {
	t.Helper()
	lt := &liveTree{sys: NewSystem(logger, actor.WithDeadLetterThrottleInterval(10*time.Millisecond)), world: f}
	lt.sub = lt.sys.EventStream.Subscribe(func(evt any) {
		if d, ok := evt.(*actor.DeadLetterEvent); ok {
			lt.mu.Lock()
			lt.dead = append(lt.dead, d.PID.String()+": "+describe(d.Message))
			lt.mu.Unlock()
		}
	})
	deps := f.deps()
	deps.Logger = logger
	node, err := StartNode(lt.sys, deps, cfg)
	if err != nil {
		t.Fatalf("start the node: %v", err)
	}
	if !node.Equal(NodePID(lt.sys)) {
		t.Fatalf("the node spawned at %s, not at NodePID's %s", node, NodePID(lt.sys))
	}
	lt.node = node
	f.mu.Lock()
	f.toNode = func(m protocol.DaemonMessage) { lt.sys.Root.Send(node, m) }
	f.mu.Unlock()
	lt.sys.Root.Send(node, first)
	return lt
}

func describe(m any) string {
	if s, ok := m.(interface{ String() string }); ok {
		return s.String()
	}
	return "a message"
}

func (lt *liveTree) send(m protocol.DaemonMessage) { lt.sys.Root.Send(lt.node, m) }

// snapshot is the barrier: the node answers once every actor has settled.
func (lt *liveTree) snapshot(t fatalf) protocol.Handoff {
	t.Helper()
	h, err := Snapshot(lt.sys, lt.node, 10*time.Second)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	lt.checkDead(t)
	return h
}

func (lt *liveTree) checkDead(t fatalf) {
	t.Helper()
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if len(lt.dead) > 0 {
		t.Fatalf("dead letters: %v", lt.dead)
	}
}

// stop poisons the tree, waits for it, and shuts the system down. Stopping
// the daemon signals no session: they outlive it.
func (lt *liveTree) stop(t fatalf) {
	t.Helper()
	signals := func() int {
		if lt.world == nil {
			return 0
		}
		lt.world.mu.Lock()
		defer lt.world.mu.Unlock()
		return len(lt.world.signals)
	}
	before := signals()
	if err := StopNode(lt.sys, lt.node); err != nil {
		t.Fatalf("stop the tree: %v", err)
	}
	if after := signals(); after != before {
		t.Fatalf("stopping the daemon sent %d signals to its sessions", after-before)
	}
	lt.sys.EventStream.Unsubscribe(lt.sub)
	lt.sys.Shutdown()
	lt.checkDead(t)
}

// settledOn waits until the tree has seen process p end: a watch's result
// comes on its own time, so the barrier is a snapshot asked again until p is
// no longer a running session in it (snapshots only, never a sleep).
func (lt *liveTree) settledOn(t fatalf, p protocol.ProcID) {
	t.Helper()
	for i := 0; i < 100000; i++ {
		h := lt.snapshot(t)
		running := false
		for _, w := range h.Workspaces {
			for _, s := range w.Sessions {
				if s.Proc == p && !s.Ended {
					running = true
				}
			}
		}
		if !running {
			return
		}
	}
	t.Fatalf("the tree never saw %s end", p)
}

func childrenOf(f *fakeWorld) []protocol.ProcID {
	f.mu.Lock()
	defer f.mu.Unlock()
	zombie := map[protocol.ProcID]bool{}
	for _, z := range f.zombies {
		zombie[z.Proc] = true
	}
	var out []protocol.ProcID
	for _, p := range f.procs {
		if p.origin == messages.OriginDaemon && (p.alive || zombie[p.id]) {
			out = append(out, p.id)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

func sameProcs(a, b []protocol.ProcID) bool {
	return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b))
}

// TestTreeOnActors runs the same stories as TestTreeProperties on the real
// shells and a real protoactor system, with a fresh system per check, the
// fakes answering at once, and a snapshot (RequestFuture) as the only barrier:
// never a sleep. A re-exec restarts the tree from its hand-off in a new
// system, which must know the same children.
func TestTreeOnActors(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		f := newFakeWorld()
		cfg := Config{Grace: 10 * time.Second, RetryAfter: time.Second, EndAttempts: 1000}
		var found []protocol.ProcInfo
		for i := rapid.IntRange(0, 2).Draw(rt, "orphans"); i > 0; i-- {
			found = append(found, f.orphan(rapid.SampledFrom(treeWs).Draw(rt, "w")))
		}
		lt := startTree(rt, f, cfg, protocol.Boot{Found: found})
		defer func() { lt.stop(rt) }()
		post := func(h string) {
			lt.send(protocol.LineRead{Line: pipe.PostLine{Repository: treeRep, Hash: h}})
		}

		// seenGone are the adopted processes whose end the tree was seen to
		// take. The end of one comes through its watch on its own time; the
		// barrier waits for it once the process is gone and no re-exec
		// freezes its session, since it can set off more (a listener's launch).
		seenGone := map[protocol.ProcID]bool{}
		settleOrphans := func(rt *rapid.T) bool {
			if f.isPaused() {
				return false
			}
			fresh := false
			for _, p := range f.orphans() {
				f.mu.Lock()
				alive := f.procs[p].alive
				f.mu.Unlock()
				if !alive && !seenGone[p] {
					lt.settledOn(rt, p)
					seenGone[p], fresh = true, true
				}
			}
			return fresh
		}
		var history []string
		note := func(format string, args ...any) { history = append(history, fmt.Sprintf(format, args...)) }
		check := func(rt *rapid.T) {
			settleOrphans(rt)
			h := lt.snapshot(rt)
			// A re-exec under way goes on after the snapshot (its exec, and
			// on failure the resume, come from the node's own goroutines), so
			// the barrier is asked again until it has exec'd or resumed.
			for j := 0; f.isPaused() && !f.hasHandoff(); j++ {
				if j > 100000 {
					rt.Fatalf("the re-exec never reached its exec")
				}
				h = lt.snapshot(rt)
			}
			h = lt.snapshot(rt)
			f.mu.Lock()
			for hash, n := range f.refusals {
				if n > 1 || n+f.spawns[hash] > 1 {
					f.mu.Unlock()
					rt.Fatalf("launch %s: %d refusals, %d spawns", hash, n, f.spawns[hash])
				}
			}
			live := map[messages.WorkspaceKey]int{}
			for _, p := range f.procs {
				if p.alive && p.origin == messages.OriginDaemon {
					live[p.w]++
				}
			}
			f.mu.Unlock()
			for w, n := range live {
				if n > 1 {
					rt.Fatalf("%d sessions of the daemon's in %s", n, w)
				}
			}
			if got, want := h.Children(), childrenOf(f); !sameProcs(got, want) {
				f.mu.Lock()
				var ps []string
				for _, p := range f.procs {
					ps = append(ps, fmt.Sprintf("%s %s %s alive=%v", p.id, p.w, p.origin, p.alive))
				}
				zs := fmt.Sprint(f.zombies)
				flog := strings.Join(f.log, "\n")
				f.mu.Unlock()
				rt.Fatalf("the tree knows the children %v, the world has %v\nsnapshot: %s\nworld: %v\nzombies: %s\nhistory:\n%s\nfake:\n%s", got, want, h.Summary(), ps, zs, strings.Join(history, "\n"), flog)
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"postLaunch": func(rt *rapid.T) {
				note("postLaunch")
				k := rapid.SampledFrom(treeWs).Draw(rt, "w")
				f.mu.Lock()
				l := protocol.LaunchSpec{Hash: f.hash(), Repository: treeRep, Workspace: k, Record: testHash(8001), Lifetime: messages.Stays}
				f.launches[l.Hash] = l
				f.mu.Unlock()
				post(l.Hash)
				if rapid.Bool().Draw(rt, "twice") {
					post(l.Hash) // the hook and the console both hand it
				}
			},
			"checkin": func(rt *rapid.T) {
				note("checkin")
				b := rapid.SampledFrom([]string{"trunk", "dev"}).Draw(rt, "branch")
				f.mu.Lock()
				h := f.hash()
				f.checkins[h] = b
				if b == "trunk" {
					f.order = append(f.order, h)
				}
				f.mu.Unlock()
				post(h)
			},
			"stop": func(rt *rapid.T) {
				note("stop")
				k := rapid.SampledFrom(treeWs).Draw(rt, "w")
				lt.send(protocol.LineRead{Line: pipe.StopLine{Login: k.Login, Project: k.Project}})
			},
			"exit": func(rt *rapid.T) {
				note("exit")
				f.mu.Lock()
				var live []protocol.ProcID
				for _, p := range f.procs {
					if p.alive {
						live = append(live, p.id)
					}
				}
				f.mu.Unlock()
				if len(live) == 0 {
					rt.Skip("nothing runs")
				}
				sort.Slice(live, func(i, j int) bool { return live[i].PID < live[j].PID })
				p := rapid.SampledFrom(live).Draw(rt, "proc")
				note("  %s exits", p)
				f.exit(p, rapid.Bool().Draw(rt, "leftResult"))
			},
			"fire": func(rt *rapid.T) {
				note("fire")
				if !f.clock.fire(rapid.IntRange(0, 5).Draw(rt, "timer")) {
					rt.Skip("no timer armed")
				}
			},
			"fail": func(rt *rapid.T) {
				note("fail")
				f.mu.Lock()
				f.failNext[rapid.SampledFrom([]string{"classify", "scan", "spawn", "end", "untested"}).Draw(rt, "what")] = true
				f.mu.Unlock()
			},
			"reexec": func(rt *rapid.T) {
				note("reexec")
				f.mu.Lock()
				f.execFails = rapid.IntRange(0, 3).Draw(rt, "execFails") == 0
				f.mu.Unlock()
				lt.send(protocol.LineRead{Line: pipe.ReexecLine{}})
			},
			"exec": func(rt *rapid.T) {
				f.mu.Lock()
				if len(f.handoffs) == 0 {
					f.mu.Unlock()
					rt.Skip("no exec asked")
				}
				h := f.handoffs[len(f.handoffs)-1]
				f.handoffs = nil
				f.mu.Unlock()
				b, err := protocol.EncodeHandoff(h)
				if err != nil {
					rt.Fatalf("encode: %v", err)
				}
				h2, err := protocol.DecodeHandoff(b)
				if err != nil {
					rt.Fatalf("decode: %v", err)
				}
				note("exec from %s", h.Summary())
				lt.stop(rt)
				lt = startTree(rt, f, cfg, protocol.Restore{Handoff: h2})
				// The new image knows every child the old one handed off (the
				// lines handed off with them may start more).
				after := lt.snapshot(rt)
				known := map[protocol.ProcID]bool{}
				for _, c := range after.Children() {
					known[c] = true
				}
				for _, c := range h.Children() {
					if !known[c] {
						rt.Fatalf("after the re-exec the tree knows %v, not the hand-off's child %s", after.Children(), c)
					}
				}
				// The new image's reaper reaps what died during the exec.
				if err := f.Resume(context.Background(), nil); err != nil {
					rt.Fatal(err)
				}
			},
			"": check,
		})

		// Settle: every session exits (CI runs leave a result), timers fire,
		// until nothing runs; then each launched process has exactly one end
		// note. A re-exec still under way is finished first.
		for i := 0; ; i++ {
			if i > 200 {
				rt.Fatalf("the tree does not settle")
			}
			// A re-exec under way: its exec comes from the node's own
			// goroutine, so snapshots are asked until it has come (or the
			// exec failed and the inputs resumed).
			for j := 0; f.isPaused() && !f.hasHandoff(); j++ {
				if j > 100000 {
					rt.Fatalf("the re-exec never reached its exec")
				}
				lt.snapshot(rt)
			}
			if f.hasHandoff() {
				// Finish the exec the same way the "exec" action does.
				f.mu.Lock()
				h := f.handoffs[len(f.handoffs)-1]
				f.handoffs = nil
				f.mu.Unlock()
				lt.stop(rt)
				lt = startTree(rt, f, cfg, protocol.Restore{Handoff: h})
				if err := f.Resume(context.Background(), nil); err != nil {
					rt.Fatal(err)
				}
			}
			check(rt)
			f.mu.Lock()
			var live []protocol.ProcID
			for _, p := range f.procs {
				if p.alive {
					live = append(live, p.id)
				}
			}
			f.mu.Unlock()
			if len(live) > 0 {
				f.exit(live[0], true)
				continue
			}
			// An adopted process's end comes through its watch, on its own
			// time (and only once no re-exec freezes its session); what it
			// sets off (a listener's launch) is looked at again.
			if settleOrphans(rt) {
				continue
			}
			if f.clock.fire(0) {
				continue
			}
			break
		}
		check(rt)
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, p := range f.procs {
			if p.origin == messages.OriginTerminal {
				continue
			}
			if n := f.endCalls[p.id]; n != 1 {
				rt.Fatalf("%s (%s) has %d end notes written\nhistory:\n%s\nfake:\n%s", p.id, p.origin, n, strings.Join(history, "\n"), strings.Join(f.log, "\n"))
			}
		}
	})
}
