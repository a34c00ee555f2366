package messages

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// How a process ended: one exit status (ExitStatus) for a session's process
// (the end note) and a run's (table 12), made from the host's wait status
// by host.Exit.Status alone.

// ExitStatus is how a process ended, in the terms of an end note (D6).
type ExitStatus struct {
	State endStatus `json:"state"`
	// Code is the exit code (exited; sandbox-failed when known).
	Code int `json:"code,omitempty"`
	// Signal names the signal that ended it, as the end note writes it: "SIGTERM".
	Signal string `json:"signal,omitempty"`
	// CPU is the user and system time the process used, when the reaper knows it.
	CPU time.Duration `json:"cpu,omitempty"`
	// MaxRSSKiB is the largest resident set, when the reaper knows it.
	MaxRSSKiB int64 `json:"max_rss_kib,omitempty"`
	// Sandboxed says the process ran in a sandbox (bwrap), which reports a
	// command killed by signal N as the exit code 128+N.
	Sandboxed bool `json:"sandboxed,omitempty"`
	// Limit names the limit of its cgroup a run's process went past
	// (LimitMemory: the kernel killed a process at it and the sandbox was
	// ended whole; LimitProcesses: a fork was refused), LimitNote what the
	// counts showed; "" for none, and for every process but a run's (D46).
	Limit     string `json:"limit,omitempty"`
	LimitNote string `json:"limit_note,omitempty"`
}

// sigKILL is SIGKILL's number, which Linux and every POSIX system share.
const sigKILL = 9

// AfterKill is the status of a process the daemon sent KILL after its stop
// grace (killed): a sandbox reports the command that KILL ended as exit
// code 137, which is that KILL, so the status says signaled SIGKILL. This
// is the one place of that rule (D20).
func (e ExitStatus) AfterKill(killed bool) ExitStatus {
	if killed && e.Sandboxed && e.State == EndExited && e.Code == 128+sigKILL {
		e.State, e.Code, e.Signal = EndSignaled, 0, "SIGKILL"
	}
	return e
}

// String renders the status in one line: "exited 0", "signaled SIGKILL", "unknown".
func (e ExitStatus) String() string {
	switch e.State {
	case EndExited, EndSandboxFailed:
		return string(e.State) + " " + strconv.Itoa(e.Code)
	case EndSignaled:
		return string(e.State) + " " + e.Signal
	case "":
		return "no status"
	default:
		return string(e.State)
	}
}

// Validate checks the state and the field it needs.
func (e ExitStatus) Validate() error {
	switch e.State {
	case EndExited, EndSandboxFailed, EndUnknown:
		return nil
	case EndSignaled:
		if e.Signal == "" {
			return strictjson.FieldErr("signal", strictjson.ErrMissing, "is empty; a signaled exit names its signal")
		}
		return nil
	case "":
		return strictjson.FieldErr("state", strictjson.ErrMissing, "is empty; an exit is exited, signaled, unknown or sandbox-failed")
	default:
		return strictjson.FieldErr("state", strictjson.ErrInvalid, strictjson.QuoteShort(string(e.State))+" is not exited, signaled, unknown or sandbox-failed")
	}
}

// Exit is the exit of seed 004's table 12: the code, or 128 and N for
// signal N.
func (e ExitStatus) Exit() int {
	if e.State == EndSignaled {
		return 128 + SignalNumber(e.Signal)
	}
	return e.Code
}

// Exited is the status of a process that exited with code.
func Exited(code int) ExitStatus { return ExitStatus{State: EndExited, Code: code} }

// Signaled is the status of a process signal n ended.
func Signaled(n int) ExitStatus { return ExitStatus{State: EndSignaled, Signal: SignalName(n)} }

// ExitUnknown is the status of a process whose end could not be had (not
// the daemon's child: D6).
var ExitUnknown = ExitStatus{State: EndUnknown}

// signalNames are Linux's signal names, for an end note ("SIGTERM").
var signalNames = [...]string{1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT",
	7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE",
	14: "SIGALRM", 15: "SIGTERM", 16: "SIGSTKFLT", 17: "SIGCHLD", 18: "SIGCONT", 19: "SIGSTOP", 20: "SIGTSTP",
	21: "SIGTTIN", 22: "SIGTTOU", 23: "SIGURG", 24: "SIGXCPU", 25: "SIGXFSZ", 26: "SIGVTALRM", 27: "SIGPROF",
	28: "SIGWINCH", 29: "SIGIO", 30: "SIGPWR", 31: "SIGSYS"}

// SignalName names signal n as an end note writes it ("SIGTERM"); "SIGRTMIN+K"
// or "signal N" for the others.
func SignalName(n int) string {
	switch {
	case n > 0 && n < len(signalNames):
		return signalNames[n]
	case n >= 34 && n <= 64:
		return fmt.Sprintf("SIGRTMIN+%d", n-34)
	}
	return fmt.Sprintf("signal %d", n)
}

// SignalNumber is the signal SignalName names; 0 for a name it never gives.
func SignalNumber(name string) int {
	for n := 1; n <= 64; n++ {
		if SignalName(n) == name {
			return n
		}
	}
	if v, ok := strings.CutPrefix(name, "signal "); ok {
		n, _ := strconv.Atoi(v)
		return n
	}
	return 0
}
