package actors

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
	"github.com/ocx-go/ocx/messages/protocol"
)

// fakeRuns is a run engine that records each effect, in the order the run
// actor's shell carried them out, and answers a launch's process with an
// exit when told to (exitNow), or when signalled.
type fakeRuns struct {
	mu      sync.Mutex
	log     []string
	exitNow bool
	toNode  func(protocol.DaemonMessage)
	done    chan struct{}
	// preparing, when set, holds Prepare until RunEndPreparing closes it
	// (a command step that runs until its stop, D99).
	preparing chan struct{}
}

func (f *fakeRuns) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, s)
}

func (f *fakeRuns) Care(_ context.Context, run string, in bool) error {
	f.record(fmt.Sprintf("care %v", in))
	if !in {
		close(f.done)
	}
	return nil
}

func (f *fakeRuns) Prepare(context.Context, string) protocol.RunPrepared {
	f.record("prepare")
	if f.preparing != nil {
		<-f.preparing
		return protocol.RunPrepared{Failed: "workspace[4] command: context canceled"}
	}
	return protocol.RunPrepared{Values: map[string]string{"run": strings.Repeat("a", 64)}}
}

func (f *fakeRuns) Write(_ context.Context, e protocol.DaemonEffect) error {
	f.record(e.String())
	return nil
}

func (f *fakeRuns) Process(_ context.Context, e protocol.DaemonEffect) error {
	f.record(e.String())
	switch e := e.(type) {
	case protocol.RunLaunch:
		if f.exitNow {
			f.toNode(protocol.RunRouted{Run: e.Run, Event: protocol.RunProcessExited{Proc: e.Proc, Status: messages.Exited(0)}})
		}
	case protocol.RunEndProcess:
		f.toNode(protocol.RunRouted{Run: e.Run, Event: protocol.RunProcessExited{Proc: e.Proc, Status: messages.Signaled(15)}})
	case protocol.RunEndPreparing:
		close(f.preparing)
	}
	return nil
}

func (f *fakeRuns) Check(context.Context) ([]protocol.RunRouted, error) { return nil, nil }

func (f *fakeRuns) Deliveries(context.Context, string, string) ([]protocol.RunRouted, error) {
	return nil, nil
}

func (f *fakeRuns) Start(context.Context, protocol.StartRun) ([]protocol.RunRouted, string, error) {
	return nil, "", nil
}

func (f *fakeRuns) effects() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.log, "\n")
}

// TestRunActorInTheTree: a run routed by the node gets an actor of its own,
// whose effects run in its core's order (care before preparing, started
// before the launch, kept logs before ended, ended before the release),
// and whose process's exit, routed by the run, ends it exited. A stop
// routed meanwhile to a second run ends its process and the run stopped.
func TestRunActorInTheTree(t *testing.T) {
	for _, tc := range []struct {
		name    string
		exitNow bool
		stop    bool
		want    []string
		// turns: the run asks the node for its user's slot and its turn to
		// write started (D86), which the node gives through the tree.
		turns bool
	}{
		{"exits", true, false, []string{"care true", "prepare", "write started", "launch", "keep logs", "write ended", "exited exit 0", "care false"}, false},
		{"stopped", false, true, []string{"care true", "prepare", "write started", "launch", "signal TERM", "keep logs", "write ended", "stopped", "care false"}, false},
		{"in its turns", true, false, []string{"care true", "prepare", "write started", "launch", "keep logs", "write ended", "exited exit 0", "care false"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newFakeWorld()
			runs := &fakeRuns{exitNow: tc.exitNow, done: make(chan struct{})}
			w.runs = runs
			lt := startTree(t, w, Config{}, protocol.Boot{})
			runs.toNode = lt.send
			hash := strings.Repeat("b", 64)
			facts := protocol.RunFacts{Hash: hash}
			if tc.turns {
				facts.Project, facts.At, facts.Slot = "demo", protocol.RunPosition{Receipt: 3, Row: 1}, "ana"
			}
			lt.send(protocol.RunRouted{Run: hash, Event: protocol.RunArrived{Facts: facts, InOrder: tc.turns}})
			if tc.stop {
				// The launch is in the log once started is written; the stop
				// is routed after it.
				for !strings.Contains(runs.effects(), "launch") {
					lt.snapshot(t)
				}
				lt.send(protocol.RunRouted{Run: hash, Event: protocol.RunStopRequested{By: "admin", Privileged: true}})
			}
			<-runs.done
			got := runs.effects()
			at := 0
			for _, want := range tc.want {
				i := strings.Index(got[at:], want)
				if i < 0 {
					t.Fatalf("effects, in order, lack %q after byte %d:\n%s", want, at, got)
				}
				at += i + len(want)
			}
			// A second arrival of the same run changes nothing.
			lt.send(protocol.RunRouted{Run: hash, Event: protocol.RunArrived{Facts: protocol.RunFacts{Hash: hash}}})
			lt.snapshot(t)
			lt.stop(t)
			if strings.Count(runs.effects(), "write ended") != 1 {
				t.Errorf("ended written more than once:\n%s", runs.effects())
			}
		})
	}
}

