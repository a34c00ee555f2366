package setup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/ocx-go/ocx/cmd/internal/node"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/remote"
	runeng "github.com/ocx-go/ocx/host/runs"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// NodeAddInput is what `ocx node add` takes, on the server's node.
type NodeAddInput struct {
	// User is the remote node's node user, made on each repository this
	// node serves with exactly an agent's capabilities.
	User string
	// Password is its password on the server, which the remote node is
	// given too (`ocx init --other-host --password-file`).
	Password string
	// Poke, when set, is the URL the hook pokes the node at: https, or
	// http on loopback (D81). PokeSecret is what each poke carries; empty,
	// the one node.json holds for the node already, else a new one.
	Poke, PokeSecret string
	DryRun           bool
}

// NodeAdd lists a node on another host on this node, the server's (D72):
// its node user made (or its password and capabilities set again) on
// each repository this node serves, with exactly fossilio.AgentCaps, and
// node.json's remote_nodes naming it, so that the console's receipt page
// answers it and the hook pokes it, each poke carrying the poke's secret
// (D81), which the remote node's node.json holds too. Added again, it
// updates the poke.
func NodeAdd(ctx context.Context, n *node.Node, in NodeAddInput) *node.Answer {
	a := node.NewAnswer("node add", in.DryRun)
	if err := checkNodeAdd(in, n.Config.User); err != nil {
		return a.Stop(err)
	}
	f, err := readNodeAdd(ctx, n, in)
	if err != nil {
		return a.Stop(err)
	}
	plan, err := nodeAddPlan(f, nodeRun{n})
	return node.Executed(ctx, a, plan, err)
}

// checkNodeAdd refuses what `node add` is given before anything is read:
// the node user, the password, the poke and its secret.
func checkNodeAdd(in NodeAddInput, self string) error {
	if err := node.CheckNewLogin(in.User); err != nil {
		return fmt.Errorf("node user: %w", err)
	}
	if in.User == self {
		return fmt.Errorf("node user: %q is this node's own", in.User)
	}
	if in.Password == "" {
		return errors.New("password: give the remote node's password with --password-file (or OCX_PASSWORD)")
	}
	switch {
	case in.Poke != "":
		if err := checkRemoteURL(in.Poke); err != nil {
			return fmt.Errorf("poke: %w", err)
		}
		if in.PokeSecret != "" {
			return messages.CheckPokeSecret("poke secret", in.PokeSecret)
		}
	case in.PokeSecret != "":
		return errors.New("poke secret: given without --poke; a secret is for the pokes of a node")
	}
	return nil
}

// nodeAddFacts is what `node add` read, for nodeAddPlan.
type nodeAddFacts struct {
	In     NodeAddInput
	Config messages.NodeConfig
	// Projects are the node's projects; Users the capabilities of the
	// user named In.User on each of its own that has one.
	Projects []node.Project
	Users    map[string]string
	// Secret is what the pokes carry: given, node.json's, or a new one
	// (Made).
	Secret   string
	Made     bool
	NodeJSON string
}

// readNodeAdd reads what `node add` needs: the poke's secret, that the
// user is no agent login here, and whether it is a user of each
// repository this node serves.
func readNodeAdd(ctx context.Context, n *node.Node, in NodeAddInput) (nodeAddFacts, error) {
	f := nodeAddFacts{In: in, Config: *n.Config, Projects: n.Projects(), Users: map[string]string{}, Secret: in.PokeSecret, NodeJSON: n.Layout.NodeJSON()}
	if in.Poke != "" && f.Secret == "" {
		for _, p := range f.Projects {
			if r, ok := p.RemoteNode(in.User); ok && r.PokeSecret != "" {
				f.Secret = r.PokeSecret
			}
		}
		if f.Secret == "" {
			b := make([]byte, 32)
			if _, err := rand.Read(b); err != nil {
				return f, fmt.Errorf("make the poke's secret: %w", err)
			}
			f.Secret, f.Made = hex.EncodeToString(b), true
		}
	}
	if pw, err := n.Layout.Password(in.User); err == nil {
		if _, err := unixhost.Below(n.Agents).ReadSecret(pw, 4<<10); !errors.Is(err, fs.ErrNotExist) {
			return f, fmt.Errorf("node user: %q is an agent login of this node (%s is there)", in.User, pw)
		}
	}
	for _, p := range f.Projects {
		if p.OtherHost {
			continue
		}
		r, err := n.OpenProjectRepo(p)
		if err != nil {
			return f, err
		}
		u, err := r.User(ctx, in.User)
		r.Close()
		switch {
		case err == nil:
			f.Users[p.Name] = u.Caps
		case !errors.Is(err, fossilio.ErrNoSuchUser):
			return f, err
		}
	}
	return f, nil
}

