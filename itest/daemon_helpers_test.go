package itest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
)

// The daemon's integration tests start ocxd themselves, before any tool
// would, so that they choose its flags (a short stop grace); the tools then
// find it running (contracts 8) and only write its pipe.

// daemonProc is an ocxd the test started, a child of the test process.
type daemonProc struct {
	t      testing.TB
	cmd    *exec.Cmd
	done   chan struct{}
	stderr *lockedBuffer
	log    func() string // ocxd.log, for a stop that does not end
}

// lockedBuffer collects a process's output, safe to read while it writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startDaemon starts program (the release's ocxd) for the node with the
// given extra flags, and waits until it holds the lock and reads its pipe.
func startDaemon(t testing.TB, n *testNode, program string, flags ...string) *daemonProc {
	t.Helper()
	return startDaemonEnv(t, n, program, nil, flags...)
}

// startDaemonEnv is startDaemon with variables added to the daemon's
// environment.
func startDaemonEnv(t testing.TB, n *testNode, program string, env []string, flags ...string) *daemonProc {
	t.Helper()
	for tries := 0; ; tries++ {
		d, late := tryStartDaemon(t, n, program, env, flags...)
		if !late || tries > 0 {
			if late {
				t.Fatalf("ocxd found a daemon running twice at its start: %s", d.stderr.String())
			}
			return d
		}
		// A hook the daemon started before it was killed (a backoffice
		// after its own write) found no daemon and started one: it holds
		// the lock, and the test's daemon exited saying so. That one is
		// stopped, and the test's started again.
		stopLateDaemons(t, n)
	}
}

// tryStartDaemon is startDaemonEnv's one try: late says the daemon exited
// at once because another daemon holds the lock.
func tryStartDaemon(t testing.TB, n *testNode, program string, env []string, flags ...string) (d *daemonProc, late bool) {
	t.Helper()
	cmd := n.command(nil, program, append([]string{"--agents", n.agents}, flags...)...)
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + n.agents, "LANG=C.UTF-8"}, env...)
	cmd.Dir = "/"
	var errb lockedBuffer
	cmd.Stderr = &errb
	// Wait returns once the daemon has ended even if a process it started
	// still holds its standard error, so that no wait here is unbounded.
	cmd.WaitDelay = 5 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d = &daemonProc{t: t, cmd: cmd, done: make(chan struct{}), stderr: &errb, log: n.daemonLog}
	go func() { cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		d.stop()
		stopLateDaemons(t, n)
	})
	n.waitFor("the daemon to hold its lock and read its pipe", func() bool {
		if d.exited() {
			if other := n.daemonPID(); other != 0 && other != cmd.Process.Pid && strings.Contains(errb.String(), "already runs") {
				late = true
				return true
			}
			t.Fatalf("ocxd exited at start: %v\n%s\nocxd.log:\n%s", cmd.ProcessState, errb.String(), n.daemonLog())
		}
		return n.daemonPID() == cmd.Process.Pid && pipeHasReader(n)
	})
	return d, late
}

func (d *daemonProc) pid() int { return d.cmd.Process.Pid }

func (d *daemonProc) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// stop ends the daemon with TERM, as the node's shutdown would, and waits
// for it; a daemon that does not end on TERM fails the test.
func (d *daemonProc) stop() {
	if d.exited() {
		return
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		// USR2 has the daemon log its goroutines: what its stop waits on.
		d.cmd.Process.Signal(syscall.SIGUSR2)
		select {
		case <-d.done:
		case <-time.After(2 * time.Second):
		}
		log := d.log()
		d.t.Errorf("ocxd (pid %d) did not end on TERM; the end of ocxd.log:\n%s", d.pid(), log[max(0, len(log)-64<<10):])
		d.cmd.Process.Kill()
		<-d.done
	}
}

