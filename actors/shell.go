package actors

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// tree is what every shell of one actor tree shares: the dependencies, the
// tunables, the supervision strategy and the mailbox producer. A shell holds
// a pointer to it rather than copies, so that ten thousand idle workspace
// actors do not carry ten thousand copies of the same values.
type tree struct {
	deps     *Deps
	cfg      Config
	strategy actor.SupervisorStrategy
	mailbox  actor.MailboxProducer
	// effects runs the host effects, mailboxes the actors' turns: both
	// bounded, so that a burst does not become a goroutine per actor.
	effects   workers
	mailboxes workers
}

func newTree(deps Deps, cfg Config) *tree {
	// The lock-free mailbox is as unbounded as protoactor's default (a
	// bounded one would block the reaper, a dropping one would lose exits),
	// but an empty one is a list head rather than a ring of ten slots.
	return &tree{deps: &deps, cfg: cfg, strategy: stopStrategy(deps.Logger), mailbox: actor.UnboundedLockfree(),
		effects: workers{max: maxEffects}, mailboxes: workers{max: maxTurns}}
}

// maxEffects bounds the goroutines that run host effects at once, for the
// whole tree, and maxTurns those that run actors' mailboxes. A burst of lines
// (a thousand workspaces told to stop, a flood of posts from the hook) would
// otherwise start a goroutine per effect and per actor, whose stacks, though
// short-lived, stay in the daemon's resident memory: 1,700 at once, 14 MB of
// stacks, were measured with protoactor's dispatcher. Fossil's server and the
// process table gain nothing from more effects at once, and a turn never
// blocks (an actor hands all I/O to effects), so a few workers keep both
// cores busy.
const (
	maxEffects = 32
	maxTurns   = 8
)

// dispatcher is protoactor's Dispatcher over the tree's mailbox workers. A
// mailbox is scheduled only when it has messages and runs until it is empty,
// yielding every throughput messages as protoactor's own does.
type dispatcher struct{ w *workers }

func (d dispatcher) Schedule(fn func()) { d.w.submit(fn) }

func (dispatcher) Throughput() int { return 300 }

// workers runs functions in the order given on at most max goroutines, none
// while there is nothing to run: a worker ends when the queue is empty, so an
// idle tree holds no goroutine and needs no closing. Submitting never blocks.
type workers struct {
	mu      sync.Mutex
	max     int
	running int
	queue   []func()
}

func (w *workers) submit(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queue = append(w.queue, f)
	if w.running < w.max {
		w.running++
		go w.work()
	}
}

func (w *workers) work() {
	for {
		w.mu.Lock()
		if len(w.queue) == 0 {
			w.running--
			w.queue = nil // the backing array of a burst is not kept
			w.mu.Unlock()
			return
		}
		f := w.queue[0]
		w.queue[0] = nil
		w.queue = w.queue[1:]
		w.mu.Unlock()
		f()
	}
}

// props makes the props of an actor of the tree, whose shell produce makes.
func (t *tree) props(produce actor.Producer, opts ...actor.PropsOption) *actor.Props {
	return actor.PropsFromProducer(produce, append([]actor.PropsOption{actor.WithSupervisor(t.strategy), actor.WithMailbox(t.mailbox),
		actor.WithDispatcher(dispatcher{&t.mailboxes})}, opts...)...)
}

// coreFor makes the core a StartActor asks for, or nil if it carries no state.
func (t *tree) coreFor(e protocol.StartActor) core {
	switch {
	case e.Addr.Kind == protocol.ActorWorkspace && e.Workspace != nil:
		return newWorkspaceCore(t.cfg, *e.Workspace)
	case e.Addr.Kind == protocol.ActorSession && e.Session != nil:
		return newSessionCore(t.cfg, *e.Session)
	case e.Addr.Kind == protocol.ActorBranch && e.Branch != nil:
		return newBranchCore(t.cfg, *e.Branch)
	case e.Addr.Kind == protocol.ActorRun && e.Run != nil:
		return restoreRunCore(t.cfg, e.Run.Facts, runKept(*e.Run))
	case e.Addr.Kind == protocol.ActorRun:
		return newRunCore(t.cfg, e.Addr.Run)
	}
	return nil
}

