package record

import (
	"context"
	"fmt"
	"slices"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// DecodedRuns are the run engine messages of msgs that decode, in their
// order: those the run tool and a runs ask read.
func DecodedRuns(msgs []RunMsg) []RunMsg {
	return slices.DeleteFunc(slices.Clone(msgs), func(m RunMsg) bool { return m.Msg == nil })
}

// RunStates applies seed 004's section 3 to the record (StandingOf): each
// run of msgs (DecodedRuns, in the server's order) with the started, stop
// and ended that count. The node's care is not read here (InCare and
// Alive stay false).
func RunStates(ctx context.Context, r *fossilio.Repo, msgs []RunMsg) []runmsg.RunState {
	privileged := PrivilegedOnce(ctx, r)
	var out []runmsg.RunState
	for _, m := range msgs {
		run := m.Run()
		if run == nil {
			continue
		}
		s := StandingOf(msgs, m, privileged)
		st := runmsg.RunState{Run: m.Hash, Node: run.Node, Objective: run.Objective, Sender: m.Sender, Manual: run.Process.Manual, State: "none",
			Started: s.Started, Stopped: s.Stopped, Ended: s.Ended}
		if e := s.EndedBy; e != nil {
			st.Outcome, st.Exit, st.Note = string(e.Outcome), e.Exit, e.Note
		}
		switch {
		case s.EndedCounts:
			st.State = "ended"
		case s.StartedCounts:
			st.State = "started"
		case s.Waits(privileged):
			st.State = "waiting"
		}
		out = append(out, st)
	}
	return out
}

// RunStateOf finds the run info names (a hash or prefix resolved, as
// fossilio.ResolveField does) among msgs (DecodedRuns), with its state as
// RunStates says it, and its message; field names the input at fault in
// a refusal.
func RunStateOf(ctx context.Context, r *fossilio.Repo, msgs []RunMsg, field string, info fossilio.Info) (runmsg.RunState, RunMsg, error) {
	i := slices.IndexFunc(msgs, func(m RunMsg) bool { return m.Hash == info.Hash })
	if i < 0 {
		return runmsg.RunState{}, RunMsg{}, fmt.Errorf("%s: %s holds no run (a post or ticket change holding {\"ocx\": 1, \"kind\": \"run\", ...})", field, info.Hash)
	}
	if _, ok := msgs[i].Msg.(*runmsg.Run); !ok {
		return runmsg.RunState{}, RunMsg{}, fmt.Errorf("%s: %s holds a %s, not a run", field, info.Hash, msgs[i].Msg.Kind())
	}
	for _, st := range RunStates(ctx, r, msgs) {
		if st.Run == info.Hash {
			return st, msgs[i], nil
		}
	}
	return runmsg.RunState{}, RunMsg{}, fmt.Errorf("%s: %s: no state", field, info.Hash)
}
