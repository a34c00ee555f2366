package actors

import (
	"slices"
	"time"

	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// TriggerCore decides a node's triggers' firings (D101; docs/runs.md
// "Runs started by events"): pure, as every core is. The engine tells it
// what the record says of each trigger (TriggerSeen), the check-ins
// received after a trigger's mark (TriggerCheckins) and the clock reaching
// a time (TriggerTick, with now the tree's clock); it answers the firings
// to write, each cause once, in order, none for a trigger that has ended.
//
// What it keeps of a trigger: the place of the last check-in it fired for
// (its mark), or for a schedule the last minute it fired for. A node that
// was down fires, when it sees the trigger again, each check-in after the
// last one a firing on the record names, and for a schedule at most one
// firing, for the latest minute that passed.
type TriggerCore struct {
	triggers map[string]*triggerState
	// order is the triggers in the order they were first seen.
	order []string
}

type triggerState struct {
	seen  protocol.TriggerSeen
	ended bool
	// mark is the place of the last check-in fired for, or the trigger's
	// own: only a check-in after it fires.
	mark protocol.RunPosition
	// last is the last minute a schedule fired for, or when the server
	// received the trigger.
	last time.Time
	// next is the schedule's next minute after a time; nil for none (a
	// trigger on check-ins, or a schedule that does not parse).
	next func(time.Time) time.Time
}

// maxScheduleSteps bounds the walk to the latest minute passed (a year of
// minutes and more).
const maxScheduleSteps = 600_000

func NewTriggerCore() *TriggerCore { return &TriggerCore{triggers: map[string]*triggerState{}} }

// Step takes one event at now and returns the firings decided.
func (c *TriggerCore) Step(now time.Time, msg any) []protocol.TriggerFire {
	switch m := msg.(type) {
	case protocol.TriggerSeen:
		return c.seen(now, m)
	case protocol.TriggerCheckins:
		return c.checkins(m)
	case protocol.TriggerTick:
		var out []protocol.TriggerFire
		for _, h := range c.order {
			out = append(out, c.due(now, c.triggers[h])...)
		}
		return out
	}
	return nil
}

func (c *TriggerCore) seen(now time.Time, m protocol.TriggerSeen) []protocol.TriggerFire {
	t, ok := c.triggers[m.Trigger]
	if !ok {
		received := m.Received
		if received.IsZero() {
			received = now
		}
		t = &triggerState{seen: m, mark: m.At, last: received.UTC().Truncate(time.Minute)}
		if m.Schedule != "" {
			if s, err := runmsg.ParseSchedule(m.Schedule); err == nil {
				t.next = func(at time.Time) time.Time { return s.Next(at.UTC()) }
			}
		}
		c.triggers[m.Trigger] = t
		c.order = append(c.order, m.Trigger)
	}
	if m.Ended {
		t.ended = true
	}
	if t.mark.Before(m.LastCheckin) {
		t.mark = m.LastCheckin
	}
	if m.LastAt.After(t.last) {
		t.last = m.LastAt.UTC()
	}
	return c.due(now, t)
}

// due fires a schedule whose next minute after its last is reached: once,
// for the latest minute reached; the minutes before it are skipped.
func (c *TriggerCore) due(now time.Time, t *triggerState) []protocol.TriggerFire {
	if t.ended || t.next == nil {
		return nil
	}
	next := t.next(t.last)
	if next.IsZero() || next.After(now) {
		return nil
	}
	for range maxScheduleSteps {
		after := t.next(next)
		if after.IsZero() || after.After(now) {
			break
		}
		next = after
	}
	t.last = next
	return []protocol.TriggerFire{{Trigger: t.seen.Trigger, Project: t.seen.Project, At: next}}
}

func (c *TriggerCore) checkins(m protocol.TriggerCheckins) []protocol.TriggerFire {
	t, ok := c.triggers[m.Trigger]
	if !ok || t.ended || len(t.seen.Branches) == 0 {
		return nil
	}
	var out []protocol.TriggerFire
	for _, ci := range m.Checkins {
		if ci.At.IsZero() || !t.mark.Before(ci.At) || !slices.Contains(t.seen.Branches, ci.Branch) {
			continue
		}
		t.mark = ci.At
		out = append(out, protocol.TriggerFire{Trigger: t.seen.Trigger, Project: t.seen.Project, Checkin: ci.Hash})
	}
	if t.mark.Before(m.ReadTo) {
		t.mark = m.ReadTo
	}
	return out
}

// Mark is where a trigger's check-ins are read from: after its mark. ok is
// false for a trigger not seen, ended, or on a schedule.
func (c *TriggerCore) Mark(trigger string) (protocol.RunPosition, bool) {
	t, ok := c.triggers[trigger]
	if !ok || t.ended || len(t.seen.Branches) == 0 {
		return protocol.RunPosition{}, false
	}
	return t.mark, true
}

// Forget drops a trigger, so that the record is read for it again: after
// a firing that could not be written, the next reading fires it again.
func (c *TriggerCore) Forget(trigger string) {
	if _, ok := c.triggers[trigger]; ok {
		delete(c.triggers, trigger)
		c.order = slices.DeleteFunc(c.order, func(h string) bool { return h == trigger })
	}
}

// NextTick is the earliest minute a schedule fires at, zero for none.
func (c *TriggerCore) NextTick() time.Time {
	var first time.Time
	for _, h := range c.order {
		t := c.triggers[h]
		if t.ended || t.next == nil {
			continue
		}
		if n := t.next(t.last); !n.IsZero() && (first.IsZero() || n.Before(first)) {
			first = n
		}
	}
	return first
}
