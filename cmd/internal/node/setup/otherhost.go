package setup

import (
	"context"
	"errors"
	"fmt"
	"github.com/ocx-go/ocx/cmd/internal/node"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/remote"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// OtherHostInput is what `ocx init --other-host` takes: a node on another
// host than the server's (D72), whose record is a clone of each project
// it pulls as its node user.
type OtherHostInput struct {
	// Projects are NAME=CLONE,URL: the clone this node keeps, made here,
	// and the server's URL.
	Projects []InitProject
	// NodeUser is the node user, a user of the server the server's node
	// lists as a remote node (`ocx node add` there); Password is its
	// password on the server.
	NodeUser, Password string
	ReleaseRoot        string
	// Pull is node.json's pull: the timer, where pokes come, and the
	// secret they carry.
	Pull   *messages.NodePull
	DryRun bool
}

// InitOtherHost makes a node on another host (D72): the agents root, the
// node user's password kept in AGENTS/USER/password, and for each project
// a clone of the server made as the node user, switched to write-ahead
// logging, whose artifacts the server vouches for (asked on its console's
// receipt page, which answers the node users its node.json lists), the
// hook's mark at its newest receipt, so that the node acts on what comes
// from then on; then node.json, each project other_host. Nothing of the
// server is changed: the server's node lists the node (`ocx node add`).
func InitOtherHost(ctx context.Context, agents string, in OtherHostInput, opts node.Options) *node.Answer {
	a := node.NewAnswer("init", in.DryRun)
	n, err := node.OpenNew(agents, opts)
	if err != nil {
		return a.Stop(err)
	}
	if err := checkOtherHost(in); err != nil {
		return a.Stop(err)
	}
	if _, err := unixhost.Below(n.Agents).ReadFile(n.Layout.NodeJSON(), unixhost.NodeFile); !errors.Is(err, fs.ErrNotExist) {
		return a.Stop(fmt.Errorf("%s is there: this agents root is a node already", n.Layout.NodeJSON()))
	}
	cfg, err := otherHostConfig(in)
	if err != nil {
		return a.Stop(err)
	}
	pwFile, _ := n.Layout.Password(cfg.User)
	n.Config = cfg
	run := &otherHostRun{n: n, password: in.Password, pwFile: pwFile}
	defer run.close()
	plan, err := otherHostPlan(otherHostFacts{Agents: n.Agents, NodeJSON: n.Layout.NodeJSON(), Password: pwFile, Config: cfg}, run)
	return node.Executed(ctx, a, plan, err)
}

// checkOtherHost refuses what init on another host is given, before
// anything is read: the node user and its password, a project, the
// pokes' listener and secret together.
func checkOtherHost(in OtherHostInput) error {
	if err := node.CheckNewLogin(in.NodeUser); err != nil {
		return fmt.Errorf("node user: %w", err)
	}
	if in.Password == "" {
		return errors.New("node user: no password: give the node user's password on the server with --password-file (or OCX_PASSWORD)")
	}
	if len(in.Projects) == 0 {
		return errors.New("project: give at least one --project NAME=CLONE,URL: the clone this node keeps, and the server's URL")
	}
	if in.Pull != nil {
		switch {
		case in.Pull.Listen != "" && in.Pull.Secret == "":
			return errors.New("pokes: --poke-listen needs --poke-secret-file: a file holding the secret the server's pokes carry (its `ocx node add --poke` made it, or took it with --poke-secret-file; D81)")
		case in.Pull.Listen == "" && in.Pull.Secret != "":
			return errors.New("pokes: --poke-secret-file is given without --poke-listen: a secret is for the pokes a node takes")
		}
	}
	return nil
}

// otherHostConfig is the node.json of a node on another host, each
// project checked: its name, its clone's path (where nothing is yet) and
// its server's URL.
func otherHostConfig(in OtherHostInput) (*messages.NodeConfig, error) {
	cfg := &messages.NodeConfig{User: in.NodeUser, Release: in.ReleaseRoot, Projects: map[string]messages.NodeProject{}, Pull: in.Pull}
	for i, p := range in.Projects {
		field := fmt.Sprintf("project[%d]", i)
		if err := messages.ValidateProject(p.Name); err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		if got := messages.ProjectOf(p.Repository); got != p.Name || !filepath.IsAbs(p.Repository) {
			return nil, fmt.Errorf("%s: the clone %s must be an absolute path named %s.fossil (a project is its file's name, D1)", field, p.Repository, p.Name)
		}
		if _, err := os.Lstat(p.Repository); !errors.Is(err, fs.ErrNotExist) { // trust:outside the clone's path the administrator names
			return nil, fmt.Errorf("%s: %s exists; the node makes its clone itself, where nothing is", field, p.Repository)
		}
		if err := checkRemoteURL(p.URL); err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		cfg.Projects[p.Name] = messages.NodeProject{Repository: p.Repository, URL: p.URL, OtherHost: true}
	}
	return cfg, cfg.Validate()
}

// otherHostFacts is what init on another host plans from: the agents
// root, its node.json, the node user's password file, node.json's
// content.
type otherHostFacts struct {
	Agents, NodeJSON, Password string
	Config                     *messages.NodeConfig
}

// otherHostEffects are the effects init on another host's plan runs.
type otherHostEffects interface {
	// makeRoot makes the agents root and keeps the password there.
	makeRoot() error
	// clone makes a project's clone, vouched for by the server.
	clone(ctx context.Context, a *node.Answer, p node.Project) error
	writeConfig(data []byte) error
}

// otherHostPlan is init on another host's plan (D72): the agents root
// and the password; each project's clone; node.json last, so that a
// clone that fails leaves no node.
func otherHostPlan(f otherHostFacts, fx otherHostEffects) (node.Plan, error) {
	var plan node.Plan
	cfg := f.Config
	data, err := cfg.Encode()
	if err != nil {
		return plan, fmt.Errorf("node.json: %w", err)
	}
	shown, err := cfg.EncodeShown()
	if err != nil {
		return plan, fmt.Errorf("node.json: %w", err)
	}
	plan.Add(fmt.Sprintf("make %s, keep the node user's password in %s (mode 0600), and write %s:\n%s", f.Agents, f.Password, f.NodeJSON, shown), func(context.Context, *node.Answer) error {
		return fx.makeRoot()
	})
	for _, name := range cfg.ProjectNames() {
		p := node.Project{Name: name, NodeProject: cfg.Projects[name]}
		plan.Add(fmt.Sprintf("clone %s as %s into %s, and have the server vouch for what it holds", p.URL, cfg.User, p.Repository), func(ctx context.Context, a *node.Answer) error {
			return fx.clone(ctx, a, p)
		})
	}
	plan.Add("", func(_ context.Context, a *node.Answer) error {
		if err := fx.writeConfig(data); err != nil {
			return err
		}
		a.Logf("wrote %s: a node on another host; its daemon pulls every %s", f.NodeJSON, cfg.PullEvery())
		return nil
	})
	return plan, nil
}

// otherHostRun is otherHostEffects on the new node; the agents root,
// once made, is held open (root) until close.
type otherHostRun struct {
	n                *node.Node
	password, pwFile string
	root             *unixhost.Root
}

func (o *otherHostRun) makeRoot() error {
	if err := os.MkdirAll(o.n.Agents, 0o700); err != nil {
		return fmt.Errorf("make the agents root: %w", err)
	}
	var err error
	if o.root, err = unixhost.OpenRoot(o.n.Agents); err != nil {
		return err
	}
	return o.n.Admin(node.Project{}).WritePasswordFile(o.pwFile, o.password)
}

func (o *otherHostRun) clone(ctx context.Context, a *node.Answer, p node.Project) error {
	return makeClone(ctx, o.n, a, o.root, p, o.password)
}

func (o *otherHostRun) writeConfig(data []byte) error {
	if err := o.root.WriteFile(o.n.Layout.NodeJSON(), data, 0o600); err != nil {
		return fmt.Errorf("write node.json: %w", err)
	}
	return nil
}

func (o *otherHostRun) close() {
	if o.root != nil {
		o.root.Close()
	}
}

// makeClone makes one project's clone: cloned as the node user (the
// password remembered, never on a command line), in write-ahead logging
// (the daemon reads while its pull writes), the vouch tables made and
// filled from the server's answer, the hook's mark at the newest receipt.
// A clone that failed half-way is removed, so that init can be run again.
func makeClone(ctx context.Context, n *node.Node, a *node.Answer, root *unixhost.Root, p node.Project, password string) (err error) {
	r, err := fossilio.OpenNode(p.Repository, nil)
	if err == nil {
		r.Close()
		return fmt.Errorf("%s: a repository is there already", p.Repository)
	}
	k := n.Keeper(p)
	k.Client.Password = func() (string, error) { return password, nil }
	code, err := k.Client.ProjectCode(ctx)
	if errors.Is(err, remote.ErrRefused) {
		return fmt.Errorf("%w (the server's node must list %s as a remote node of %s: `ocx node add %s` there)", err, n.Config.User, p.Name, n.Config.User)
	}
	if err != nil {
		return err
	}
	f := &fossilio.Fossil{Exe: n.Fossil, Home: n.Agents, User: n.Config.User, Dir: n.Agents}
	if err := os.MkdirAll(filepath.Dir(p.Repository), 0o755); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
				os.Remove(p.Repository + suffix)
			}
		}
	}()
	if err := f.Clone(ctx, fossilio.CloneOptions{URL: p.URL, Login: n.Config.User, Password: password, ProjectCode: code}, p.Repository); err != nil {
		return err
	}
	admin := &fossilio.Admin{Repository: p.Repository, Fossil: f}
	if _, err := admin.UseWAL(ctx); err != nil {
		return err
	}
	if err := admin.MakeVouched(ctx); err != nil {
		return err
	}
	got, err := k.Vouch(ctx)
	if err != nil {
		return err
	}
	if err := root.WriteFile(n.Layout.HookMark(p.Name), host.HookMarkContent(got.Through), 0o600); err != nil {
		return fmt.Errorf("write the hook's mark for %s: %w", p.Name, err)
	}
	a.Logf("cloned %s as %s into %s; the server vouched for its %d artifacts; the node acts on what arrives after receipt %d", p.URL, n.Config.User, p.Repository, got.Vouched, got.Through)
	return nil
}
