package fossilio

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// besideWait bounds one backoffice run started beside the work that
// needed it.
const besideWait = time.Minute

// Beside runs, for a long-lived process (the MCP server beside a session,
// the daemon), the backoffice a write needs (D11) beside the work that
// wrote rather than before it goes on: the write is on the server when the
// caller goes on, and the hook sees it as soon as the run, started at once,
// reaches it. Runs for one repository never overlap and coalesce: a write
// made while one runs asks for exactly one more run after it, which sees
// every write made meanwhile. Wait returns once none is left.
type Beside struct {
	log *slog.Logger

	mu      sync.Mutex
	running map[string]bool
	again   map[string]bool
	wg      sync.WaitGroup
}

// NewBeside returns a Beside logging to log.
func NewBeside(log *slog.Logger) *Beside {
	return &Beside{log: log, running: map[string]bool{}, again: map[string]bool{}}
}

// Kick asks for a run of the backoffice of the repository named key: now,
// or once the one running for key ends. run is the backoffice itself
// (Admin.Backoffice).
func (b *Beside) Kick(key string, run func(context.Context) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running[key] {
		b.again[key] = true
		return
	}
	b.running[key] = true
	b.wg.Add(1)
	go b.loop(key, run)
}

func (b *Beside) loop(key string, run func(context.Context) error) {
	defer b.wg.Done()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), besideWait)
		t0 := time.Now()
		err := run(ctx)
		cancel()
		if err != nil {
			b.log.Warn("the backoffice failed (the server's own runs the hook later)", slog.String("repository", key), slog.Any("error", err))
		} else {
			b.log.Info("backoffice ran", slog.String("repository", key), slog.Duration("took", time.Since(t0)))
		}
		b.mu.Lock()
		if !b.again[key] {
			b.running[key] = false
			b.mu.Unlock()
			return
		}
		b.again[key] = false
		b.mu.Unlock()
	}
}

// Wait returns once no run is left.
func (b *Beside) Wait() { b.wg.Wait() }