// stopLateDaemons ends any daemon a hook started after the test's own
// stopped: the backoffice runs the hook without waiting, so a write made just
// before the end can make the hook find no daemon and start one. It returns
// once, twice in a row, no hook run names the agents root and no daemon
// holds its lock (a hook run that starts a daemon waits for it to hold the
// lock). A backoffice that runs its hook later still (Fossil's lease) meets
// the node's shutdown, which removes the hook first.
func stopLateDaemons(t testing.TB, n *testNode) {
	deadline := time.Now().Add(20 * time.Second)
	for quiet := 0; quiet < 2; {
		if time.Now().After(deadline) {
			t.Errorf("a daemon or a hook run still names %s", n.agents)
			return
		}
		quiet++
		if n.hookRunning() {
			quiet = 0
		}
		if pid := n.daemonPID(); pid != 0 {
			quiet = 0
			syscall.Kill(pid, syscall.SIGTERM)
			for n.daemonPID() == pid && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill9 kills the daemon, as a crash would.
func (d *daemonProc) kill9() {
	d.cmd.Process.Kill()
	<-d.done
}

// pipeHasReader says whether the daemon's pipe is open for reading.
func pipeHasReader(n *testNode) bool {
	root, err := unixhost.OpenRoot(n.seen(n.agents))
	if err != nil {
		return false
	}
	defer root.Close()
	w, err := unixhost.OpenLineWriter(root, n.seen(filepath.Join(n.agents, "ocxd")))
	if err != nil {
		return false
	}
	w.Close()
	return true
}

// send writes lines to the daemon's pipe, packed into atomic writes.
func (n *testNode) send(lines ...string) {
	n.t.Helper()
	root, err := unixhost.OpenRoot(n.seen(n.agents))
	if err != nil {
		n.t.Fatal(err)
	}
	defer root.Close()
	w, err := unixhost.OpenLineWriter(root, n.seen(filepath.Join(n.agents, "ocxd")))
	if err != nil {
		n.t.Fatal(err)
	}
	defer w.Close()
	raw := make([][]byte, len(lines))
	for i, l := range lines {
		raw[i] = []byte(l)
	}
	if err := w.WriteLines(raw); err != nil {
		n.t.Fatal(err)
	}
}

func (n *testNode) daemonLog() string {
	b, _ := os.ReadFile(n.seen(filepath.Join(n.agents, "ocxd.log")))
	return string(b)
}

// logLine is one line of ocxd.log, as far as the tests read it.
type logLine struct {
	Msg    string `json:"msg"`
	Level  string `json:"level"`
	OCXD   int    `json:"ocxd"`
	Line   string `json:"line"`
	PID    string `json:"pid"`
	N      int64  `json:"n"`
	Point  string `json:"point"`
	Launch string `json:"launch"`
	Run    string `json:"run"`
	Status string `json:"status"`
	Signal string `json:"signal"`
	Stacks string `json:"stacks"`
	Woken  string `json:"woken"`
	Newest int64  `json:"newest"`
	Mark   int64  `json:"mark"`
	Why    string `json:"why"`
	// Dropped and Since: a notice of records dropped.
	Dropped int64  `json:"dropped"`
	Since   string `json:"since"`
	Ask     string `json:"ask"`
	From    string `json:"from"`
	Vouched int    `json:"vouched"`
}

// logIndex is the index in lines of the first line from `from` on that
// satisfies match, -1 when none does.
func logIndex(lines []logLine, from int, match func(logLine) bool) int {
	for i := max(from, 0); i < len(lines); i++ {
		if match(lines[i]) {
			return i
		}
	}
	return -1
}

// waitLogLine waits until the daemon's log holds a line that satisfies
// match, and returns the log as it was then.
func (n *testNode) waitLogLine(what string, match func(logLine) bool) []logLine {
	n.t.Helper()
	var lines []logLine
	n.waitFor(what, func() bool {
		lines = n.logLines()
		return logIndex(lines, 0, match) >= 0
	})
	return lines
}

// logLines reads ocxd.log; every line must be one JSON object.
func (n *testNode) logLines() []logLine {
	n.t.Helper()
	f, err := os.Open(n.seen(filepath.Join(n.agents, "ocxd.log")))
	if err != nil {
		n.t.Fatal(err)
	}
	defer f.Close()
	var out []logLine
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			// A last line without its newline is a record the daemon is
			// writing as this reads (one write(2), which a read may see
			// half of): the next read has it whole.
			break
		}
		var l logLine
		if err := json.Unmarshal(line, &l); err != nil {
			n.t.Fatalf("ocxd.log holds a line that is not one JSON object: %q: %v", line, err)
		}
		out = append(out, l)
	}
	return out
}

// notesOn returns the notes of type T on a thread, with their posts.
func notesOn[T messages.Note](n *testNode, root string) []struct {
	P    posted
	Note T
} {
	var out []struct {
		P    posted
		Note T
	}
	for _, p := range n.thread(root) {
		if note, ok := p.Note.(T); ok {
			out = append(out, struct {
				P    posted
				Note T
			}{p, note})
		}
	}
	return out
}

// endsOf returns the end notes the node user wrote for a launch.
func (n *testNode) endsOf(root, launch string) []*messages.EndNote {
	var out []*messages.EndNote
	for _, e := range notesOn[*messages.EndNote](n, root) {
		if e.Note.Launch == launch && e.P.Sender == "ocx" && e.P.InReplyTo == launch {
			out = append(out, e.Note)
		}
	}
	return out
}

// refusalsOf returns the refusal notes the node user wrote for a launch.
func (n *testNode) refusalsOf(root, launch string) []*messages.RefusalNote {
	var out []*messages.RefusalNote
	for _, e := range notesOn[*messages.RefusalNote](n, root) {
		if e.Note.Launch == launch && e.P.Sender == "ocx" && e.P.InReplyTo == launch {
			out = append(out, e.Note)
		}
	}
	return out
}

// serving finds the `workspace serve` process of a launch in /proc.
func (n *testNode) serving(launch string) (pid int, ok bool) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
		if len(args) > 1 && filepath.Base(args[0]) == "workspace" && args[1] == "serve" && strings.Contains(string(b), launch) {
			return p, true
		}
	}
	return 0, false
}

