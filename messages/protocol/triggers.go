package protocol

import (
	"fmt"
	"strings"
	"time"
)

// Triggers (D101): the events the trigger core (actors.triggerCore) takes
// and the firings it decides. The engine reads them from the record.

// TriggerSeen is what the record says of one trigger of this node: a run
// with process.on that counts (sent by admin or setup, refused by none of
// section 11's rows), where it stands, whether it has ended (a stop), and
// the last cause a firing of it names.
type TriggerSeen struct {
	Trigger string
	Project string
	// Branches are on.checkin; Schedule is on.schedule.
	Branches []string
	Schedule string
	// At is its place in the server's order; Received when the server
	// received it.
	At       RunPosition
	Received time.Time
	// Ended says its ended counts: it fires no more.
	Ended bool
	// LastCheckin is the place of the last check-in a firing of it
	// names; LastAt the latest minute one names. Zero: none.
	LastCheckin RunPosition
	LastAt      time.Time
}

func (m TriggerSeen) String() string {
	on := "checkin " + strings.Join(m.Branches, ",")
	if m.Schedule != "" {
		on = fmt.Sprintf("schedule %q", m.Schedule)
	}
	s := fmt.Sprintf("trigger %s %s %s at %s", short(m.Trigger), m.Project, on, m.At)
	if m.Ended {
		s += " ended"
	}
	if m.LastCheckin != (RunPosition{}) {
		s += " last-checkin " + m.LastCheckin.String()
	}
	if !m.LastAt.IsZero() {
		s += " last-at " + m.LastAt.UTC().Format(time.RFC3339)
	}
	return s
}

// TriggerCheckin is a check-in the server received, as a trigger reads it.
type TriggerCheckin struct {
	Hash   string
	Branch string
	At     RunPosition
}

// TriggerCheckins are the check-ins received after a trigger's mark, in
// the server's order; ReadTo is the place of the last artifact read, of
// any kind (zero: none), which the next reading starts after.
type TriggerCheckins struct {
	Trigger  string
	Checkins []TriggerCheckin
	ReadTo   RunPosition
}

func (m TriggerCheckins) String() string {
	parts := make([]string, len(m.Checkins))
	for i, c := range m.Checkins {
		parts[i] = fmt.Sprintf("%s@%s:%s", short(c.Hash), c.At, c.Branch)
	}
	return fmt.Sprintf("checkins for %s: %s", short(m.Trigger), strings.Join(parts, " "))
}

// TriggerTick is the node's clock reaching a time: the schedules due fire.
type TriggerTick struct{}

func (TriggerTick) String() string { return "tick" }

// TriggerFire is a firing decided: the node writes a fired naming the
// trigger and its cause, Checkin (a hash) or At (a minute, UTC).
type TriggerFire struct {
	Trigger string
	Project string
	Checkin string
	At      time.Time
}

func (e TriggerFire) String() string {
	if e.Checkin != "" {
		return fmt.Sprintf("fire %s checkin %s", short(e.Trigger), short(e.Checkin))
	}
	return fmt.Sprintf("fire %s at %s", short(e.Trigger), e.At.UTC().Format(time.RFC3339))
}

func short(h string) string {
	if len(h) > 10 {
		return h[:10]
	}
	return h
}
