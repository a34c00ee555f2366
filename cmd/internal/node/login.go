package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// LoginAdd provisions an agent login on each repository of the login group
// (seed 002, "provision an agent login"): exactly fossilio.AgentCaps, its one
// password kept in AGENTS/LOGIN/password. Adding it again gives it an account
// on projects added since, and its capabilities back after a withdrawal.
func (n *Node) LoginAdd(ctx context.Context, login string, dry bool) *Answer {
	return n.LoginAddWith(ctx, login, "", dry)
}

// LoginAddWith is LoginAdd; on a node on another host (D72), whose
// projects are the server's node's to provision, it keeps the password
// of an agent login the server's node made (`ocx login add` there), given
// here: checked by logging in to each server as the login, which must
// hold neither admin nor setup there, then kept in AGENTS/LOGIN/password.
func (n *Node) LoginAddWith(ctx context.Context, login, password string, dry bool) *Answer {
	a := NewAnswer("login add", dry)
	if err := CheckNewLogin(login); err != nil {
		return a.Stop(err) // it names the login already
	}
	if login == n.Config.User {
		return a.Stop(fmt.Errorf("login: %q is the node user, which `ocx init` provisions", login))
	}
	var remoteProjects, own []string
	for _, p := range n.Projects() {
		if p.OtherHost {
			remoteProjects = append(remoteProjects, p.Name)
		} else {
			own = append(own, p.Name)
		}
	}
	switch {
	case len(remoteProjects) > 0 && len(own) > 0:
		return a.Stop(fmt.Errorf("login: this node is the server's node of %s and serves %s from another host: add agent logins on a node of one kind", strings.Join(own, ", "), strings.Join(remoteProjects, ", ")))
	case len(remoteProjects) > 0:
		return a.Stop(n.adoptLogin(ctx, a, login, password))
	case password != "":
		return a.Stop(fmt.Errorf("login: a password is given, but this node is the server's node of its projects: it makes its agent logins' passwords itself"))
	}
	pwFile, err := n.Layout.Password(login)
	if err != nil {
		return a.Stop(fmt.Errorf("login: %w", err))
	}
	_, kept := os.Lstat(pwFile)
	ours := kept == nil
	// A user of that name that is not one of ours is someone's: provisioning
	// would replace its capabilities and its password.
	for _, p := range n.Projects() {
		r, err := n.OpenProjectRepo(p)
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
	return a.Stop(Execute(ctx, a, loginAddPlan(login, projectNames(n.Projects()), pwFile, ours, &loginRun{n: n, pwFile: pwFile})))
}

// adoptLogin keeps, on a node on another host, the password of an agent
// login the server's node made: each server takes it, and the login holds
// neither admin nor setup there (an agent's user never does, E2).
func (n *Node) adoptLogin(ctx context.Context, a *Answer, login, password string) error {
	if password == "" {
		return fmt.Errorf("login: this node serves its projects from another host, whose server's node makes agent logins (`ocx login add %s` there): give the login's password here with --password-file", login)
	}
	pwFile, err := n.Layout.Password(login)
	if err != nil {
		return fmt.Errorf("login: %w", err)
	}
	return Execute(ctx, a, adoptPlan(login, password, pwFile, n.Projects(), adoptRun{n}))
}

// adoptEffects are the effects adoptPlan runs.
type adoptEffects interface {
	// privileged logs in to the project's server as the login, and says
	// whether it holds admin or setup there.
	privileged(ctx context.Context, p Project, login, password string) (bool, error)
	// keepPassword writes the password file (mode 0600).
	keepPassword(pwFile, password string) error
}

// adoptPlan is an agent login's adoption on a node on another host (D72):
// each project's server logged in to as the login, which must hold
// neither admin nor setup there; then its password kept in pwFile.
func adoptPlan(login, password, pwFile string, projects []Project, fx adoptEffects) Plan {
	var plan Plan
	for _, p := range projects {
		plan.Add(fmt.Sprintf("log in to %s as %q, and check that it holds neither admin nor setup there", p.URL, login), func(ctx context.Context, a *Answer) error {
			privileged, err := fx.privileged(ctx, p, login, password)
			if err != nil {
				return fmt.Errorf("login %q: %w", login, err)
			}
			if privileged {
				return fmt.Errorf("login %q holds admin or setup on %s: an agent login never does (E2)", login, p.Name)
			}
			a.Logf("%s takes %q's password; it holds neither admin nor setup there", p.URL, login)
			return nil
		})
	}
	plan.Add(fmt.Sprintf("keep its password in %s (mode 0600)", pwFile), func(_ context.Context, a *Answer) error {
		if err := fx.keepPassword(pwFile, password); err != nil {
			return err
		}
		a.Logf("its password is in %s", pwFile)
		return nil
	})
	return plan
}

// adoptRun is adoptEffects on this node.
type adoptRun struct{ n *Node }

// privileged asks the server, which answers the login of itself alone
// (D81).
func (r adoptRun) privileged(ctx context.Context, p Project, login, password string) (bool, error) {
	v, err := r.n.ServerViewer(ctx, p, Caller{Login: login, Password: password})
	if err != nil {
		return false, err
	}
	return v.Privileged, nil
}

func (r adoptRun) keepPassword(pwFile, password string) error {
	return r.n.Admin(Project{}).WritePasswordFile(pwFile, password)
}

// projectNames are the names of projects ps.
func projectNames(ps []Project) []string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return names
}

