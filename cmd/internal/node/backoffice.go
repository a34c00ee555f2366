package node

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// BackofficeWait bounds one backoffice run started beside an answer.
const BackofficeWait = time.Minute

// backoffices runs, for a long-lived front end (the MCP server beside a
// session), the backoffice each write needs (D11) beside the answer rather
// than before it: the write is on the node when the answer says so, and
// the hook sees it as soon as the run, started at once, reaches it. Runs
// for one project never overlap and coalesce: a write made while one runs
// asks for exactly one more run after it, which sees every write made
// meanwhile.
type backoffices struct {
	run func(ctx context.Context, p project) error
	log *slog.Logger

	mu      sync.Mutex
	running map[string]bool
	again   map[string]bool
	wg      sync.WaitGroup
}

func newBackoffices(run func(ctx context.Context, p project) error, log *slog.Logger) *backoffices {
	return &backoffices{run: run, log: log, running: map[string]bool{}, again: map[string]bool{}}
}

// kick asks for a backoffice run of p: now, or once the one running ends.
func (b *backoffices) kick(p project) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running[p.Name] {
		b.again[p.Name] = true
		return
	}
	b.running[p.Name] = true
	b.wg.Add(1)
	go b.loop(p)
}

func (b *backoffices) loop(p project) {
	defer b.wg.Done()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), BackofficeWait)
		t0 := time.Now()
		err := b.run(ctx, p)
		cancel()
		if err != nil {
			b.log.Warn("the backoffice failed (the server's own runs the hook later)", slog.String("project", p.Name), slog.Any("err", err))
		} else {
			b.log.Info("backoffice ran", slog.String("project", p.Name), slog.Duration("took", time.Since(t0)))
		}
		b.mu.Lock()
		if !b.again[p.Name] {
			b.running[p.Name] = false
			b.mu.Unlock()
			return
		}
		b.again[p.Name] = false
		b.mu.Unlock()
	}
}

// wait returns once no run is left.
func (b *backoffices) wait() { b.wg.Wait() }
