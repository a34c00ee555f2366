package messages

import (
	"fmt"
	"strings"
	"time"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// ReexecOutcome is what the daemon's last re-exec came to (seed 002,
// "re-exec the daemon"): the old image writes it when the exec does not
// happen (its image keeps running) and, just before the exec, as pending;
// the new image when it starts from the hand-off, or fails to; the next
// ensure of the daemon when it rolls back a release whose daemon ended
// before it recorded its outcome (D73). It is AGENTS/ocxd.reexec (a host
// file, "ocx": "reexec"), and the status's daemon.reexec, which `ocx
// release accept` waits for.
type ReexecOutcome struct {
	// At is when it was written, in UTC.
	At time.Time `json:"at" why:"a re-exec's outcome says when it came"`
	// PID is the daemon's: the same before and after an exec.
	PID int `json:"pid" max:"pid" why:"a re-exec's outcome names the daemon's PID"`
	// Target is the ocxd exec'd (or that was to be), links followed; absent
	// when the release's ocxd could not be found.
	Target string `json:"target,omitempty"`
	// Release is the release Target belongs to, as an end note names it.
	Release string `json:"release,omitempty"`
	// OK says the new image runs; Error says why not, when it does not.
	OK    bool   `json:"ok" why:"a re-exec's outcome says whether the new image runs"`
	Error string `json:"error,omitempty"`
	// State says more of an outcome that is not OK (D73): one of the
	// Reexec* states; absent for a failure it says nothing more of (the
	// exec itself failed, or the old image could not prepare it: the old
	// image runs on) and in a record written before it was added.
	State string `json:"state,omitempty"`
	// From is the release the daemon ran before this re-exec (the old
	// image's), which a rollback puts back; absent when it is not known.
	From string `json:"from,omitempty"`
}

// The states of a re-exec that is not OK (ReexecOutcome.State).
const (
	// ReexecRefused: before the exec, the old image asked the release's
	// ocxd (its hand-off version, then --handoff-check on the very
	// hand-off) and it could not take over; the old image runs on.
	ReexecRefused = "refused"
	// ReexecPending: written by the old image just before the exec; the
	// new image replaces it when it starts. Found while no daemon holds
	// the lock, it says the new image ended before it recorded its outcome.
	ReexecPending = "pending"
	// ReexecExited: the new image could not start from the hand-off, said
	// so, and exited: no daemon runs.
	ReexecExited = "exited"
	// ReexecRolledBack: the release's daemon ended (pending or exited),
	// and the release root's links were rolled back to the release the
	// daemon ran before; Error says so and why.
	ReexecRolledBack = "rolled_back"
)

// reexecStates are the values State may take.
var reexecStates = []string{ReexecRefused, ReexecPending, ReexecExited, ReexecRolledBack}

// Ended says the re-exec ended the daemon: the release's image ran and
// ended before it recorded an outcome, or said it could not start. The
// release cannot run as the daemon, and no daemon runs for it.
func (r *ReexecOutcome) Ended() bool {
	return r.State == ReexecPending || r.State == ReexecExited
}

// Validate checks every field, and that an error is given exactly when it
// failed.
func (r *ReexecOutcome) Validate() error { return r.validate("") }

func (r *ReexecOutcome) validate(f string) error {
	if err := checkTime(strictjson.JoinField(f, "at"), r.At); err != nil {
		return err
	}
	if err := checkPID(strictjson.JoinField(f, "pid"), r.PID); err != nil {
		return err
	}
	if r.Target != "" {
		if err := CheckAbsPath(strictjson.JoinField(f, "target"), r.Target); err != nil {
			return err
		}
	}
	if err := CheckLine(strictjson.JoinField(f, "release"), r.Release, false, MaxShortLen); err != nil {
		return err
	}
	if err := CheckText(strictjson.JoinField(f, "error"), r.Error, false, MaxTextLen); err != nil {
		return err
	}
	if err := CheckLine(strictjson.JoinField(f, "from"), r.From, false, MaxShortLen); err != nil {
		return err
	}
	if r.State != "" {
		known := false
		for _, s := range reexecStates {
			known = known || r.State == s
		}
		switch {
		case !known:
			return strictjson.FieldErr(strictjson.JoinField(f, "state"), strictjson.ErrInvalid, fmt.Sprintf("is %s; a re-exec's state is %s", strictjson.QuoteShort(r.State), strings.Join(reexecStates, ", ")))
		case r.OK:
			return strictjson.FieldErr(strictjson.JoinField(f, "state"), strictjson.ErrInvalid, "is given for a re-exec that succeeded")
		}
	}
	switch {
	case r.OK && r.Error != "":
		return strictjson.FieldErr(strictjson.JoinField(f, "error"), strictjson.ErrInvalid, "is given for a re-exec that succeeded")
	case !r.OK && r.Error == "":
		return strictjson.FieldErr(strictjson.JoinField(f, "error"), strictjson.ErrMissing, "is missing; a failed re-exec says why")
	}
	return nil
}

// Encode renders AGENTS/ocxd.reexec, indented, after validating it.
func (r *ReexecOutcome) Encode() ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, strictjson.At("ocxd.reexec", err)
	}
	c := *r
	c.At = c.At.UTC()
	return encodeHostFile("reexec", c)
}

