package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/node/setup"
	"github.com/ocx-go/ocx/cmd/internal/workspaces"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/daemonclient"
	"github.com/ocx-go/ocx/host/model"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// The demo's people and its agent. The person's password is fixed so that
// the README can say it; the node is on loopback only.
const (
	demoAdmin    = "admin"
	demoPerson   = "pat"
	demoPersonPW = "pat"
	demoAgent    = "agent-demo"
	// demoCaps lets the person read, post without moderation, open and
	// comment on tickets, and write over sync (for `ocx post`).
	demoCaps = "cghijnorwz234"
	// demoCommand is the session's command: it answers each post with what
	// it heard.
	demoCommand = `printf '%s heard: ' "$USER"; cat`
	// demoCI and demoReviewer are the demo's mechanical logins, each a
	// `completes` session on a branch listener on trunk (D5, D42): CI tags
	// each check-in, the reviewer judges it.
	demoCI       = "ci-demo"
	demoReviewer = "reviewer-demo"
	// demoCICommand is CI's command, run in the tree on the check-in: it
	// counts the files there and passes.
	demoCICommand = `n=$(ls | wc -l); echo "ci: $n files on this check-in; all checks pass"`
	// demoReviewCommand is the reviewer's: it passes what it reads.
	demoReviewCommand = `echo "reviewed: $(ls | wc -l) files, each keeps to the record's objective"`
	// demoBranch is the branch the demo's workspaces and listeners name.
	demoBranch = "trunk"
	// The templates the demo writes, wiki pages workspace/NAME and
	// session/NAME (docs/console.md).
	demoWorkspaceTemplate = "demo"
	demoSessionTemplate   = "ci"
	// demoRunPattern is the demo's run pattern, the wiki page run/echo
	// (D84): seed 004 section 14's unconfined echo, its layers held once.
	demoRunPattern = "echo"
	// demoMirror is the git mirror's directory in the demo's, and the
	// directory a newcomer's clone of it is told to make.
	demoMirror = "git"
)

// The environment that makes the demo's session an llm session on
// ocx-runner-native: the model server's base URL (an OpenAI-compatible
// one such as ollama's, unless OCX_DEMO_MODEL_API says anthropic), the
// model, and a file holding its key when it takes one.
const (
	demoModelURLEnv = "OCX_DEMO_MODEL_URL"
	demoModelEnv    = "OCX_DEMO_MODEL"
	demoModelAPIEnv = "OCX_DEMO_MODEL_API"
	demoModelKeyEnv = "OCX_DEMO_MODEL_KEY_FILE"
)

// demoModel writes the node's model.json from the environment when it
// names a model server, and returns the model; "" when it names none.
func demoModel(path string) (string, error) {
	url := os.Getenv(demoModelURLEnv)
	if url == "" {
		return "", nil
	}
	name := os.Getenv(demoModelEnv)
	if name == "" {
		return "", fmt.Errorf("%s names a model server, but %s names no model", demoModelURLEnv, demoModelEnv)
	}
	api := os.Getenv(demoModelAPIEnv)
	if api == "" {
		api = "openai"
	}
	c := &model.Config{API: model.API(api), BaseURL: url, KeyFile: os.Getenv(demoModelKeyEnv), Models: []string{name}} // the model create gives its agents (D52)
	if err := c.Validate(); err != nil {
		return "", fmt.Errorf("the demo's model (%s, %s, %s): %w", demoModelURLEnv, demoModelAPIEnv, demoModelKeyEnv, err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return "", err
	}
	if err := unixhost.Below(filepath.Dir(path)).WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return "", err
	}
	return name, nil
}

