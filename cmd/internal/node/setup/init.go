package setup

import (
	"context"
	"errors"
	"fmt"
	"github.com/ocx-go/ocx/cmd/internal/node"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// DefaultNodeUser is the node user's login when init is not told another.
const DefaultNodeUser = "ocx"

// InitProject is one repository of the login group, as `--project
// NAME=REPO,URL` gives it.
type InitProject struct {
	Name       string
	Repository string
	URL        string
}

// ParseInitProject reads NAME=REPO,URL.
func ParseInitProject(s string) (InitProject, error) {
	name, rest, ok := strings.Cut(s, "=")
	repo, u, ok2 := strings.Cut(rest, ",")
	if !ok || !ok2 || name == "" || repo == "" || u == "" {
		return InitProject{}, fmt.Errorf("project %q: want NAME=REPOSITORY,URL, as demo=/srv/fossil/demo.fossil,http://127.0.0.1:8080/", s)
	}
	return InitProject{Name: name, Repository: repo, URL: u}, nil
}

// InitInput is what `ocx init` takes.
type InitInput struct {
	Projects []InitProject
	// NodeUser is the node user's login (default DefaultNodeUser).
	NodeUser string
	// ReleaseRoot is the release root (current and previous link to
	// releases/ID/); empty for a developer's build.
	ReleaseRoot string
	// Sandbox, when set, is what the node adds to every sandbox it
	// proposes (node.json's sandbox, D48).
	Sandbox *messages.NodeSandbox
	// ConfinedOnly, when set, says whether the node runs nothing
	// unconfined (node.json's confined_only, D53); nil keeps what
	// node.json says (false for a new node).
	ConfinedOnly *bool
	DryRun       bool
}

// Init makes the agents root and node.json (contracts 3), and provisions
// the node user on each repository with its password in AGENTS/USER/password.
// Run again, it adds projects; it refuses to change what node.json says.
func Init(ctx context.Context, agents string, in InitInput, opts node.Options) *node.Answer {
	a := node.NewAnswer("init", in.DryRun)
	n, err := node.OpenNew(agents, opts)
	if err != nil {
		return a.Stop(err)
	}
	cfg, err := planInit(ctx, n, a, in)
	if err != nil {
		return a.Stop(err)
	}
	data, err := cfg.Encode()
	if err != nil {
		return a.Stop(fmt.Errorf("node.json: %w", err))
	}
	pwFile, _ := n.Layout.Password(cfg.User)
	n.Config = cfg
	run := &initRun{n: n, pwFile: pwFile}
	defer run.close()
	return a.Stop(node.Execute(ctx, a, initPlan(initFacts{Agents: n.Agents, NodeJSON: n.Layout.NodeJSON(), Password: pwFile, Config: cfg, Data: data}, run)))
}

// initFacts is what init checked, for initPlan.
type initFacts struct {
	Agents, NodeJSON, Password string
	Config                     *messages.NodeConfig
	Data                       []byte // node.json as written
}

// initEffects are the effects init's plan runs.
type initEffects interface {
	// makeRoot makes the agents root and the node user's directory.
	makeRoot() error
	// useWAL switches a repository to write-ahead logging.
	useWAL(ctx context.Context, name string) error
	// provision makes the node user on a repository.
	provision(ctx context.Context, name string) error
	// writeConfig writes node.json.
	writeConfig(data []byte) error
	// reread has a running daemon read node.json again.
	reread(a *node.Answer) error
}

// initPlan is init's plan (contracts 3): the agents root, then on each
// repository write-ahead logging and the node user, then node.json, last,
// once every repository holds its user.
func initPlan(f initFacts, fx initEffects) node.Plan {
	var plan node.Plan
	plan.Add(fmt.Sprintf("make %s and write %s:\n%s", f.Agents, f.NodeJSON, f.Data), func(context.Context, *node.Answer) error { return fx.makeRoot() })
	for _, name := range f.Config.ProjectNames() {
		repo := f.Config.Projects[name].Repository
		// The server, its backoffice, the hook, the daemon and the tools all
		// open the repository; under the rollback journal a web post that meets
		// another writer fails with "database is locked" (D11). So the switch
		// comes first, before init writes; on a live repository it waits a
		// bounded time for the others' locks (an error says so past it), and
		// a repository already in WAL mode is not waited for.
		plan.Add(fmt.Sprintf("switch %s to write-ahead logging", repo), func(ctx context.Context, a *node.Answer) error {
			if err := fx.useWAL(ctx, name); err != nil {
				return fmt.Errorf("switch %s to write-ahead logging: %w", name, err)
			}
			a.Logf("switched %s to write-ahead logging", repo)
			return nil
		})
		plan.Add(fmt.Sprintf("provision the node user %q on %s (capabilities %s, password in %s)", f.Config.User, repo, fossilio.AgentCaps, f.Password), func(ctx context.Context, a *node.Answer) error {
			if err := fx.provision(ctx, name); err != nil {
				return fmt.Errorf("provision the node user on %s: %w", name, err)
			}
			a.Logf("provisioned the node user %q on %s (capabilities %s)", f.Config.User, repo, fossilio.AgentCaps)
			return nil
		})
	}
	plan.Add("", func(_ context.Context, a *node.Answer) error {
		if err := fx.writeConfig(f.Data); err != nil {
			return fmt.Errorf("write node.json: %w", err)
		}
		a.Logf("wrote %s", f.NodeJSON)
		return fx.reread(a)
	})
	return plan
}

// initRun is initEffects on this node, its config the one init writes.
type initRun struct {
	n      *node.Node
	pwFile string
	root   *unixhost.Root
}

func (r *initRun) makeRoot() error {
	if err := os.MkdirAll(r.n.Agents, 0o700); err != nil {
		return fmt.Errorf("make the agents root: %w", err)
	}
	root, err := unixhost.OpenRoot(r.n.Agents)
	if err != nil {
		return err
	}
	r.root = root
	return root.MkdirAll(filepath.Dir(r.pwFile), 0o700)
}

func (r *initRun) useWAL(ctx context.Context, name string) error {
	p, err := r.n.Project(name)
	if err != nil {
		return err
	}
	_, err = r.n.Admin(p).UseWAL(ctx)
	return err
}

func (r *initRun) provision(ctx context.Context, name string) error {
	p, err := r.n.Project(name)
	if err != nil {
		return err
	}
	return r.n.Admin(p).ProvisionAgent(ctx, r.n.Config.User, r.pwFile)
}

func (r *initRun) writeConfig(data []byte) error {
	return r.root.WriteFile(r.n.Layout.NodeJSON(), data, 0o600)
}

func (r *initRun) reread(a *node.Answer) error { return daemonRereads(r.n, a) }

func (r *initRun) close() {
	if r.root != nil {
		r.root.Close()
	}
}

// planInit checks every input and merges it with an existing node.json.
func planInit(ctx context.Context, n *node.Node, a *node.Answer, in InitInput) (*messages.NodeConfig, error) {
	user := in.NodeUser
	if user == "" {
		user = DefaultNodeUser
	}
	if err := node.CheckNewLogin(user); err != nil {
		return nil, fmt.Errorf("node user: %w", err)
	}
	cfg := &messages.NodeConfig{User: user, Release: in.ReleaseRoot, Projects: map[string]messages.NodeProject{}}
	if in.ReleaseRoot != "" {
		if err := messages.ValidateAbsPath(in.ReleaseRoot); err != nil {
			return nil, fmt.Errorf("release: %w", err)
		}
		if st, err := os.Stat(filepath.Join(in.ReleaseRoot, "current")); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("release: %s has no current release (a link current -> releases/ID/); make the release root with `ocx release init %s --from DIR` (or --repo REPO CHECKIN)", in.ReleaseRoot, in.ReleaseRoot)
		}
	}
	if err := mergeNodeJSON(n, a, cfg, in); err != nil {
		return nil, err
	}
	if in.Sandbox != nil {
		cfg.Sandbox = in.Sandbox
		a.Logf("every sandbox the node proposes sees %s read-only and has %s on its PATH", strings.Join(in.Sandbox.ReadOnly, ", "), strings.Join(in.Sandbox.Path, ", "))
	}
	if in.ConfinedOnly != nil {
		cfg.ConfinedOnly = *in.ConfinedOnly
	}
	if cfg.ConfinedOnly {
		a.Logf("the node runs nothing unconfined: its daemon refuses a run without a sandbox (row 7)")
	}
	if len(in.Projects) == 0 && len(cfg.Projects) == 0 {
		return nil, errors.New("project: give at least one --project NAME=REPOSITORY,URL")
	}
	for i, p := range in.Projects {
		if err := checkInitProject(ctx, cfg, fmt.Sprintf("project[%d]", i), p); err != nil {
			return nil, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// mergeNodeJSON merges an existing node.json into cfg: a node keeps its
// user and its release root, its projects, and what init is not given
// again.
func mergeNodeJSON(n *node.Node, a *node.Answer, cfg *messages.NodeConfig, in InitInput) error {
	old, err := unixhost.Below(n.Agents).ReadFile(n.Layout.NodeJSON(), unixhost.NodeFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	}
	prev, err := messages.DecodeNodeConfig(old)
	if err != nil {
		return fmt.Errorf("%s: %w", n.Layout.NodeJSON(), err)
	}
	if prev.User != cfg.User {
		return fmt.Errorf("node user: node.json names %q; a node keeps its user", prev.User)
	}
	// A node without a release root may be given one (D32's bootstrap);
	// one it has is kept.
	if in.ReleaseRoot != "" && prev.Release != "" && prev.Release != in.ReleaseRoot {
		return fmt.Errorf("release: node.json names %q; a node keeps its release root", prev.Release)
	}
	if prev.Release != "" {
		cfg.Release = prev.Release
	} else if in.ReleaseRoot != "" {
		a.Logf("node.json names no release root yet: it will name %s (a running daemon moves to it at its next re-exec or start)", in.ReleaseRoot)
	}
	for name, p := range prev.Projects {
		cfg.Projects[name] = p
	}
	// What init is not given again it keeps.
	cfg.SessionLimits, cfg.Sandbox, cfg.ConfinedOnly = prev.SessionLimits, prev.Sandbox, prev.ConfinedOnly
	a.Logf("%s exists; adding to it", n.Layout.NodeJSON())
	return nil
}

// checkInitProject checks one --project and adds it to cfg: its name, its
// repository (holding that project, D1, and readable), its server's URL,
// and what node.json already says of it.
func checkInitProject(ctx context.Context, cfg *messages.NodeConfig, field string, p InitProject) error {
	if err := messages.ValidateProject(p.Name); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	if err := messages.ValidateRepository(p.Repository); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	if got := messages.ProjectOf(p.Repository); got != p.Name {
		return fmt.Errorf("%s: repository %s holds project %q, not %q (a project is its file's name, D1)", field, p.Repository, got, p.Name)
	}
	if err := checkServerURL(p.URL); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	r, err := fossilio.OpenNode(p.Repository, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	_, err = r.ProjectCode(ctx)
	r.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	np := messages.NodeProject{Repository: p.Repository, URL: p.URL}
	if prev, ok := cfg.Projects[p.Name]; ok {
		if prev.Repository != np.Repository || prev.URL != np.URL || prev.OtherHost {
			return fmt.Errorf("%s: node.json has %s as %s at %s", field, p.Name, prev.Repository, prev.URL)
		}
		np = prev // what else node.json says of it (its remote nodes) is kept
	}
	cfg.Projects[p.Name] = np
	return nil
}

// checkServerURL accepts http(s)://HOST[:PORT]/ without credentials.
func checkServerURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("url %q is not an http:// or https:// server URL", s)
	}
	if u.User != nil {
		return fmt.Errorf("url %q holds credentials; they are kept in the agents root, never in node.json", s)
	}
	return nil
}

// checkRemoteURL accepts the URL of a server a node on another host
// trusts, or of a remote node's poke: https, or http on loopback alone
// (messages.CheckRemoteURL, D81).
func checkRemoteURL(s string) error {
	if err := checkServerURL(s); err != nil {
		return err
	}
	if err := messages.CheckRemoteURL("url", s); err != nil {
		var fe *strictjson.FieldError
		if errors.As(err, &fe) {
			return fmt.Errorf("url %s", fe.Problem)
		}
		return err
	}
	return nil
}
