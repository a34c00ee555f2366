package actors

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// TestChildNamesRoundTrip: a shell names each child by its address and
// reads the address back from the name when the child stops; every address a
// core can start comes back the same, branch names with slashes and spaces
// included.
func TestChildNamesRoundTrip(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		name := rapid.StringMatching(`[A-Za-z0-9][A-Za-z0-9._-]{0,20}`)
		w := messages.WorkspaceKey{Login: name.Draw(rt, "login"), Project: name.Draw(rt, "project")}
		node := &shell{core: newNodeCore(Config{})}
		ws := &shell{core: newWorkspaceCore(Config{}, protocol.WorkspaceState{Workspace: w})}
		addrs := []struct {
			parent *shell
			a      protocol.ActorAddr
		}{
			{node, protocol.WorkspaceAddr(w)},
			{ws, protocol.SessionAddr(w, protocol.ProcID{PID: rapid.IntRange(1, 1<<22).Draw(rt, "pid"), Start: rapid.Uint64().Draw(rt, "start")})},
			{ws, protocol.BranchAddr(w, rapid.StringN(1, 40, -1).Draw(rt, "branch"))},
		}
		for _, c := range addrs {
			n := childName(c.a)
			got, ok := c.parent.childAddr(n)
			if !ok || got != c.a {
				rt.Fatalf("%s named %q reads back as %s (%v)", c.a, n, got, ok)
			}
		}
	})
}

// TestIdleWorkspaceHoldsNoMaps: a workspace that never had a session, a
// listener or a launch holds no map, even after a stop scanned its table;
// its maps come when first needed.
func TestIdleWorkspaceHoldsNoMaps(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	c := newWorkspaceCore(Config{}, protocol.WorkspaceState{Workspace: wsAna})
	c.Start(now)
	c.Step(now, protocol.StopWorkspace{Workspace: wsAna})
	c.Step(now, protocol.WorkspaceScanned{Workspace: wsAna, Purpose: protocol.ScanForStop})
	if c.sessions != nil || c.branches != nil || c.deferred != nil || c.stopping != nil || c.launches.set != nil || c.restored != nil {
		t.Errorf("an idle workspace holds maps: sessions %v branches %v deferred %v stopping %v launches %v restored %v",
			c.sessions, c.branches, c.deferred, c.stopping, c.launches.set, c.restored)
	}
	if !c.Quiescent() {
		t.Errorf("an idle workspace waits for a result")
	}
	// A launch makes the maps it needs.
	l := protocol.LaunchSpec{Hash: testHash(1), Repository: treeRep, Workspace: wsAna, Record: testHash(2), Lifetime: messages.Stays}
	c.Step(now, protocol.LaunchRequested{Launch: l})
	c.Step(now, protocol.WorkspaceScanned{Workspace: wsAna, Purpose: protocol.ScanForLaunch, For: l.Hash})
	c.Step(now, protocol.SessionSpawned{Launch: l.Hash, Proc: protocol.ProcID{PID: 42, Start: 7}})
	if len(c.sessions) != 1 || !c.launches.has(l.Hash) {
		t.Errorf("after a launch: sessions %v, launch remembered %v", c.sessions, c.launches.has(l.Hash))
	}
}

// TestWorkersBoundAndOrder: the tree's workers never run more at once than
// their bound; one worker runs what is submitted in order; and they end when
// nothing is left (goleak, over the package, would see one that did not).
func TestWorkersBoundAndOrder(t *testing.T) {
	for _, bound := range []int{1, 3} {
		w := &workers{max: bound}
		const jobs = 50
		var mu sync.Mutex
		var order []int
		running, most := 0, 0
		release := make(chan struct{})
		var done sync.WaitGroup
		done.Add(jobs)
		for i := 0; i < jobs; i++ {
			w.submit(func() {
				defer done.Done()
				mu.Lock()
				order = append(order, i)
				running++
				most = max(most, running)
				mu.Unlock()
				<-release
				mu.Lock()
				running--
				mu.Unlock()
			})
		}
		close(release)
		done.Wait()
		if most > bound || most < 1 {
			t.Errorf("bound %d: %d ran at once", bound, most)
		}
		if len(order) != jobs {
			t.Errorf("bound %d: %d of %d jobs ran", bound, len(order), jobs)
		}
		if bound == 1 {
			for i, j := range order {
				if i != j {
					t.Fatalf("one worker started job %d %dth: %v", j, i, order)
				}
			}
		}
		for {
			w.mu.Lock()
			n, q := w.running, w.queue
			w.mu.Unlock()
			if n == 0 {
				if q != nil {
					t.Errorf("bound %d: an idle pool keeps its queue (capacity %d)", bound, cap(q))
				}
				break
			}
			runtime.Gosched()
		}
	}
}
