package setup

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/ocx-go/ocx/cmd/internal/node"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/daemonclient"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages/pipe"
)

// isNoReader says whether a pipe error means nobody reads it.
func isNoReader(err error) bool {
	return errors.Is(err, host.ErrNoReader) || errors.Is(err, fs.ErrNotExist)
}

// daemonRereads has a running daemon read node.json again once a command
// changed it: it is handed `reexec`, a re-exec in place that keeps its
// PID and its sessions and builds every part again from the file as it
// is now (issue 38: a remote node added while the daemon ran was poked
// only after a restart). Until the new image answers, the daemon's socket
// refuses every ask, naming the change, and each caller does its work
// itself with the file as it is. With no daemon, the next one reads it.
func daemonRereads(n *node.Node, a *node.Answer) error {
	pid, held, err := unixhost.LockHolder(n.Layout.Lock())
	if err != nil {
		return fmt.Errorf("find the daemon, to have it read %s again: %w", n.Layout.NodeJSON(), err)
	}
	if !held {
		a.Logf("no daemon runs: the next one reads %s", n.Layout.NodeJSON())
		return nil
	}
	if err := daemonclient.Send(n.Layout, []pipe.Line{pipe.ReexecLine{}}); err != nil {
		if isNoReader(err) {
			a.Logf("the daemon (pid %d) is stopping: the next one reads %s", pid, n.Layout.NodeJSON())
			return nil
		}
		return fmt.Errorf("hand `reexec` to the daemon (pid %d) so that it reads %s again: %w; it reads it at its next start, and refuses every ask until then", pid, n.Layout.NodeJSON(), err)
	}
	a.Logf("handed `reexec` to the daemon (pid %d): it reads %s again, keeping its PID and its sessions", pid, n.Layout.NodeJSON())
	return nil
}
