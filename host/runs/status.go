package runs

import (
	"context"

	"github.com/ocx-go/ocx/messages/protocol"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// Status is what `ocx run status` and a runs ask (D66) answer: the runs
// of repository r as the record and the node's care say, or the one run
// names (a hash or its prefix). read gives the repository's run engine
// messages in the server's order (the daemon's run log, or
// record.ReadRuns).
func Status(ctx context.Context, layout host.Layout, r *fossilio.Repo, read func(context.Context) ([]record.RunMsg, error), run string) ([]runmsg.RunState, error) {
	if run != "" {
		info, err := fossilio.ResolveField(ctx, r, "run", run)
		if err != nil {
			return nil, err
		}
		msgs, err := read(ctx)
		if err != nil {
			return nil, err
		}
		st, _, err := record.RunStateOf(ctx, r, record.DecodedRuns(msgs), "run", info)
		if err != nil {
			return nil, err
		}
		Care(layout, &st)
		return []runmsg.RunState{st}, nil
	}
	msgs, err := read(ctx)
	if err != nil {
		return nil, err
	}
	sts := record.RunStates(ctx, r, record.DecodedRuns(msgs))
	for i := range sts {
		Care(layout, &sts[i])
	}
	return sts, nil
}

// Care fills in whether the node keeps run st in its care (its care file,
// host.Layout.RunCareFile), and whether the process it names runs.
func Care(layout host.Layout, st *runmsg.RunState) {
	p, err := layout.RunCareFile(st.Run)
	if err != nil {
		return
	}
	b, err := unixhost.Below(layout.Root()).ReadFile(p, unixhost.SmallFile)
	if err != nil {
		return
	}
	st.InCare = true
	if c, err := protocol.DecodeRunCare(b); err == nil && c.Process != nil {
		ps, err := unixhost.ReadStat(c.Process.PID)
		st.Alive = err == nil && ps.Start == c.Process.Start && !ps.Zombie()
	}
}