// shell is the protoactor side of every actor: it hands each message to the
// core and runs the effects the core returns. Host effects run on goroutines
// of the shell's own, and their results come back to the actor as messages,
// so Receive never blocks on I/O. Tells, starts and stops of children are done
// in Receive itself, in the order the core returned them.
//
// An idle shell is small on purpose (a node may hold ten thousand workspace
// actors): what the tree shares is behind one pointer, and what only some
// actors need (children, snapshot requests, effects in flight) is allocated
// when first needed.
type shell struct {
	tree *tree
	core core
	// self and sys are set when the actor starts, before any effect runs.
	self *actor.PID
	sys  *actor.ActorSystem
	// fam is nil until the actor starts its first child.
	fam *family
	run runner
	// serial runs a run actor's effects one at a time, in the order its
	// core asked for them (care before the workspace is made, a launch
	// before its signal); nil for every other actor.
	serial *workers
	// requests are the senders of snapshot requests still to answer, by the
	// number the core knows them by; nil when none waits.
	requests map[int]*actor.PID
	nextReq  int
}

// family is what a shell with children keeps: the props its children are
// spawned with, one for all of them, and each running child by name.
type family struct {
	props *actor.Props
	// next is the shell being spawned. protoactor calls the props' producer
	// synchronously inside Spawn, in the parent's Receive, so the parent
	// hands the child's shell over through this field; one Props then serves
	// every child instead of a Props and a closure per child.
	next atomic.Pointer[shell]
	// kids maps a running child's name (childName) to its PID. A child asked
	// to stop leaves it at once, so nothing more is told to it.
	kids map[string]*actor.PID
}

// notRestarted stands in for a child protoactor asks its props to make again:
// a restart, which the tree's supervisors never choose. It stops at once, so
// that the parent learns that the child stopped instead of a child running
// from a state that is not its own.
type notRestarted struct{}

func (notRestarted) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); ok {
		ctx.Stop(ctx.Self())
	}
}

func (s *shell) family() *family {
	if s.fam == nil {
		f := &family{kids: map[string]*actor.PID{}}
		f.props = s.tree.props(func() actor.Actor {
			if c := f.next.Swap(nil); c != nil {
				return c
			}
			return notRestarted{}
		})
		s.fam = f
	}
	return s.fam
}

// childName names a child by its address, so that its PID's ID says which
// actor it is and the address can be read back from it when it stops: the
// parent keeps no second map from IDs to addresses.
func childName(a protocol.ActorAddr) string {
	switch a.Kind {
	case protocol.ActorWorkspace:
		return "w" + a.Workspace.String()
	case protocol.ActorSession:
		return "s" + a.Proc.String()
	case protocol.ActorBranch:
		return "b" + a.Branch
	case protocol.ActorRun:
		return "r" + a.Run
	}
	return ""
}

// childAddr reads back the address childName wrote. The name was made by
// this shell, so it is not validated again: a workspace key is split at its
// one slash, a session's PID@START read as numbers.
func (s *shell) childAddr(name string) (protocol.ActorAddr, bool) {
	if name == "" {
		return protocol.ActorAddr{}, false
	}
	rest := name[1:]
	switch name[0] {
	case 'w':
		login, project, ok := strings.Cut(rest, "/")
		return protocol.WorkspaceAddr(messages.WorkspaceKey{Login: login, Project: project}), ok
	case 's':
		pid, start, ok := strings.Cut(rest, "@")
		p, err1 := strconv.Atoi(pid)
		st, err2 := strconv.ParseUint(start, 10, 64)
		return protocol.SessionAddr(s.core.addr().Workspace, protocol.ProcID{PID: p, Start: st}), ok && err1 == nil && err2 == nil
	case 'b':
		return protocol.BranchAddr(s.core.addr().Workspace, rest), true
	case 'r':
		return protocol.RunAddr(rest), true
	}
	return protocol.ActorAddr{}, false
}

// Receive is protoactor's entry point.
func (s *shell) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.self, s.sys = ctx.Self(), ctx.ActorSystem()
		s.apply(ctx, s.core.Start(s.tree.deps.Clock.Now()))
	case *actor.Stopping:
		s.stopEffects()
	case *actor.Stopped, *actor.Restarting:
	case *actor.Terminated:
		name, ok := strings.CutPrefix(m.Who.Id, s.self.Id+"/")
		if !ok {
			return
		}
		a, ok := s.childAddr(name)
		if !ok {
			s.logAttrs(slog.LevelError, "a child with a name this actor does not give stopped", slog.String("child", m.Who.Id))
			return
		}
		if s.fam != nil {
			if pid, ok := s.fam.kids[name]; ok && pid.Id == m.Who.Id {
				delete(s.fam.kids, name)
			}
		}
		if s.stopping() {
			// The actor is stopping, and protoactor stops its children
			// first: nothing stopped unexpectedly.
			return
		}
		s.step(ctx, protocol.ChildStopped{Addr: a})
	case protocol.SnapshotRequest:
		s.nextReq++
		if s.requests == nil {
			s.requests = map[int]*actor.PID{}
		}
		s.requests[s.nextReq] = ctx.Sender()
		s.step(ctx, protocol.SnapshotRequest{Request: s.nextReq})
	case protocol.DaemonMessage:
		s.step(ctx, m)
	default:
		s.logAttrs(slog.LevelWarn, "a message the daemon's actors do not take", slog.Any(keyMessage, m))
	}
}

