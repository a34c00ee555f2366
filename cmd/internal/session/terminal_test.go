package session_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
)

func TestMechanicalInBwrap(t *testing.T) {
	n := newNode(t)
	w := n.workspace("box-1")
	// The command reports what the sandbox lets it see.
	cmd := []string{"sh", "-c", `read -r x || true
echo "said: $x from=${OCX_FROM:-unknown}"
[ -e ` + n.agents + `/node.json ] && echo "sees node.json" || echo "no node.json"
[ -e ` + n.srv.Repo + ` ] && echo "sees the repository" || echo "no repository"
echo "home=$HOME"`}
	r := w.record(messages.ListenThread, "Answer from the sandbox.", stays(cmd...), "")
	p := w.serve(r.launch, true)
	w.waitLog("event=ready", 1)
	h := w.post(n.admin, r, "boxed")
	w.wake(h)
	a := w.waitReply(r, h)
	// The sandbox cannot read the node, yet the session knows who sent the
	// post: the hook's wake line says it (D27).
	for _, want := range []string{"said: boxed from=" + n.srv.AdminLogin, "no node.json", "no repository", "home=" + w.ws.Dir} {
		if !strings.Contains(a.text, want) {
			t.Errorf("the sandboxed answer lacks %q:\n%s", want, a.text)
		}
	}
	if a.sender != w.login {
		t.Errorf("sent by %q", a.sender)
	}
	stop := w.post(n.admin, r, "```json\n{\"ocx\": \"stop\", \"reason\": \"enough\"}\n```\n")
	w.wake(stop)
	if code := p.wait(); code != 0 {
		t.Fatalf("the sandboxed session exited %d after a stop request:\n%s", code, w.logText())
	}
	if sn := w.stoppedNote(r); sn.Cause != messages.StopByRequest || sn.Request != stop {
		t.Errorf("stopped note %s", sn)
	}
}

// homeDefinition posts a session definition on the workspace's own record,
// as a terminal session finds it.
func (w *wsFixture) homeDefinition(def *messages.SessionDefinition) string {
	w.n.t.Helper()
	block, err := def.Encode()
	if err != nil {
		w.n.t.Fatal(err)
	}
	h, err := w.n.admin.Reply(w.n.ctx, w.home, w.home, string(block))
	if err != nil {
		w.n.t.Fatal(err)
	}
	return h
}

func TestRunAtATerminalUsesTheNewestDefinition(t *testing.T) {
	n := newNode(t)
	w := n.workspace("term-1")
	w.homeDefinition(stays("sh", "-c", "echo old definition"))
	w.homeDefinition(stays(echoCommand...))
	// dev, who may push but holds neither admin nor setup, pushes a newer
	// definition: it does not count (D7), and the terminal session says so.
	block, err := stays("sh", "-c", "echo dev's definition").Encode()
	if err != nil {
		t.Fatal(err)
	}
	data, err := fossilio.PostDraft{Date: time.Now(), User: n.srv.AdminLogin, Root: w.home, InReplyTo: w.home, Text: string(block)}.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	devDef, err := n.dev.Push(n.ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	home := rec{kind: messages.ListenThread, id: w.home, first: w.home}
	p := w.spawn([]string{filepath.Join(release, "workspace"), "run", w.key.String(), "--root", n.agents}, false, nil)
	w.waitLog("event=ready", 1)
	if log := w.logText(); !strings.Contains(log, devDef) || !strings.Contains(log, `was sent by \"dev\", who holds neither admin nor setup`) {
		t.Errorf("the terminal session does not say the newer definition does not count:\n%s", log)
	}
	h := w.post(n.admin, home, "at the terminal")
	w.wake(h)
	a := w.waitReply(home, h)
	// Outside the sandbox the node's repository tells who sent the post.
	if !strings.Contains(a.text, "said: at the terminal") || !strings.Contains(a.text, "from="+n.srv.AdminLogin) {
		t.Errorf("the terminal session's answer:\n%s", a.text)
	}
	// While it runs, a second session of the workspace is refused.
	code, stdout, stderr := runWorkspace(t, "start", w.key.String(), "--root", n.agents)
	if code != 1 || stdout != "" || !strings.Contains(stderr, "is in use") {
		t.Errorf("a second session beside a terminal session: exit %d, %q, %q", code, stdout, stderr)
	}
	// Ctrl-C at the terminal stops it, with a stopped note and no launch.
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d after SIGINT", code)
	}
	sn := w.stoppedNote(home)
	if sn.Cause != messages.StopBySignal || sn.Signal != "SIGINT" || sn.Launch != "" {
		t.Errorf("stopped note %s", sn)
	}
}

