package otherhosts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ocx-go/ocx/actors/pull"
	"github.com/ocx-go/ocx/fossilio/remote"
)

// Puller is the daemon's shell of a node on another host's pull (D72):
// it runs the decisions of actors/pull on the clock, pulls each project
// (remote.Keeper) in a goroutine of its own, and after a pull that brought
// something runs the hook's work on the clone (After), so that the node
// acts on what came as the server's node acts on a receipt.
type Puller struct {
	keepers map[string]*remote.Keeper
	every   time.Duration
	// After is run after each pull that succeeded, with what it brought:
	// the hook's work on the clone. It may be nil.
	After func(ctx context.Context, project string, p remote.Pulled)
	// Fresh is told once of each project's first successful pull.
	Fresh func(project string)
	// Pulled, when set, is told of each pull: how long it took, and
	// whether it failed (the daemon's metrics).
	Pulled func(project string, d time.Duration, failed bool)
	log    *slog.Logger

	in     chan pull.Msg
	begun  time.Time
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	asks   map[int]chan error
	nextID int
	closed bool
}

// newPuller is the puller of keepers (by project), its timer every.
func newPuller(keepers map[string]*remote.Keeper, every time.Duration, log *slog.Logger) *Puller {
	ctx, cancel := context.WithCancel(context.Background())
	return &Puller{keepers: keepers, every: every, log: log, in: make(chan pull.Msg, 64),
		ctx: ctx, cancel: cancel, asks: map[int]chan error{}}
}

// Start begins: every project is pulled at once, then on the timer.
func (p *Puller) Start() {
	p.begun = time.Now()
	names := make([]string, 0, len(p.keepers))
	for n := range p.keepers {
		names = append(names, n)
	}
	p.wg.Add(1)
	go p.loop(pull.Started{At: 0, Projects: names})
}

// Stop ends the loop and waits for the pulls under way; asks still
// waiting are answered that the puller stopped.
func (p *Puller) Stop() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, ch := range p.asks {
		ch <- errors.New("the daemon is stopping")
		delete(p.asks, id)
	}
}

func (p *Puller) now() time.Duration { return time.Since(p.begun) }

// send hands the loop a message, unless it stopped.
func (p *Puller) send(m pull.Msg) bool {
	select {
	case p.in <- m:
		return true
	case <-p.ctx.Done():
		return false
	}
}

// Kick pulls project ("" for every one) now, or once more after the pull
// under way.
func (p *Puller) Kick(project, why string) {
	if p == nil {
		return
	}
	p.send(pull.Kicked{At: p.now(), Project: project, Why: why})
}

// Pull waits for a pull of project begun after the call, and returns
// how it ended.
func (p *Puller) Pull(ctx context.Context, project string) error {
	if p == nil {
		return fmt.Errorf("project %q: this node pulls nothing", project)
	}
	ch := make(chan error, 1)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return errors.New("the daemon is stopping")
	}
	p.nextID++
	id := p.nextID
	p.asks[id] = ch
	p.mu.Unlock()
	if !p.send(pull.Asked{At: p.now(), Project: project, ID: id}) {
		return errors.New("the daemon is stopping")
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		p.mu.Lock()
		delete(p.asks, id)
		p.mu.Unlock()
		return ctx.Err()
	}
}

// loop runs the core.
func (p *Puller) loop(first pull.Msg) {
	defer p.wg.Done()
	core := pull.New(p.every)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var pulls sync.WaitGroup
	defer pulls.Wait()
	handle := func(m pull.Msg) {
		for _, e := range core.Step(m) {
			switch e := e.(type) {
			case pull.PullProject:
				p.log.Debug("pull", slog.String("project", e.Project), slog.String("why", e.Why))
				pulls.Add(1)
				go func() {
					defer pulls.Done()
					msg := pull.PullEnded{Project: e.Project}
					t0 := time.Now()
					err := p.pullOne(e.Project)
					if err != nil {
						msg.Err = err.Error()
					}
					if p.Pulled != nil {
						p.Pulled(e.Project, time.Since(t0), err != nil)
					}
					msg.At = p.now()
					p.send(msg)
				}()
			case pull.Answer:
				p.answer(e)
			case pull.FirstPulled:
				if p.Fresh != nil {
					p.Fresh(e.Project)
				}
			case pull.SetTimer:
				timer.Stop()
				if e.At != pull.Never {
					timer.Reset(max(e.At-p.now(), 0))
				}
			}
		}
	}
	handle(first)
	for {
		select {
		case <-p.ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
			handle(pull.Tick{At: p.now()})
		case m := <-p.in:
			handle(m)
		}
	}
}

// pullOne pulls a project, then runs the hook's work on what came.
func (p *Puller) pullOne(project string) error {
	k := p.keepers[project]
	ctx, cancel := context.WithTimeout(p.ctx, 2*time.Minute)
	defer cancel()
	got, err := k.Pull(ctx)
	if err != nil {
		p.log.Warn("the pull failed; the node waits and pulls again (it acts on nothing the server has not vouched for)",
			slog.String("project", project), slog.String("error", err.Error()))
		return err
	}
	if got.Vouched+got.Unknown == 0 {
		return nil
	}
	t0 := time.Now()
	if p.After != nil {
		p.After(ctx, project, got)
	}
	p.log.Info("pulled", slog.String("project", project), slog.Int64("through", got.Through),
		slog.Int("vouched", got.Vouched), slog.Int("unknown", got.Unknown),
		slog.Duration("pull", got.Pull), slog.Duration("vouch", got.Vouch), slog.Duration("hook", time.Since(t0)))
	return nil
}

// answer tells the asks how their pull ended.
func (p *Puller) answer(a pull.Answer) {
	var err error
	if a.Err != "" {
		err = errors.New(a.Err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range a.IDs {
		if ch, ok := p.asks[id]; ok {
			ch <- err
			delete(p.asks, id)
		}
	}
}

// Poked tells the puller the server poked: every project is pulled, at
// most once every pull.pokeGap (D81).
func (p *Puller) Poked() {
	if p == nil {
		return
	}
	p.send(pull.Poked{At: p.now()})
}
