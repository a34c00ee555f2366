package actors

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// fakeWorld implements every interface of deps.go over one model of the
// record and the process table, and records what the actors did. It answers
// at once (a watch waits until its process is gone); every method is safe
// from the shells' goroutines.
type fakeWorld struct {
	mu sync.Mutex
	// runs is the world's run engine (seed 004); nil for none.
	runs RunHost

	launches map[string]protocol.LaunchSpec
	checkins map[string]string // hash -> branch
	order    []string          // trunk check-ins, oldest first
	tested   map[string]bool
	procs    map[protocol.ProcID]*fakeProc
	nextPID  int
	nextN    int

	// failNext makes the next call of that name fail once.
	failNext map[string]bool

	refusals  map[string]int
	ends      map[protocol.ProcID][]protocol.WriteEnd
	endCalls  map[protocol.ProcID]int // successful calls, before the writer's own check
	signals   []protocol.SignalProcess
	spawns    map[string]int
	paused    bool
	zombies   []protocol.ProcessExited
	handoffs  []protocol.Handoff
	execFails bool
	// toNode sends a message to the node of the tree running now, as the
	// reaper and the pipe reader do.
	toNode func(protocol.DaemonMessage)

	clock *fakeClock
	// log records what the fake did, for a failure's message.
	log []string
}

func (f *fakeWorld) logf(format string, args ...any) {
	f.log = append(f.log, fmt.Sprintf(format, args...))
}

type fakeProc struct {
	id     protocol.ProcID
	w      messages.WorkspaceKey
	origin messages.Origin
	launch protocol.LaunchSpec
	alive  bool
	result bool
	gone   chan struct{}
}

func newFakeWorld() *fakeWorld {
	return &fakeWorld{
		launches: map[string]protocol.LaunchSpec{}, checkins: map[string]string{}, tested: map[string]bool{},
		procs: map[protocol.ProcID]*fakeProc{}, nextPID: 700, failNext: map[string]bool{},
		refusals: map[string]int{}, ends: map[protocol.ProcID][]protocol.WriteEnd{}, endCalls: map[protocol.ProcID]int{}, spawns: map[string]int{},
		clock: newFakeClock(time.Unix(1_000_000, 0)),
	}
}

func (f *fakeWorld) deps() Deps {
	return Deps{Classifier: f, Checkins: f, Notes: f, Procs: f, Spawner: f, Signaler: f, Watcher: f, Clock: f.clock, Inputs: f, Execer: f, Runs: f.runs}
}

func (f *fakeWorld) fail(name string) error {
	if f.failNext[name] {
		delete(f.failNext, name)
		return errors.New("injected failure of " + name)
	}
	return nil
}

func (f *fakeWorld) hash() string {
	f.nextN++
	return testHash(f.nextN)
}

func (f *fakeWorld) Classify(_ context.Context, repository, hash string) (Classification, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail("classify"); err != nil {
		return Classification{}, err
	}
	if l, ok := f.launches[hash]; ok {
		return Classification{Launch: &l}, nil
	}
	if b, ok := f.checkins[hash]; ok {
		lt := messages.Completes
		if b == "dev" {
			lt = messages.Stays
		}
		return Classification{Checkin: &protocol.CheckinSpec{Hash: hash, Repository: repository, Branch: b, Listeners: []protocol.BranchListener{
			{Workspace: wsCI, Repository: repository, Record: testHash(9001), ListenNote: testHash(9002), Lifetime: lt}}}}, nil
	}
	return Classification{Nothing: "not a note of the daemon's"}, nil
}

func (f *fakeWorld) ResolveLaunch(_ context.Context, p protocol.ProcInfo) (protocol.LaunchSpec, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.launches[p.Launch]
	if !ok {
		return l, fmt.Errorf("no launch note %s", p.Launch)
	}
	return l, nil
}

func (f *fakeWorld) Queue(_ context.Context, _ protocol.BranchListener, branch string) (Queue, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail("untested"); err != nil {
		return Queue{}, err
	}
	var q Queue
	for _, h := range f.order {
		if !f.tested[h] {
			q.Waiting = append(q.Waiting, h)
		}
	}
	return q, nil
}

func (f *fakeWorld) RunResult(_ context.Context, l protocol.LaunchSpec) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.procs {
		if p.launch.Hash == l.Hash && p.result {
			return "green: ok", true, nil
		}
	}
	return "", false, nil
}

func (f *fakeWorld) WriteRefusal(_ context.Context, n protocol.WriteRefusal) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refusals[n.Launch.Hash]++
	return nil
}

func (f *fakeWorld) WriteEnd(_ context.Context, n protocol.WriteEnd) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail("end"); err != nil {
		f.logf("end note %s fails", n.Proc)
		return err
	}
	f.endCalls[n.Proc]++
	f.logf("end note %s", n.Proc)
	// As decisions D6 asks of the real writer: none if one is there already.
	if len(f.ends[n.Proc]) > 0 {
		return nil
	}
	f.ends[n.Proc] = append(f.ends[n.Proc], n)
	return nil
}

func (f *fakeWorld) WriteLaunch(_ context.Context, n protocol.WriteLaunch) (protocol.LaunchSpec, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := protocol.LaunchSpec{Hash: f.hash(), Repository: n.Listener.Repository, Workspace: n.Listener.Workspace, Record: n.Listener.Record,
		Lifetime: messages.Completes, Checkin: n.Checkin, Branch: n.Branch}
	f.launches[l.Hash] = l
	return l, nil
}