// TestRunStoppedWhileItsLayersAreMade: a stop while Prepare runs (a
// command step that would run on, D99) reaches the engine beside the run's
// serial effects, which wait for the preparation: RunEndPreparing ends it,
// and the run ends stopped, never started.
func TestRunStoppedWhileItsLayersAreMade(t *testing.T) {
	w := newFakeWorld()
	runs := &fakeRuns{done: make(chan struct{}), preparing: make(chan struct{})}
	w.runs = runs
	lt := startTree(t, w, Config{}, protocol.Boot{})
	runs.toNode = lt.send
	hash := strings.Repeat("c", 64)
	lt.send(protocol.RunRouted{Run: hash, Event: protocol.RunArrived{Facts: protocol.RunFacts{Hash: hash}}})
	for !strings.Contains(runs.effects(), "prepare") {
		lt.snapshot(t)
	}
	lt.send(protocol.RunRouted{Run: hash, Event: protocol.RunStopRequested{By: "admin", Privileged: true}})
	select {
	case <-runs.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the run did not end: its stop waited for its preparation:\n%s", runs.effects())
	}
	got := runs.effects()
	if want := "care true\nprepare\nend preparing " + hash[:10]; !strings.HasPrefix(got, want) {
		t.Errorf("effects:\n%s\nwant them to begin\n%s", got, want)
	}
	if !strings.Contains(got, "write ended "+hash[:10]+" stopped") || strings.Contains(got, "write started") || strings.Contains(got, "launch") {
		t.Errorf("want ended stopped, never started:\n%s", got)
	}
	lt.stop(t)
}

// TestStoppingTheTreeIsNoAccident: a daemon stopped by a plain TERM stops
// its tree, and protoactor stops each child before its parent; the node
// logs no run's nor workspace's actor as stopped unexpectedly then
// (issue 38: a remote daemon's TERM logged an error for each run whose
// ended was on the record already).
func TestStoppingTheTreeIsNoAccident(t *testing.T) {
	w := newFakeWorld()
	runs := &fakeRuns{exitNow: true, done: make(chan struct{})}
	w.runs = runs
	var logs lockedBuffer
	lt := startTreeLogging(t, w, Config{}, protocol.Boot{}, slog.New(slog.NewTextHandler(&logs, nil)))
	runs.toNode = lt.send
	hash := strings.Repeat("c", 64)
	lt.send(protocol.RunRouted{Run: hash, Event: protocol.RunArrived{Facts: protocol.RunFacts{Hash: hash}}})
	<-runs.done
	lt.send(protocol.LineRead{Line: pipe.StopLine{Login: "ana", Project: "demo"}})
	lt.snapshot(t)
	lt.stop(t)
	if strings.Contains(logs.String(), "unexpectedly") {
		t.Fatalf("stopping the tree logged an actor as stopped unexpectedly:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "level=") {
		t.Fatalf("the tree logged nothing; the test sees no log:\n%s", logs.String())
	}
}

// turnRuns is a run engine for several runs: it records each effect with
// its run's hash, ends a run's process at once for the runs in exitNow,
// and counts the runs out of care.
type turnRuns struct {
	fakeRuns
	exitNow map[string]bool
	out     sync.WaitGroup
}

func (f *turnRuns) Care(_ context.Context, run string, in bool) error {
	f.record(fmt.Sprintf("%s care %v", run[:1], in))
	if !in {
		f.out.Done()
	}
	return nil
}

func (f *turnRuns) Prepare(_ context.Context, run string) protocol.RunPrepared {
	f.record(run[:1] + " prepare")
	return protocol.RunPrepared{Values: map[string]string{"run": run}}
}

func (f *turnRuns) Write(_ context.Context, e protocol.DaemonEffect) error {
	f.record(e.String())
	return nil
}

func (f *turnRuns) Process(_ context.Context, e protocol.DaemonEffect) error {
	f.record(e.String())
	switch e := e.(type) {
	case protocol.RunLaunch:
		if f.exitNow[e.Run] {
			f.toNode(protocol.RunRouted{Run: e.Run, Event: protocol.RunProcessExited{Proc: e.Proc, Status: messages.Exited(0)}})
		}
	case protocol.RunEndProcess:
		f.toNode(protocol.RunRouted{Run: e.Run, Event: protocol.RunProcessExited{Proc: e.Proc, Status: messages.Signaled(15)}})
	case protocol.RunEndPreparing:
		close(f.preparing)
	}
	return nil
}

// TestRunsOfOneUserTakeTurnsInTheTree (D86): two runs of one user, whose
// password step the server's node sets, in the real shells: the second's
// layers are made only once the first's ended is written and it gave its
// slot back, through the node; no effect of either waits for the other's.
func TestRunsOfOneUserTakeTurnsInTheTree(t *testing.T) {
	w := newFakeWorld()
	a, b := strings.Repeat("a", 64), strings.Repeat("c", 64)
	runs := &turnRuns{exitNow: map[string]bool{b: true}}
	runs.out.Add(2)
	w.runs = runs
	lt := startTree(t, w, Config{}, protocol.Boot{})
	runs.toNode = lt.send
	arrive := func(h string, n int64) {
		f := protocol.RunFacts{Hash: h, Project: "demo", At: protocol.RunPosition{Receipt: n, Row: 1}, Slot: "ana"}
		lt.send(protocol.RunRouted{Run: h, Event: protocol.RunArrived{Facts: f, InOrder: true}})
	}
	arrive(a, 1)
	for !strings.Contains(runs.effects(), "launch aaaaaaaaaa") {
		lt.snapshot(t)
	}
	arrive(b, 2)
	lt.send(protocol.RunRouted{Run: a, Event: protocol.RunStopRequested{By: "admin", Privileged: true}})
	runs.out.Wait()
	lt.stop(t)
	got := runs.effects()
	endedA := strings.Index(got, "write ended aaaaaaaaaa stopped")
	prepB := strings.Index(got, "c prepare")
	if endedA < 0 || prepB < endedA || strings.Count(got, "c prepare") != 1 || !strings.Contains(got, "write ended cccccccccc exited exit 0") {
		t.Fatalf("the second run's layers were not made once, after the first's ended:\n%s", got)
	}
}
