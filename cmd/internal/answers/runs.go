package answers

import (
	"context"

	"github.com/ocx-go/ocx/messages/wire"

	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host/nodesock"
	"github.com/ocx-go/ocx/host/runs"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// runs answers a runs ask from the daemon's live run log: the run tool's
// own reading (runs.Status) over the daemon's open repository and the run
// log it keeps, so that only what arrived since the last receipt is read.
// (A node.json changed since is refused, as for every ask:
// Socket.sameNode.)
func (s *status) runs(ctx context.Context, a *wire.Ask) *wire.Reply {
	x, err := s.repos.Index(a.Project)
	if err != nil {
		return nodesock.Refusal("the runs: %v", err)
	}
	r := wire.NewReply()
	sts, err := runs.Status(ctx, s.layout, x.Repo, func(ctx context.Context) ([]record.RunMsg, error) { return x.Runs(ctx) }, a.Run)
	if err != nil {
		return nodesock.Refusal("the runs: %v", err)
	}
	if sts == nil {
		sts = []runmsg.RunState{}
	}
	r.Runs = &sts
	r.Receipts = map[string]wire.Receipt{a.Project: {Rcvid: uint64(max(x.Idx.Mark(), 0))}}
	return r
}
