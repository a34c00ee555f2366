package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// What the console reads beside the actions: the same record model and the
// same paths, named for its pages.

// ProjectOf names the project whose repository is the file at path, as
// Fossil names it (FOSSIL_REPOSITORY): by node.json's path, or by the file
// itself when one of the two names it through a link.
func (n *Node) ProjectOf(path string) (string, bool) {
	// Fossil gives the repository as its server was given it: relative to
	// the server's directory, which is the CGI's too.
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if name, ok := n.Config.ProjectOfRepository(path); ok {
		return name, true
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", false
	}
	for _, p := range n.Projects() {
		if pst, err := os.Stat(p.Repository); err == nil && os.SameFile(st, pst) {
			return p.Name, true
		}
	}
	return "", false
}

// OpenRepo opens a project's repository for reading, as the node's.
func (n *Node) OpenRepo(project string) (*fossilio.Repo, error) {
	p, err := n.Project(project)
	if err != nil {
		return nil, err
	}
	return n.OpenProjectRepo(p)
}

// Workspaces returns each workspace of project the record defines: its
// latest definition that counts and the terminated note that ends it.
func (n *Node) Workspaces(ctx context.Context, project string) (map[messages.WorkspaceKey]*Workspace, error) {
	r, err := n.OpenRepo(project)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return Defined(ctx, n.Index(r))
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

// SessionEnd is how the last session of a workspace ended, as the record
// says (record.SessionEnd).
type SessionEnd = record.SessionEnd

// LastSessionEnd reads how the last session of workspace key ended; nil
// when none ever ended.
func (n *Node) LastSessionEnd(ctx context.Context, key messages.WorkspaceKey) (*SessionEnd, error) {
	r, err := n.OpenRepo(key.Project)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return lastSessionEnd(ctx, n.Index(r), key)
}

// lastSessionEnd reads how the last session of workspace key ended, from
// the record idx indexes (record.LastSessionEnd).
func lastSessionEnd(ctx context.Context, idx *record.Index, key messages.WorkspaceKey) (*SessionEnd, error) {
	return record.LastSessionEnd(ctx, idx, key)
}

// LogTail returns the last max bytes of a log below the agents root, from
// the start of a line, or "" when there is none. A session's log is in its
// workspace, the agent's to replace: it is read through no link, without
// waiting, and only when it is a regular file (ReadTail); anything else
// there shows as no log, logged once.
func (n *Node) LogTail(path string, max int64) (string, error) {
	root, err := unixhost.OpenRoot(n.Agents)
	if err != nil {
		return "", err
	}
	defer root.Close()
	b, size, err := root.ReadTail(path, max)
	if err != nil {
		if n.refusals.Absent(err) {
			return "", nil
		}
		return "", err
	}
	s := string(b)
	if size > int64(len(b)) {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return strings.ToValidUTF8(s, "\uFFFD"), nil
}
