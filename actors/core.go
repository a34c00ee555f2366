package actors

import (
	"log/slog"
	"time"

	"github.com/ocx-go/ocx/messages"
)

// core is what every actor's decisions share: a first step when the actor
// starts (or restarts from a hand-off), then one step per message. A core is a
// plain value: no goroutine, no clock (the time comes in as now), no I/O.
type core interface {
	Start(now time.Time) []messages.DaemonEffect
	Step(now time.Time, msg messages.DaemonMessage) []messages.DaemonEffect
	// Quiescent reports whether the core waits for no effect's result, so that
	// its state can be handed on.
	Quiescent() bool
	// addr is the actor's logical address, derived from its key rather than
	// stored, so that an idle actor does not carry it twice.
	addr() messages.ActorAddr
}

// base collects a step's effects and counts the effects whose results the
// core still waits for. Long-lived effects (timers, watches) are not counted:
// their state is in the core's own fields and is re-armed after a hand-off.
type base struct {
	out      []messages.DaemonEffect
	awaiting int
}

// take returns the effects of the step and starts the next.
func (b *base) take() []messages.DaemonEffect {
	o := b.out
	b.out = nil
	return o
}

func (b *base) emit(e messages.DaemonEffect) {
	if expectsResult(e) {
		b.awaiting++
	}
	b.out = append(b.out, e)
}

// settle counts a result in, if msg is one.
func (b *base) settle(msg messages.DaemonMessage) {
	if isResult(msg) && b.awaiting > 0 {
		b.awaiting--
	}
}

func (b *base) tell(to messages.ActorAddr, m messages.DaemonMessage) {
	b.out = append(b.out, messages.Tell{To: to, Msg: m})
}

func (b *base) log(level slog.Level, text string, attrs ...slog.Attr) {
	b.out = append(b.out, messages.LogEvent{Level: level, Text: text, Attrs: attrs})
}

func (b *base) Quiescent() bool { return b.awaiting == 0 }

// expectsResult says whether an effect sends exactly one result back to the
// actor that asked for it, and so holds up a hand-off until it does
// (messages.Asking).
func expectsResult(e messages.DaemonEffect) bool {
	_, ok := e.(messages.Asking)
	return ok
}

// isResult says whether a message is the result of an effect that
// expectsResult counts (messages.Answer).
func isResult(m messages.DaemonMessage) bool {
	_, ok := m.(messages.Answer)
	return ok
}

func errAttr(err error) slog.Attr { return slog.String(KeyError, err.Error()) }

func wsAttr(w messages.WorkspaceKey) slog.Attr { return slog.String(KeyWorkspace, w.String()) }

func pidAttr(p messages.ProcID) slog.Attr { return slog.String(KeyPID, p.String()) }

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
	asks     map[messages.ActorAddr]int
	waiting  map[messages.ActorAddr]bool
	replied  map[messages.ActorAddr]bool
	sessions map[messages.ProcID]messages.SessionState
	branches map[string]messages.BranchState
	parts    map[messages.WorkspaceKey]messages.WorkspaceState
	requests []int
}

func newCollection(seq int, freeze bool) *collection {
	return &collection{
		seq: seq, freeze: freeze,
		asks:     map[messages.ActorAddr]int{},
		waiting:  map[messages.ActorAddr]bool{},
		replied:  map[messages.ActorAddr]bool{},
		sessions: map[messages.ProcID]messages.SessionState{},
		branches: map[string]messages.BranchState{},
		parts:    map[messages.WorkspaceKey]messages.WorkspaceState{},
	}
}

// ask records a new request to child a and returns it: only the answer to it
// will count.
func (c *collection) ask(a messages.ActorAddr) messages.CollectState {
	c.asks[a]++
	c.waiting[a] = true
	delete(c.replied, a)
	return messages.CollectState{Seq: c.seq, Ask: c.asks[a], Freeze: c.freeze}
}

// answer takes a child's answer if it is to the latest request.
func (c *collection) answer(m messages.StateCollected) bool {
	if m.Seq != c.seq || !c.waiting[m.From] || m.Ask != c.asks[m.From] {
		return false
	}
	delete(c.waiting, m.From)
	c.replied[m.From] = true
	return true
}

// forget drops a child that stopped.
func (c *collection) forget(a messages.ActorAddr) {
	delete(c.asks, a)
	delete(c.waiting, a)
	delete(c.replied, a)
}
