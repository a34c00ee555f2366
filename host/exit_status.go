package host

import "github.com/ocx-go/ocx/messages"

// Status is the exit in messages' terms, as it came: the one mapping of
// the host's wait status, for a session's end note and a run's exit
// alike. A sandboxed command's code comes from bwrap, which writes 128+N
// for a command killed by signal N (the session's core tells the daemon's
// own KILL from it: messages.ExitStatus.AfterKill); a run's cgroup names
// the limit its process went past.
func (e Exit) Status() messages.ExitStatus {
	o, code := e.Outcome()
	st := messages.ExitStatus{CPU: e.User + e.System, MaxRSSKiB: e.MaxRSS / 1024, Sandboxed: e.Sandbox != nil}
	switch o {
	case OutcomeExited:
		st.State, st.Code = messages.EndExited, code
		if e.PastCPULimit() {
			st.State, st.Code, st.Signal = messages.EndSignaled, 0, SignalName(int(SIGXCPU))
		}
	case OutcomeSignaled:
		st.State, st.Signal = messages.EndSignaled, SignalName(e.Signal)
	case OutcomeSandboxFailed:
		st.State, st.Code = messages.EndSandboxFailed, e.Code
	default:
		st.State = messages.EndUnknown
	}
	if c := e.Cgroup; c != nil {
		st.Limit, st.LimitNote = c.Events.Limit(), c.Events.Words(c.Limits)
	}
	return st
}
