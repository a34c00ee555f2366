package session_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/actors/turn"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/syncfwd"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
)

// waitFor bounds every wait of these tests for something a real process does;
// it only fails a test that would otherwise hang, and measures nothing.
const waitFor = 90 * time.Second

// node is a real fossil server on 127.0.0.1, an agents root with node.json,
// and the repository opened as the node's (where senders are known).
type node struct {
	t      testing.TB
	ctx    context.Context
	srv    *harness.Server
	repo   *fossilio.Repo
	agents string
	layout host.Layout
	admin  *fossilio.Client // a person with setup, writing the records
	dev    *fossilio.Client // a developer who may check in
}

func newNode(t testing.TB) *node {
	t.Helper()
	srv := harness.StartServer(t, harness.Options{Users: []harness.User{{Login: "dev", Password: "dev-pw", Caps: "gio"}}})
	repo, err := fossilio.OpenNode(srv.Repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	agents := filepath.Join(t.TempDir(), "agents")
	if err := os.MkdirAll(agents, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := host.NewLayout(agents)
	if err != nil {
		t.Fatal(err)
	}
	nc := &messages.NodeConfig{User: "ocx", Projects: map[string]messages.NodeProject{
		"demo": {Repository: srv.Repo, URL: srv.URL}}}
	data, err := nc.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.NodeJSON(), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return &node{t: t, ctx: context.Background(), srv: srv, repo: repo, agents: agents, layout: l,
		admin: &fossilio.Client{URL: srv.URL, Login: srv.AdminLogin, Password: srv.AdminPassword, ProjectCode: srv.ProjectCode},
		dev:   &fossilio.Client{URL: srv.URL, Login: "dev", Password: "dev-pw", ProjectCode: srv.ProjectCode},
	}
}

// wsFixture is a workspace made as `ocx` would make it: an agent login
// provisioned on the node, a workspace definition on its record, a clone
// made over the network as the agent with its password remembered, a tree on
// trunk, and binding.json.
type wsFixture struct {
	n       *node
	login   string
	key     messages.WorkspaceKey
	ws      host.Workspace
	home    string // the workspace's record
	sandbox messages.Sandbox
	agent   *fossilio.Client
	// syncDir, when set, is bound into the sandbox as the daemon binds a
	// session's MCP directory, and holds the node's sync socket, which the
	// session's environment names (throughNode).
	syncDir string
	// forwarded counts the requests the sync socket carried.
	forwarded *atomic.Int64
}

func (n *node) workspace(login string) *wsFixture {
	t := n.t
	t.Helper()
	pwFile, err := n.layout.Password(login)
	if err != nil {
		t.Fatal(err)
	}
	admin := &fossilio.Admin{Repository: n.srv.Repo, Fossil: &fossilio.Fossil{Home: n.srv.Home}}
	if err := admin.ProvisionAgent(n.ctx, login, pwFile); err != nil {
		t.Fatal(err)
	}
	pw, err := fossilio.ReadPasswordFile(pwFile)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := n.layout.Workspace(messages.WorkspaceKey{Login: login, Project: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(ws.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sb := messages.Sandbox{
		Network:   true,
		ReadOnly:  []string{"/usr", "/lib", "/lib64", "/bin", "/etc", release},
		ReadWrite: []string{ws.Dir},
		Homes:     []string{},
		Path:      []string{release, "/usr/local/bin", "/usr/bin", "/bin"},
	}
	def := &messages.WorkspaceDefinition{Login: login, Project: "demo", Branch: "trunk", Sandbox: sb}
	block, err := def.Encode()
	if err != nil {
		t.Fatal(err)
	}
	home, err := n.admin.NewThread(n.ctx, "Workspace of "+login, "The workspace of "+login+".\n\n"+string(block))
	if err != nil {
		t.Fatal(err)
	}
	f := &fossilio.Fossil{Home: ws.Dir}
	if err := f.Clone(n.ctx, fossilio.CloneOptions{URL: n.srv.URL, Login: login, Password: pw, ProjectCode: n.srv.ProjectCode}, ws.Clone); err != nil {
		t.Fatal(err)
	}
	if err := f.OpenCheckout(n.ctx, ws.Clone, ws.Tree, "trunk"); err != nil {
		t.Fatal(err)
	}
	b := &messages.Binding{Login: login, Project: "demo", ProjectCode: n.srv.ProjectCode, Remote: n.srv.URL,
		Branch: "trunk", Home: home, Workspace: home}
	data, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ws.Binding, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return &wsFixture{n: n, login: login, key: messages.WorkspaceKey{Login: login, Project: "demo"}, ws: ws, home: home, sandbox: sb,
		agent: &fossilio.Client{URL: n.srv.URL, Login: login, Password: pw, ProjectCode: n.srv.ProjectCode}}
}

// rec is a session's own record: a thread or a ticket.
type rec struct {
	kind   messages.ListenKind
	id     string // root post or ticket id
	first  string // the first post or change
	def    string // the post holding the session definition
	launch string // the launch note
}

// post is where a note or a person's words go: a reply in the thread, or a
// change to the ticket.
func (w *wsFixture) post(c *fossilio.Client, r rec, text string) string {
	w.n.t.Helper()
	var h string
	var err error
	if r.kind == messages.ListenTicket {
		h, err = c.ChangeTicket(w.n.ctx, r.id, fossilio.Field{Name: "+icomment", Value: text}, fossilio.Field{Name: "mimetype", Value: fossilio.MarkdownMimetype})
	} else {
		h, err = c.Reply(w.n.ctx, r.id, r.id, text)
	}
	if err != nil {
		w.n.t.Fatal(err)
	}
	return h
}

// record makes a session's record holding objective, its session
// definition, and a launch note for it (checkin names a CI run's check-in).
func (w *wsFixture) record(kind messages.ListenKind, objective string, def *messages.SessionDefinition, checkin string) rec {
	t, ctx := w.n.t, w.n.ctx
	t.Helper()
	var r rec
	r.kind = kind
	if kind == messages.ListenTicket {
		h, id, err := w.n.admin.NewTicket(ctx, fossilio.Field{Name: "title", Value: "A task for " + w.login},
			fossilio.Field{Name: "icomment", Value: objective}, fossilio.Field{Name: "mimetype", Value: fossilio.MarkdownMimetype},
			fossilio.Field{Name: "status", Value: "Open"})
		if err != nil {
			t.Fatal(err)
		}
		r.id, r.first = id, h
	} else {
		h, err := w.n.admin.NewThread(ctx, "A task for "+w.login, objective)
		if err != nil {
			t.Fatal(err)
		}
		r.id, r.first = h, h
	}
	block, err := def.Encode()
	if err != nil {
		t.Fatal(err)
	}
	r.def = w.post(w.n.admin, r, "The session.\n\n"+string(block))
	ln := &messages.LaunchNote{Login: w.login, Project: "demo", Workspace: w.home, Session: r.def, Release: messages.ReleaseCurrent, Checkin: checkin}
	block, err = ln.Encode()
	if err != nil {
		t.Fatal(err)
	}
	r.launch = w.post(w.n.admin, r, string(block))
	return r
}

// proc is a session process the test started, in a session of its own as
// the daemon starts it, its output in WS/session/log.
type proc struct {
	w    *wsFixture
	cmd  *exec.Cmd
	done chan struct{}
	code int

	mu         sync.Mutex
	status     []byte        // what bwrap wrote on its status descriptor
	statusRead chan struct{} // closed once nothing more can be written there
}

// sandboxInit waits until bwrap says which process is the sandbox's init.
func (p *proc) sandboxInit() int {
	t := p.w.n.t
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		p.mu.Lock()
		st := host.ParseBwrapStatus(p.status)
		p.mu.Unlock()
		if st.ChildPID > 0 {
			return st.ChildPID
		}
		if time.Now().After(deadline) {
			t.Fatalf("bwrap never said its child's PID:\n%s", p.w.logText())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// bwrapStatus is what bwrap said, once it has exited.
func (p *proc) bwrapStatus() host.BwrapStatus {
	<-p.statusRead
	p.mu.Lock()
	defer p.mu.Unlock()
	return host.ParseBwrapStatus(p.status)
}

// throughNode makes w's sessions run as the daemon runs them with the
// node's sync socket (D49): sandboxed without the network, the socket in a
// directory bound at host.MCPMount, served in this process by the node's
// forwarder to the test's server, as `ocx mcp serve` serves it.
func (w *wsFixture) throughNode() {
	t := w.n.t
	t.Helper()
	dir, err := os.MkdirTemp("", "ocx-sync-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	f, err := syncfwd.New(w.n.srv.URL, w.login, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, host.SyncSocketName))
	if err != nil {
		t.Fatal(err)
	}
	w.forwarded = new(atomic.Int64)
	counted := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.forwarded.Add(1)
		f.ServeHTTP(rw, r)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- syncfwd.Serve(ctx, ln, counted, unixhost.SameUser, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	w.syncDir = dir
	w.sandbox.Network = false
}

// serve starts `workspace serve` as the daemon does (contracts 1): its
// environment exactly, cwd the tree, stdin /dev/null, output appended to the
// session's log; sandboxed, inside bwrap built by host.BwrapArgs from the
// workspace definition's sandbox.
func (w *wsFixture) serve(launch string, sandboxed bool) *proc {
	argv := []string{filepath.Join(release, "workspace"), "serve", w.key.String(), "--root", w.n.agents, "--launch", launch}
	return w.spawn(argv, sandboxed, nil)
}

func (w *wsFixture) spawn(argv []string, sandboxed bool, extraEnv []string) *proc {
	t := w.n.t
	t.Helper()
	if err := os.MkdirAll(w.ws.Session, 0o700); err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(w.ws.Log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	env := append([]string{"HOME=" + w.ws.Dir, "PATH=" + strings.Join(w.sandbox.Path, ":"), "USER=" + w.login,
		"LOGNAME=" + w.login, "LANG=C.UTF-8"}, extraEnv...)
	if w.syncDir != "" {
		env = append(env, host.SyncSocketEnv+"="+host.SyncSocketInside)
	}
	path := argv[0]
	p := &proc{w: w, done: make(chan struct{}), statusRead: make(chan struct{})}
	var statusW *os.File
	if sandboxed {
		// bwrap says on descriptor 3 which process is the sandbox's init,
		// whose group a stop signals (docs/host.md §5), and the exit code.
		spec := host.SandboxSpec{Workspace: w.ws.Dir, Release: release, MCPDir: w.syncDir, Sandbox: messages.Sandbox{
			Network: w.sandbox.Network, ReadOnly: w.sandbox.ReadOnly, ReadWrite: w.sandbox.ReadWrite,
			Homes: w.sandbox.Homes, Path: w.sandbox.Path}}
		argv, err = host.BwrapArgs(spec, 3, w.ws.Tree, argv)
		if err != nil {
			t.Fatal(err)
		}
		path = "/usr/bin/bwrap"
		var statusR *os.File
		statusR, statusW, err = os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer close(p.statusRead)
			defer statusR.Close()
			buf := make([]byte, 4096)
			for {
				n, err := statusR.Read(buf)
				p.mu.Lock()
				p.status = append(p.status, buf[:n]...)
				p.mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	} else {
		close(p.statusRead)
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Dir: w.ws.Tree, Stdout: logf, Stderr: logf,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	if statusW != nil {
		cmd.ExtraFiles = []*os.File{statusW}
	}
	err = cmd.Start()
	if statusW != nil {
		statusW.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = cmd
	harness.Track(t, cmd.Process.Pid)
	go func() {
		_ = cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		killNaming(t, w.ws.Dir)
		<-p.statusRead
		if t.Failed() || testing.Verbose() {
			t.Logf("session log:\n%s", w.logText())
		}
	})
	return p
}

// killNaming ends, by PID, every process whose command line names dir: what
// a sandboxed session left behind if a test failed before it ended. It first
// gives such processes a bounded while to end by themselves: bwrap reports
// the session's exit as soon as the session exits, while the sandbox's init
// (a bwrap too) is still reaping what is left before it exits.
func killNaming(t testing.TB, dir string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := naming(dir)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for pid, argv := range pids {
				t.Errorf("process %d (%s) still names %s; killed", pid, argv, dir)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// naming lists the processes whose command line names dir, with it.
func naming(dir string) map[int]string {
	out := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(dir)) {
			out[pid] = strings.ReplaceAll(string(b), "\x00", " ")
		}
	}
	return out
}

func (w *wsFixture) logText() string {
	b, _ := os.ReadFile(w.ws.Log)
	return string(b)
}

// waitLog waits until the session's log holds s, n times at least.
func (w *wsFixture) waitLog(s string, n int) {
	t := w.n.t
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for strings.Count(w.logText(), s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the session's log never held %q %d times:\n%s", s, n, w.logText())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait() int {
	t := p.w.n.t
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(waitFor):
		t.Fatalf("the session did not exit:\n%s", p.w.logText())
	}
	return -1
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// wake writes each post's wake line into the wake pipe as the hook does:
// its hash and its sender, as the node's repository recorded it.
func (w *wsFixture) wake(hashes ...string) {
	t := w.n.t
	t.Helper()
	var lines []string
	for _, h := range hashes {
		info, err := w.n.repo.Info(w.n.ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		l, err := pipe.WakeLine{Post: h, From: info.Sender}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.TrimSuffix(string(l), "\n"))
	}
	w.wakeLines(lines...)
}

// wakeLines writes wake lines as they are.
func (w *wsFixture) wakeLines(lines ...string) {
	t := w.n.t
	t.Helper()
	root, err := unixhost.OpenRoot(w.n.agents)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	lw, err := unixhost.OpenLineWriter(root, w.ws.Wake)
	if err != nil {
		t.Fatal(err)
	}
	defer lw.Close()
	for _, l := range lines {
		if err := lw.WriteLine([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
}

// answer is a reply on the node's record.
type answer struct {
	hash, text, sender string
}

// replies lists what the agent login sent on record r in answer to post to,
// as the node's repository records the sender.
func (w *wsFixture) replies(r rec, to string) []answer {
	t, ctx := w.n.t, w.n.ctx
	t.Helper()
	var out []answer
	if r.kind == messages.ListenTicket {
		changes, err := w.n.repo.TicketChanges(ctx, r.id)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range changes {
			if c.Sender == w.login && turn.RepliesTo(c.Comment, to) {
				out = append(out, answer{c.Hash, c.Comment, c.Sender})
			}
		}
		return out
	}
	posts, err := w.n.repo.Thread(ctx, r.id)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range posts {
		if p.InReplyTo == to && p.Sender == w.login {
			out = append(out, answer{p.Hash, p.Text, p.Sender})
		}
	}
	return out
}

// waitReply waits until the agent's reply to post to is on the node.
func (w *wsFixture) waitReply(r rec, to string) answer {
	t := w.n.t
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		if rs := w.replies(r, to); len(rs) > 0 {
			return rs[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reply to %s on the record:\n%s", to, w.logText())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// notes lists the notes of kind the agent sent on record r.
func (w *wsFixture) notes(r rec, kind messages.NoteKind) []messages.Note {
	t, ctx := w.n.t, w.n.ctx
	t.Helper()
	var texts []string
	if r.kind == messages.ListenTicket {
		changes, err := w.n.repo.TicketChanges(ctx, r.id)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range changes {
			if c.Sender == w.login {
				texts = append(texts, c.Comment)
			}
		}
	} else {
		posts, err := w.n.repo.Thread(ctx, r.id)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range posts {
			if p.Sender == w.login {
				texts = append(texts, p.Text)
			}
		}
	}
	var out []messages.Note
	for _, text := range texts {
		if n, err := messages.ReadPost([]byte(text)); err == nil && n.NoteKind() == kind {
			out = append(out, n)
		}
	}
	return out
}

// stoppedNote returns the one stopped note the agent wrote on r.
func (w *wsFixture) stoppedNote(r rec) *messages.StoppedNote {
	t := w.n.t
	t.Helper()
	ns := w.notes(r, messages.KindStopped)
	if len(ns) != 1 {
		t.Fatalf("%d stopped notes on the record, want 1:\n%s", len(ns), w.logText())
	}
	return ns[0].(*messages.StoppedNote)
}

// turnFileGone checks WS/session/turn is gone once no turn runs.
func (w *wsFixture) turnFileGone() {
	w.n.t.Helper()
	if _, err := os.Stat(filepath.Join(w.ws.Session, "turn")); !os.IsNotExist(err) {
		w.n.t.Errorf("WS/session/turn is there with no turn running: %v", err)
	}
}
