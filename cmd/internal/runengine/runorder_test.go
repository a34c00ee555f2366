package runengine

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/messages"
)

// TestStartOrder: a run's started waits for the runs of its project
// before it on the record that were found to begin, until each is
// started, ended or out of care, or waits for its user's slot; a run of
// another project, or after it, holds nothing back; past the bound it
// goes on, and the log says which run it stopped waiting for.
func TestStartOrder(t *testing.T) {
	o := newStartOrder()
	at := func(n int64) messages.RunPosition { return messages.RunPosition{Receipt: n, Row: n} }
	o.arriving("demo", "r1", at(1))
	o.arriving("demo", "r2", at(2))
	o.arriving("demo", "r3", at(3))
	o.arriving("other", "x0", at(0))
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	done := make(chan string, 3)
	wait := func(h string, n int64) {
		go func() {
			if err := o.wait(context.Background(), "demo", h, at(n), time.Minute, log); err != nil {
				done <- "error " + err.Error()
				return
			}
			done <- h
		}()
	}
	wait("r3", 3)
	wait("r2", 2)
	// r1 is first: it does not wait.
	if err := o.wait(context.Background(), "demo", "r1", at(1), time.Minute, log); err != nil {
		t.Fatal(err)
	}
	select {
	case h := <-done:
		t.Fatalf("%s went on while r1 is neither started nor ended", h)
	case <-time.After(50 * time.Millisecond):
	}
	o.settled("r1")
	if h := <-done; h != "r2" {
		t.Fatalf("after r1, %s went on; want r2", h)
	}
	select {
	case h := <-done:
		t.Fatalf("%s went on while r2 is neither started nor ended", h)
	case <-time.After(50 * time.Millisecond):
	}
	o.pass("r2") // r2 waits for its user's slot: the others go on
	if h := <-done; h != "r3" {
		t.Fatalf("after r2 passed, %s went on; want r3", h)
	}
	// A run before it that never settles holds it back no longer than the
	// bound, and the log names the earliest of those (r3, not r4).
	o.arriving("demo", "r4", at(4))
	o.arriving("demo", "r5", at(5))
	if err := o.wait(context.Background(), "demo", "r5", at(5), 20*time.Millisecond, log); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "out of the server's order") || !strings.Contains(logs.String(), "before=r3") {
		t.Errorf("the log does not say r5 stopped waiting for r3, the earliest before it:\n%s", logs.String())
	}
	// A context that ends ends the wait.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := o.wait(ctx, "demo", "r5", at(5), time.Minute, log); err == nil {
		t.Error("a wait went on after its context ended")
	}
}
