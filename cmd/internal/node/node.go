package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/daemonclient"
	"github.com/ocx-go/ocx/host/nodestatus"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/wire"
)

// DefaultAgents is the agents root when neither --agents nor OCX_AGENTS says.
const DefaultAgents = "/var/lib/ocx/agents"

// Caller is who an action writes on the record as (D10): a Fossil login and
// its password, or its login cookie, sent over sync so that the node's
// repository records it as the sender.
type Caller struct {
	Login    string
	Password string
	// Cookie, in place of Password, is the caller's Fossil login cookie
	// (NAME=VALUE): the console's viewer, whose writes Fossil authenticates
	// by the cookie its own login page set (D30).
	Cookie string
}

// Options tune how a node is opened.
type Options struct {
	// Caller is who posts the action's notes; needed only by actions that
	// write as the caller.
	Caller Caller
	// Release is the directory holding the release's ocx, ocxd and workspace.
	// Empty: the release root's current link when node.json names a release
	// root, else the directory of the running executable.
	Release string
	// Fossil is the fossil executable; empty means "fossil" on PATH.
	Fossil string
	// Log receives one line per step; nil discards.
	Log *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OutcomeWait bounds how long `session start` waits for the daemon's
	// answer (D12); zero means DefaultOutcomeWait.
	OutcomeWait time.Duration
	// StopWait bounds how long a second `session start` waits for the end
	// of the session it stopped (D33); zero means DefaultStopWait.
	StopWait time.Duration
	// DaemonWait bounds how long a started daemon has to open its pipe;
	// zero means daemonclient.DefaultWait.
	DaemonWait time.Duration
	// BackofficeBeside runs the backoffice a write needs beside its answer
	// instead of before it (a long-lived front end: the MCP server), runs
	// of one project coalesced; the front end calls Wait before it exits.
	BackofficeBeside bool
	// Records, when set, gives the node its repositories open and their
	// record indexes kept up to date (the daemon's, D66); nil opens each
	// repository for the call and indexes it from nothing, as a command
	// does.
	Records Records
	// Procs, when set, is a process table the caller keeps open (the
	// daemon's, following the kernel's process events), which a status
	// scans; nil opens one for each status.
	Procs *unixhost.ProcTable
	// Passed, when set, is told of what the node's readers pass over;
	// nil logs it to Log, once each.
	Passed *record.PassedLog
	// Daemon, when set, is the PID of the daemon that is this node's
	// caller (its socket's answers): it holds the lock while it answers,
	// so a status need not read who holds it.
	Daemon int
	// Ask, when set, asks the daemon in its own process (a page it
	// serves, D71); nil asks on its socket.
	Ask func(context.Context, *wire.Ask) (*wire.Reply, error)
}

// Records are the repositories of a node's projects as a long-lived reader
// keeps them.
type Records interface {
	// Repo is the project's repository, open, for a caller that closes it
	// (a fossilio Lend).
	Repo(project string) (*fossilio.Repo, error)
	// Index is the record index kept of the repository r, which Repo
	// gave; nil when none is kept.
	Index(r *fossilio.Repo) *record.Index
}

// Node is one agents root opened for the actions: its layout, node.json and
// the release its tools run from.
type Node struct {
	Agents  string
	Layout  host.Layout
	Config  *messages.NodeConfig
	Caller  Caller
	Release string // the release directory (may be the release root's current link)
	Fossil  string
	Log     *slog.Logger
	Now     func() time.Time

	outcomeWait, daemonWait, stopWait time.Duration
	// toolProject is the project a tool call acts on ("" for the node's
	// one project), set by CallIn on its copy of the node.
	toolProject string
	// beside runs backoffices beside the answers (Options.BackofficeBeside).
	beside *fossilio.Beside
	// refusals logs, once, each file below the agents root the node would
	// not read (docs/trust.md).
	refusals *unixhost.RefusalLog
	// passed logs, once, each artifact and status entry a reader passes
	// over (issue 22 item 5); the Node's copies share it.
	passed *record.PassedLog
	// records are Options.Records, procs Options.Procs, daemon
	// Options.Daemon, ask Options.Ask.
	records Records
	procs   *unixhost.ProcTable
	daemon  int
	ask     func(context.Context, *wire.Ask) (*wire.Reply, error)
}

// Default bounds on waiting.
const (
	DefaultOutcomeWait = 30 * time.Second
)

