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

// Target is a remote node's poke, as the server's node.json lists it:
// the URL and the secret each poke carries.
type Target struct{ URL, Secret string }

// pokeHeader is the header a poke carries its secret in, as a bearer
// token.
const pokeHeader = "Authorization"

// poke tells the remote node at t to pull now: a POST that carries
// nothing but t's secret (D72, D81). Any answer but 204 is an error
// naming it.
func poke(ctx context.Context, t Target) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, http.NoBody)
	if err != nil {
		return fmt.Errorf("poke %s: %w", t.URL, err)
	}
	req.Header.Set(pokeHeader, "Bearer "+t.Secret)
	resp, err := pokeHTTP.Do(req)
	if err != nil {
		return fmt.Errorf("poke %s: %w", t.URL, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("poke %s: HTTP %s", t.URL, resp.Status)
	}
	return nil
}

// PokeAll pokes each target at once and returns what failed.
func PokeAll(ctx context.Context, targets []Target) []error {
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = poke(ctx, t)
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
// poke a target at a time, and pokes asked meanwhile make one more after
// it.
type Poker struct {
	log *slog.Logger
	ctx context.Context
	// stop ends the pokes under way, wg waits for them.
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu      sync.Mutex
	running map[Target]bool
	again   map[Target]bool
}

// NewPoker is a poker logging to log.
func NewPoker(log *slog.Logger) *Poker {
	ctx, cancel := context.WithCancel(context.Background())
	return &Poker{log: log, ctx: ctx, stop: cancel, running: map[Target]bool{}, again: map[Target]bool{}}
}

// Poke pokes each target beside the caller.
func (p *Poker) Poke(targets []Target) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, u := range targets {
		if p.running[u] {
			p.again[u] = true
			continue
		}
		p.running[u] = true
		p.wg.Add(1)
		go p.run(u)
	}
}

func (p *Poker) run(u Target) {
	defer p.wg.Done()
	for {
		ctx, cancel := context.WithTimeout(p.ctx, 2*time.Second)
		err := poke(ctx, u)
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
