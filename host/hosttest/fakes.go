package hosttest

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

var (
	_ host.Clock      = (*clock)(nil)
	_ host.Spawner    = (*Spawner)(nil)
	_ host.Signaler   = (*Spawner)(nil)
	_ host.Watcher    = (*Spawner)(nil)
	_ host.RunStarter = (*Spawner)(nil)
	_ host.ProcTable  = (*ProcTable)(nil)
)

// clock is a manual clock: time moves only with Advance, which runs the
// timers that fall due, in order, on the caller's goroutine, so a test
// decides exactly when each fires.
type clock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*timer
}

type timer struct {
	at   time.Time
	seq  int
	f    func()
	done bool
}

// newClock starts a clock at start.
func newClock(start time.Time) *clock { return &clock{now: start} }

// Now is the clock's time.
func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc calls f when Advance moves the clock d past now.
func (c *clock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &timer{at: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if t.done {
			return false
		}
		t.done = true
		return true
	}
}

// Advance moves the clock by d, firing each timer that falls due at its own
// time, earliest first.
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		sort.SliceStable(c.timers, func(i, j int) bool {
			if !c.timers[i].at.Equal(c.timers[j].at) {
				return c.timers[i].at.Before(c.timers[j].at)
			}
			return c.timers[i].seq < c.timers[j].seq
		})
		var due *timer
		for _, t := range c.timers {
			if !t.done && !t.at.After(end) {
				due = t
				break
			}
		}
		if due == nil {
			break
		}
		due.done = true
		if due.at.After(c.now) {
			c.now = due.at
		}
		c.mu.Unlock()
		due.f()
		c.mu.Lock()
	}
	c.now = end
	live := c.timers[:0]
	for _, t := range c.timers {
		if !t.done {
			live = append(live, t)
		}
	}
	c.timers = live
	c.mu.Unlock()
}

// Pending counts the timers not yet fired or stopped.
func (c *clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.done {
			n++
		}
	}
	return n
}

// spawned is one process the fake spawner started.
type spawned struct {
	ID   protocol.ProcID
	Spec host.SpawnSpec
}

// Sent is one signal the fake sent.
type Sent struct {
	ID  protocol.ProcID
	Sig host.Signal
}

// Spawner fakes the launcher: Spawner, Signaler and Watcher in one, since a
// process's start, signals and end are one story. Processes end only when
// the test calls End (or a signal handler it set does); exits are delivered
// on the caller's goroutine, never during Spawn.
type Spawner struct {
	mu      sync.Mutex
	next    int
	start   uint64
	spawned []spawned
	started []started
	sent    []Sent
	running map[protocol.ProcID]func(host.Exit)
	failing error
	// OnSignal, when set, is called (outside the fake's lock) after a signal
	// was recorded: a test makes a process end on TERM by calling End there.
	OnSignal func(id protocol.ProcID, sig host.Signal)
	// SignalErr, when set for an identity, is what Signal returns for it.
	SignalErr map[protocol.ProcID]error
	// Support is what StartRun provides; the zero value provides everything.
	Support host.RunSupport
}

// NewSpawner numbers processes from firstPID, with start times from 1000.
func NewSpawner(firstPID int) *Spawner {
	return &Spawner{next: firstPID, start: 1000, running: map[protocol.ProcID]func(host.Exit){}, SignalErr: map[protocol.ProcID]error{}}
}

// FailNext makes the next Spawn fail with err.
func (s *Spawner) FailNext(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing = err
}

// Spawn records spec and "starts" a process.
func (s *Spawner) Spawn(spec host.SpawnSpec, onExit func(host.Exit)) (protocol.ProcID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.takeFailing(); err != nil {
		return protocol.ProcID{}, err
	}
	if onExit == nil || spec.Path == "" || len(spec.Args) == 0 {
		return protocol.ProcID{}, fmt.Errorf("hosttest: spawn: incomplete spec %+v", spec)
	}
	id := s.nextID(onExit)
	s.spawned = append(s.spawned, spawned{ID: id, Spec: spec})
	return id, nil
}