// Open opens the agents root at agents, reading its node.json.
func Open(agents string, opts Options) (*Node, error) {
	n, err := OpenNew(agents, opts)
	if err != nil {
		return nil, err
	}
	data, err := unixhost.Below(n.Agents).ReadFile(n.Layout.NodeJSON(), unixhost.NodeFile)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("open node: %s has no node.json; run `ocx init --agents %s ...` first", n.Agents, n.Agents)
		}
		return nil, fmt.Errorf("open node: %w", err)
	}
	cfg, err := messages.DecodeNodeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("open node: %s: %w", n.Layout.NodeJSON(), err)
	}
	n.Config = cfg
	if n.Release == "" {
		n.Release, err = daemonclient.Release(cfg)
		if err != nil {
			return nil, err
		}
	}
	return n, nil
}

// OpenNew opens the agents root at agents without reading node.json,
// which it may not hold yet: init's node, whose Config its caller sets.
func OpenNew(agents string, opts Options) (*Node, error) {
	if agents == "" {
		return nil, errors.New("open node: no agents root given (--agents or OCX_AGENTS)")
	}
	abs, err := filepath.Abs(agents)
	if err != nil {
		return nil, fmt.Errorf("open node: agents root %q: %w", agents, err)
	}
	layout, err := host.NewLayout(abs)
	if err != nil {
		return nil, fmt.Errorf("open node: %w", err)
	}
	n := &Node{
		Agents:      layout.Root(),
		Layout:      layout,
		Caller:      opts.Caller,
		Release:     opts.Release,
		Fossil:      opts.Fossil,
		Log:         opts.Log,
		Now:         opts.Now,
		outcomeWait: opts.OutcomeWait,
		daemonWait:  opts.DaemonWait,
		stopWait:    opts.StopWait,
		records:     opts.Records,
		procs:       opts.Procs,
		daemon:      opts.Daemon,
		ask:         opts.Ask,
	}
	if n.Log == nil {
		n.Log = slog.New(slog.DiscardHandler)
	}
	n.refusals = unixhost.NewRefusalLog(n.Log)
	n.passed = opts.Passed
	if n.passed == nil {
		n.passed = record.NewPassedLog(n.Log)
	}
	if opts.BackofficeBeside {
		n.beside = fossilio.NewBeside(n.Log)
	}
	if n.Now == nil {
		n.Now = time.Now
	}
	if n.outcomeWait <= 0 {
		n.outcomeWait = DefaultOutcomeWait
	}
	if n.daemonWait <= 0 {
		n.daemonWait = daemonclient.DefaultWait
	}
	if n.stopWait <= 0 {
		n.stopWait = DefaultStopWait
	}
	return n, nil
}

// OutcomeWait bounds how long a start waits for the daemon's answer
// (Options.OutcomeWait).
func (n *Node) OutcomeWait() time.Duration { return n.outcomeWait }

// StopWait bounds how long a start waits for the end of the session it
// stopped (Options.StopWait).
func (n *Node) StopWait() time.Duration { return n.stopWait }

// Passed logs, once, each artifact and status entry a reader passes over.
func (n *Node) Passed() *record.PassedLog { return n.passed }

// Program is the path of one of the release's programs: ocx, ocxd or
// workspace.
func (n *Node) Program(name string) string { return filepath.Join(n.Release, name) }

// Project is one repository of the login group.
type Project struct {
	Name string
	messages.NodeProject
}

// Projects lists the login group in a stable order.
func (n *Node) Projects() []Project {
	var out []Project
	for _, name := range n.Config.ProjectNames() {
		out = append(out, Project{Name: name, NodeProject: n.Config.Projects[name]})
	}
	return out
}

// Project returns one project of the node, or an error naming the known ones.
func (n *Node) Project(name string) (Project, error) {
	p, ok := n.Config.Projects[name]
	if !ok {
		return Project{}, fmt.Errorf("project %q is not a repository of this node (it has %s)", name, strings.Join(n.Config.ProjectNames(), ", "))
	}
	return Project{Name: name, NodeProject: p}, nil
}

// fossilCLI runs fossil commands on the node itself (backoffice, git
// export), with the agents root as their private home so that no shared
// global config is touched.
func (n *Node) fossilCLI() *fossilio.Fossil {
	return &fossilio.Fossil{Exe: n.Fossil, Home: n.Agents, User: n.Config.User, Dir: n.Agents}
}

// Admin runs fossil's administrative commands on project p's repository.
func (n *Node) Admin(p Project) *fossilio.Admin {
	return &fossilio.Admin{Repository: p.Repository, Fossil: n.fossilCLI(), Files: unixhost.Below(n.Agents)}
}