// loginEffects are the effects the login plans run.
type loginEffects interface {
	// keepPassword makes the directory the login's password is kept in.
	keepPassword() error
	// provision gives the login its account on a project (AgentCaps).
	provision(ctx context.Context, login, project string) error
	// withdraw takes every capability from the login on a project.
	withdraw(ctx context.Context, login, project string) error
	// rotate gives the login a fresh password on every project, saying
	// what it did on each, and returns it.
	rotate(ctx context.Context, a *Answer, login string) (string, error)
	// remember makes a workspace's clone remember the login's new
	// password, and says what it did.
	remember(ctx context.Context, k messages.WorkspaceKey, login, password string) string
}

// loginAddPlan provisions login on each project, its password kept in
// pwFile (a fresh one unless ours: the node keeps one already).
func loginAddPlan(login string, projects []string, pwFile string, ours bool, fx loginEffects) Plan {
	var plan Plan
	plan.Add("", func(context.Context, *Answer) error { return fx.keepPassword() })
	for _, name := range projects {
		plan.Add(fmt.Sprintf("provision %q on %s with capabilities %s", login, name, fossilio.AgentCaps), func(ctx context.Context, a *Answer) error {
			if err := fx.provision(ctx, login, name); err != nil {
				return fmt.Errorf("provision %q on %s: %w", login, name, err)
			}
			a.Logf("provisioned %q on %s with capabilities %s", login, name, fossilio.AgentCaps)
			return nil
		})
	}
	text := ""
	if !ours {
		text = fmt.Sprintf("keep a fresh password in %s (mode 0600)", pwFile)
	}
	plan.Add(text, func(_ context.Context, a *Answer) error {
		a.Logf("its password is in %s", pwFile)
		return nil
	})
	return plan
}

// loginWithdrawPlan takes every capability from login on each project; a
// project without its account is said and passed over.
func loginWithdrawPlan(login string, projects []string, fx loginEffects) Plan {
	var plan Plan
	for _, name := range projects {
		plan.Add(fmt.Sprintf("take every capability from %q on %s", login, name), func(ctx context.Context, a *Answer) error {
			err := fx.withdraw(ctx, login, name)
			if errors.Is(err, fossilio.ErrNoSuchUser) {
				a.Logf("%q has no account on %s", login, name)
				return nil
			}
			if err != nil {
				return fmt.Errorf("withdraw %q on %s: %w", login, name, err)
			}
			a.Logf("took every capability from %q on %s", login, name)
			return nil
		})
	}
	return plan
}