// DecodeReexecOutcome reads and validates AGENTS/ocxd.reexec.
func DecodeReexecOutcome(data []byte) (*ReexecOutcome, error) {
	o, err := hostFileObject("ocxd.reexec", "reexec", data)
	if err != nil {
		return nil, err
	}
	r := &ReexecOutcome{}
	if err := Fill(o, r); err != nil {
		return nil, strictjson.At("ocxd.reexec", err)
	}
	if err := r.Validate(); err != nil {
		return nil, strictjson.At("ocxd.reexec", err)
	}
	return r, nil
}

// String renders the outcome on one line.
func (r *ReexecOutcome) String() string {
	l := Render("reexec").KV("at", r.At.UTC().Format(time.RFC3339Nano)).KV("pid", fmt.Sprint(r.PID)).
		OptKV("target", r.Target).OptKV("release", r.Release).OptKV("from", r.From)
	return l.Flag("ok", r.OK).OptKV("state", r.State).Text("error", r.Error).String()
}

// DaemonStatus is the status's daemon: whether one runs for the agents
// root, its PID and the release it runs, and its last re-exec.
type DaemonStatus struct {
	Running bool `json:"running" why:"the daemon's status says whether one runs"`
	// PID is the daemon holding AGENTS/ocxd.lock; absent when none runs.
	PID int `json:"pid,omitempty" max:"pid"`
	// Release is the release its program belongs to (named as a session's);
	// absent when none runs or it cannot be read.
	Release string `json:"release,omitempty"`
	// Reexec is the last re-exec's outcome (AGENTS/ocxd.reexec); absent
	// when none was recorded.
	Reexec *ReexecOutcome `json:"reexec,omitempty"`
	// ConfinedOnly: the node runs nothing unconfined (node.json's
	// confined_only, D53), so its daemon refuses a run without a sandbox.
	ConfinedOnly bool `json:"confined_only,omitempty"`
}

func (d *DaemonStatus) validate(f string) error {
	switch {
	case d.Running:
		if err := checkPID(strictjson.JoinField(f, "pid"), d.PID); err != nil {
			return err
		}
	case d.PID != 0:
		return strictjson.FieldErr(strictjson.JoinField(f, "pid"), strictjson.ErrInvalid, "is given while no daemon runs")
	case d.Release != "":
		return strictjson.FieldErr(strictjson.JoinField(f, "release"), strictjson.ErrInvalid, "is given while no daemon runs")
	}
	if err := CheckLine(strictjson.JoinField(f, "release"), d.Release, false, MaxShortLen); err != nil {
		return err
	}
	if d.Reexec != nil {
		return d.Reexec.validate(strictjson.JoinField(f, "reexec"))
	}
	return nil
}

// String renders the daemon's status on one line.
func (d *DaemonStatus) String() string {
	l := Render("daemon")
	if d.Running {
		l.KV("pid", fmt.Sprint(d.PID)).OptKV("release", d.Release)
	} else {
		l.Word("none")
	}
	if d.ConfinedOnly {
		l.KV("runs", "confined_only")
	}
	if d.Reexec != nil {
		r := d.Reexec
		l.KV("reexec_at", r.At.UTC().Format(time.RFC3339))
		if r.OK {
			l.KV("reexec", "ok").OptKV("reexec_release", r.Release)
		} else {
			l.KV("reexec", "failed").OptKV("reexec_state", r.State).OptKV("reexec_release", r.Release).Text("reexec_error", r.Error)
		}
	}
	return l.String()
}