// OpenProjectRepo opens a project's repository read-only.
func (n *Node) OpenProjectRepo(p Project) (*fossilio.Repo, error) {
	if n.records != nil {
		return n.records.Repo(p.Name)
	}
	r, err := fossilio.OpenNode(p.Repository, n.passed.Options())
	if err != nil {
		return nil, fmt.Errorf("open repository of %s: %w", p.Name, err)
	}
	return r, nil
}

// Writer writes notes over sync, each as its login: the caller with the
// caller's password, any other login with the password it keeps in the
// agents root. It runs no backoffice: each action runs it once at its end.
func (n *Node) Writer(p Project, code string) *fossilio.Notes {
	return &fossilio.Notes{
		URL:         p.URL,
		ProjectCode: code,
		Password:    n.Password,
		Cookie: func(login string) string {
			if login == n.Caller.Login {
				return n.Caller.Cookie
			}
			return ""
		},
		Now: n.Now,
	}
}

// Password returns a login's password: the caller's, or the one kept in
// AGENTS/LOGIN/password.
func (n *Node) Password(login string) (string, error) {
	if n.Caller.Login != "" && login == n.Caller.Login {
		if n.Caller.Password == "" {
			return "", fmt.Errorf("no password for the caller %q (OCX_PASSWORD or --password-file)", login)
		}
		return n.Caller.Password, nil
	}
	path, err := n.Layout.Password(login)
	if err != nil {
		return "", err
	}
	return fossilio.ReadPasswordFrom(unixhost.Below(n.Agents), path)
}

// Backoffice runs the repository's backoffice so the hook sees the action's
// writes at once (D11). Its failure is logged, not fatal: the server's own
// backoffice runs the hook later.
func (n *Node) Backoffice(ctx context.Context, a *Answer, p Project) {
	if p.OtherHost {
		// On another host the record is the node's clone: the pull brings
		// the write in and the daemon acts on it (D72).
		if err := n.PullClone(ctx, p); err != nil {
			a.Logf("the clone of %s is not pulled yet (the daemon pulls it on its timer): %v", p.Name, err)
			return
		}
		a.Logf("pulled the clone of %s from the server, so that the node reads the write at once", p.Name)
		return
	}
	if n.beside != nil {
		n.beside.Kick(p.Repository, n.Admin(p).Backoffice)
		a.Logf("the backoffice of %s runs beside this answer, so the hook sees the write at once", p.Name)
		return
	}
	if err := n.Admin(p).Backoffice(ctx); err != nil {
		a.Logf("the backoffice of %s failed (the server's own runs the hook later): %v", p.Name, err)
	}
}

// Wait returns once every backoffice run started beside an answer
// (Options.BackofficeBeside) has ended.
func (n *Node) Wait() {
	if n.beside != nil {
		n.beside.Wait()
	}
}

// RequireCaller refuses an action that writes as the caller when no caller
// was given.
func (n *Node) RequireCaller() error {
	if n.Caller.Login == "" {
		return errors.New("caller: no --user given: this action writes on the record as its caller (D10)")
	}
	if err := messages.ValidateLogin(n.Caller.Login); err != nil {
		return fmt.Errorf("caller: %w", err)
	}
	if n.Caller.Password == "" && n.Caller.Cookie == "" {
		return fmt.Errorf("caller: no password for %q: set OCX_PASSWORD or give --password-file", n.Caller.Login)
	}
	if n.Caller.Cookie != "" {
		login, err := fossilio.CookieLogin(n.Caller.Cookie)
		if err != nil {
			return fmt.Errorf("caller: %w", err)
		}
		if login != n.Caller.Login {
			return fmt.Errorf("caller: the login cookie is %q's, not %q's", login, n.Caller.Login)
		}
	}
	return nil
}

// RequirePrivileged refuses a caller without admin or setup on p: the notes
// it would write (definitions, launches, terminations) count only when such
// a user sends them (D7).
func (n *Node) RequirePrivileged(ctx context.Context, r *fossilio.Repo, p Project) error {
	ok, caps, err := n.CallerPrivileged(ctx, r, p)
	if err != nil {
		return fmt.Errorf("caller: %w", err)
	}
	if !ok {
		return fmt.Errorf("caller: %q has capabilities %q on %s, without admin (a) or setup (s): what it wrote would not count (D7)", n.Caller.Login, caps, p.Name)
	}
	return nil
}