func TestStartDetachesAndPrintsThePID(t *testing.T) {
	n := newNode(t)
	w := n.workspace("term-2")
	r := w.record(messages.ListenTicket, "Work on this ticket.", stays(echoCommand...), "")
	code, stdout, stderr := runWorkspace(t, "start", w.key.String(), "--root", n.agents, "--session", r.def)
	if code != 0 {
		t.Fatalf("start exited %d: %s\n%s", code, stderr, w.logText())
	}
	pid, err := strconv.Atoi(strings.TrimSpace(stdout))
	if err != nil {
		t.Fatalf("start printed %q, not a PID", stdout)
	}
	harness.Track(t, pid)
	t.Cleanup(func() {
		if harness.Alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		killNaming(t, w.ws.Dir)
	})
	// It is detached: a session and process group of its own, the command
	// line naming its workspace and root, its output in the session's log.
	sid, pgid := statField(t, pid, 6), statField(t, pid, 5)
	if sid != pid || pgid != pid {
		t.Errorf("the detached session's group %d and session %d, want its own PID %d", pgid, sid, pid)
	}
	argv, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(argv), "\x00start\x00"+w.key.String()+"\x00--root\x00"+n.agents+"\x00") {
		t.Errorf("its command line %q", argv)
	}
	h := w.post(n.admin, r, "detached")
	w.wake(h)
	if a := w.waitReply(r, h); !strings.Contains(a.text, "said: detached") {
		t.Errorf("the answer:\n%s", a.text)
	}
	// Its log is WS/session/log (the line comes once the write returned).
	w.waitLog("event=answered post="+h, 1)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitFor)
	for harness.Alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the detached session did not end on TERM:\n%s", w.logText())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if sn := w.stoppedNote(r); sn.Cause != messages.StopBySignal || sn.Signal != "SIGTERM" || sn.Launch != "" {
		t.Errorf("stopped note %s", sn)
	}
}

