package remote

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// pokeHTTP pokes: it follows no redirect and keeps no connection.
var pokeHTTP = &http.Client{Timeout: 5 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Transport:     &http.Transport{DisableKeepAlives: true}}

// Poke tells the remote node at url to pull now: a POST that carries
// nothing (D72). Any answer but 204 is an error naming it.
func Poke(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, http.NoBody)
	if err != nil {
		return fmt.Errorf("poke %s: %w", url, err)
	}
	resp, err := pokeHTTP.Do(req)
	if err != nil {
		return fmt.Errorf("poke %s: %w", url, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("poke %s: HTTP %s", url, resp.Status)
	}
	return nil
}

// PokeAll pokes each URL at once and returns what failed.
func PokeAll(ctx context.Context, urls []string) []error {
	errs := make([]error, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = Poke(ctx, u)
		}()
	}
	wg.Wait()
	var out []error
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// Poker pokes beside the daemon's work, never waiting on a node: one
// poke a URL at a time, and pokes asked meanwhile make one more after
// it.
type Poker struct {
	log *slog.Logger
	ctx context.Context
	// stop ends the pokes under way, wg waits for them.
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu      sync.Mutex
	running map[string]bool
	again   map[string]bool
}

// NewPoker is a poker logging to log.
func NewPoker(log *slog.Logger) *Poker {
	ctx, cancel := context.WithCancel(context.Background())
	return &Poker{log: log, ctx: ctx, stop: cancel, running: map[string]bool{}, again: map[string]bool{}}
}

// Poke pokes each URL beside the caller.
func (p *Poker) Poke(urls []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, u := range urls {
		if p.running[u] {
			p.again[u] = true
			continue
		}
		p.running[u] = true
		p.wg.Add(1)
		go p.run(u)
	}
}

func (p *Poker) run(u string) {
	defer p.wg.Done()
	for {
		ctx, cancel := context.WithTimeout(p.ctx, 2*time.Second)
		err := Poke(ctx, u)
		cancel()
		if err != nil && p.ctx.Err() == nil {
			p.log.Warn("a remote node was not poked; it pulls on its timer", slog.String("error", err.Error()))
		}
		p.mu.Lock()
		if !p.again[u] || p.ctx.Err() != nil {
			delete(p.running, u)
			delete(p.again, u)
			p.mu.Unlock()
			return
		}
		delete(p.again, u)
		p.mu.Unlock()
	}
}

// Close ends the pokes under way and waits for them.
func (p *Poker) Close() {
	if p == nil {
		return
	}
	p.stop()
	p.wg.Wait()
}
