package hook

import (
	"context"

	"github.com/ocx-go/ocx/messages"
)

// Answer is the daemon's answer to a hook's ask on its socket (D66): the
// hook's work, done in the daemon's process for the repository and the
// hashes the ask names, as the hook's own process would have done it (the
// mark's lock keeps it from overlapping another run of either kind). A
// failure is a refusal naming it; the asking hook then runs the work
// itself.
func Answer(ctx context.Context, agents string, a *messages.Ask) *messages.Reply {
	r := messages.NewReply()
	hashes := a.Hashes
	if hashes == nil {
		hashes = []string{}
	}
	done, err := Done(ctx, Options{Agents: agents, Repo: a.Repo, Hashes: hashes, ByDaemon: true})
	if err != nil {
		r.Error = "the hook's work: " + err.Error()
		return r
	}
	r.Hook = &done
	return r
}
