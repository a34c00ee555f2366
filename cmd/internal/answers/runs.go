package answers

import (
	"context"

	"github.com/ocx-go/ocx/cmd/internal/tools"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host/nodesock"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/wire"
)

// runs answers a runs ask from the daemon's live run log: the run tool's
// own reading (tools.ReadRunStatus), given the daemon's open repositories,
// so that only what arrived since the last receipt is read. (A node.json
// changed since is refused, as for every ask: Socket.sameNode.)
func (s *status) runs(ctx context.Context, a *wire.Ask) *wire.Reply {
	r, n, refusal := s.node()
	if refusal != nil {
		return refusal
	}
	sts, err := tools.Of(n).ReadRunStatus(ctx, tools.RunInput{Project: a.Project, Run: a.Run})
	if err != nil {
		return nodesock.Refusal("the runs: %v", err)
	}
	if sts == nil {
		sts = []messages.RunState{}
	}
	r.Runs = &sts
	if x, err := s.repos.Index(a.Project); err == nil {
		r.Receipts = map[string]wire.Receipt{a.Project: {Rcvid: uint64(max(x.Idx.Mark(), 0))}}
	}
	return r
}

// Runs are the run engine messages the daemon keeps of r's repository
// (node.RunRecords).
func (l liveRecords) Runs(ctx context.Context, r *fossilio.Repo) ([]record.RunMsg, bool, error) {
	x, err := l.repos.IndexAt(r.Path())
	if err != nil {
		return nil, false, nil
	}
	msgs, err := x.Runs(ctx)
	return msgs, true, err
}
