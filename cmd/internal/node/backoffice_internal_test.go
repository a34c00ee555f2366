package node

import (
	"context"
	"log/slog"
	"sync"
	"testing"
)

// Runs beside the answers never overlap for one project and coalesce: the
// kicks made while one runs ask for exactly one more run, and wait returns
// once none is left.
func TestBackofficesCoalesce(t *testing.T) {
	var mu sync.Mutex
	runs := map[string]int{}
	running := map[string]int{}
	overlap := false
	release := make(chan struct{})
	started := make(chan string, 10)
	b := newBackoffices(func(_ context.Context, p project) error {
		mu.Lock()
		runs[p.Name]++
		running[p.Name]++
		overlap = overlap || running[p.Name] > 1
		mu.Unlock()
		started <- p.Name
		<-release
		mu.Lock()
		running[p.Name]--
		mu.Unlock()
		return nil
	}, slog.New(slog.DiscardHandler))

	demo, other := project{Name: "demo"}, project{Name: "other"}
	b.kick(demo)
	<-started // demo's first run holds
	for range 5 {
		b.kick(demo)
	}
	b.kick(other)
	<-started // other runs beside demo: another project
	close(release)
	<-started // demo's one more run
	b.wait()
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
