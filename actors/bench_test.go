package actors

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
	"github.com/ocx-go/ocx/messages/protocol"
)

// BenchmarkCoresLaunchCycle measures the cores alone, on the simulator: one
// launch note from its post line to its end note (classify, scan, spawn, exit,
// end note), every effect answered at once.
func BenchmarkCoresLaunchCycle(b *testing.B) {
	s := newSim(Config{RecentHashes: 1 << 20, RecentLaunches: 1 << 20}, time.Unix(1_000_000, 0))
	pid := 1000
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		l := protocol.LaunchSpec{Hash: testHash(i), Repository: treeRep, Workspace: wsAna, Record: testHash(8001), Lifetime: messages.Stays}
		s.input(protocol.LineRead{Line: pipe.PostLine{Repository: treeRep, Hash: l.Hash}})
		pid++
		proc := protocol.ProcID{PID: pid, Start: 5000}
		for len(s.pending) > 0 {
			p := s.pending[0]
			var r protocol.DaemonMessage
			switch e := p.eff.(type) {
			case protocol.ClassifyArtifact:
				r = protocol.ArtifactClassified{Repository: e.Repository, Hash: e.Hash, Launch: &l}
			case protocol.ScanWorkspace:
				r = protocol.WorkspaceScanned{Workspace: e.Workspace, Purpose: e.Purpose, For: e.For}
			case protocol.SpawnSession:
				r = protocol.SessionSpawned{Launch: e.Launch.Hash, Proc: proc}
				if err := s.answer(p.id, r); err != nil {
					b.Fatal(err)
				}
				s.input(protocol.ProcessExited{Proc: proc, Workspace: wsAna, Status: messages.ExitStatus{State: messages.EndExited}})
				continue
			case protocol.WatchLimits:
				// Nothing goes past a limit here: the watch is never answered.
				s.remove(p.id)
				continue
			case protocol.CloseLimits:
				r = protocol.LimitsClosed{Proc: e.Proc}
			case protocol.ReadUsage:
				r = protocol.UsageRead{Proc: e.Proc}
			case protocol.WriteEnd:
				r = protocol.EndWritten{Proc: e.Proc}
			default:
				b.Fatalf("unexpected effect %s", p.eff)
			}
			if err := s.answer(p.id, r); err != nil {
				b.Fatal(err)
			}
		}
	}
	if len(s.deadLetters) > 0 {
		b.Fatalf("dead letters: %v", s.deadLetters)
	}
}

// BenchmarkActorsLaunchCycle measures the same cycle through the real shells
// on protoactor, with the fakes answering at once: a launch note posted, its
// session spawned, exited and recorded, a snapshot as the barrier.
func BenchmarkActorsLaunchCycle(b *testing.B) {
	f := newFakeWorld()
	lt := startTree(b, f, Config{RecentHashes: 1 << 20, RecentLaunches: 1 << 20}, protocol.Boot{})
	defer lt.stop(b)
	b.ReportAllocs()
	for b.Loop() {
		f.mu.Lock()
		l := protocol.LaunchSpec{Hash: f.hash(), Repository: treeRep, Workspace: wsAna, Record: testHash(8001), Lifetime: messages.Stays}
		f.launches[l.Hash] = l
		f.mu.Unlock()
		lt.send(protocol.LineRead{Line: pipe.PostLine{Repository: treeRep, Hash: l.Hash}})
		h := lt.snapshot(b)
		children := h.Children()
		if len(children) != 1 {
			b.Fatalf("%d children after a launch", len(children))
		}
		f.exit(children[0], false)
		lt.snapshot(b)
	}
}

// BenchmarkWorkspaceActorMemory measures the Go heap that idle workspace
// actors hold, in bytes per actor: 10,000 of them, each made by a `stop`
// line as the daemon's memory benchmark makes them, with the daemon's own
// kind of logger (JSON). Beside it, the same number of bare protoactor
// actors, the floor.
func BenchmarkWorkspaceActorMemory(b *testing.B) {
	const actors = 10000
	b.Run("workspace", func(b *testing.B) {
		for b.Loop() {
			f := newFakeWorld()
			logger := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
			sys := NewSystem(logger, actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
			deps := f.deps()
			deps.Logger = logger
			node, err := StartNode(sys, deps, Config{})
			if err != nil {
				b.Fatal(err)
			}
			sys.Root.Send(node, protocol.Boot{})
			if _, err := Snapshot(sys, node, 10*time.Second); err != nil {
				b.Fatal(err)
			}
			before := liveHeap()
			for i := 0; i < actors; i++ {
				sys.Root.Send(node, protocol.LineRead{Line: pipe.StopLine{Login: fmt.Sprintf("ghost-%d", i), Project: "demo"}})
			}
			h, err := Snapshot(sys, node, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			if len(h.Workspaces) != actors {
				b.Fatalf("%d workspaces in the snapshot, want %d", len(h.Workspaces), actors)
			}
			h = protocol.Handoff{}
			after := liveHeap()
			b.ReportMetric(float64(after-before)/actors, "heap-B/actor")
			if err := StopNode(sys, node); err != nil {
				b.Fatal(err)
			}
			sys.Shutdown()
		}
	})
	b.Run("bare-protoactor", func(b *testing.B) {
		for b.Loop() {
			sys := NewSystem(slog.New(slog.DiscardHandler), actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
			props := actor.PropsFromFunc(func(actor.Context) {})
			before := liveHeap()
			pids := make([]*actor.PID, actors)
			for i := range pids {
				pids[i] = sys.Root.Spawn(props)
			}
			after := liveHeap()
			b.ReportMetric(float64(after-before)/actors, "heap-B/actor")
			for _, p := range pids {
				if err := sys.Root.StopFuture(p).Wait(); err != nil {
					b.Fatal(err)
				}
			}
			sys.Shutdown()
		}
	})
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