// statField reads field i (1-based, after the command name: 3 is the state)
// of /proc/PID/stat as a number.
func statField(t *testing.T, pid, i int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	v, err := strconv.Atoi(f[i-3])
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestTermInBwrap stops a sandboxed session as the daemon does: TERM to the
// process group of bwrap's init, inside the sandbox (docs/host.md §5).
func TestTermInBwrap(t *testing.T) {
	n := newNode(t)
	w := n.workspace("box-2")
	// Seed 000's own read-only list, narrower than all of /etc, with this
	// test's release in place of /var/lib/ocx/release/current.
	w.sandbox.ReadOnly = []string{"/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc/ssl", "/etc/pki",
		"/etc/ca-certificates", "/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/passwd",
		"/etc/group", "/opt", release}
	r := w.record(messages.ListenThread, "Wait in the sandbox.", stays(echoCommand...), "")
	p := w.serve(r.launch, true)
	w.waitLog("event=ready", 1)
	h := w.post(n.admin, r, "narrow")
	w.wake(h)
	if a := w.waitReply(r, h); !strings.Contains(a.text, "said: narrow") {
		t.Errorf("the answer from seed 000's sandbox:\n%s", a.text)
	}
	initPID := p.sandboxInit()
	if err := syscall.Kill(-initPID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("bwrap exited %d after TERM to the sandbox's group:\n%s", code, w.logText())
	}
	if st := p.bwrapStatus(); !st.Exited || st.ExitCode != 0 {
		t.Errorf("bwrap's status %+v, want the session's exit 0", st)
	}
	if sn := w.stoppedNote(r); sn.Cause != messages.StopBySignal || sn.Signal != "SIGTERM" || sn.Launch != r.launch {
		t.Errorf("stopped note %s", sn)
	}
}

// TestOneSessionHoldsTheWorkspace: two `workspace serve` of one workspace
// at once, in their sandboxes, as two launches in the same moment would
// make them (the process table cannot see a session whose exec is under
// way): the second exits 1 saying the workspace is in use and touches
// nothing; the first runs on and answers. Once the first has ended, the
// next one starts.
func TestOneSessionHoldsTheWorkspace(t *testing.T) {
	n := newNode(t)
	w := n.workspace("lock-1")
	r := w.record(messages.ListenThread, "Answer what is said here.", stays(echoCommand...), "")
	first := w.serve(r.launch, true)
	w.waitLog("event=ready", 1)

	second := w.serve(r.launch, true)
	if code := second.wait(); code != 1 {
		t.Fatalf("a second session in the workspace exited %d, want 1:\n%s", code, w.logText())
	}
	if !strings.Contains(w.logText(), "workspace lock-1/demo is in use: another session holds its lock") {
		t.Errorf("the second session does not say why it did not run:\n%s", w.logText())
	}
	if strings.Count(w.logText(), "event=listening") != 1 {
		t.Errorf("the second session listened:\n%s", w.logText())
	}
	if !first.running() {
		t.Fatalf("the first session ended:\n%s", w.logText())
	}
	h := w.post(n.admin, r, "still there")
	w.wake(h)
	if a := w.waitReply(r, h); !strings.Contains(a.text, "still there") {
		t.Errorf("the first session's answer: %q", a.text)
	}

	stop := w.post(n.admin, r, "```json\n{\"ocx\": \"stop\", \"reason\": \"enough\"}\n```\n")
	w.wake(stop)
	if code := first.wait(); code != 0 {
		t.Fatalf("the first session exited %d after a stop request:\n%s", code, w.logText())
	}
	third := w.serve(r.launch, true)
	w.waitLog("event=ready", 2)
	stop = w.post(n.admin, r, "```json\n{\"ocx\": \"stop\", \"reason\": \"enough again\"}\n```\n")
	w.wake(stop)
	if code := third.wait(); code != 0 {
		t.Fatalf("the session after the first exited %d:\n%s", code, w.logText())
	}
}

// TestWallAtATerminal: a terminal session (no daemon watches it) is held to
// its definition's limits.wall by its own timer (D40): past it, in the
// middle of a turn that would run on, the turn gets TERM, its answer is
// written, and the stopped note says cause budget, limit wall.
func TestWallAtATerminal(t *testing.T) {
	n := newNode(t)
	w := n.workspace("term-wall")
	def := stays("sh", "-c", "echo turn begins; sleep 30; echo never")
	def.Limits = &messages.SessionLimits{Wall: "4s"}
	w.homeDefinition(def)
	home := rec{kind: messages.ListenThread, id: w.home, first: w.home}
	start := time.Now()
	p := w.spawn([]string{filepath.Join(release, "workspace"), "run", w.key.String(), "--root", n.agents}, false, nil)
	w.waitLog("event=ready", 1)
	h := w.post(n.admin, home, "run long")
	w.wake(h)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d past its wall:\n%s", code, w.logText())
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the session ran %s with a wall of 4s", took)
	}
	sn := w.stoppedNote(home)
	if sn.Cause != messages.StopByBudget || sn.Budget != messages.LimitWall || sn.Signal != "" {
		t.Errorf("stopped note %s, want cause budget, budget wall", sn)
	}
	if a := w.waitReply(home, h); !strings.Contains(a.text, "turn begins") || strings.Contains(a.text, "never") || !strings.Contains(a.text, "SIGTERM") {
		t.Errorf("the turn cut short by the wall answered:\n%s", a.text)
	}
}