// runDemo brings up a demo node on 127.0.0.1: a release made from the
// binaries beside this ocx, a repository switched to write-ahead logging and
// only then a Fossil server with its backoffice polled each second (D11),
// the node initialised with the hook installed, an agent login,
// its workspace and a mechanical session that answers; and what else the
// guide and the console show (issue 27 item 8): the git mirror, CI and a
// reviewer on branch listeners, a check-in for them, and a workspace and a
// session template. It prints where each is and what to type, runs until
// interrupted, then stops the sessions and
// the daemon and ends every process it started, by PID.
func runDemo(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	dir := fs.String("dir", "", "directory for the demo node (default: a new temporary one, removed at the end)")
	port := fs.Int("port", 0, "port on 127.0.0.1 (default: a free one)")
	project := fs.String("project", "demo", "the project (repository) name")
	from := fs.String("from", "", "the directory holding ocx, ocxd and workspace (default: this ocx's own, as `make build` puts them in bin/)")
	if err := fs.Parse(args); err != nil {
		return usageErr(err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if err := messages.ValidateProject(*project); err != nil {
		return fmt.Errorf("%w: project: %v", errUsage, err)
	}
	bin := *from
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		if exe, err = filepath.EvalSymlinks(exe); err != nil {
			return err
		}
		bin = filepath.Dir(exe)
	}
	for _, name := range demoPrograms() {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			return fmt.Errorf("the demo runs the release's binaries: %s has no %s (`make build` puts %s in bin/)", bin, name, strings.Join(demoPrograms(), ", "))
		}
	}
	root := *dir
	if root == "" {
		tmp, err := os.MkdirTemp("", "ocx-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		root = tmp
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	d := &demo{e: e, root: root, project: *project}
	defer d.teardown()
	if err := d.up(ctx, bin, *port); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(e.stdout, "stopping: the session, the daemon, the backoffice poller and the server")
	case <-d.srv.exited:
		return fmt.Errorf("fossil server (pid %d) exited by itself", d.srv.pid)
	}
	return nil
}

// demo is a running demo node and what it started.
type demo struct {
	e       *env
	root    string
	project string
	srv     *server
	poller  *server
	n       *node.Node
	key     messages.WorkspaceKey
	launch  string
}

// demoPaths are the directories of a demo node, below its root.
type demoPaths struct {
	home, agents, relRoot, extroot string
}

func (d *demo) up(ctx context.Context, bin string, port int) error {
	p := demoPaths{home: filepath.Join(d.root, "home"), agents: filepath.Join(d.root, "agents"),
		relRoot: filepath.Join(d.root, "release"), extroot: filepath.Join(d.root, "ext")}
	for _, dir := range []string{p.home, p.agents, p.extroot} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	if err := makeRelease(bin, p.relRoot); err != nil {
		return err
	}
	fsl := &fossilio.Fossil{Home: p.home, User: demoAdmin, Dir: d.root}
	repo := filepath.Join(d.root, d.project+".fossil")
	adminPw, err := d.serve(ctx, fsl, repo, port, p.extroot)
	if err != nil {
		return err
	}
	if err := d.openNode(ctx, p, repo, adminPw); err != nil {
		return err
	}
	d.key = messages.WorkspaceKey{Login: demoAgent, Project: d.project}
	record, err := d.workspace(ctx)
	if err != nil {
		return err
	}
	llm, err := d.startSession(ctx)
	if err != nil {
		return err
	}
	if err := d.templates(ctx, fsl, repo); err != nil {
		return err
	}
	for _, l := range []struct {
		login, command, what string
		result               messages.ResultKind
	}{
		{demoCI, demoCICommand, "The demo's CI: it tags each check-in on " + demoBranch + " green or red.", messages.ResultCI},
		{demoReviewer, demoReviewCommand, "The demo's reviewer: it judges each check-in on " + demoBranch + " against this record.", messages.ResultVerdict},
	} {
		if err := d.branchListener(ctx, l.login, l.command, l.what, l.result); err != nil {
			return err
		}
	}
	checkin, err := d.checkin(ctx, p.home)
	if err != nil {
		return err
	}
	// A web post that meets another writer of the repository fails with
	// "database is locked" (Fossil reads, then writes, in one transaction),
	// so the demo says it is ready once the writes its start set off are done.
	settle(ctx, repo, 1500*time.Millisecond, 15*time.Second)
	d.ready(p, adminPw, record, checkin, llm)
	return nil
}

// serve makes the demo's repository, its git mirror, and starts its
// server and backoffice poller; it returns the admin's password.
func (d *demo) serve(ctx context.Context, fsl *fossilio.Fossil, repo string, port int, extroot string) (string, error) {
	e := d.e
	adminPw, err := demoRepository(ctx, fsl, repo)
	if err != nil {
		return "", err
	}
	admin := &fossilio.Admin{Repository: repo, Fossil: fsl}
	if err := admin.SetUser(ctx, demoPerson, demoPersonPW, demoCaps); err != nil {
		return "", err
	}
	// The server never runs the backoffice itself; the poller beside it
	// does, each second, and each OCX write runs it at once (D11).
	if _, err := fsl.Run(ctx, []string{"settings", "backoffice-disable", "on", "-R", repo}); err != nil {
		return "", err
	}
	// The git mirror (docs/console.md "Git"): the hook keeps it current
	// from the next check-in on.
	if _, err := fsl.Run(ctx, []string{"git", "export", filepath.Join(d.root, demoMirror), "-R", repo}); err != nil {
		return "", fmt.Errorf("the demo's git mirror (is git installed? `make deps` installs it): %w", err)
	}
	// Write-ahead logging before anything else opens the repository: the
	// switch needs the file to itself, and the server and the poller write
	// it from their start (D11). `ocx init` below then finds it switched.
	if _, err := admin.UseWAL(ctx); err != nil {
		return "", err
	}
	if d.srv, err = startServer(ctx, fsl, repo, port, extroot); err != nil {
		return "", err
	}
	e.log.Info("fossil server started", "pid", d.srv.pid, "url", d.srv.url)
	if d.poller, err = startProcess(fsl, []string{"backoffice", "--poll", "1", repo}); err != nil {
		return "", err
	}
	e.log.Info("backoffice poller started", "pid", d.poller.pid)
	return adminPw, nil
}

// openNode makes the demo's node (init, the console, the hook, the agent
// login) and opens it as the admin.
func (d *demo) openNode(ctx context.Context, p demoPaths, repo, adminPw string) error {
	e := d.e
	initA := setup.Init(ctx, p.agents, setup.InitInput{Projects: []setup.InitProject{{Name: d.project, Repository: repo, URL: d.srv.url}}, ReleaseRoot: p.relRoot}, node.Options{Log: e.log})
	if err := answerErr(initA); err != nil {
		return err
	}
	n, err := node.Open(p.agents, node.Options{Caller: node.Caller{Login: demoAdmin, Password: adminPw}, Log: e.log})
	if err != nil {
		return err
	}
	d.n = n
	if err := answerErr(n.ConsoleInstall(p.extroot, false)); err != nil {
		return err
	}
	if err := answerErr(n.HookInstall(ctx, false)); err != nil {
		return err
	}
	return answerErr(n.LoginAdd(ctx, demoAgent, false))
}

// startSession starts the demo's session: mechanical, or an llm session
// when the environment names a model; it returns the model.
func (d *demo) startSession(ctx context.Context) (string, error) {
	n := d.n
	in := workspaces.SessionStartInput{
		Workspace: d.key.String(), Kind: string(messages.Mechanical), Lifetime: string(messages.Stays),
		Command: []string{"/bin/sh", "-c", demoCommand},
		// The session hears the demo's person and the admin (D27).
		Hears: []string{demoPerson, n.Caller.Login},
	}
	llm, err := demoModel(n.Layout.ModelJSON())
	if err != nil {
		return "", err
	}
	if llm != "" {
		in.Kind, in.Command, in.Runner, in.Model = string(messages.LLM), nil, messages.RunnerNative, llm
	}
	start := workspaces.Of(n).SessionStart(ctx, in)
	if start.Result != nil {
		d.launch = *start.Result
	}
	if err := answerErr(start); err != nil {
		return "", err
	}
	return llm, nil
}

// ready prints what the demo node is and how to use it.
func (d *demo) ready(p demoPaths, adminPw, record, checkin, llm string) {
	e, agents := d.e, p.agents
	ocx := filepath.Join(p.relRoot, "current", "ocx")
	console := d.srv.url + "ext/" + node.ConsoleEntryName + "/"
	fmt.Fprintf(e.stdout, "OCX demo node\n")
	fmt.Fprintf(e.stdout, "  console:     %s\n", console)
	fmt.Fprintf(e.stdout, "  url:         %s\n", d.srv.url)
	fmt.Fprintf(e.stdout, "  log in as:   %s  password: %s  (at %slogin)\n", demoPerson, demoPersonPW, d.srv.url)
	fmt.Fprintf(e.stdout, "  admin login: %s  password: %s\n", demoAdmin, adminPw)
	fmt.Fprintf(e.stdout, "  agent login: %s  (its session answers in the thread below)\n", demoAgent)
	fmt.Fprintf(e.stdout, "  thread:      %sforumpost/%s\n", d.srv.url, record)
	fmt.Fprintf(e.stdout, "  agents root: %s\n", agents)
	fmt.Fprintf(e.stdout, "  git mirror:  git clone %s%s %s-git\n", console, demoMirror, d.project)
	fmt.Fprintf(e.stdout, "  ci:          %s  (a branch listener on %s: each check-in gets a ci tag, green or red)\n", demoCI, demoBranch)
	fmt.Fprintf(e.stdout, "  reviewer:    %s  (a branch listener on %s: each check-in gets its audited verdict)\n", demoReviewer, demoBranch)
	if checkin != "" {
		fmt.Fprintf(e.stdout, "  check-in:    %sinfo/%s  (the demo's, by %s: its ci tag and verdict appear there within seconds)\n", d.srv.url, checkin, demoPerson)
	}
	fmt.Fprintf(e.stdout, "  workspace template: %sworkspaces/add?template=%s\n", console, demoWorkspaceTemplate)
	fmt.Fprintf(e.stdout, "  session template:   %sworkspace/%s/start?template=%s\n", console, demoAgent, demoSessionTemplate)
	fmt.Fprintf(e.stdout, "  run pattern: %spattern/%s  (or: OCX_AGENTS=%s OCX_USER=%s OCX_PASSWORD=%s %s run post --pattern %s --objective \"Say hello.\")\n",
		console, demoRunPattern, agents, demoAdmin, adminPw, ocx, demoRunPattern)
	fmt.Fprintf(e.stdout, "  releases:    %sreleases   tools: %stools   status (JSON): %sstate\n", console, console, console)
	fmt.Fprintf(e.stdout, "\nThe console, in the browser (log in as %s first, at %slogin):\n", demoAdmin, d.srv.url)
	fmt.Fprintf(e.stdout, "  1. Hook: the wake hook is installed on %s.\n", d.project)
	fmt.Fprintf(e.stdout, "  2. Agent logins: add one (say agent-2).\n")
	fmt.Fprintf(e.stdout, "  3. Workspaces: Add a workspace for it; open it; Start a session (mechanical, stays, a command such as: read -r l; echo \"heard: $l\").\n")
	fmt.Fprintf(e.stdout, "  4. Sessions: see it listening; open it for its log, its listeners (add a ticket), and Stop it.\n")
	fmt.Fprintf(e.stdout, "\nOr talk to the session already running: log in as %s, open the thread, press Reply, type a line (say: hello), then Preview and Submit.\n", demoPerson)
	if llm != "" {
		fmt.Fprintf(e.stdout, "Its session is an llm session: ocx-runner-native asks the model %s at %s (AGENTS/model.json); reload the page to see its answer.\n", llm, os.Getenv(demoModelURLEnv))
	} else {
		fmt.Fprintf(e.stdout, "Within a few seconds %s answers \"%s heard: hello\"; reload the page to see it.\n", demoAgent, demoAgent)
		fmt.Fprintf(e.stdout, "(With %s=http://127.0.0.1:11434 and %s=MODEL, a local ollama say, the session is an llm session on ocx-runner-native instead.)\n", demoModelURLEnv, demoModelEnv)
	}
	fmt.Fprintf(e.stdout, "From a terminal, the same:\n")
	fmt.Fprintf(e.stdout, "  OCX_AGENTS=%s OCX_USER=%s OCX_PASSWORD=%s %s post --to %s --text hello\n", agents, demoPerson, demoPersonPW, ocx, record[:fossilio.MinPrefix])
	fmt.Fprintf(e.stdout, "  OCX_AGENTS=%s %s status\n", agents, ocx)
	fmt.Fprintf(e.stdout, "A check-in of your own, which CI tags and the reviewer judges (as %s):\n", demoPerson)
	fmt.Fprintf(e.stdout, "  fossil clone --save-http-password http://%s:%s@%s %s/mine.fossil && mkdir %s/mine && cd %s/mine && fossil open ../mine.fossil && echo hi > hi.txt && fossil add hi.txt && fossil commit -m hi\n",
		demoPerson, demoPersonPW, strings.TrimPrefix(d.srv.url, "http://"), d.root, d.root, d.root)
	fmt.Fprintf(e.stdout, "ready; press Ctrl-C to stop\n")
}

// workspace adds the demo's workspace, or finds the one a previous run in
// the same directory made, and returns its record.
func (d *demo) workspace(ctx context.Context) (string, error) {
	if b, err := d.n.Binding(d.key); err == nil {
		return b.Home, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	add := workspaces.Of(d.n).WorkspaceAdd(ctx, workspaces.WorkspaceAddInput{Login: demoAgent, Project: d.project, Branch: "trunk"})
	if err := answerErr(add); err != nil {
		return "", err
	}
	return *add.Result, nil
}

// templates writes the demo's two templates and its run pattern as wiki
// pages, or a new version of each left in the directory: the node's
// default sandbox as workspace/demo (the console adds the workspace's own
// directory), CI's session definition as session/ci, and section 14's
// echo as run/echo.
func (d *demo) templates(ctx context.Context, fsl *fossilio.Fossil, repo string) error {
	sb := d.n.DefaultSandbox("")
	sb.ReadWrite = []string{}
	sbJSON, err := json.MarshalIndent(sb, "", "  ")
	if err != nil {
		return err
	}
	def := &messages.SessionDefinition{Kind: messages.Mechanical, Lifetime: messages.Completes,
		Command: []string{"/bin/sh", "-c", demoCICommand}}
	defJSON, err := def.Encode()
	if err != nil {
		return err
	}
	pages := []struct{ name, text string }{
		{"workspace/" + demoWorkspaceTemplate, "The demo's workspace template: the node's default sandbox, without the network.\n\n```json\n" + string(sbJSON) + "\n```\n"},
		{"session/" + demoSessionTemplate, "The demo's session template: CI's command, a mechanical session that completes.\n\n" + string(defJSON)},
		{runmsg.RunPatternPrefix + demoRunPattern, demoEchoPattern},
	}
	for _, p := range pages {
		f := filepath.Join(d.root, "template.md")
		if err := os.WriteFile(f, []byte(p.text), 0o600); err != nil { // trust:outside the demo's own directory
			return err
		}
		if err := writePage(ctx, fsl, repo, p.name, f); err != nil {
			return fmt.Errorf("the demo's template %s: %w", p.name, err)
		}
		os.Remove(f)
	}
	return nil
}

// demoEchoPattern is the page of the demo's run pattern: section 14's
// unconfined echo, its process held once; each run from it gives its
// objective (ocx run post --pattern echo --objective "Say hello.").
const demoEchoPattern = "The demo's run pattern: seed 004 section 14's unconfined echo. A run from it says hello in a reply, then ends exited 0.\n\n" +
	"```json\n" + `{"process": {"user": "builder", "command": ["echo", "hello"], "env": {"PATH": "/usr/bin:/bin"}, "keep": {"stdout_when": "always"}}}` + "\n```\n"

// lockedWait bounds how long writePage tries again a page that met
// another writer.
const lockedWait = 15 * time.Second

// writePage writes the wiki page name from the file f with `fossil wiki`:
// a new page, or a new version of one there. Fossil reads, then writes,
// in one transaction, so a write that meets another writer of the
// repository (the daemon's notes, the backoffice) fails at once with
// "database is locked", having written nothing; it is tried again, for at
// most lockedWait, as a user would.
func writePage(ctx context.Context, fsl *fossilio.Fossil, repo, name, f string) error {
	deadline := time.Now().Add(lockedWait)
	for pause := 20 * time.Millisecond; ; pause = min(2*pause, 500*time.Millisecond) {
		verb := "create"
		r, err := fossilio.OpenNode(repo, nil)
		if err != nil {
			return err
		}
		if _, err := r.WikiPage(ctx, name); err == nil {
			verb = "commit"
		}
		r.Close()
		_, err = fsl.Run(ctx, []string{"wiki", verb, name, f, "--mimetype", "text/x-markdown", "-R", repo})
		if err == nil || !strings.Contains(err.Error(), "database is locked") || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
	}
}

// branchListener gives the demo a mechanical login whose `completes`
// session runs on each check-in of demoBranch: its login, its workspace,
// the session definition on the workspace's record (result ci or
// verdict), and the branch listener. A directory a previous run left keeps
// what it has.
func (d *demo) branchListener(ctx context.Context, login, command, what string, result messages.ResultKind) error {
	k := messages.WorkspaceKey{Login: login, Project: d.project}
	if _, err := d.n.Binding(k); err == nil {
		return nil
	}
	if err := answerErr(d.n.LoginAdd(ctx, login, false)); err != nil {
		return err
	}
	add := workspaces.Of(d.n).WorkspaceAdd(ctx, workspaces.WorkspaceAddInput{Login: login, Project: d.project, Branch: demoBranch})
	if err := answerErr(add); err != nil {
		return err
	}
	def := &messages.SessionDefinition{Kind: messages.Mechanical, Lifetime: messages.Completes, Result: result,
		Command: []string{"/bin/sh", "-c", command}}
	block, err := def.Encode()
	if err != nil {
		return err
	}
	if err := answerErr(d.n.Post(ctx, node.PostInput{Project: d.project, To: *add.Result, Text: what + "\n\n" + string(block)})); err != nil {
		return err
	}
	return answerErr(workspaces.Of(d.n).ListenerAdd(ctx, workspaces.ListenerInput{Workspace: k.String(), Kind: string(messages.ListenBranch), Names: demoBranch}))
}

// checkin makes the demo's one check-in on demoBranch, as the person, from
// a clone of theirs over the network, so that CI and the reviewer have a
// check-in to show; "" when a previous run in the directory made it.
func (d *demo) checkin(ctx context.Context, home string) (string, error) {
	clone := filepath.Join(d.root, demoPerson+".fossil")
	if _, err := os.Stat(clone); err == nil {
		return "", nil
	}
	f := &fossilio.Fossil{Home: home, User: demoPerson, Dir: d.root}
	if err := f.Clone(ctx, fossilio.CloneOptions{URL: d.srv.url, Login: demoPerson, Password: demoPersonPW}, clone); err != nil {
		return "", err
	}
	tree := filepath.Join(d.root, demoPerson)
	if err := f.OpenCheckout(ctx, clone, tree, demoBranch); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tree, "README.md"), []byte("# The OCX demo\n\nA check-in for CI and the reviewer.\n"), 0o644); err != nil { // trust:outside the demo's own directory
		return "", err
	}
	in := &fossilio.Fossil{Home: home, User: demoPerson, Dir: tree}
	if _, err := in.Run(ctx, []string{"add", "README.md"}); err != nil {
		return "", err
	}
	if _, err := in.Run(ctx, []string{"commit", "--no-warnings", "-m", "The demo's first check-in"}); err != nil {
		return "", err
	}
	out, err := in.Run(ctx, []string{"info", "current"})
	if err != nil {
		return "", err
	}
	var hash string
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && (strings.TrimSpace(k) == "checkout" || strings.TrimSpace(k) == "hash") {
			if f := strings.Fields(v); len(f) > 0 {
				hash = f[0]
			}
		}
	}
	if hash == "" {
		return "", fmt.Errorf("the demo's check-in: fossil info names no hash:\n%s", out)
	}
	if err := f.Push(ctx, clone); err != nil {
		return "", err
	}
	return hash, nil
}

