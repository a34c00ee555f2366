package runengine

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/messages"
)

// The node starts its runs in the server's order (seed 004 section 10;
// D72): the started of a run is written only once every run of the node
// that stands before it on the record, and that the classifier found to
// begin, has its started written, or ended, or left the node's care, or
// waits for its user's slot (runslots.go: one run at a time for each
// user passes the others). The node core hands the runs to their actors
// in the server's order; their preparations then run side by side, and
// this keeps their started in that order.

// OrderWait bounds how long a run's started waits for the runs before it:
// past it, the run is started out of the server's order, and the log says
// which run it did not wait for any longer.
const OrderWait = 30 * time.Second

// startOrder is the runs found to begin whose started is not written yet.
type startOrder struct {
	mu      sync.Mutex
	pending map[string]ordered // by run hash
	// changed is closed, and made anew, at each change.
	changed chan struct{}
}

// ordered is one run waiting for its started.
type ordered struct {
	project string
	at      messages.RunPosition
	// passed: it waits for its user's slot, and the others go on.
	passed bool
}

func newStartOrder() *startOrder {
	return &startOrder{pending: map[string]ordered{}, changed: make(chan struct{})}
}

// change wakes the waiters; the caller holds mu.
func (o *startOrder) change() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// arriving keeps a run the classifier found to begin.
func (o *startOrder) arriving(project, hash string, at messages.RunPosition) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.pending[hash]; !ok {
		o.pending[hash] = ordered{project: project, at: at}
	}
}

// settled forgets a run whose started is written, or that ended or left
// the node's care.
func (o *startOrder) settled(hash string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.pending[hash]; ok {
		delete(o.pending, hash)
		o.change()
	}
}

// pass lets the runs after hash go on while it waits for its user's slot.
func (o *startOrder) pass(hash string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e, ok := o.pending[hash]; ok && !e.passed {
		e.passed = true
		o.pending[hash] = e
		o.change()
	}
}

// before is the earliest run, in the server's order, that stands before
// at in project and holds it back: the one a log line names, whatever
// order the map is walked in.
func (o *startOrder) before(project, hash string, at messages.RunPosition) (string, bool) {
	first, found := "", false
	var firstAt messages.RunPosition
	for h, e := range o.pending {
		if h == hash || e.project != project || e.passed || !e.at.Before(at) {
			continue
		}
		if !found || e.at.Before(firstAt) || (!firstAt.Before(e.at) && h < first) {
			first, firstAt, found = h, e.at, true
		}
	}
	return first, found
}

// wait returns once no run before hash holds it back, or after max (the
// run it stopped waiting for is logged), or when ctx ends.
func (o *startOrder) wait(ctx context.Context, project, hash string, at messages.RunPosition, max time.Duration, log *slog.Logger) error {
	deadline := time.NewTimer(max)
	defer deadline.Stop()
	for {
		o.mu.Lock()
		first, held := o.before(project, hash, at)
		changed := o.changed
		o.mu.Unlock()
		if !held {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			log.Warn("a run is started out of the server's order: a run before it is neither started nor ended",
				slog.String(actors.KeyRun, hash), slog.String("before", first), slog.Duration("waited", max))
			return nil
		}
	}
}
