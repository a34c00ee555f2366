package actors

import (
	"log/slog"
	"time"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// core is what every actor's decisions share: a first step when the actor
// starts (or restarts from a hand-off), then one step per message. A core is a
// plain value: no goroutine, no clock (the time comes in as now), no I/O.
type core interface {
	Start(now time.Time) []protocol.DaemonEffect
	Step(now time.Time, msg protocol.DaemonMessage) []protocol.DaemonEffect
	// Quiescent reports whether the core waits for no effect's result, so that
	// its state can be handed on.
	Quiescent() bool
	// addr is the actor's logical address, derived from its key rather than
	// stored, so that an idle actor does not carry it twice.
	addr() protocol.ActorAddr
}

// base collects a step's effects and counts the effects whose results the
// core still waits for. Long-lived effects (timers, watches) are not counted:
// their state is in the core's own fields and is re-armed after a hand-off.
type base struct {
	out      []protocol.DaemonEffect
	awaiting int
}

// take returns the effects of the step and starts the next.
func (b *base) take() []protocol.DaemonEffect {
	o := b.out
	b.out = nil
	return o
}

func (b *base) emit(e protocol.DaemonEffect) {
	if expectsResult(e) {
		b.awaiting++
	}
	b.out = append(b.out, e)
}

// settle counts a result in, if msg is one.
func (b *base) settle(msg protocol.DaemonMessage) {
	if isResult(msg) && b.awaiting > 0 {
		b.awaiting--
	}
}

func (b *base) tell(to protocol.ActorAddr, m protocol.DaemonMessage) {
	b.out = append(b.out, protocol.Tell{To: to, Msg: m})
}

func (b *base) log(level slog.Level, text string, attrs ...slog.Attr) {
	b.out = append(b.out, protocol.LogEvent{Level: level, Text: text, Attrs: attrs})
}

func (b *base) Quiescent() bool { return b.awaiting == 0 }

// expectsResult says whether an effect sends exactly one result back to the
// actor that asked for it, and so holds up a hand-off until it does
// (protocol.Asking).
func expectsResult(e protocol.DaemonEffect) bool {
	_, ok := e.(protocol.Asking)
	return ok
}

// isResult says whether a message is the result of an effect that
// expectsResult counts (protocol.Answer).
func isResult(m protocol.DaemonMessage) bool {
	_, ok := m.(protocol.Answer)
	return ok
}

func errAttr(err error) slog.Attr { return slog.String(keyError, err.Error()) }

func wsAttr(w messages.WorkspaceKey) slog.Attr { return slog.String(KeyWorkspace, w.String()) }

func pidAttr(p protocol.ProcID) slog.Attr { return slog.String(KeyPID, p.String()) }

// recentSet is a bounded memory of strings, oldest forgotten first.
type recentSet struct {
	max   int
	order []string
	set   map[string]bool
}

func newRecentSet(max int, from []string) *recentSet {
	r := &recentSet{max: max}
	for _, s := range from {
		r.add(s)
	}
	return r
}

func (r *recentSet) has(s string) bool { return r.set[s] }

func (r *recentSet) add(s string) {
	if r.set[s] {
		return
	}
	if r.set == nil {
		r.set = map[string]bool{}
	}
	r.set[s] = true
	r.order = append(r.order, s)
	for len(r.order) > r.max {
		delete(r.set, r.order[0])
		r.order = r.order[1:]
	}
}

func (r *recentSet) list() []string { return append([]string(nil), r.order...) }

// collection is a CollectState being answered: the children still to answer,
// those that answered, and their parts.
type collection struct {
	seq      int
	freeze   bool
	asks     map[protocol.ActorAddr]int
	waiting  map[protocol.ActorAddr]bool
	replied  map[protocol.ActorAddr]bool
	sessions map[protocol.ProcID]protocol.SessionState
	branches map[string]protocol.BranchState
	parts    map[messages.WorkspaceKey]protocol.WorkspaceState
	requests []int
}

func newCollection(seq int, freeze bool) *collection {
	return &collection{
		seq: seq, freeze: freeze,
		asks:     map[protocol.ActorAddr]int{},
		waiting:  map[protocol.ActorAddr]bool{},
		replied:  map[protocol.ActorAddr]bool{},
		sessions: map[protocol.ProcID]protocol.SessionState{},
		branches: map[string]protocol.BranchState{},
		parts:    map[messages.WorkspaceKey]protocol.WorkspaceState{},
	}
}

// ask records a new request to child a and returns it: only the answer to it
// will count.
func (c *collection) ask(a protocol.ActorAddr) protocol.CollectState {
	c.asks[a]++
	c.waiting[a] = true
	delete(c.replied, a)
	return protocol.CollectState{Seq: c.seq, Ask: c.asks[a], Freeze: c.freeze}
}

// answer takes a child's answer if it is to the latest request.
func (c *collection) answer(m protocol.StateCollected) bool {
	if m.Seq != c.seq || !c.waiting[m.From] || m.Ask != c.asks[m.From] {
		return false
	}
	delete(c.waiting, m.From)
	c.replied[m.From] = true
	return true
}

// forget drops a child that stopped.
func (c *collection) forget(a protocol.ActorAddr) {
	delete(c.asks, a)
	delete(c.waiting, a)
	delete(c.replied, a)
}