// nodeEffects are the effects the plans of `node add` and `node remove`
// run.
type nodeEffects interface {
	// setUser makes the user on the project's repository, or sets its
	// password and capabilities again.
	setUser(ctx context.Context, p node.Project, user, password string) error
	// withdraw takes every capability from the user on the project's
	// repository; a repository without the user is no failure.
	withdraw(ctx context.Context, p node.Project, user string) error
	// writeConfig writes node.json; reread tells the daemon to read it.
	writeConfig(data []byte) error
	reread(a *node.Answer) error
}

// nodeAddPlan is `node add`'s plan (D72, D81): the user made on each
// repository this node serves, then node.json listing it as a remote
// node, with the pokes' secret. A project served from another host is
// said and left as it is; a user of a repository that is not already a
// remote node of it is refused.
func nodeAddPlan(f nodeAddFacts, fx nodeEffects) (node.Plan, error) {
	var plan node.Plan
	in := f.In
	cfg := f.Config
	cfg.Projects = map[string]messages.NodeProject{}
	for _, p := range f.Projects {
		if p.OtherHost {
			plan.Say("%s is served from another host: its server's node lists its remote nodes", p.Name)
			cfg.Projects[p.Name] = p.NodeProject
			continue
		}
		if caps, ok := f.Users[p.Name]; ok {
			if _, listed := p.RemoteNode(in.User); !listed {
				return plan, fmt.Errorf("node user: %q is already a user of %s (capabilities %q) and not a remote node of this node; choose another name", in.User, p.Name, caps)
			}
		}
		np := p.NodeProject
		np.RemoteNodes = slices.DeleteFunc(slices.Clone(np.RemoteNodes), func(r messages.RemoteNode) bool { return r.User == in.User })
		np.RemoteNodes = append(np.RemoteNodes, messages.RemoteNode{User: in.User, Poke: in.Poke, PokeSecret: f.Secret})
		cfg.Projects[p.Name] = np
		plan.Add(fmt.Sprintf("make %q a user of %s with capabilities %s and the password given", in.User, p.Name, fossilio.AgentCaps), func(ctx context.Context, a *node.Answer) error {
			if err := fx.setUser(ctx, p, in.User, in.Password); err != nil {
				return err
			}
			a.Logf("made %q a user of %s (capabilities %s)", in.User, p.Name, fossilio.AgentCaps)
			return nil
		})
	}
	data, err := cfg.Encode()
	if err != nil {
		return plan, err
	}
	shown, err := cfg.EncodeShown()
	if err != nil {
		return plan, err
	}
	plan.Add(fmt.Sprintf("list %q as a remote node in %s:\n%s", in.User, f.NodeJSON, shown), func(_ context.Context, a *node.Answer) error {
		if err := fx.writeConfig(data); err != nil {
			return err
		}
		if f.Made {
			a.Logf("made the secret %q's pokes carry: node.json's remote_nodes hold it (poke_secret); give it to that node's `ocx init --other-host --poke-secret-file`", in.User)
		}
		return fx.reread(a)
	})
	return plan, nil
}

// nodeRun is nodeEffects on this node.
type nodeRun struct{ n *node.Node }

func (r nodeRun) setUser(ctx context.Context, p node.Project, user, password string) error {
	return r.n.Admin(p).SetUser(ctx, user, password, fossilio.AgentCaps)
}

func (r nodeRun) withdraw(ctx context.Context, p node.Project, user string) error {
	if err := r.n.Admin(p).Withdraw(ctx, user); err != nil && !errors.Is(err, fossilio.ErrNoSuchUser) {
		return err
	}
	return nil
}

func (r nodeRun) writeConfig(data []byte) error { return writeNodeJSON(r.n, data) }

func (r nodeRun) reread(a *node.Answer) error { return daemonRereads(r.n, a) }

// NodeRemove unlists a node on another host (D72): its node user keeps
// no capability on the repositories this node serves, and the receipt
// page answers it no more.
func NodeRemove(ctx context.Context, n *node.Node, user string, dry bool) *node.Answer {
	a := node.NewAnswer("node remove", dry)
	if err := messages.ValidateLogin(user); err != nil {
		return a.Stop(fmt.Errorf("node user: %w", err))
	}
	plan, err := nodeRemovePlan(user, *n.Config, n.Projects(), n.Layout.NodeJSON(), nodeRun{n})
	return node.Executed(ctx, a, plan, err)
}

// nodeRemovePlan is `node remove`'s plan (D72): every capability taken
// from the user on each repository that lists it as a remote node, then
// node.json without it; refused when no project lists it.
func nodeRemovePlan(user string, cfg messages.NodeConfig, projects []node.Project, nodeJSON string, fx nodeEffects) (node.Plan, error) {
	cfg.Projects = map[string]messages.NodeProject{}
	var plan node.Plan
	found := false
	for _, p := range projects {
		np := p.NodeProject
		if _, ok := p.RemoteNode(user); ok {
			found = true
			np.RemoteNodes = slices.DeleteFunc(slices.Clone(np.RemoteNodes), func(r messages.RemoteNode) bool { return r.User == user })
			plan.Add(fmt.Sprintf("take every capability from %q on %s", user, p.Name), func(ctx context.Context, a *node.Answer) error {
				if err := fx.withdraw(ctx, p, user); err != nil {
					return err
				}
				a.Logf("took every capability from %q on %s", user, p.Name)
				return nil
			})
		}
		cfg.Projects[p.Name] = np
	}
	if !found {
		return plan, fmt.Errorf("node user: %q is not a remote node of this node", user)
	}
	data, err := cfg.Encode()
	if err != nil {
		return plan, err
	}
	plan.Add(fmt.Sprintf("unlist %q in %s", user, nodeJSON), func(_ context.Context, a *node.Answer) error {
		if err := fx.writeConfig(data); err != nil {
			return err
		}
		return fx.reread(a)
	})
	return plan, nil
}

