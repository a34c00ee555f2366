package itest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/nodesock"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// stallBound is issue 38's own acceptance: a command a person runs while
// the daemon is stopped returns within a second.
const stallBound = time.Second

// TestAStoppedDaemonStallsNoWriter is issue 38 item 4 (D75): with the
// daemon stopped (SIGSTOP, by its PID) and a stays session listening on a
// thread, `ocx post` into the thread returns within a second and the
// session answers while the daemon is still stopped (the hook, given no
// answer on the daemon's socket in nodesock.AnswerWait, does its work
// itself); so do a status, the runs and a console page, each read by the
// caller itself. Once the daemon goes on (SIGCONT), it finds every ask
// left on its socket given up and does none of their work, and acts on
// the hook's pipe lines once: the post woke the session once, got one
// answer, no unheard note, one line read.
func TestAStoppedDaemonStallsNoWriter(t *testing.T) {
	needs(t, "ocx", "ocxd", "workspace", host.HookProgram, host.ConsoleProgram)
	n := consoleNode(t)
	n.must("", "hook", "install")
	d := startDaemon(t, n, program("ocxd"), "--grace", "1s")
	n.waitLogLine("the daemon to serve its socket", func(l logLine) bool { return l.Msg == "serving the daemon's socket" })
	record, launch, _, _ := startSession(t, n, d.pid(), agent)
	n.waitFor("the session to listen", func() bool {
		st := n.status()
		return len(st.Sessions) == 1 && st.Sessions[0].Listening
	})
	v := n.viewer(n.srv.AdminLogin)
	if code, body := v.get("sessions"); code != 200 || strings.Contains(body, `id="ocx-read-itself"`) {
		t.Fatalf("the sessions page with the daemon up: %d\n%s", code, body)
	}

	pid := d.pid()
	stopped := func() bool {
		st, err := unixhost.ReadStat(pid)
		return err == nil && st.State == 'T'
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Before the daemon's own stop (cleanups run last first): a stopped
	// daemon would not take its TERM.
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	n.waitFor("the daemon to stop", stopped)
	// A command that waited for the daemon would wait until it goes on:
	// the test makes it go on after 15 s, to fail on the measure rather
	// than hang, and stops it again for the next.
	timed := func(what string, f func()) {
		t.Helper()
		if !stopped() {
			syscall.Kill(pid, syscall.SIGSTOP)
			n.waitFor("the daemon to stop again", stopped)
		}
		watchdog := time.AfterFunc(15*time.Second, func() { syscall.Kill(pid, syscall.SIGCONT) })
		defer watchdog.Stop()
		start := time.Now()
		f()
		took := time.Since(start)
		t.Logf("with the daemon stopped, %s took %v", what, took)
		if took > stallBound {
			t.Errorf("with the daemon stopped, %s took %v (the bound is %v)", what, took, stallBound)
		}
	}
	var st *messages.NodeState
	timed("ocx status", func() { st = n.status() })
	if len(st.Sessions) != 1 || !st.Sessions[0].Listening {
		t.Errorf("the status read while the daemon is stopped: %+v", st.Sessions)
	}
	timed("ocx run status", func() { n.must("", "run", "status", "--json") })
	timed("a console page", func() {
		code, body := v.get("sessions")
		if code != 200 || !strings.Contains(body, `id="ocx-read-itself"`) || !strings.Contains(body, `data-ocx-session="`+key(agent)+`"`) {
			t.Errorf("the sessions page with the daemon stopped: %d, served by itself %v",
				code, strings.Contains(body, `id="ocx-read-itself"`))
		}
	})
	var hello string
	timed("ocx post", func() { hello = n.result(person, "post", "--to", record, "--text", "while stopped") })
	answer := n.awaitReply(record, hello)
	if !strings.Contains(answer.Text, "echo: while stopped") {
		t.Errorf("the session's answer: %q", answer.Text)
	}
	if !stopped() {
		t.Fatalf("the daemon went on before the session answered: the test measured nothing")
	}

	// Each ask the daemon took no part of is one the caller gave up (the
	// hook's log, or the console's page, says why); once it goes on, the
	// daemon finds each given up and does none of it.
	hookLog := func() string {
		b, _ := os.ReadFile(filepath.Join(n.agents, "hook.log"))
		return string(b)
	}
	fellBack := strings.Count(hookLog(), "the daemon took no ask")
	if fellBack == 0 {
		t.Fatalf("no hook fell back for want of the daemon's answer; the hook's log:\n%s", hookLog())
	}
	// The asks left on the stopped daemon's socket, each in its backlog:
	// the hooks', and one each of the status, the runs and the page (the
	// console's fallback does not ask again).
	layout, err := host.NewLayout(n.agents)
	if err != nil {
		t.Fatal(err)
	}
	queued := backlog(t, layout.Socket())
	if queued != fellBack+3 {
		t.Errorf("%d asks wait on the stopped daemon's socket, want %d: the hooks' %d, and one each of the status, the runs and the page", queued, fellBack+3, fellBack)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	gaveUp := func() map[string]int {
		by := map[string]int{}
		for _, l := range n.logLines() {
			if l.Msg == nodesock.GaveUp {
				by[l.Ask]++
				by[""]++
			}
		}
		return by
	}
	n.waitFor("the daemon to find each ask left on its socket given up", func() bool { return gaveUp()[""] >= queued })
	if by := gaveUp(); by["hook"] != fellBack || by["status"] != 1 || by["runs"] != 1 || by["page"] != 1 {
		t.Errorf("the asks found given up: %v; want %d hook, 1 status, 1 runs, 1 page", by, fellBack)
	}
	n.waitLogLine("the daemon to read the session's answer's line", func(l logLine) bool {
		return l.Msg == "read" && strings.HasSuffix(l.Line, " "+answer.Hash)
	})

	// Once each.
	answers, unheard := 0, 0
	for _, p := range n.thread(record) {
		if p.InReplyTo == hello && p.Sender == agent {
			if _, ok := p.Note.(*messages.UnheardNote); ok {
				unheard++
			} else {
				answers++
			}
		}
	}
	if answers != 1 || unheard != 0 {
		t.Errorf("the post got %d answers and %d unheard notes, want 1 and 0", answers, unheard)
	}
	if woke := strings.Count(hookLog(), "msg=woke post="+hello); woke != 1 {
		t.Errorf("the post woke the session %d times in the hook's log, want 1:\n%s", woke, hookLog())
	}
	sessionLog, _, err := unixhost.Below(n.agents).ReadTail(filepath.Join(n.workspaceDir(agent), "session", "log"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	for _, l := range strings.Split(string(sessionLog), "\n") {
		if strings.Contains(l, `msg="wake read"`) && strings.Contains(l, hello) {
			reads++
		}
	}
	if reads != 1 {
		t.Errorf("the session read the post's wake %d times, want 1:\n%s", reads, sessionLog)
	}
	read := 0
	for _, l := range n.logLines() {
		if l.Msg == "read" && strings.HasSuffix(l.Line, " "+hello) {
			read++
		}
	}
	if read != 1 {
		t.Errorf("the daemon read the post's line %d times, want 1:\n%s", read, n.daemonLog())
	}
	// The session's end recorded before the daemon's own stop: a stop
	// while the daemon's end note runs its backoffice waits for the hook
	// that backoffice runs.
	n.must("", "session", "stop", key(agent))
	n.waitLogLine("the session's end note", func(l logLine) bool { return l.Msg == "wrote a end note" && l.Launch == launch })
}

// backlog is how many connections wait in the listen queue of the Unix
// socket at path, none of them taken (ss's Recv-Q of a listener): those a
// stopped daemon has not accepted.
func backlog(t *testing.T, path string) int {
	t.Helper()
	out, err := exec.Command("ss", "-xlH", "src", path).Output()
	if err != nil {
		t.Fatalf("ss (iproute2) lists the socket's queue: %v", err)
	}
	f := strings.Fields(string(out))
	if len(f) < 5 || f[1] != "LISTEN" || f[4] != path {
		t.Fatalf("ss lists no listener at %s: %q", path, out)
	}
	q, err := strconv.Atoi(f[2])
	if err != nil {
		t.Fatalf("ss's queue of %s: %q", path, out)
	}
	return q
}