// CallerPrivileged says whether the caller holds admin or setup on p,
// with its capabilities for a refusal to name: Privileged on the node's
// repository r; on a project served from another host, as the server
// answers the caller logged in as itself, since a node there knows the
// standing of those whose artifacts it holds alone (D81).
func (n *Node) CallerPrivileged(ctx context.Context, r *fossilio.Repo, p Project) (bool, string, error) {
	if !p.OtherHost {
		return privileged(ctx, r, n.Caller.Login)
	}
	if n.Caller.Login == "" {
		return false, "", nil
	}
	v, err := n.ServerViewer(ctx, p, n.Caller)
	if err != nil {
		return false, "", err
	}
	return v.Privileged, v.Caps, nil
}

// privileged says whether login holds admin or setup on the repository
// (fossilio.Repo.Privileged, D7), with its own capabilities for a refusal
// to name; a login the repository does not hold is an error saying so.
func privileged(ctx context.Context, r *fossilio.Repo, login string) (bool, string, error) {
	if login == "" {
		return false, "", nil
	}
	u, err := r.User(ctx, login)
	if errors.Is(err, fossilio.ErrNoSuchUser) {
		return false, "", fmt.Errorf("%q is not a user of %s", login, r.ProjectName())
	}
	if err != nil {
		return false, "", err
	}
	ok, err := r.Privileged(ctx, login)
	if err != nil {
		return false, "", err
	}
	return ok, u.Caps, nil
}

// PasswordLogins lists the logins that keep a password in the agents root,
// the node user included, sorted (nodestatus.PasswordLogins).
func (n *Node) PasswordLogins() ([]string, error) { return nodestatus.PasswordLogins(n.Agents) }

// ReadBinding reads the binding the node wrote when it made workspace ws,
// its own copy (nodestatus.Node.ReadBinding, D44); fs.ErrNotExist when the
// node made none.
func (n *Node) ReadBinding(ws host.Workspace) (*messages.Binding, error) {
	return n.statusNode().ReadBinding(ws)
}

// OnHost says whether workspace ws is on the host (nodestatus.OnHost).
func OnHost(ws host.Workspace) error { return nodestatus.OnHost(ws) }

// Binding is the binding the node kept when it made workspace key
// (readBinding); fs.ErrNotExist when it made none.
func (n *Node) Binding(key messages.WorkspaceKey) (*messages.Binding, error) {
	ws, err := n.WorkspacePaths(key)
	if err != nil {
		return nil, err
	}
	return n.ReadBinding(ws)
}

// BoundWorkspace is what the node made workspace ws from: the binding it
// kept, else the definition that counts for it on the record r while its
// directory is on the host (nodestatus.Node.BoundWorkspace).
func (n *Node) BoundWorkspace(ctx context.Context, r *fossilio.Repo, ws host.Workspace) (*messages.Binding, error) {
	return n.statusNode().BoundWorkspace(ctx, r, ws)
}

// procTable reads the process table of this agents root.
func (n *Node) procTable() (*unixhost.ProcTable, error) {
	daemon, _, err := unixhost.LockHolder(n.Layout.Lock())
	if err != nil {
		return nil, fmt.Errorf("read the daemon's lock: %w", err)
	}
	root := ""
	if n.Config != nil {
		root = n.Config.Release
	}
	return unixhost.NewProcTable(unixhost.ProcOptions{Layout: n.Layout, ReleaseRoot: root, Daemon: daemon})
}

// Naming answers whether a process names the workspace k: the check before
// a stop, a terminate, a collection or a withdrawal.
func (n *Node) Naming(k messages.WorkspaceKey) (host.Verdict, error) {
	t, err := n.procTable()
	if err != nil {
		return host.Verdict{}, err
	}
	defer t.Close()
	v, err := t.Naming(k)
	if err != nil {
		return host.Verdict{}, fmt.Errorf("read the process table: %w", err)
	}
	return v, nil
}

// RefuseIfNamed says why an action may not touch a workspace a process
// names (or may name: an unreadable process counts).
func RefuseIfNamed(v host.Verdict, k messages.WorkspaceKey, what string) error {
	switch v.Named {
	case host.No:
		return nil
	case host.Yes:
		var pids []string
		for _, id := range v.By {
			pids = append(pids, fmt.Sprint(id.PID))
		}
		return fmt.Errorf("%s: a running process names workspace %s (pid %s); stop its session first%s", what, k, strings.Join(pids, ", "), v.Ignored())
	default:
		return fmt.Errorf("%s: the process table cannot say whether a process names workspace %s (%s); refused, since it might", what, k, v)
	}
}

// DefaultStopWait bounds how long a second start waits for the end note of
// the session it stopped (D33).
const DefaultStopWait = 60 * time.Second
