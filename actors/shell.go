package actors

import (
	"context"
	"log/slog"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ocx-go/ocx/messages"
)

// shell is the protoactor side of every actor: it hands each message to the
// core and runs the effects the core returns. Host effects run on goroutines
// of the shell's own, and their results come back to the actor as messages,
// so Receive never blocks on I/O. Tells, starts and stops of children are done
// in Receive itself, in the order the core returned them.
type shell struct {
	addr    messages.ActorAddr
	newCore func() core
	core    core
	deps    *Deps
	cfg     Config
	log     *slog.Logger

	children map[messages.ActorAddr]*actor.PID
	byID     map[string]messages.ActorAddr
	run      *runner

	// requests are the senders of snapshot requests still to answer, by the
	// number the core knows them by.
	requests map[int]*actor.PID
	nextReq  int
}

func newShell(addr messages.ActorAddr, deps *Deps, cfg Config, newCore func() core) *shell {
	return &shell{addr: addr, newCore: newCore, deps: deps, cfg: cfg,
		log: deps.Logger.With(slog.String(KeyActor, addr.String()))}
}

// Receive is protoactor's entry point.
func (s *shell) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		// The core is made here, so that a restart (which our supervisors
		// never choose) would also begin from the first state.
		s.core = s.newCore()
		s.children = map[messages.ActorAddr]*actor.PID{}
		s.byID = map[string]messages.ActorAddr{}
		s.requests = map[int]*actor.PID{}
		s.run = newRunner(ctx.ActorSystem(), ctx.Self(), s.deps)
		s.apply(ctx, s.core.Start(s.deps.Clock.Now()))
	case *actor.Stopping:
		s.run.stop()
	case *actor.Stopped, *actor.Restarting:
	case *actor.Terminated:
		if a, ok := s.byID[m.Who.Id]; ok {
			delete(s.byID, m.Who.Id)
			if pid, ok := s.children[a]; ok && pid.Id == m.Who.Id {
				delete(s.children, a)
			}
			s.step(ctx, messages.ChildStopped{Addr: a})
		}
	case messages.SnapshotRequest:
		s.nextReq++
		s.requests[s.nextReq] = ctx.Sender()
		s.step(ctx, messages.SnapshotRequest{Request: s.nextReq})
	case messages.DaemonMessage:
		s.step(ctx, m)
	default:
		s.log.Warn("a message the daemon's actors do not take", slog.Any(KeyMessage, m))
	}
}

func (s *shell) step(ctx actor.Context, m messages.DaemonMessage) {
	s.log.Debug("message", slog.String(KeyMessage, m.String()))
	s.apply(ctx, s.core.Step(s.deps.Clock.Now(), m))
}

func (s *shell) apply(ctx actor.Context, effs []messages.DaemonEffect) {
	for _, e := range effs {
		switch e := e.(type) {
		case messages.Tell:
			to := s.resolve(ctx, e.To)
			if to == nil {
				s.log.Error("a message to an actor this one does not know dropped", slog.String("to", e.To.String()), slog.String(KeyMessage, e.Msg.String()))
				continue
			}
			ctx.Send(to, e.Msg)
		case messages.StartActor:
			props := s.childProps(e)
			if props == nil {
				s.log.Error("cannot start that child", slog.String("child", e.Addr.String()))
				continue
			}
			pid := ctx.SpawnPrefix(props, string(e.Addr.Kind))
			s.children[e.Addr] = pid
			s.byID[pid.Id] = e.Addr
		case messages.StopActor:
			// The child stays in byID until protoactor reports it
			// terminated; the core learns it then, as ChildStopped.
			if pid, ok := s.children[e.Addr]; ok {
				delete(s.children, e.Addr)
				ctx.Stop(pid)
			}
		case messages.ReplySnapshot:
			if to, ok := s.requests[e.Request]; ok {
				delete(s.requests, e.Request)
				if to != nil {
					ctx.Send(to, e.Handoff)
				}
			}
		case messages.LogEvent:
			s.log.LogAttrs(context.Background(), e.Level, e.Text, e.Attrs...)
		case messages.StartTimer:
			s.log.Debug("effect", slog.String(KeyEffect, e.String()))
			s.run.timer(s.deps.Clock, e)
		default:
			s.log.Debug("effect", slog.String(KeyEffect, e.String()))
			s.run.effect(e)
		}
	}
}

// resolve maps a logical address to a PID: a child of this actor, or its parent.
func (s *shell) resolve(ctx actor.Context, a messages.ActorAddr) *actor.PID {
	if pid, ok := s.children[a]; ok {
		return pid
	}
	switch {
	case s.addr.Kind == messages.ActorWorkspace && a.Kind == messages.ActorNode,
		(s.addr.Kind == messages.ActorSession || s.addr.Kind == messages.ActorBranch) &&
			a.Kind == messages.ActorWorkspace && a.Workspace == s.addr.Workspace:
		return ctx.Parent()
	}
	return nil
}

func (s *shell) childProps(e messages.StartActor) *actor.Props {
	switch {
	case e.Addr.Kind == messages.ActorWorkspace && e.Workspace != nil:
		return WorkspaceProps(*s.deps, s.cfg, *e.Workspace)
	case e.Addr.Kind == messages.ActorSession && e.Session != nil:
		return SessionProps(*s.deps, s.cfg, *e.Session)
	case e.Addr.Kind == messages.ActorBranch && e.Branch != nil:
		return BranchProps(*s.deps, s.cfg, *e.Branch)
	}
	return nil
}

// runner runs an actor's host effects on goroutines and sends each result back
// to the actor, unless the actor has stopped: then the result is dropped, so
// that a late result never becomes a dead letter.
type runner struct {
	system *actor.ActorSystem
	self   *actor.PID
	deps   *Deps
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	stopped bool
	timers  map[int]func() bool
	nextID  int
	// running counts the effect goroutines, so a test can wait for them.
	running sync.WaitGroup
}

func newRunner(system *actor.ActorSystem, self *actor.PID, deps *Deps) *runner {
	ctx, cancel := context.WithCancel(context.Background())
	return &runner{system: system, self: self, deps: deps, ctx: ctx, cancel: cancel, timers: map[int]func() bool{}}
}

func (r *runner) effect(e messages.DaemonEffect) {
	r.running.Add(1)
	go func() {
		defer r.running.Done()
		r.deliver(r.deps.run(r.ctx, e))
	}()
}

func (r *runner) timer(c Clock, e messages.StartTimer) {
	r.mu.Lock()
	r.nextID++
	id := r.nextID
	r.mu.Unlock()
	// The clock is called without the lock held, in case it runs f at once.
	fired := false
	stop := c.AfterFunc(e.After, func() {
		r.mu.Lock()
		fired = true
		delete(r.timers, id)
		r.mu.Unlock()
		r.deliver(messages.TimerFired{Proc: e.Proc, Purpose: e.Purpose, Seq: e.Seq})
	})
	r.mu.Lock()
	if !fired && !r.stopped {
		r.timers[id] = stop
	}
	stopped := r.stopped
	r.mu.Unlock()
	if stopped {
		stop()
	}
}

func (r *runner) deliver(m messages.DaemonMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || m == nil || r.ctx.Err() != nil {
		return
	}
	r.system.Root.Send(r.self, m)
}

// stop cancels every effect still running and every timer, and drops their
// results from now on.
func (r *runner) stop() {
	r.mu.Lock()
	r.stopped = true
	timers := r.timers
	r.timers = map[int]func() bool{}
	r.mu.Unlock()
	r.cancel()
	for _, t := range timers {
		t()
	}
}