// logAttrs logs through the tree's one logger, naming the actor; an actor
// keeps no logger of its own.
func (s *shell) logAttrs(level slog.Level, text string, attrs ...slog.Attr) {
	log := s.tree.deps.Logger
	if !log.Enabled(context.Background(), level) {
		return
	}
	all := make([]slog.Attr, 0, len(attrs)+1)
	all = append(all, slog.String(keyActor, s.core.addr().String()))
	log.LogAttrs(context.Background(), level, text, append(all, attrs...)...)
}

func (s *shell) step(ctx actor.Context, m protocol.DaemonMessage) {
	if s.tree.deps.Logger.Enabled(context.Background(), slog.LevelDebug) {
		s.logAttrs(slog.LevelDebug, "message", slog.String(keyMessage, m.String()))
	}
	s.apply(ctx, s.core.Step(s.tree.deps.Clock.Now(), m))
}

func (s *shell) apply(ctx actor.Context, effs []protocol.DaemonEffect) {
	for _, e := range effs {
		switch e := e.(type) {
		case protocol.Tell:
			to := s.resolve(ctx, e.To)
			if to == nil {
				s.logAttrs(slog.LevelError, "a message to an actor this one does not know dropped", slog.String("to", e.To.String()), slog.String(keyMessage, e.Msg.String()))
				continue
			}
			ctx.Send(to, e.Msg)
		case protocol.StartActor:
			s.spawn(ctx, e)
		case protocol.StopActor:
			// The child's address comes back from its name when protoactor
			// reports it terminated; the core learns it then, as
			// ChildStopped.
			if s.fam != nil {
				name := childName(e.Addr)
				if pid, ok := s.fam.kids[name]; ok {
					delete(s.fam.kids, name)
					ctx.Stop(pid)
				}
			}
		case protocol.ReplySnapshot:
			if to, ok := s.requests[e.Request]; ok {
				delete(s.requests, e.Request)
				if len(s.requests) == 0 {
					s.requests = nil
				}
				if to != nil {
					ctx.Send(to, e.Handoff)
				}
			}
		case protocol.LogEvent:
			s.logAttrs(e.Level, e.Text, e.Attrs...)
		case protocol.StartTimer:
			s.logEffect(e)
			s.timer(e.After, protocol.TimerFired{Proc: e.Proc, Purpose: e.Purpose, Seq: e.Seq})
		case protocol.RunStartTimer:
			s.logEffect(e)
			s.timer(e.After, protocol.RunTimerFired{Purpose: e.Purpose, Seq: e.Seq})
		default:
			s.logEffect(e)
			s.effect(e)
		}
	}
}

func (s *shell) logEffect(e protocol.DaemonEffect) {
	if s.tree.deps.Logger.Enabled(context.Background(), slog.LevelDebug) {
		s.logAttrs(slog.LevelDebug, "effect", slog.String(keyEffect, e.String()))
	}
}

// spawn starts a child with a core made from the StartActor's state, under
// a name made from its address.
func (s *shell) spawn(ctx actor.Context, e protocol.StartActor) {
	c := s.tree.coreFor(e)
	name := childName(e.Addr)
	if c == nil || name == "" {
		s.logAttrs(slog.LevelError, "cannot start that child", slog.String("child", e.Addr.String()))
		return
	}
	f := s.family()
	f.next.Store(&shell{tree: s.tree, core: c})
	pid, err := ctx.SpawnNamed(f.props, name)
	f.next.Store(nil)
	if err != nil {
		// A name is taken only by a child that has not stopped, and the
		// cores start a child again only after it stopped.
		s.logAttrs(slog.LevelError, "cannot start that child", slog.String("child", e.Addr.String()), errAttr(err))
		return
	}
	// The name is kept as the tail of the PID's own ID, not a copy.
	f.kids[pid.Id[len(pid.Id)-len(name):]] = pid
}

