package actors

import (
	"testing"
	"time"

	"github.com/ocx-go/ocx/messages"
)

// BenchmarkCoresLaunchCycle measures the cores alone, on the simulator: one
// launch note from its post line to its end note (classify, scan, spawn, exit,
// end note), every effect answered at once.
func BenchmarkCoresLaunchCycle(b *testing.B) {
	s := newSim(Config{RecentHashes: 1 << 20, RecentLaunches: 1 << 20}, time.Unix(1_000_000, 0))
	pid := 1000
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		l := messages.LaunchSpec{Hash: testHash(i), Repository: treeRep, Workspace: wsAna, Record: testHash(8001), Lifetime: messages.Stays}
		s.input(messages.LineRead{Line: messages.PostLine{Repository: treeRep, Hash: l.Hash}})
		pid++
		proc := messages.ProcID{PID: pid, Start: 5000}
		for len(s.pending) > 0 {
			p := s.pending[0]
			var r messages.DaemonMessage
			switch e := p.eff.(type) {
			case messages.ClassifyArtifact:
				r = messages.ArtifactClassified{Repository: e.Repository, Hash: e.Hash, Launch: &l}
			case messages.ScanWorkspace:
				r = messages.WorkspaceScanned{Workspace: e.Workspace, Purpose: e.Purpose, For: e.For}
			case messages.SpawnSession:
				r = messages.SessionSpawned{Launch: e.Launch.Hash, Proc: proc}
				if err := s.answer(p.id, r); err != nil {
					b.Fatal(err)
				}
				s.input(messages.ProcessExited{Proc: proc, Status: messages.ExitStatus{State: messages.EndExited}})
				continue
			case messages.WriteEnd:
				r = messages.EndWritten{Proc: e.Proc}
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
	lt := startTree(b, f, Config{RecentHashes: 1 << 20, RecentLaunches: 1 << 20}, messages.Boot{})
	defer lt.stop(b)
	b.ReportAllocs()
	for b.Loop() {
		f.mu.Lock()
		l := messages.LaunchSpec{Hash: f.hash(), Repository: treeRep, Workspace: wsAna, Record: testHash(8001), Lifetime: messages.Stays}
		f.launches[l.Hash] = l
		f.mu.Unlock()
		lt.send(messages.LineRead{Line: messages.PostLine{Repository: treeRep, Hash: l.Hash}})
		h := lt.snapshot(b)
		children := h.Children()
		if len(children) != 1 {
			b.Fatalf("%d children after a launch", len(children))
		}
		f.exit(children[0], false)
		lt.snapshot(b)
	}
}