// loginRotatePlan gives login a fresh password on the projects, kept in
// pwFile, then makes each of its workspaces' clones remember it.
func loginRotatePlan(login string, projects int, pwFile string, keys []messages.WorkspaceKey, fx loginEffects) Plan {
	var plan Plan
	var password string
	plan.Add(fmt.Sprintf("give %q a fresh password on %d repositories and keep it in %s", login, projects, pwFile), func(ctx context.Context, a *Answer) error {
		var err error
		password, err = fx.rotate(ctx, a, login)
		return err
	})
	for _, k := range keys {
		plan.Add(fmt.Sprintf("make the clone of workspace %s remember it, unless its record restricts no_password", k), func(ctx context.Context, a *Answer) error {
			a.Logf("%s", fx.remember(ctx, k, login, password))
			return nil
		})
	}
	return plan
}

// loginRun is loginEffects on this node.
type loginRun struct {
	n      *Node
	pwFile string
}

func (l *loginRun) keepPassword() error {
	root, err := unixhost.OpenRoot(l.n.Agents)
	if err != nil {
		return err
	}
	defer root.Close()
	return root.MkdirAll(filepath.Dir(l.pwFile), 0o700)
}

func (l *loginRun) provision(ctx context.Context, login, name string) error {
	p, err := l.n.Project(name)
	if err != nil {
		return err
	}
	return l.n.Admin(p).ProvisionAgent(ctx, login, l.pwFile)
}

func (l *loginRun) withdraw(ctx context.Context, login, name string) error {
	p, err := l.n.Project(name)
	if err != nil {
		return err
	}
	return l.n.Admin(p).Withdraw(ctx, login)
}

func (l *loginRun) rotate(ctx context.Context, a *Answer, login string) (string, error) {
	var password string
	var err error
	for i, p := range l.n.Projects() {
		if i == 0 {
			password, err = l.n.Admin(p).RotatePassword(ctx, login, l.pwFile)
		} else {
			err = l.n.Admin(p).SetPassword(ctx, login, password)
		}
		if errors.Is(err, fossilio.ErrNoSuchUser) {
			a.Logf("%q has no account on %s", login, p.Name)
			continue
		}
		if err != nil {
			return "", fmt.Errorf("rotate the password of %q on %s: %w", login, p.Name, err)
		}
		a.Logf("gave %q a fresh password on %s", login, p.Name)
	}
	return password, nil
}

func (l *loginRun) remember(ctx context.Context, k messages.WorkspaceKey, login, password string) string {
	return l.n.rememberRotated(ctx, k, login, password)
}

// LoginWithdraw takes every capability from an agent login on each
// repository (seed 002, "withdraw an agent login"). It is refused while a
// process names one of the login's workspaces. Fossil keeps the user, so
// what it wrote stays attributed; the password file stays, so `login add`
// gives the capabilities back.
func (n *Node) LoginWithdraw(ctx context.Context, login string, dry bool) *Answer {
	a := NewAnswer("login withdraw", dry)
	for _, p := range n.Projects() {
		if err := refuseOtherHost(p, "withdrawing an agent login", "run `ocx login withdraw "+login+"` on the server's node"); err != nil {
			return a.Stop(err)
		}
	}
	if err := n.CheckAgentLogin(login); err != nil {
		return a.Stop(err)
	}
	keys, err := n.WorkspacesOf(login)
	if err != nil {
		return a.Stop(err)
	}
	for _, k := range keys {
		v, err := n.Naming(k)
		if err != nil {
			return a.Stop(err)
		}
		if err := RefuseIfNamed(v, k, "withdraw "+login); err != nil {
			return a.Stop(err)
		}
	}
	return a.Stop(Execute(ctx, a, loginWithdrawPlan(login, projectNames(n.Projects()), &loginRun{n: n})))
}

