package messages

import (
	"fmt"
	"time"
)

// ReexecOutcome is what the daemon's last re-exec came to (seed 002,
// "re-exec the daemon"): the old image writes it when the exec does not
// happen (its image keeps running), the new image when it starts from the
// hand-off. It is AGENTS/ocxd.reexec (a host file, "ocx": "reexec"), and
// the status's daemon.reexec, which `ocx release accept` waits for.
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
}

// Validate checks every field, and that an error is given exactly when it
// failed.
func (r *ReexecOutcome) Validate() error { return r.validate("") }

func (r *ReexecOutcome) validate(f string) error {
	if err := checkTime(joinField(f, "at"), r.At); err != nil {
		return err
	}
	if err := checkPID(joinField(f, "pid"), r.PID); err != nil {
		return err
	}
	if r.Target != "" {
		if err := checkAbsPath(joinField(f, "target"), r.Target); err != nil {
			return err
		}
	}
	if err := checkLine(joinField(f, "release"), r.Release, false, MaxShortLen); err != nil {
		return err
	}
	if err := checkText(joinField(f, "error"), r.Error, false, MaxTextLen); err != nil {
		return err
	}
	switch {
	case r.OK && r.Error != "":
		return fieldErr(joinField(f, "error"), ErrInvalid, "is given for a re-exec that succeeded")
	case !r.OK && r.Error == "":
		return fieldErr(joinField(f, "error"), ErrMissing, "is missing; a failed re-exec says why")
	}
	return nil
}

// Encode renders AGENTS/ocxd.reexec, indented, after validating it.
func (r *ReexecOutcome) Encode() ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, at("ocxd.reexec", err)
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
	if err := fill(o, r); err != nil {
		return nil, at("ocxd.reexec", err)
	}
	if err := r.Validate(); err != nil {
		return nil, at("ocxd.reexec", err)
	}
	return r, nil
}

// String renders the outcome on one line.
func (r *ReexecOutcome) String() string {
	l := newLine("reexec").kv("at", r.At.UTC().Format(time.RFC3339Nano)).kv("pid", fmt.Sprint(r.PID)).
		optKV("target", r.Target).optKV("release", r.Release)
	return l.flag("ok", r.OK).text("error", r.Error).String()
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
		if err := checkPID(joinField(f, "pid"), d.PID); err != nil {
			return err
		}
	case d.PID != 0:
		return fieldErr(joinField(f, "pid"), ErrInvalid, "is given while no daemon runs")
	case d.Release != "":
		return fieldErr(joinField(f, "release"), ErrInvalid, "is given while no daemon runs")
	}
	if err := checkLine(joinField(f, "release"), d.Release, false, MaxShortLen); err != nil {
		return err
	}
	if d.Reexec != nil {
		return d.Reexec.validate(joinField(f, "reexec"))
	}
	return nil
}

// String renders the daemon's status on one line.
func (d *DaemonStatus) String() string {
	l := newLine("daemon")
	if d.Running {
		l.kv("pid", fmt.Sprint(d.PID)).optKV("release", d.Release)
	} else {
		l.word("none")
	}
	if d.ConfinedOnly {
		l.kv("runs", "confined_only")
	}
	if d.Reexec != nil {
		r := d.Reexec
		l.kv("reexec_at", r.At.UTC().Format(time.RFC3339))
		if r.OK {
			l.kv("reexec", "ok").optKV("reexec_release", r.Release)
		} else {
			l.kv("reexec", "failed").text("reexec_error", r.Error)
		}
	}
	return l.String()
}
