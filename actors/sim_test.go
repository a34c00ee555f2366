package actors

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/ocx-go/ocx/messages/protocol"
)

// sim runs the actor tree's cores without protoactor, the way the shells do:
// each actor has a mailbox, a step takes one message, Tell enqueues, StartActor
// makes a child core and runs its Start at once (protoactor delivers Started
// before any user message), StopActor removes an actor and its children, and
// host effects wait in a list until the test answers them. Delivery follows a
// scheduler: the oldest message first (a deterministic schedule for
// transcripts), or a choice among the non-empty mailboxes (a property test's
// random schedule). Both keep each mailbox first-in first-out, as protoactor
// does.
type sim struct {
	cfg   Config
	now   time.Time
	cores map[protocol.ActorAddr]core
	// parent of each actor but the node.
	parent map[protocol.ActorAddr]protocol.ActorAddr
	mail   map[protocol.ActorAddr][]queued
	seq    int

	pending []*pendingEffect
	nextID  int

	// pick chooses the mailbox to deliver from among n non-empty ones,
	// ordered oldest head first; nil picks 0.
	pick func(n int) int

	// hooks the tests observe with.
	onEffect  func(from protocol.ActorAddr, e protocol.DaemonEffect)
	onDeliver func(to protocol.ActorAddr, m protocol.DaemonMessage)

	// cgroups, when set, stands for the cgroups' host (a transcript's):
	// nil leaves the limits' effects pending, numbered, as any other.
	cgroups *simCgroups

	deadLetters []string
	snapshots   map[int]protocol.Handoff
	// trace collects what a transcript prints.
	trace     []string
	showTells bool
	showDebug bool
}

type queued struct {
	seq int
	msg protocol.DaemonMessage
}

// pendingEffect is a host effect the test has not answered yet.
type pendingEffect struct {
	id   int
	from protocol.ActorAddr
	eff  protocol.DaemonEffect
}

func newSim(cfg Config, now time.Time) *sim {
	s := &sim{
		cfg:       cfg,
		now:       now,
		cores:     map[protocol.ActorAddr]core{},
		parent:    map[protocol.ActorAddr]protocol.ActorAddr{},
		mail:      map[protocol.ActorAddr][]queued{},
		snapshots: map[int]protocol.Handoff{},
	}
	node := protocol.NodeAddr()
	s.cores[node] = newNodeCore(cfg)
	s.apply(node, s.cores[node].Start(now))
	return s
}

// send enqueues a message to an actor from outside the tree (the wiring).
func (s *sim) send(to protocol.ActorAddr, m protocol.DaemonMessage) {
	if _, ok := s.cores[to]; !ok {
		s.deadLetters = append(s.deadLetters, to.String()+": "+m.String())
		return
	}
	s.seq++
	s.mail[to] = append(s.mail[to], queued{seq: s.seq, msg: m})
}

// input sends to the node and delivers until every mailbox is empty.
func (s *sim) input(m protocol.DaemonMessage) {
	s.send(protocol.NodeAddr(), m)
	s.drain()
}

// drain delivers messages until no mailbox holds one.
func (s *sim) drain() {
	for s.deliverOne() {
	}
}

