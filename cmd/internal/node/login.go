package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// LoginAdd provisions an agent login on each repository of the login group
// (seed 002, "provision an agent login"): exactly fossilio.AgentCaps, its one
// password kept in AGENTS/LOGIN/password. Adding it again gives it an account
// on projects added since, and its capabilities back after a withdrawal.
func (n *Node) LoginAdd(ctx context.Context, login string, dry bool) *Answer {
	a := newAnswer("login add", dry)
	if err := CheckNewLogin(login); err != nil {
		return a.Stop(err) // it names the login already
	}
	if login == n.Config.User {
		return a.Stop(fmt.Errorf("login: %q is the node user, which `ocx init` provisions", login))
	}
	pwFile, err := n.Layout.Password(login)
	if err != nil {
		return a.Stop(fmt.Errorf("login: %w", err))
	}
	_, kept := os.Lstat(pwFile)
	ours := kept == nil
	// A user of that name that is not one of ours is someone's: provisioning
	// would replace its capabilities and its password.
	for _, p := range n.projects() {
		r, err := n.openRepo(p)
		if err != nil {
			return a.Stop(err)
		}
		u, err := r.User(ctx, login)
		r.Close()
		if err == nil && !ours {
			return a.Stop(fmt.Errorf("login: %q is already a user of %s (capabilities %q) and not an agent login of this node; choose another name", login, p.Name, u.Caps))
		}
		if err != nil && !errors.Is(err, fossilio.ErrNoSuchUser) {
			return a.Stop(err)
		}
	}
	if dry {
		for _, p := range n.projects() {
			a.Would("provision %q on %s with capabilities %s", login, p.Name, fossilio.AgentCaps)
		}
		if !ours {
			a.Would("keep a fresh password in %s (mode 0600)", pwFile)
		}
		return a
	}
	root, err := unixhost.OpenRoot(n.Agents)
	if err != nil {
		return a.Stop(err)
	}
	defer root.Close()
	if err := root.MkdirAll(filepath.Dir(pwFile), 0o700); err != nil {
		return a.Stop(err)
	}
	for _, p := range n.projects() {
		if err := n.admin(p).ProvisionAgent(ctx, login, pwFile); err != nil {
			return a.Stop(fmt.Errorf("provision %q on %s: %w", login, p.Name, err))
		}
		a.Logf("provisioned %q on %s with capabilities %s", login, p.Name, fossilio.AgentCaps)
	}
	a.Logf("its password is in %s", pwFile)
	return a
}

// LoginWithdraw takes every capability from an agent login on each
// repository (seed 002, "withdraw an agent login"). It is refused while a
// process names one of the login's workspaces. Fossil keeps the user, so
// what it wrote stays attributed; the password file stays, so `login add`
// gives the capabilities back.
func (n *Node) LoginWithdraw(ctx context.Context, login string, dry bool) *Answer {
	a := newAnswer("login withdraw", dry)
	if err := n.checkAgentLogin(login); err != nil {
		return a.Stop(err)
	}
	keys, err := n.workspacesOf(login)
	if err != nil {
		return a.Stop(err)
	}
	for _, k := range keys {
		v, err := n.naming(k)
		if err != nil {
			return a.Stop(err)
		}
		if err := refuseIfNamed(v, k, "withdraw "+login); err != nil {
			return a.Stop(err)
		}
	}
	for _, p := range n.projects() {
		if dry {
			a.Would("take every capability from %q on %s", login, p.Name)
			continue
		}
		err := n.admin(p).Withdraw(ctx, login)
		if errors.Is(err, fossilio.ErrNoSuchUser) {
			a.Logf("%q has no account on %s", login, p.Name)
			continue
		}
		if err != nil {
			return a.Stop(fmt.Errorf("withdraw %q on %s: %w", login, p.Name, err))
		}
		a.Logf("took every capability from %q on %s", login, p.Name)
	}
	return a
}

// LoginRotate gives an agent login a fresh password on each repository,
// keeps it in AGENTS/LOGIN/password, and makes each of its workspaces'
// clones remember it.
func (n *Node) LoginRotate(ctx context.Context, login string, dry bool) *Answer {
	a := newAnswer("login rotate", dry)
	if err := n.checkAgentLogin(login); err != nil {
		return a.Stop(err)
	}
	pwFile, _ := n.Layout.Password(login)
	keys, err := n.workspacesOf(login)
	if err != nil {
		return a.Stop(err)
	}
	projects := n.projects()
	if dry {
		a.Would("give %q a fresh password on %d repositories and keep it in %s", login, len(projects), pwFile)
		for _, k := range keys {
			a.Would("make the clone of workspace %s remember it", k)
		}
		return a
	}
	var password string
	for i, p := range projects {
		if i == 0 {
			password, err = n.admin(p).RotatePassword(ctx, login, pwFile)
		} else {
			err = n.admin(p).SetPassword(ctx, login, password)
		}
		if errors.Is(err, fossilio.ErrNoSuchUser) {
			a.Logf("%q has no account on %s", login, p.Name)
			continue
		}
		if err != nil {
			return a.Stop(fmt.Errorf("rotate the password of %q on %s: %w", login, p.Name, err))
		}
		a.Logf("gave %q a fresh password on %s", login, p.Name)
	}
	for _, k := range keys {
		ws, _ := n.workspace(k)
		b, err := n.readBinding(ws)
		if err != nil {
			a.Logf("workspace %s: %v; its clone keeps the old password", k, err)
			continue
		}
		rem := fossilio.Remote{URL: b.Remote, Login: login, Password: fossilio.SharedSecret(b.ProjectCode, login, password)}
		if err := fossilio.Remember(ctx, ws.Clone, rem); err != nil {
			return a.Stop(fmt.Errorf("make the clone of %s remember the new password: %w", k, err))
		}
		a.Logf("the clone of workspace %s remembers the new password", k)
	}
	return a
}

// checkAgentLogin refuses a name that is not an agent login of this node.
func (n *Node) checkAgentLogin(login string) error {
	if err := messages.ValidateLogin(login); err != nil {
		return fmt.Errorf("login: %w", err)
	}
	if login == n.Config.User {
		return fmt.Errorf("login: %q is the node user, not an agent login", login)
	}
	pwFile, err := n.Layout.Password(login)
	if err != nil {
		return fmt.Errorf("login: %w", err)
	}
	if _, err := os.Lstat(pwFile); err != nil {
		return fmt.Errorf("login: %q is not an agent login of this node (no %s; `ocx login add %s` makes one)", login, pwFile, login)
	}
	return nil
}

// workspacesOf lists the workspaces a login has on the host.
func (n *Node) workspacesOf(login string) ([]messages.WorkspaceKey, error) {
	dir := filepath.Join(n.Agents, login, "projects")
	entries, err := unixhost.Below(n.Agents).ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the workspaces of %s: %w", login, err)
	}
	var out []messages.WorkspaceKey
	for _, e := range entries {
		k := messages.WorkspaceKey{Login: login, Project: e.Name()}
		if e.IsDir() && k.Validate() == nil {
			out = append(out, k)
		}
	}
	return out, nil
}
