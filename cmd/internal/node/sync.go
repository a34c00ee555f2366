package node

import (
	"context"
	"fmt"

	"github.com/ocx-go/ocx/messages"
)

// SyncTarget is the one URL the sync socket of workspace k forwards to
// (D49): its project's server, as node.json names it, never as anything
// in the workspace says. It is "" with why when the node offers k no sync
// socket: its agent's record restricts no_password (D39), so the agent
// has no password to send and its session reads and writes through the
// tools; nothing in its sandbox reaches the server with Fossil.
func (n *Node) SyncTarget(ctx context.Context, k messages.WorkspaceKey) (target, why string, err error) {
	p, err := n.Project(k.Project)
	if err != nil {
		return "", "", err
	}
	r, err := n.OpenProjectRepo(p)
	if err != nil {
		return "", "", err
	}
	defer r.Close()
	rec, recHash, found, err := n.AgentRecord(ctx, r, p, k.Login)
	if err != nil {
		return "", "", fmt.Errorf("the record of %q on %s: %w", k.Login, p.Name, err)
	}
	if found && rec.Restrict.NoPassword {
		return "", fmt.Sprintf("record %s restricts no_password: the session reads and writes through the tools (D39)", recHash), nil
	}
	return p.URL, "", nil
}
