package node

import (
	"context"

	"github.com/ocx-go/ocx/host/daemonclient"
	"github.com/ocx-go/ocx/messages/pipe"
)

// EnsureAndSend starts the daemon when needed and hands it lines.
func (n *Node) EnsureAndSend(ctx context.Context, a *Answer, lines ...pipe.Line) error {
	started, err := daemonclient.Ensure(ctx, n.Layout, n.Program("ocxd"), n.daemonWait)
	if started {
		a.Logf("started the daemon %s", n.Program("ocxd"))
	}
	if err != nil {
		return err
	}
	if err := daemonclient.Send(n.Layout, lines); err != nil {
		return err
	}
	for _, l := range lines {
		a.Logf("handed `%s` to the daemon", l)
	}
	return nil
}