// LoginRotate gives an agent login a fresh password on each repository,
// keeps it in AGENTS/LOGIN/password, and makes each of its workspaces'
// clones remember it, but one whose record restricts no_password
// (rememberRotated).
func (n *Node) LoginRotate(ctx context.Context, login string, dry bool) *Answer {
	a := NewAnswer("login rotate", dry)
	for _, p := range n.Projects() {
		if err := refuseOtherHost(p, "a fresh password for an agent login", "rotate it on the server's node, then give it here with `ocx login add "+login+" --password-file`"); err != nil {
			return a.Stop(err)
		}
	}
	if err := n.CheckAgentLogin(login); err != nil {
		return a.Stop(err)
	}
	pwFile, _ := n.Layout.Password(login)
	keys, err := n.WorkspacesOf(login)
	if err != nil {
		return a.Stop(err)
	}
	return a.Stop(Execute(ctx, a, loginRotatePlan(login, len(n.Projects()), pwFile, keys, &loginRun{n: n, pwFile: pwFile})))
}

// rememberRotated makes the clone of workspace k remember login's new
// password, and says what it did (D47). What it needs is the node's own:
// the server's URL from the node's configuration, the project code from
// the node's repository, whether the login's record restricts no_password
// from its record there (a clone whose agent holds no password is never
// given one). The workspace's binding.json, the agent's file, is not
// read. The clone, the agent's file too, is written in place only when it
// is a regular file with one name, reached without a link; any other is
// refused, naming why, and keeps the old password: its agent harms only
// itself.
func (n *Node) rememberRotated(ctx context.Context, k messages.WorkspaceKey, login, password string) string {
	keeps := fmt.Sprintf("; the clone of workspace %s keeps the old password", k)
	p, err := n.Project(k.Project)
	if err != nil {
		return err.Error() + keeps
	}
	r, err := n.OpenProjectRepo(p)
	if err != nil {
		return err.Error() + keeps
	}
	rec, recHash, found, err := n.AgentRecord(ctx, r, p, login)
	if err != nil {
		r.Close()
		return fmt.Sprintf("the record of %q on %s cannot be read: %v%s", login, p.Name, err, keeps)
	}
	code, err := r.ProjectCode(ctx)
	r.Close()
	if err != nil {
		return err.Error() + keeps
	}
	if found && rec.Restrict.NoPassword {
		return fmt.Sprintf("the clone of workspace %s is not given the password: record %s restricts no_password", k, recHash)
	}
	ws, err := n.WorkspacePaths(k)
	if err != nil {
		return err.Error() + keeps
	}
	f, err := n.OpenAgentFile(ws.Clone, os.O_RDWR)
	if err != nil {
		return fmt.Sprintf("the clone of workspace %s is refused: %v%s", k, err, keeps)
	}
	defer f.Close()
	rem := fossilio.Remote{URL: p.URL, Login: login, Password: fossilio.SharedSecret(code, login, password)}
	if err := fossilio.RememberFile(ctx, f, rem); err != nil {
		return fmt.Sprintf("the clone of workspace %s cannot remember it: %v%s", k, err, keeps)
	}
	return fmt.Sprintf("the clone of workspace %s remembers the new password", k)
}

// CheckAgentLogin refuses a name that is not an agent login of this node.
func (n *Node) CheckAgentLogin(login string) error {
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

// WorkspacesOf lists the workspaces a login has on the host.
func (n *Node) WorkspacesOf(login string) ([]messages.WorkspaceKey, error) {
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

// CheckNewLogin checks a login that the node's tools make: D1's shape, and
// not one of the agents root's own files (D16, D19).
func CheckNewLogin(login string) error {
	if err := messages.ValidateLogin(login); err != nil {
		return err
	}
	return messages.ValidateLogin(login)
}
