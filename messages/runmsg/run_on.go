package runmsg

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// Triggers (beyond seed 004, D101; docs/runs.md "Runs started by events"):
// process.on makes a run a trigger, which fires on each check-in on named
// branches or on a cron schedule; each firing is a run of its own, a fired
// message the node writes in the trigger's thread.

// RunOn is process.on: exactly one of Checkin and Schedule.
type RunOn struct {
	// Checkin lists the branches whose check-ins each fire the trigger.
	Checkin []string `json:"checkin,omitempty"`
	// Schedule is a cron schedule of five fields, UTC.
	Schedule string `json:"schedule,omitempty"`
}

var onKeys = []string{"checkin", "schedule"}

func readOn(o strictjson.Obj) (*RunOn, error) {
	if err := closed(o, "process.on", onKeys...); err != nil {
		return nil, err
	}
	on := &RunOn{}
	var err error
	if on.Checkin, err = o.Strs("checkin", false, ""); err != nil {
		return nil, err
	}
	if on.Schedule, err = o.OptStr("schedule"); err != nil {
		return nil, err
	}
	if o.Has("checkin") && len(on.Checkin) == 0 {
		return nil, strictjson.FieldErr(o.Field("checkin"), strictjson.ErrMissing, "is empty; a trigger on check-ins names at least one branch")
	}
	return on, nil
}

// Kind is "checkin" or "schedule", which of the two the trigger fires on.
func (on *RunOn) Kind() string {
	if len(on.Checkin) > 0 {
		return "checkin"
	}
	return "schedule"
}

func (on *RunOn) validate(field string) error {
	f := func(k string) string { return strictjson.JoinField(field, k) }
	switch {
	case len(on.Checkin) > 0 && on.Schedule != "":
		return strictjson.FieldErr(field, strictjson.ErrInvalid, "gives both checkin and schedule; a trigger fires on one of them")
	case len(on.Checkin) == 0 && on.Schedule == "":
		return strictjson.FieldErr(field, strictjson.ErrMissing, "gives neither checkin nor schedule; a trigger fires on one of them")
	case len(on.Checkin) > 0:
		return messages.CheckBranches(f("checkin"), on.Checkin)
	}
	if _, err := ParseSchedule(on.Schedule); err != nil {
		return strictjson.FieldErr(f("schedule"), strictjson.ErrInvalid, fmt.Sprintf("%s is not a cron schedule (five fields, UTC): %v", strictjson.QuoteShort(on.Schedule), err))
	}
	return nil
}

// MaxSchedule is the longest schedule read.
const MaxSchedule = 256

// ParseSchedule reads a cron schedule as process.on.schedule takes it:
// five fields or a descriptor, by robfig/cron/v3's standard parser, in
// UTC; a zone prefix and @every are refused.
func ParseSchedule(spec string) (cron.Schedule, error) {
	switch {
	case len(spec) > MaxSchedule:
		return nil, fmt.Errorf("longer than %d bytes", MaxSchedule)
	case strings.ContainsAny(spec, "\n\r\x00"):
		return nil, fmt.Errorf("not one line")
	case strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ="):
		return nil, fmt.Errorf("a zone is not given: the schedule is UTC")
	case strings.HasPrefix(spec, "@every"):
		return nil, fmt.Errorf("@every is a period, not a cron schedule")
	}
	return cron.ParseStandard(spec)
}

// ScheduleNext is the first scheduled minute after t, in UTC, or the zero
// time when there is none (a spec ParseSchedule refuses, or none within
// five years, as the parser says of 30 February).
func ScheduleNext(spec string, t time.Time) time.Time {
	s, err := ParseSchedule(spec)
	if err != nil {
		return time.Time{}
	}
	return s.Next(t.UTC())
}

// FiredTimeLayout is how a fired's at is written: a minute, RFC 3339, UTC.
const FiredTimeLayout = "2006-01-02T15:04:00Z"

// RunFired is a trigger's firing (D101): written by the node as its node
// user where the trigger Run is, naming its cause, exactly one of Checkin
// (a check-in's hash in full) and At (a scheduled minute, UTC). One that
// counts is a run of its own (fossilio/record reads it so).
type RunFired struct {
	Node    string    `json:"node"`
	Run     string    `json:"run"`
	Checkin string    `json:"checkin,omitempty"`
	At      time.Time `json:"-"`
}

// Kind is fired.
func (*RunFired) Kind() MessageKind { return MsgFired }

// NodeUser is the node its envelope names.
func (f *RunFired) NodeUser() string { return f.Node }

// Cause names what fired it: "checkin HASH" or "at 2026-12-08T00:05:00Z".
func (f *RunFired) Cause() string {
	if f.Checkin != "" {
		return "checkin " + f.Checkin
	}
	return "at " + f.At.UTC().Format(FiredTimeLayout)
}

// Validate checks the envelope and that exactly one cause is given.
func (f *RunFired) Validate() error {
	if err := messages.CheckUser("node", f.Node); err != nil {
		return err
	}
	if err := messages.CheckHash("run", f.Run); err != nil {
		return err
	}
	switch {
	case f.Checkin != "" && !f.At.IsZero():
		return strictjson.FieldErr("checkin", strictjson.ErrInvalid, "is given with at; a firing names one cause")
	case f.Checkin == "" && f.At.IsZero():
		return strictjson.FieldErr("checkin", strictjson.ErrMissing, "is missing, and so is at; a firing names its cause")
	case f.Checkin != "":
		return messages.CheckHash("checkin", f.Checkin)
	}
	if !f.At.Equal(f.At.Truncate(time.Minute)) {
		return strictjson.FieldErr("at", strictjson.ErrInvalid, "is not a whole minute")
	}
	return nil
}

func (f *RunFired) String() string {
	return messages.Render("fired").KV("node", f.Node).KV("run", f.Run).KV("cause", f.Cause()).String()
}

// Encode renders the fired's canonical block.
func (f *RunFired) Encode() ([]byte, error) {
	if err := f.Validate(); err != nil {
		return nil, strictjson.At("fired", err)
	}
	body := struct {
		Node    string `json:"node"`
		Run     string `json:"run"`
		Checkin string `json:"checkin,omitempty"`
		At      string `json:"at,omitempty"`
	}{Node: f.Node, Run: f.Run, Checkin: f.Checkin}
	if !f.At.IsZero() {
		body.At = f.At.UTC().Format(FiredTimeLayout)
	}
	return encodeMessage(MsgFired, &body)
}

// Firing is the run a fired that counts is (D101): the trigger's layers,
// its process without on.
func (r *Run) Firing() *Run {
	c := *r
	c.Process.On = nil
	return &c
}
