package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/remote"
	"github.com/ocx-go/ocx/host/nodesock"
	"github.com/ocx-go/ocx/messages/wire"
)

// pullWait bounds how long an action waits for its clone's pull.
const pullWait = time.Minute

// PullClone brings the clone of a project served from another host up to
// date with the server (D72): the daemon's pull, asked on its socket, so
// that the daemon acts on what came; with no daemon, or one that took no
// ask in time, a pull of this process's own. An action that wrote to the server then reads its write
// in the node's clone.
func (n *Node) PullClone(ctx context.Context, p Project) error {
	a := wire.NewAsk(wire.AskPull)
	a.Project = p.Name
	var r *wire.Reply
	var err error
	if n.ask != nil {
		r, err = n.ask(ctx, a)
	} else {
		r, err = nodesock.Ask(ctx, n.Layout, a, pullWait)
	}
	switch {
	case err == nil && r.Error == "":
		return nil
	case err == nil:
		return errors.New(r.Error)
	case !errors.Is(err, nodesock.ErrNoDaemon) && !errors.Is(err, nodesock.ErrNotTaken):
		return err
	}
	// No daemon, or one that took no ask in time (stopped, D75): the
	// pull is this process's.
	_, err = n.Keeper(p).Pull(ctx)
	return err
}

// Keeper is the keeper of a project's clone as this process pulls it, as
// the node user.
func (n *Node) Keeper(p Project) *remote.Keeper {
	return &remote.Keeper{Project: p.Name, Clone: p.Repository, Log: n.Log,
		Fossil: &fossilio.Fossil{Exe: n.Fossil, Home: n.Agents, User: n.Config.User, Dir: n.Agents},
		Client: &remote.Client{URL: p.URL, Login: n.Config.User, Password: func() (string, error) { return n.Password(n.Config.User) }}}
}

// ServerViewer asks the server of p, a project served from another host,
// what it holds of c's login, logged in as c (its password or its
// cookie): its capabilities there and whether it holds admin or setup.
// The server's receipt page answers any login of itself, and tells a
// node on another host of no other user but those its receipts name
// (D81). A login the server does not take is an error saying so.
func (n *Node) ServerViewer(ctx context.Context, p Project, c Caller) (wire.ReceiptViewer, error) {
	cl := &remote.Client{URL: p.URL, Login: c.Login, Cookie: c.Cookie}
	if c.Password != "" {
		cl.Password = func() (string, error) { return c.Password, nil }
	}
	v, err := cl.Viewer(ctx)
	if err != nil {
		return wire.ReceiptViewer{}, fmt.Errorf("what %s holds of %q: %w", p.URL, c.Login, err)
	}
	return v, nil
}

// refuseOtherHost refuses what only the server's node may do to a
// project: on another host the repository is the node's clone, and the
// server's users, hook and settings are the server's node's to change.
func refuseOtherHost(p Project, what, instead string) error {
	if !p.OtherHost {
		return nil
	}
	return fmt.Errorf("project %s is served from another host (node.json's other_host): %s is the server's node's to do; %s", p.Name, what, instead)
}
