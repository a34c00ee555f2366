package hook

import (
	"context"

	"github.com/ocx-go/ocx/messages/wire"
)

// Answer is the daemon's answer to a hook's ask on its socket (D66): the
// hook's work, done in the daemon's process for the repository and the
// hashes the ask names, as the hook's own process would have done it (the
// mark's lock keeps it from overlapping another run of either kind). A
// failure is a refusal naming it; the asking hook then runs the work
// itself.
//
// The daemon gives what it keeps: d, the Options of its runs (the agents
// root, node.json as it read it, its open readers of the repositories,
// the hook's log it keeps open).
func Answer(ctx context.Context, d Options, a *wire.Ask) *wire.Reply {
	r := wire.NewReply()
	d.Repo, d.Hashes, d.ByDaemon, d.Stdin = a.Repo, a.Hashes, true, nil
	done, err := Done(ctx, d)
	if err != nil {
		r.Error = "the hook's work: " + err.Error()
		return r
	}
	r.Hook = &done
	return r
}