// ppidOf reads a process's parent.
func ppidOf(t testing.TB, pid int) int {
	st, err := unixhost.ReadStat(pid)
	if err != nil {
		t.Fatalf("read the stat of %d: %v", pid, err)
	}
	return st.PPID
}

// workspaceDir is a workspace's directory in the node's agents root.
func (n *testNode) workspaceDir(login string) string {
	return filepath.Join(n.agents, login, "projects", "demo")
}

// hooksFree fails the test when the node's repository holds a phantom (an
// artifact it names but lacks) or a hook embargo: Fossil then holds back its
// after-receive hooks, for 60 s after every push (fossil-2.21.md 4.3). OCX
// never writes an artifact naming one the server lacks; what the fossil
// command pushes is Fossil's own business, so a test that used it only logs
// what it finds.
func (n *testNode) hooksFree() {
	n.t.Helper()
	out, err := n.srv.Fossil("sql", "-R", n.srv.Repo,
		"SELECT 'phantom '||uuid FROM phantom JOIN blob USING(rid) UNION ALL SELECT 'embargo '||value FROM config WHERE name='hook-embargo'")
	if err != nil {
		n.t.Fatal(err)
	}
	// SQLite's notice that it recovered the WAL (the last connection to
	// close was the daemon's read-only one, which cannot checkpoint) goes
	// to the same output; it is no phantom.
	var kept []string
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "SQLITE_NOTICE") {
			kept = append(kept, line)
		}
	}
	s := strings.TrimSpace(strings.Join(kept, "\n"))
	switch {
	case s == "":
	case n.fossilClients:
		n.t.Logf("the node's repository holds back its hooks, after pushes by the fossil command:\n%s", s)
	default:
		n.t.Errorf("the node's repository holds back its hooks:\n%s", s)
	}
}

// psForest is the process forest, for a failure's message.
func psForest() string {
	out, err := exec.Command("ps", "-eo", "pid,ppid,stat,lstart,args", "--forest").Output()
	if err != nil {
		return "ps: " + err.Error()
	}
	return string(out)
}

// pipeWriter opens the daemon's pipe for writing, as the hook and the tools
// do; the caller closes it.
func (n *testNode) pipeWriter() *unixhost.LineWriter {
	n.t.Helper()
	w, err := n.openPipe()
	if err != nil {
		n.t.Fatal(err)
	}
	return w
}

// openPipe is pipeWriter for a writer that may find nobody reading.
func (n *testNode) openPipe() (*unixhost.LineWriter, error) {
	root, err := unixhost.OpenRoot(n.seen(n.agents))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return unixhost.OpenLineWriter(root, n.seen(filepath.Join(n.agents, "ocxd")))
}

// launchAgain posts, as the admin, a launch note repeating the record's
// first one (the same workspace and session definitions) and hands it to
// the daemon, as an older tool or a hand-written note would: `ocx session
// start` no longer launches beside a running session (a second start
// restarts, D33), so the daemon's own refusal of a launch into a workspace
// a process names is reached this way. It returns the note's hash.
func (n *testNode) launchAgain(record string) string {
	n.t.Helper()
	c := &fossilio.Client{URL: n.srv.URL, Login: n.srv.AdminLogin, Password: n.srv.AdminPassword, ProjectCode: n.srv.ProjectCode}
	var ln messages.LaunchNote
	if launches := notesOn[*messages.LaunchNote](n, record); len(launches) > 0 {
		ln = *launches[0].Note
	} else {
		// A session at a terminal wrote none: a session definition first,
		// and the workspace's definition as the host holds it.
		login := ""
		for _, p := range n.thread(record) {
			if d, ok := p.Note.(*messages.WorkspaceDefinition); ok {
				login = d.Login
			}
		}
		data, err := os.ReadFile(filepath.Join(n.workspaceDir(login), "binding.json"))
		if err != nil {
			n.t.Fatal(err)
		}
		b, err := messages.DecodeBinding(data)
		if err != nil {
			n.t.Fatal(err)
		}
		def := &messages.SessionDefinition{Kind: messages.Mechanical, Command: []string{"cat"}, Lifetime: messages.Stays}
		dblock, err := def.Encode()
		if err != nil {
			n.t.Fatal(err)
		}
		sdef, err := c.Reply(n.ctx, record, record, "Session, by hand.\n\n"+string(dblock))
		if err != nil {
			n.t.Fatal(err)
		}
		ln = messages.LaunchNote{Login: login, Project: "demo", Workspace: b.Workspace, Session: sdef, Release: messages.ReleaseCurrent}
	}
	block, err := ln.Encode()
	if err != nil {
		n.t.Fatal(err)
	}
	hash, err := c.Reply(n.ctx, record, record, fmt.Sprintf("Launch of the session %s in workspace `%s/%s`, again.\n\n%s", ln.Session[:10], ln.Login, ln.Project, block))
	if err != nil {
		n.t.Fatal(err)
	}
	n.send(pipe.PostLine{Repository: n.srv.Repo, Hash: hash}.String())
	return hash
}