func (f *fakeWorld) Scan(_ context.Context, w messages.WorkspaceKey) ([]protocol.ProcInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail("scan"); err != nil {
		return nil, err
	}
	var ps []protocol.ProcInfo
	for _, p := range f.procs {
		if p.alive && p.w == w {
			ps = append(ps, protocol.ProcInfo{Proc: p.id, Workspace: w, Verb: "serve", Launch: p.launch.Hash, StartedBy: p.origin})
		}
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Proc.PID < ps[j].Proc.PID })
	return ps, nil
}

func (f *fakeWorld) Spawn(_ context.Context, l protocol.LaunchSpec) (protocol.ProcID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail("spawn"); err != nil {
		return protocol.ProcID{}, err
	}
	f.nextPID++
	id := protocol.ProcID{PID: f.nextPID, Start: 5000}
	f.procs[id] = &fakeProc{id: id, w: l.Workspace, origin: messages.OriginDaemon, launch: l, alive: true, gone: make(chan struct{})}
	f.spawns[l.Hash]++
	f.logf("spawn %s in %s for %s (ci %v)", id, l.Workspace, l.Hash[:10], l.IsCI())
	return id, nil
}

func (f *fakeWorld) Signal(_ context.Context, p protocol.ProcID, group bool, sig string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.signals = append(f.signals, protocol.SignalProcess{Proc: p, Group: group, Signal: sig})
	return nil
}

func (f *fakeWorld) Watch(ctx context.Context, id protocol.ProcID) error {
	f.mu.Lock()
	p := f.procs[id]
	f.mu.Unlock()
	if p == nil {
		return nil
	}
	select {
	case <-p.gone:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fakeWorld) Pause(context.Context) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paused = true
	f.logf("pause")
	return nil, nil
}

func (f *fakeWorld) Resume(context.Context, []byte) error {
	f.mu.Lock()
	f.paused = false
	f.logf("resume, %d zombies", len(f.zombies))
	zs := f.zombies
	f.zombies = nil
	send := f.toNode
	f.mu.Unlock()
	for _, z := range zs {
		send(z)
	}
	return nil
}

func (f *fakeWorld) Exec(_ context.Context, h protocol.Handoff) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.execFails {
		f.logf("exec fails")
		return errors.New("exec: no such file or directory")
	}
	f.logf("exec with %s", h.Summary())
	f.handoffs = append(f.handoffs, h)
	return nil // the image is replaced; the test starts the new tree
}

// orphan adds a `workspace serve` process of a previous daemon, for a Boot.
func (f *fakeWorld) orphan(w messages.WorkspaceKey) protocol.ProcInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := protocol.LaunchSpec{Hash: f.hash(), Repository: treeRep, Workspace: w, Record: testHash(8000), Lifetime: messages.Stays}
	f.launches[l.Hash] = l
	f.nextPID++
	id := protocol.ProcID{PID: f.nextPID, Start: 4000}
	f.procs[id] = &fakeProc{id: id, w: w, origin: messages.OriginOrphan, launch: l, alive: true, gone: make(chan struct{})}
	return protocol.ProcInfo{Proc: id, Workspace: w, Verb: "serve", Launch: l.Hash, StartedBy: messages.OriginOrphan}
}

func (f *fakeWorld) isPaused() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.paused
}

func (f *fakeWorld) hasHandoff() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.handoffs) > 0
}

func (f *fakeWorld) orphans() []protocol.ProcID {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []protocol.ProcID
	for _, p := range f.procs {
		if p.origin == messages.OriginOrphan {
			out = append(out, p.id)
		}
	}
	return out
}

// exit ends a process: a child's exit goes to the node as the reaper would
// send it (or waits as a zombie while the reaper is paused); an adopted
// process's watch sees it gone.
func (f *fakeWorld) exit(id protocol.ProcID, leftResult bool) {
	f.mu.Lock()
	p := f.procs[id]
	p.alive = false
	f.logf("%s exits (paused %v)", id, f.paused)
	if p.launch.IsCI() && leftResult {
		f.tested[p.launch.Checkin] = true
		p.result = true
	}
	close(p.gone)
	var send func(protocol.DaemonMessage)
	e := protocol.ProcessExited{Proc: id, Workspace: p.w, Status: messages.ExitStatus{State: messages.EndExited}, At: f.clock.Now()}
	if p.origin == messages.OriginDaemon {
		if f.paused {
			f.zombies = append(f.zombies, e)
		} else {
			send = f.toNode
		}
	}
	f.mu.Unlock()
	if send != nil {
		send(e)
	}
}

// fakeClock is a clock whose timers fire when the test says so.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	f       func()
	stopped bool
}

func newFakeClock(now time.Time) *fakeClock { return &fakeClock{now: now} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(_ time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// fire runs the i-th timer still armed (in arming order); false if none.
func (c *fakeClock) fire(i int) bool {
	c.mu.Lock()
	var armed []*fakeTimer
	for _, t := range c.timers {
		if !t.stopped {
			armed = append(armed, t)
		}
	}
	if len(armed) == 0 {
		c.mu.Unlock()
		return false
	}
	t := armed[i%len(armed)]
	t.stopped = true
	c.mu.Unlock()
	t.f()
	return true
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