// resolve maps a logical address to a PID: a child of this actor, or its parent.
func (s *shell) resolve(ctx actor.Context, a protocol.ActorAddr) *actor.PID {
	if s.fam != nil {
		if pid, ok := s.fam.kids[childName(a)]; ok {
			return pid
		}
	}
	self := s.core.addr()
	switch {
	case (self.Kind == protocol.ActorWorkspace || self.Kind == protocol.ActorRun) && a.Kind == protocol.ActorNode,
		(self.Kind == protocol.ActorSession || self.Kind == protocol.ActorBranch) &&
			a.Kind == protocol.ActorWorkspace && a.Workspace == self.Workspace:
		return ctx.Parent()
	}
	return nil
}

// runner is what a shell keeps of its host effects in flight: each effect
// runs on a goroutine and sends its result back to the actor, unless the
// actor has stopped: then the result is dropped, so that a late result never
// becomes a dead letter.
type runner struct {
	mu      sync.Mutex
	stopped bool
	nextID  int
	// live cancels each effect still running and each timer not yet fired,
	// by number; nil when there is none, so that an idle actor holds no map.
	live map[int]func()
	// running counts the effect goroutines, so a test can wait for them.
	running sync.WaitGroup
}

// add registers a cancel function; the caller holds mu.
func (r *runner) add(cancel func()) int {
	r.nextID++
	if r.live == nil {
		r.live = map[int]func(){}
	}
	r.live[r.nextID] = cancel
	return r.nextID
}

// done forgets an effect or timer, reporting whether it was still
// registered; the caller holds mu.
func (r *runner) done(id int) bool {
	_, ok := r.live[id]
	delete(r.live, id)
	if len(r.live) == 0 {
		r.live = nil
	}
	return ok
}

// effect runs a host effect off the actor's goroutine, with a context that
// the actor's stop cancels: on the tree's workers, or, for a watch (of a
// process or of a session's limits), which lasts as long as its process,
// on a goroutine of its own, so that no number of watches can hold up the
// other effects.
func (s *shell) effect(e protocol.DaemonEffect) {
	r := &s.run
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	id := r.add(cancel)
	r.running.Add(1)
	r.mu.Unlock()
	run := func() {
		defer r.running.Done()
		var m protocol.DaemonMessage
		// An effect whose actor stopped while it waited in the queue is
		// not run: its result would be dropped.
		if ctx.Err() == nil {
			m = s.tree.deps.run(ctx, e)
			if o := s.tree.deps.Observe; o != nil {
				o(e, m)
			}
		}
		r.mu.Lock()
		r.done(id)
		r.mu.Unlock()
		cancel()
		s.deliver(m)
	}
	switch e.(type) {
	case protocol.WatchProcess, protocol.WatchLimits:
		// Beside the actor's other effects: a watch lasts.
		go run()
		return
	case protocol.RunEndPreparing:
		// Beside the run's preparation, which it ends (D99).
		go run()
		return
	}
	if s.core.addr().Kind == protocol.ActorRun {
		if s.serial == nil {
			s.serial = &workers{max: 1}
		}
		s.serial.submit(run)
		return
	}
	s.tree.effects.submit(run)
}

// timer arms a timer on the tree's clock, which sends fired when it fires.
func (s *shell) timer(after time.Duration, fired protocol.DaemonMessage) {
	r := &s.run
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	id := r.add(nil)
	r.mu.Unlock()
	// The clock is called without the lock held, in case it runs f at once.
	stop := s.tree.deps.Clock.AfterFunc(after, func() {
		r.mu.Lock()
		pending := r.done(id)
		r.mu.Unlock()
		if pending {
			s.deliver(fired)
		}
	})
	r.mu.Lock()
	if _, pending := r.live[id]; pending {
		r.live[id] = func() { stop() }
	}
	stopped := r.stopped
	r.mu.Unlock()
	if stopped {
		stop()
	}
}

func (s *shell) deliver(m protocol.DaemonMessage) {
	r := &s.run
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || m == nil {
		return
	}
	s.sys.Root.Send(s.self, m)
}

// stopEffects cancels every effect still running and every timer, and drops
// their results from now on.
// stopping says the actor itself is stopping (stopEffects ran).
func (s *shell) stopping() bool {
	s.run.mu.Lock()
	defer s.run.mu.Unlock()
	return s.run.stopped
}

func (s *shell) stopEffects() {
	r := &s.run
	r.mu.Lock()
	r.stopped = true
	live := r.live
	r.live = nil
	r.mu.Unlock()
	for _, cancel := range live {
		if cancel != nil {
			cancel()
		}
	}
}