// takeFailing is the failure FailNext set, once; s.mu is held.
func (s *Spawner) takeFailing() error {
	err := s.failing
	s.failing = nil
	return err
}

// nextID numbers a new process, which onExit is told of its end; s.mu is
// held.
func (s *Spawner) nextID(onExit func(host.Exit)) protocol.ProcID {
	id := protocol.ProcID{PID: s.next, Start: s.start}
	s.next++
	s.start += 10
	s.running[id] = onExit
	return id
}

// started is one run's process the fake started.
type started struct {
	ID   protocol.ProcID
	Spec host.RunSpec
}

// StartRun records spec and "starts" a run's process, numbered as Spawn's;
// Support, when set, refuses what it does not provide, as the real one does.
func (s *Spawner) StartRun(spec host.RunSpec, onExit func(host.Exit)) (protocol.ProcID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.takeFailing(); err != nil {
		return protocol.ProcID{}, err
	}
	if onExit == nil || len(spec.Command) == 0 || spec.Dir == "" {
		return protocol.ProcID{}, fmt.Errorf("hosttest: start run: incomplete spec %+v", spec)
	}
	if err := s.Support.Check(spec.Sandbox, spec.Limits); err != nil {
		return protocol.ProcID{}, err
	}
	id := s.nextID(onExit)
	s.started = append(s.started, started{ID: id, Spec: spec})
	return id, nil
}

// Started returns the runs' processes started so far, in order.
func (s *Spawner) Started() []started {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.started)
}

// Watch follows a process not spawned here; End reports it.
func (s *Spawner) Watch(id protocol.ProcID, onExit func(host.Exit)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.running[id]; ok {
		return fmt.Errorf("hosttest: watch %s: already followed", id)
	}
	s.running[id] = onExit
	return nil
}

// End ends a running process with e (its ID is set to id), calling its
// onExit once, on this goroutine.
func (s *Spawner) End(id protocol.ProcID, e host.Exit) error {
	s.mu.Lock()
	onExit, ok := s.running[id]
	delete(s.running, id)
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("hosttest: end %s: %w", id, host.ErrGone)
	}
	e.ID = id
	onExit(e)
	return nil
}

// Signal records the signal; ErrGone for a process that is not running.
func (s *Spawner) Signal(id protocol.ProcID, sig host.Signal) error {
	s.mu.Lock()
	if err, ok := s.SignalErr[id]; ok {
		s.mu.Unlock()
		return err
	}
	_, ok := s.running[id]
	if ok {
		s.sent = append(s.sent, Sent{ID: id, Sig: sig})
	}
	h := s.OnSignal
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("hosttest: signal %s %s: %w", id, sig, host.ErrGone)
	}
	if h != nil {
		h(id, sig)
	}
	return nil
}

// Spawned lists what was spawned, in order.
func (s *Spawner) Spawned() []spawned {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]spawned(nil), s.spawned...)
}

// Sent lists the signals sent, in order.
func (s *Spawner) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sent(nil), s.sent...)
}

// Running lists the processes not yet ended.
func (s *Spawner) Running() []protocol.ProcID {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]protocol.ProcID, 0, len(s.running))
	for id := range s.running {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

// ProcTable is a table the test sets.
type ProcTable struct {
	mu    sync.Mutex
	table host.Table
	err   error
}

// Set replaces the table.
func (p *ProcTable) Set(t host.Table) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.table = t
}

// SetErr makes Scan and Naming fail with err (nil to stop).
func (p *ProcTable) SetErr(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.err = err
}

// Scan returns the table.
func (p *ProcTable) Scan() (host.Table, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.table, p.err
}

// Naming answers from the table, as host.Table.Naming does.
func (p *ProcTable) Naming(k messages.WorkspaceKey) (host.Verdict, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return host.Verdict{Key: k}, p.err
	}
	return p.table.Naming(k), nil
}
