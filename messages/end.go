package messages

import (
	"fmt"
	"strconv"
	"time"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// endStatus says how a session's process ended.
type endStatus string

// The statuses of an end note (D6).
const (
	// EndExited: it exited by itself; ExitCode says with what.
	EndExited endStatus = "exited"
	// EndSignaled: a signal ended it; Signal names it.
	EndSignaled endStatus = "signaled"
	// EndUnknown: the daemon saw it gone but could not reap it (not its child),
	// so it records no guessed exit status.
	EndUnknown endStatus = "unknown"
	// EndSandboxFailed: the sandbox could not be set up, so the session never ran.
	EndSandboxFailed endStatus = "sandbox-failed"
)

// RunResultOf is the word an end note says for a run's result as read from
// its check-in (a ci tag's value or a verdict's): green, red, pass, fail,
// or none when value is neither.
func RunResultOf(value string) CIResult {
	if t, err := parseCITag(value); err == nil {
		return t.Result
	}
	if v, err := ParseVerdict(value); err == nil {
		if v.Pass {
			return CIPass
		}
		return CIFail
	}
	return CINone
}

// EndNote records a session's end: written by the node user on the session's
// own record, replying to the launch, at most once per process (PID and start
// time, D6).
type EndNote struct {
	Version   int       `json:"-" ocx:"version"`
	Launch    string    `json:"launch" why:"an end names the launch it ends"`
	Login     string    `json:"login" why:"the note names the agent login of its workspace"`
	Project   string    `json:"project" why:"the note names the project of its workspace"`
	PID       int       `json:"pid" max:"pid" why:"a process is named by its PID and start time"`
	StartTime uint64    `json:"start_time" why:"a process is named by its PID and start time (clock ticks since boot)"`
	Status    endStatus `json:"status" why:"an end says how the process ended: exited, signaled, unknown or sandbox-failed"`
	// ExitCode is set for exited (required) and sandbox-failed (when known).
	ExitCode *int `json:"exit_code,omitempty" max:"code"`
	// Signal names the signal for signaled, as SIGTERM.
	Signal string `json:"signal,omitempty"`
	// Killed says the daemon sent SIGKILL after the stop grace ran out.
	Killed bool `json:"killed" why:"an end says whether the daemon killed the process after the stop grace"`
	// Release is the release the process ran: the name of its directory under
	// the release root's releases/, or the directory of a developer's build.
	Release string `json:"release" why:"an end names the release the process ran"`
	// Seen is when the daemon saw the process end, in UTC.
	Seen time.Time `json:"seen" why:"an end says when it was seen, in UTC"`
	// Checkin is, for a CI run, the check-in it was launched to test.
	Checkin string `json:"checkin,omitempty"`
	// Budget names the limit past which the daemon ended the session (D40),
	// as wall; empty when none did. A reader from before D40 refuses the
	// note (budget is a limit-bearing key, E9) rather than read a budget's
	// end as a plain exit.
	Budget string `json:"budget,omitempty"`
	// Result is, for a CI run, what the check-in carried when the run ended:
	// green or red (a ci tag), pass or fail (a reviewer's verdict, D42), or
	// none (then the daemon does not launch again, D5).
	Result CIResult `json:"result,omitempty"`
	// Usage is the session's use of the node, summed (D50): the node's
	// count of its model, its turns' wall and CPU time, what its runner
	// reported. Absent when nothing was read. Not a limit: a reader that
	// does not know it passes over it.
	Usage *SessionUsage `json:"usage,omitempty"`
	// Note says the end in words.
	Note string `json:"note" why:"an end says what happened in words"`
}

// NoteKind is "end".
func (*EndNote) NoteKind() NoteKind { return kindEnd }

// StatusString renders how the process ended: "exited 0", "signaled
// SIGKILL", "unknown".
func (n *EndNote) StatusString() string {
	switch n.Status {
	case EndExited, EndSandboxFailed:
		if n.ExitCode != nil {
			return string(n.Status) + " " + strconv.Itoa(*n.ExitCode)
		}
	case EndSignaled:
		return string(n.Status) + " " + n.Signal
	case "":
		return "no status"
	}
	return string(n.Status)
}

func (n *EndNote) version() int { return n.Version }

// Validate checks every field and that the status, exit code, signal and
// killed agree.
func (n *EndNote) Validate() error {
	if err := checkHeader(n.Version, n.Login, n.Project); err != nil {
		return err
	}
	if err := CheckHash("launch", n.Launch); err != nil {
		return err
	}
	if err := checkPID("pid", n.PID); err != nil {
		return err
	}
	if err := checkStartTime("start_time", n.StartTime); err != nil {
		return err
	}
	if n.ExitCode != nil && (*n.ExitCode < 0 || *n.ExitCode > 255) {
		return strictjson.FieldErr("exit_code", strictjson.ErrInvalid, fmt.Sprintf("%d is not an exit code (0 to 255)", *n.ExitCode))
	}
	if n.Signal != "" {
		if err := checkSignal("signal", n.Signal); err != nil {
			return err
		}
	}
	if err := n.validateStatus(); err != nil {
		return err
	}
	if err := CheckLine("release", n.Release, true, MaxShortLen); err != nil {
		return err
	}
	if err := checkTime("seen", n.Seen); err != nil {
		return err
	}
	if err := checkOptHash("checkin", n.Checkin); err != nil {
		return err
	}
	if n.Budget != "" {
		if err := checkBudget("budget", n.Budget, budgetLimits); err != nil {
			return err
		}
		if n.Status == EndSandboxFailed {
			return strictjson.FieldErr("budget", strictjson.ErrInvalid, "a session whose sandbox failed to start never ran, so it ran past no limit")
		}
	}
	if n.Usage != nil {
		if err := n.Usage.validate("usage"); err != nil {
			return err
		}
	}
	switch n.Result {
	case "":
	case CIGreen, CIRed, CIPass, CIFail, CINone:
		if n.Checkin == "" {
			return strictjson.FieldErr("result", strictjson.ErrInvalid, "a result belongs to a CI run; the note names no checkin")
		}
	default:
		return strictjson.FieldErr("result", strictjson.ErrInvalid, fmt.Sprintf("%s is not a CI result (green, red, pass, fail, none)", strictjson.QuoteShort(string(n.Result))))
	}
	return CheckText("note", n.Note, true, MaxTextLen)
}

// validateStatus checks that the status, exit code, signal and killed
// agree.
func (n *EndNote) validateStatus() error {
	switch n.Status {
	case EndExited:
		if n.ExitCode == nil {
			return strictjson.FieldErr("exit_code", strictjson.ErrMissing, "is missing; an exited process has an exit code")
		}
		if n.Signal != "" {
			return strictjson.FieldErr("signal", strictjson.ErrInvalid, "an exited process was not ended by a signal")
		}
		if n.Killed {
			return strictjson.FieldErr("killed", strictjson.ErrInvalid, "is true, but a killed process is signaled, not exited")
		}
	case EndSignaled:
		if n.Signal == "" {
			return strictjson.FieldErr("signal", strictjson.ErrMissing, "is missing; a signaled process names the signal, as SIGTERM")
		}
		if n.ExitCode != nil {
			return strictjson.FieldErr("exit_code", strictjson.ErrInvalid, "a signaled process has no exit code")
		}
	case EndUnknown:
		if n.ExitCode != nil {
			return strictjson.FieldErr("exit_code", strictjson.ErrInvalid, "an end the daemon could not reap has no exit code; it is never guessed")
		}
		if n.Signal != "" {
			return strictjson.FieldErr("signal", strictjson.ErrInvalid, "an end the daemon could not reap has no signal; it is never guessed")
		}
	case EndSandboxFailed:
		if n.Signal != "" {
			return strictjson.FieldErr("signal", strictjson.ErrInvalid, "a sandbox that failed to start names no signal")
		}
		if n.Killed {
			return strictjson.FieldErr("killed", strictjson.ErrInvalid, "is true, but a sandbox that failed to start was not killed")
		}
	case "":
		return strictjson.FieldErr("status", strictjson.ErrMissing, "is empty; it is exited, signaled, unknown or sandbox-failed")
	default:
		return strictjson.FieldErr("status", strictjson.ErrInvalid, fmt.Sprintf("%s is not an end status (exited, signaled, unknown, sandbox-failed)", strictjson.QuoteShort(string(n.Status))))
	}
	return nil
}

// Encode renders the canonical block, with Seen in UTC.
func (n *EndNote) Encode() ([]byte, error) {
	c := *n
	c.Seen = c.Seen.UTC()
	return encodeChecked(&c)
}

// String renders the note on one line.
func (n *EndNote) String() string {
	l := Render(kindEnd).version(n.Version).Word(n.Login+"/"+n.Project).KV("launch", n.Launch).
		KV("pid", strconv.Itoa(n.PID)).num("start_time", n.StartTime).KV("status", string(n.Status))
	if n.ExitCode != nil {
		l.KV("exit_code", strconv.Itoa(*n.ExitCode))
	}
	l.OptKV("signal", n.Signal).Flag("killed", n.Killed).KV("release", n.Release).
		KV("seen", n.Seen.UTC().Format(time.RFC3339Nano)).OptKV("budget", n.Budget).OptKV("checkin", n.Checkin).OptKV("result", string(n.Result))
	return l.Text("note", n.Note).String()
}
