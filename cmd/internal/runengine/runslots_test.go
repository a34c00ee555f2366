package runengine

import (
	"context"
	"errors"
	"testing"
	"time"
)

// One run at a time for each user (seed 004 §5): the runs waiting take
// the slot in the order they came, each once the run before it gives it
// back; another user's run never waits; a stop ends a wait, and a run
// holding the slot may take it again (prepared again after a restart).
func TestUserSlots(t *testing.T) {
	s := newUserSlots()
	ctx := context.Background()
	if err := s.take(ctx, "u", "r1", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.take(ctx, "u", "r1", nil); err != nil {
		t.Fatalf("the holder taking its slot again: %v", err)
	}
	if err := s.take(ctx, "v", "other", nil); err != nil {
		t.Fatalf("another user's run waited: %v", err)
	}
	order := make(chan string, 3)
	waits := make(chan string, 3)
	for _, r := range []string{"r2", "r3", "r4"} {
		go func() {
			err := s.take(ctx, "u", r, func(before string) { waits <- r + " after " + before })
			if err != nil {
				order <- r + ": " + err.Error()
				return
			}
			order <- r
		}()
		if got := <-waits; got != r+" after r1" {
			t.Fatalf("waiting: %q", got)
		}
	}
	s.stop("r3")
	if got := <-order; got != "r3: "+errStoppedWaiting.Error() {
		t.Fatalf("the stopped wait: %q", got)
	}
	select {
	case got := <-order:
		t.Fatalf("%s took the slot while r1 held it", got)
	default:
	}
	s.give("r1")
	if got := <-order; got != "r2" {
		t.Fatalf("after r1: %q, want r2 (the first waiting)", got)
	}
	s.give("r2")
	if got := <-order; got != "r4" {
		t.Fatalf("after r2: %q, want r4", got)
	}
	s.give("r4")
	if err := s.take(ctx, "u", "r5", nil); err != nil {
		t.Fatalf("a free slot: %v", err)
	}

	// A wait whose context ends leaves the queue; a slot handed to it
	// meanwhile goes on to the next.
	s2 := newUserSlots()
	s2.hold("u", "a")
	s2.hold("u", "ignored") // held already: a second hold changes nothing
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	entered := make(chan struct{})
	go func() { done <- s2.take(cctx, "u", "b", func(string) { close(entered) }) }()
	<-entered
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait: %v", err)
	}
	s2.give("a")
	got := make(chan error, 1)
	go func() { got <- s2.take(ctx, "u", "c", nil) }()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the slot stayed with a wait that ended")
	}
}
