package node

import (
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
)

// What the console's forms read beside the actions.

// OpenRepo opens a project's repository for reading, as the node's.
func (n *Node) OpenRepo(project string) (*fossilio.Repo, error) {
	p, err := n.Project(project)
	if err != nil {
		return nil, err
	}
	return n.OpenProjectRepo(p)
}

// WorkspacePaths are the paths of workspace key on the host.
func (n *Node) WorkspacePaths(key messages.WorkspaceKey) (host.Workspace, error) {
	return n.Layout.Workspace(key)
}

// AgentLogins lists the node's agent logins (those keeping a password in
// the agents root), the node user left out.
func (n *Node) AgentLogins() ([]string, error) {
	all, err := n.PasswordLogins()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range all {
		if l != n.Config.User {
			out = append(out, l)
		}
	}
	return out, nil
}