// deliverOne delivers one message; false if there was none.
func (s *sim) deliverOne() bool {
	var addrs []protocol.ActorAddr
	for a, q := range s.mail {
		if len(q) > 0 {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return false
	}
	sort.Slice(addrs, func(i, j int) bool { return s.mail[addrs[i]][0].seq < s.mail[addrs[j]][0].seq })
	i := 0
	if s.pick != nil && len(addrs) > 1 {
		i = s.pick(len(addrs))
	}
	a := addrs[i]
	q := s.mail[a][0]
	s.mail[a] = s.mail[a][1:]
	c, ok := s.cores[a]
	if !ok {
		return true
	}
	if s.onDeliver != nil {
		s.onDeliver(a, q.msg)
	}
	s.apply(a, c.Step(s.now, q.msg))
	return true
}

func (s *sim) apply(from protocol.ActorAddr, effs []protocol.DaemonEffect) {
	for _, e := range effs {
		if s.onEffect != nil {
			s.onEffect(from, e)
		}
		switch e := e.(type) {
		case protocol.Tell:
			if s.showTells {
				s.trace = append(s.trace, from.String()+" -> "+e.String())
			}
			to := e.To
			if _, ok := s.cores[to]; !ok {
				s.deadLetters = append(s.deadLetters, fmt.Sprintf("from %s: %s", from, e))
				continue
			}
			if !s.mayAddress(from, to) {
				s.deadLetters = append(s.deadLetters, fmt.Sprintf("from %s (not its parent or child): %s", from, e))
				continue
			}
			s.seq++
			s.mail[to] = append(s.mail[to], queued{seq: s.seq, msg: e.Msg})
		case protocol.StartActor:
			if _, ok := s.cores[e.Addr]; ok {
				s.deadLetters = append(s.deadLetters, "started twice: "+e.Addr.String())
				continue
			}
			var c core
			switch {
			case e.Workspace != nil:
				c = newWorkspaceCore(s.cfg, *e.Workspace)
			case e.Session != nil:
				c = newSessionCore(s.cfg, *e.Session)
			case e.Branch != nil:
				c = newBranchCore(s.cfg, *e.Branch)
			default:
				s.deadLetters = append(s.deadLetters, "start without a state: "+e.Addr.String())
				continue
			}
			if s.showTells {
				s.trace = append(s.trace, from.String()+" -> "+e.String())
			}
			s.cores[e.Addr] = c
			s.parent[e.Addr] = from
			s.apply(e.Addr, c.Start(s.now))
		case protocol.StopActor:
			if s.showTells {
				s.trace = append(s.trace, from.String()+" -> "+e.String())
			}
			s.stop(e.Addr)
			// protoactor tells the parent once the child has stopped.
			s.seq++
			s.mail[from] = append(s.mail[from], queued{seq: s.seq, msg: protocol.ChildStopped{Addr: e.Addr}})
		case protocol.ReplySnapshot:
			s.snapshots[e.Request] = e.Handoff
			s.trace = append(s.trace, e.String())
		case protocol.LogEvent:
			if e.Level > slog.LevelDebug || s.showDebug {
				s.trace = append(s.trace, e.String())
			}
		default:
			if s.cgroups != nil && s.cgroups.take(s, from, e) {
				continue
			}
			s.nextID++
			p := &pendingEffect{id: s.nextID, from: from, eff: e}
			s.pending = append(s.pending, p)
			s.trace = append(s.trace, fmt.Sprintf("[%d] %s", p.id, e))
		}
	}
}

// mayAddress says whether from may reach to as the shells resolve addresses:
// its parent or one of its children.
func (s *sim) mayAddress(from, to protocol.ActorAddr) bool {
	return s.parent[from] == to || s.parent[to] == from
}

// stop removes an actor, its children, its queued messages (protoactor's stop
// drops them) and its pending effects (the runner drops their results).
func (s *sim) stop(a protocol.ActorAddr) {
	for c, p := range s.parent {
		if p == a {
			s.stop(c)
		}
	}
	delete(s.cores, a)
	delete(s.parent, a)
	delete(s.mail, a)
	kept := s.pending[:0]
	for _, p := range s.pending {
		if p.from != a {
			kept = append(kept, p)
		}
	}
	s.pending = kept
}

// find returns the pending effect with that id.
func (s *sim) find(id int) (*pendingEffect, error) {
	for _, p := range s.pending {
		if p.id == id {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no pending effect [%d]", id)
}

// answer removes a pending effect and delivers its result to the actor that
// asked (nil: an effect with no result, such as an exec that happened).
func (s *sim) answer(id int, result protocol.DaemonMessage) error {
	p, err := s.find(id)
	if err != nil {
		return err
	}
	s.remove(id)
	if result != nil {
		s.send(p.from, result)
	}
	s.drain()
	return nil
}

func (s *sim) remove(id int) {
	for i, p := range s.pending {
		if p.id == id {
			s.pending = append(s.pending[:i:i], s.pending[i+1:]...)
			return
		}
	}
}

// pendingOf returns the pending effects of one type, oldest first.
func pendingOf[T protocol.DaemonEffect](s *sim) []*pendingEffect {
	var out []*pendingEffect
	for _, p := range s.pending {
		if _, ok := p.eff.(T); ok {
			out = append(out, p)
		}
	}
	return out
}

// takeTrace returns what was traced since the last call.
func (s *sim) takeTrace() []string {
	t := s.trace
	s.trace = nil
	return t
}

// describe renders the tree's actors, for a failure message.
func (s *sim) describe() string {
	var as []string
	for a := range s.cores {
		as = append(as, a.String())
	}
	sort.Strings(as)
	var ps []string
	for _, p := range s.pending {
		ps = append(ps, fmt.Sprintf("[%d] %s: %s", p.id, p.from, p.eff))
	}
	return "actors: " + strings.Join(as, "; ") + "\npending: " + strings.Join(ps, "\n  ")
}

// simCgroups stands for the sessions' cgroups in a transcript, so that the
// effects there are numbered as before they came: a limits watch is kept,
// unnumbered, until the transcript says a limit is reached ("limit"), and
// a close is answered at once with what "closes" said for the process
// (nothing past, by default).
type simCgroups struct {
	watches map[protocol.ProcID]pendingEffect
	closes  map[protocol.ProcID]protocol.LimitsClosed
	// usage is what a read of a launch's usage gives ("spent"): none by
	// default.
	usage map[string]protocol.UsageRead
}

func newSimCgroups() *simCgroups {
	return &simCgroups{watches: map[protocol.ProcID]pendingEffect{}, closes: map[protocol.ProcID]protocol.LimitsClosed{},
		usage: map[string]protocol.UsageRead{}}
}

// take handles e if it is a limits effect, and says whether it was.
func (c *simCgroups) take(s *sim, from protocol.ActorAddr, e protocol.DaemonEffect) bool {
	switch e := e.(type) {
	case protocol.WatchLimits:
		c.watches[e.Proc] = pendingEffect{from: from, eff: e}
		s.trace = append(s.trace, e.String())
		return true
	case protocol.CloseLimits:
		r := c.closes[e.Proc]
		r.Proc = e.Proc
		s.trace = append(s.trace, e.String()+": "+r.String())
		s.seq++
		s.mail[from] = append(s.mail[from], queued{seq: s.seq, msg: r})
		return true
	case protocol.ReadUsage:
		// The usage read is answered at once, as a close is, so that
		// the effects after it keep their numbers.
		r := c.usage[e.Launch]
		r.Proc = e.Proc
		s.trace = append(s.trace, e.String()+": "+r.String())
		s.seq++
		s.mail[from] = append(s.mail[from], queued{seq: s.seq, msg: r})
		return true
	}
	return false
}

// reach delivers the watch of p the news that it went past limit.
func (c *simCgroups) reach(s *sim, p protocol.ProcID, limit, note string) error {
	w, ok := c.watches[p]
	if !ok {
		return fmt.Errorf("no limits watch for %s", p)
	}
	delete(c.watches, p)
	e := w.eff.(protocol.WatchLimits)
	s.seq++
	s.mail[w.from] = append(s.mail[w.from], queued{seq: s.seq, msg: protocol.LimitReached{Proc: p, Seq: e.Seq, Limit: limit, Note: note, At: s.now}})
	s.drain()
	return nil
}
