package actors

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ocx-go/ocx/messages/protocol"
)

// lockedBuffer is a log sink safe from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestStopStrategyStopsAFailedActor: an actor that panics is stopped and the
// failure logged; it is not restarted (a restart would begin from a stale
// state, and the daemon must never loop).
func TestStopStrategyStopsAFailedActor(t *testing.T) {
	var buf lockedBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sys := NewSystem(logger, actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
	defer sys.Shutdown()

	var mu sync.Mutex
	starts := 0
	terminated := make(chan struct{})
	child := actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *actor.Started:
			mu.Lock()
			starts++
			mu.Unlock()
		case string:
			panic("a broken invariant")
		}
	})
	parent := actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *actor.Started:
			pid := ctx.Spawn(child)
			ctx.Send(pid, "boom")
		case *actor.Terminated:
			close(terminated)
		}
	}, actor.WithSupervisor(stopStrategy(logger)))
	pid := sys.Root.Spawn(parent)
	<-terminated
	if err := sys.Root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if starts != 1 {
		t.Errorf("the failed child started %d times, want once (stopped, not restarted)", starts)
	}
	if !strings.Contains(buf.String(), "an actor failed; it is stopped, not restarted") || !strings.Contains(buf.String(), "a broken invariant") {
		t.Errorf("the failure is not logged with its reason:\n%s", buf.String())
	}
}

// TestNewSystemRoutesProtoactorLogs: protoactor's own lines go to the
// daemon's logger, below Warn dropped (its start-up line among them).
func TestNewSystemRoutesProtoactorLogs(t *testing.T) {
	var buf lockedBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sys := NewSystem(logger, actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
	defer sys.Shutdown()
	sys.Logger().Info("chatter")
	sys.Logger().Warn("something is wrong")
	out := buf.String()
	if strings.Contains(out, "actor system started") || strings.Contains(out, "chatter") {
		t.Errorf("protoactor's info lines reached the log:\n%s", out)
	}
	if !strings.Contains(out, "something is wrong") || !strings.Contains(out, "component=protoactor") {
		t.Errorf("protoactor's warning did not reach the log, marked as its own:\n%s", out)
	}
}

// TestResultAfterStopIsDropped: the result of an effect that ends after its
// actor stopped is dropped, not sent to a dead actor. The same result from a
// runner that was not stopped becomes a dead letter, which shows the count
// would see it.
func TestResultAfterStopIsDropped(t *testing.T) {
	for _, stop := range []bool{true, false} {
		sys := NewSystem(slog.New(slog.DiscardHandler), actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
		var mu sync.Mutex
		dead := 0
		sub := sys.EventStream.Subscribe(func(evt any) {
			if _, ok := evt.(*actor.DeadLetterEvent); ok {
				mu.Lock()
				dead++
				mu.Unlock()
			}
		})
		pid := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
		if err := sys.Root.StopFuture(pid).Wait(); err != nil {
			t.Fatal(err)
		}
		deps := newFakeWorld().deps()
		deps.Logger = slog.New(slog.DiscardHandler)
		sh := &shell{tree: newTree(deps, Config{}), core: newNodeCore(Config{}), self: pid, sys: sys}
		if stop {
			sh.stopEffects()
		}
		sh.effect(protocol.ClassifyArtifact{Repository: treeRep, Hash: testHash(1)})
		sh.run.running.Wait()
		sys.EventStream.Unsubscribe(sub)
		sys.Shutdown()
		mu.Lock()
		got := dead
		mu.Unlock()
		if stop && got != 0 {
			t.Errorf("a stopped runner sent %d results to its dead actor", got)
		}
		if !stop && got != 1 {
			t.Errorf("a runner not stopped made %d dead letters, want 1: the count does not see them", got)
		}
		if !stop {
			sh.stopEffects()
		}
	}
}

// TestStartNodeChecksItsDependencies names every missing dependency.
func TestStartNodeChecksItsDependencies(t *testing.T) {
	sys := NewSystem(slog.New(slog.DiscardHandler), actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
	defer sys.Shutdown()
	_, err := StartNode(sys, Deps{Procs: newFakeWorld()}, Config{})
	if err == nil {
		t.Fatal("a node started without its dependencies")
	}
	for _, name := range []string{"Classifier", "Checkins", "Notes", "Spawner", "Signaler", "Watcher", "Clock", "Inputs", "Execer", "Logger"} {
		if !strings.Contains(err.Error(), "dependency "+name+" is missing") {
			t.Errorf("the error does not name %s: %v", name, err)
		}
	}
	if strings.Contains(err.Error(), "Procs") {
		t.Errorf("the error names a dependency that was given: %v", err)
	}
}

// TestConfigDefaults fills in every zero field, and keeps what is set.
func TestConfigDefaults(t *testing.T) {
	c := Config{Grace: time.Second}.withDefaults()
	want := Config{Grace: time.Second, RetryAfter: DefaultRetryAfter, EndAttempts: defaultEndAttempts,
		RecentHashes: defaultRecentHashes, RecentLaunches: defaultRecentLaunches, OrderWait: defaultOrderWait}
	if c != want {
		t.Errorf("withDefaults = %+v, want %+v", c, want)
	}
}