// writeNodeJSON writes node.json, atomically, below the agents root.
func writeNodeJSON(n *node.Node, data []byte) error {
	root, err := unixhost.OpenRoot(n.Agents)
	if err != nil {
		return err
	}
	defer root.Close()
	return root.WriteFile(n.Layout.NodeJSON(), data, 0o600)
}

// NodePassword keeps a run user's password in the node's file of
// passwords, AGENTS/run-passwords (seed 004 section 4; D72), on a node on
// another host: checked first by logging in to the server as the user
// (a wrong password is refused, naming it, and nothing is written), then
// the file written whole, atomically, mode 0600, owned by the node's
// account, its other users kept. A file that does not read is refused,
// never overwritten.
func NodePassword(ctx context.Context, n *node.Node, user, password string, dry bool) *node.Answer {
	a := node.NewAnswer("node password", dry)
	var served []node.Project
	for _, p := range n.Projects() {
		if p.OtherHost {
			served = append(served, p)
		}
	}
	if len(served) == 0 {
		return a.Stop(errors.New("this node is the server's node of each of its projects: it sets a run user's password itself, and keeps no file of passwords"))
	}
	if user == n.Config.User {
		return a.Stop(fmt.Errorf("user: %q is the node user, never a run's user (seed 004 section 11, row 4)", user))
	}
	if password == "" {
		return a.Stop(errors.New("password: give the user's password with --password-file (or OCX_PASSWORD)"))
	}
	path := filepath.Join(n.Layout.Root(), runeng.PasswordsFileName)
	pws, err := runeng.ReadPasswords(path)
	if err != nil && !errors.Is(err, runeng.ErrNoPasswordsFile) {
		return a.Stop(fmt.Errorf("the file of passwords does not read, and is not overwritten: %w", err))
	}
	byUser := map[string]string{}
	for _, u := range pws.Users() {
		byUser[u], _ = pws.Password(u)
	}
	plan, err := passwordPlan(user, password, path, served, byUser, passwordRun{n})
	return node.Executed(ctx, a, plan, err)
}

// passwordEffects are the effects `node password`'s plan runs.
type passwordEffects interface {
	// checkLogin logs in to the project's server as the user.
	checkLogin(ctx context.Context, p node.Project, user, password string) error
	// keep writes the file of passwords (mode 0600).
	keep(path string, data []byte) error
}

// passwordPlan is `node password`'s plan (D72): the user's password
// checked on each server this node's projects come from, then the file
// of passwords written whole: byUser, the users it holds, and the user
// with its new password.
func passwordPlan(user, password, path string, served []node.Project, byUser map[string]string, fx passwordEffects) (node.Plan, error) {
	var plan node.Plan
	all := maps.Clone(byUser)
	all[user] = password
	next, err := runeng.NewPasswords(all)
	if err != nil {
		return plan, err
	}
	for _, p := range served {
		plan.Add(fmt.Sprintf("log in to %s as %q with the password given", p.URL, user), func(ctx context.Context, a *node.Answer) error {
			if err := fx.checkLogin(ctx, p, user, password); err != nil {
				return fmt.Errorf("the password of %q: %w; nothing written", user, err)
			}
			a.Logf("%s takes %q's password", p.URL, user)
			return nil
		})
	}
	plan.Add(fmt.Sprintf("keep %q's password in %s (mode 0600), with the %d other users' it holds", user, path, len(all)-1), func(_ context.Context, a *node.Answer) error {
		if err := fx.keep(path, next.Encode()); err != nil {
			return err
		}
		a.Logf("kept %q's password in %s: %s", user, path, next)
		return nil
	})
	return plan, nil
}

// passwordRun is passwordEffects on this node.
type passwordRun struct{ n *node.Node }

func (r passwordRun) checkLogin(ctx context.Context, p node.Project, user, password string) error {
	c := &remote.Client{URL: p.URL, Login: user, Password: func() (string, error) { return password, nil }}
	return c.CheckLogin(ctx)
}

func (r passwordRun) keep(path string, data []byte) error {
	root, err := unixhost.OpenRoot(r.n.Agents)
	if err != nil {
		return err
	}
	defer root.Close()
	return root.WriteFile(path, data, 0o600)
}
