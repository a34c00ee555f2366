package record

import (
	"fmt"

	"github.com/ocx-go/ocx/messages/runmsg"
)

// RunVerdict is what a run engine message is to the node self: a run that
// arrived for it (Run; section 11 is the caller's to check), a stop that
// counts of its run Stop, or nothing, Nothing saying why.
type RunVerdict struct {
	Run     bool
	Stop    string
	Nothing string
}

// VerdictOf says what msgs[i] is to the node self (section 3's table):
// a run for it whose started and ended do not count yet, a stop that
// counts of a run that has not ended, or nothing; a started or an ended
// asks nothing, whether it counts or not.
func VerdictOf(msgs []RunMsg, i int, self string, privileged PrivilegedFunc) RunVerdict {
	m := msgs[i]
	nothing := func(format string, a ...any) RunVerdict { return RunVerdict{Nothing: fmt.Sprintf(format, a...)} }
	if m.Node() != self {
		return nothing("a %s for the node %q, not this node's (%q)", m.Kind(), m.Node(), self)
	}
	if m.Kind() == runmsg.MsgRun {
		if st := StandingOf(msgs, m, privileged); st.StartedCounts || st.EndedCounts {
			return nothing("a run answered already (its started or ended counts)")
		}
		return RunVerdict{Run: true}
	}
	if m.Msg == nil {
		if m.Kind() == runmsg.MsgStop {
			return nothing("a stop that does not read: %s", m.Malformed.Error())
		}
		return nothing("a %s that does not read", m.Kind())
	}
	if f, ok := m.Msg.(*runmsg.RunFired); ok {
		// One that counts is read as the run it is (RunLog, D101).
		return nothing("a fired that does not count: not by the node user where its trigger %s is, of a cause named before, or after its ended (sent by %q)", f.Run, m.Sender)
	}
	j := IndexRun(msgs, m.About())
	where := j >= 0 && msgs[j].SameRecord(m)
	if m.Kind() == runmsg.MsgStop {
		v, row := runmsg.ClassifyMessage(runmsg.MessageStanding{Kind: runmsg.MsgStop, SenderPrivileged: privileged(m.Sender), WhereItsRun: where})
		if v != runmsg.MessageCounts {
			return nothing("a stop %s (section 3, row %d): sent by %q, where its run is: %v", v, row, m.Sender, where)
		}
		if StandingOf(msgs, msgs[j], privileged).EndedCounts {
			return nothing("a stop of a run that has ended")
		}
		return RunVerdict{Stop: m.About()}
	}
	// started and ended are the node's own answers: which count is read
	// from the record when it matters; none asks anything.
	s := runmsg.MessageStanding{Kind: m.Kind(), SenderIsNode: m.Sender == self, WhereItsRun: where}
	if j >= 0 {
		before := StandingOf(msgs[:i], msgs[j], privileged)
		s.SeenBefore = (m.Kind() == runmsg.MsgStarted && before.StartedCounts) || (m.Kind() == runmsg.MsgEnded && before.EndedCounts)
	}
	v, row := runmsg.ClassifyMessage(s)
	if v == runmsg.MessageCounts {
		return nothing("the node's own %s", m.Kind())
	}
	return nothing("a %s %s (section 3, row %d)", m.Kind(), v, row)
}

// WhyNoStart says why a person cannot start the run msgs[i] on the node
// self now (section 8), "" when they can: it is the node's, it reads, it is
// manual, and neither its started, its ended nor a stop counts.
func WhyNoStart(msgs []RunMsg, i int, self string, privileged PrivilegedFunc) string {
	m := msgs[i]
	if m.Node() != self {
		return fmt.Sprintf("a run for the node %q, not this node's (%q)", m.Node(), self)
	}
	run := m.Run()
	switch {
	case run == nil:
		return "a run that does not read: it was ended refused when it arrived"
	case run.Process.On != nil:
		return "a trigger (process.on): it starts no process itself; each firing is a run the node starts"
	case !run.Process.Manual:
		return "not a manual run (process.manual is false): the node started it when it arrived"
	}
	st := StandingOf(msgs, m, privileged)
	switch {
	case st.EndedCounts:
		return "the run has ended"
	case st.StartedCounts:
		return "the run has started already"
	case st.StopCounts:
		return "the run was stopped"
	}
	return ""
}