// waitNoSession waits until no process names workspace k, at most until
// ctx ends.
func (d *demo) waitNoSession(ctx context.Context, k messages.WorkspaceKey) {
	for ctx.Err() == nil {
		st, err := d.n.Status(ctx)
		running := err != nil
		if err == nil {
			for _, s := range st.Sessions {
				running = running || (s.Login == k.Login && s.Project == k.Project)
			}
		}
		if !running {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// teardown stops what up started, in the order that lets each write its
// notes and leaves nothing to start anything again: the session (its stopped
// note; the daemon's end note), the poller (no hook runs after it), the
// hook runs still going (one may start a daemon: that is what a hook does
// when posts arrive and none runs), the daemon, the server.
func (d *demo) teardown() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if d.n != nil && d.key.Login != "" {
		if a := workspaces.Of(d.n).SessionStop(ctx, d.key.String(), false); a.OK() {
			d.e.log.Info("session stop handed to the daemon", "workspace", d.key)
			d.waitSessionEnd(ctx)
		}
	}
	// CI's and the reviewer's runs end by themselves; one still running
	// is stopped, since the daemon leaves its sessions running when it
	// stops.
	if d.n != nil {
		for _, login := range []string{demoCI, demoReviewer} {
			k := messages.WorkspaceKey{Login: login, Project: d.project}
			if a := workspaces.Of(d.n).SessionStop(ctx, k.String(), false); a.OK() {
				d.e.log.Info("session stop handed to the daemon", "workspace", k)
				d.waitNoSession(ctx, k)
			}
		}
	}
	// Without the hook, no backoffice run (the poller's, or one a write of
	// the daemon's set off) can start a daemon again once it is stopped.
	if d.n != nil {
		if a := d.n.HookRemove(ctx, false); !a.OK() {
			d.e.log.Warn("remove the hook", "error", *a.Stopped)
		}
	}
	if d.poller != nil {
		d.poller.stop(d.e)
	}
	if d.n != nil {
		d.stopDaemons(ctx)
	}
	if d.srv != nil {
		d.srv.stop(d.e)
	}
}

// stopDaemons waits for the hook runs still going to end, then stops the
// daemon, until neither is left: a hook run that began before the hook was
// removed may start a daemon.
func (d *demo) stopDaemons(ctx context.Context) {
	hook := d.n.Program("ocx")
	for quiet := 0; quiet < 2 && ctx.Err() == nil; {
		busy := false
		if len(pidsRunning(hook, "hook")) > 0 {
			busy = true
		} else if pid, err := daemonclient.PID(d.n.Layout); err == nil && pid > 0 {
			busy = true
			_ = unixhost.Kill(pid, host.SIGTERM)
			for i := 0; i < 500; i++ {
				if p, _ := daemonclient.PID(d.n.Layout); p != pid {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			d.e.log.Info("daemon stopped", "pid", pid)
		}
		if busy {
			quiet = 0
		} else {
			quiet++
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, pid := range pidsRunning(hook, "hook") {
		_ = unixhost.Kill(pid, host.SIGKILL)
	}
}

// settle waits until the repository (and its write-ahead log) has not
// changed for quiet, at most max.
func settle(ctx context.Context, repo string, quiet, max time.Duration) {
	mark := func() string {
		var b strings.Builder
		for _, p := range []string{repo, repo + "-wal"} {
			if st, err := os.Stat(p); err == nil {
				fmt.Fprintf(&b, "%d/%d ", st.Size(), st.ModTime().UnixNano())
			}
		}
		return b.String()
	}
	deadline := time.Now().Add(max)
	last, since := mark(), time.Now()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		if m := mark(); m != last {
			last, since = m, time.Now()
		} else if time.Since(since) >= quiet {
			return
		}
	}
}

// pidsRunning lists the processes running program with first argument arg.
func pidsRunning(program, arg string) []int {
	return pidsWhose(func(args []string) bool { return args[0] == program && args[1] == arg })
}

// pidsWhose lists the processes but this one whose command line, of two
// words or more, match says.
func pidsWhose(match func(args []string) bool) []int {
	entries, _ := os.ReadDir("/proc") // trust:outside /proc
	var pids []int
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + ent.Name() + "/cmdline") // trust:outside /proc
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if len(args) > 1 && match(args) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitSessionEnd waits until no process names the workspace and the
// daemon's end note is on the record, at most until ctx ends.
func (d *demo) waitSessionEnd(ctx context.Context) {
	for ctx.Err() == nil {
		st, err := d.n.Status(ctx)
		running := err != nil
		if err == nil {
			for _, s := range st.Sessions {
				running = running || (s.Login == d.key.Login && s.Project == d.key.Project)
			}
		}
		ended := d.launch == ""
		if !ended {
			end, err := workspaces.Of(d.n).Ended(ctx, d.project, d.launch)
			ended = err == nil && end != nil
		}
		if !running && ended {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// answerErr turns a stopped answer into an error carrying its log.
func answerErr(a *node.Answer) error {
	if a.OK() {
		return nil
	}
	return fmt.Errorf("%s: %s\n  %s", a.Tool, *a.Stopped, strings.Join(a.Log, "\n  "))
}

// makeRelease copies the binaries into RELROOT/releases/demo/ and links
// current to it, so that a rebuild of bin/ never changes a running demo.
// demoPrograms are the programs the demo's release holds: every release's
// and the small hook and console (D66, D71), without which each sync and
// each console page would take the slow path through `ocx` (issue 42).
func demoPrograms() []string {
	return append(slices.Clone(host.ReleasePrograms), host.HookProgram, host.ConsoleProgram)
}

func makeRelease(bin, relRoot string) error {
	dir := filepath.Join(relRoot, "releases", "demo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	names := demoPrograms()
	// The runners beside them too (D9): `make build` puts each in bin/.
	entries, err := os.ReadDir(bin) // trust:outside bin/ and the demo's release root
	if err != nil {
		return fmt.Errorf("make the demo's release: %w", err)
	}
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, host.RunnerPrefix) && len(n) > len(host.RunnerPrefix) && !strings.Contains(n, ".") && e.Type().IsRegular() {
			names = append(names, n)
		}
	}
	for _, name := range names {
		if err := copyFile(filepath.Join(bin, name), filepath.Join(dir, name), 0o755); err != nil {
			return fmt.Errorf("make the demo's release: %w", err)
		}
	}
	current := filepath.Join(relRoot, "current")
	_ = os.Remove(current)
	return os.Symlink(filepath.Join("releases", "demo"), current)
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src) // trust:outside bin/ and the demo's release root
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode) // trust:outside bin/ and the demo's release root
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// demoRepository makes the demo repository, or reuses one left in the
// directory, and gives the admin a fresh password.
func demoRepository(ctx context.Context, fsl *fossilio.Fossil, repo string) (string, error) {
	if _, err := os.Stat(repo); errors.Is(err, os.ErrNotExist) {
		if _, err := fsl.Run(ctx, []string{"init", "-A", demoAdmin, repo}); err != nil {
			return "", err
		}
	} else if err != nil {
		return "", err
	}
	pw := fossilio.NewPassword()
	if _, err := fsl.Run(ctx, []string{"user", "password", demoAdmin, pw, "-R", repo}, pw); err != nil {
		return "", err
	}
	return pw, nil
}

// server is a process the demo started in a process group of its own: the
// fossil server, or the backoffice poller.
type server struct {
	pid    int
	url    string
	argv   []string
	exited chan struct{}
}

// startProcess starts fossil with args in a process group of its own.
func startProcess(fsl *fossilio.Fossil, args []string) (*server, error) {
	exe := fsl.Exe
	if exe == "" {
		exe = "fossil"
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = fsl.Env()
	cmd.Dir = fsl.Dir
	cmd.SysProcAttr = unixhost.GroupAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start fossil %s: %w", strings.Join(args, " "), err)
	}
	s := &server{pid: cmd.Process.Pid, argv: cmd.Args, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	return s, nil
}

// startServer starts `fossil server` on 127.0.0.1, unjailed so that the
// backoffice and hooks run (reference 4.5), and waits until it accepts
// connections.
func startServer(ctx context.Context, fsl *fossilio.Fossil, repo string, port int, extroot string) (*server, error) {
	if port == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		port = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	s, err := startProcess(fsl, []string{"server", "--port", strconv.Itoa(port), "--localhost", "--nojail", "--extroot", extroot, repo})
	if err != nil {
		return nil, err
	}
	s.url = fmt.Sprintf("http://127.0.0.1:%d/", port)
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("fossil server on port %d exited (is the port taken?)", port)
		case <-ctx.Done():
			s.stop(nil)
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop(nil)
			return nil, fmt.Errorf("fossil server on port %d did not accept connections in 15 s", port)
		}
	}
}

// stop ends the process group by its PID: TERM, then KILL. A backoffice the
// server forks, or a run the poller starts, may leave the group; each has a
// command line naming the repository, so each such process is ended by its
// PID too.
func (s *server) stop(e *env) {
	_ = unixhost.KillGroup(s.pid, host.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		_ = unixhost.KillGroup(s.pid, host.SIGKILL)
		<-s.exited
	}
	_ = unixhost.KillGroup(s.pid, host.SIGKILL)
	repo := s.argv[len(s.argv)-1]
	for _, pid := range pidsNaming(repo) {
		_ = unixhost.Kill(pid, host.SIGKILL)
	}
	if e != nil {
		e.log.Info("stopped", "pid", s.pid, "argv", strings.Join(s.argv, " "))
	}
}

// pidsNaming lists the fossil processes whose command line names path.
func pidsNaming(path string) []int {
	return pidsWhose(func(args []string) bool { return filepath.Base(args[0]) == "fossil" && args[len(args)-1] == path })
}
