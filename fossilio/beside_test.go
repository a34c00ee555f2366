package fossilio_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/ocx-go/ocx/fossilio"
)

// Runs beside the work never overlap for one repository and coalesce: the
// kicks made while one runs ask for exactly one more run, and wait returns
// once none is left.
func TestBackofficesCoalesce(t *testing.T) {
	var mu sync.Mutex
	runs := map[string]int{}
	running := map[string]int{}
	overlap := false
	release := make(chan struct{})
	started := make(chan string, 10)
	b := fossilio.NewBeside(slog.New(slog.DiscardHandler))
	run := func(name string) func(context.Context) error {
		return func(context.Context) error {
			mu.Lock()
			runs[name]++
			running[name]++
			overlap = overlap || running[name] > 1
			mu.Unlock()
			started <- name
			<-release
			mu.Lock()
			running[name]--
			mu.Unlock()
			return nil
		}
	}
	b.Kick("demo", run("demo"))
	<-started // demo's first run holds
	for range 5 {
		b.Kick("demo", run("demo"))
	}
	b.Kick("other", run("other"))
	<-started // other runs beside demo: another repository
	close(release)
	<-started // demo's one more run
	b.Wait()
	mu.Lock()
	defer mu.Unlock()
	if runs["demo"] != 2 || runs["other"] != 1 || overlap {
		t.Errorf("runs %v (overlap %v); want demo twice, other once, none overlapping", runs, overlap)
	}
	select {
	case p := <-started:
		t.Errorf("a run of %s after the last", p)
	default:
	}
}
