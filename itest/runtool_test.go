package itest

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/ocx-go/ocx/messages/runmsg"
)

// OCX's run tool (ocx run), end to end: a real fossil server, the hook,
// the daemon and the run's real process.

func manualRun(node, command string) string {
	return fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Wait for a person.",
"process": {"user": "builder", "command": ["sh", "-c", %q], "env": {"PATH": "/usr/bin:/bin"}, "manual": true,
"keep": {"stdout_when": "always"}}}`, node, command)
}

// waiting waits until the daemon has taken the manual run root as
// waiting: its log says so, so that what the test then finds not written
// was not written by a daemon that had read the run.
func (n *testNode) waiting(root string) {
	n.t.Helper()
	n.waitLogLine("the manual run to wait", func(l logLine) bool {
		return l.Msg == "a manual run waits for a start by admin or setup" && l.Run == root
	})
}

// barrier waits until the daemon has acted on every line written to its
// pipe before it: it reads its lines in order, and the `runs check` sent
// now is logged once it is done.
func (n *testNode) barrier() {
	n.t.Helper()
	at := 0
	for _, l := range n.logLines() {
		if strings.Contains(l.Msg, "runs are checked") {
			at++
		}
	}
	n.send("runs check")
	n.waitFor("the daemon to act on every line before a runs check", func() bool {
		seen := 0
		for _, l := range n.logLines() {
			if strings.Contains(l.Msg, "runs are checked") {
				seen++
			}
		}
		return seen > at
	})
}

// TestRunToolManualStart: a manual run waits, with no started, until the
// admin's ocx run start (seed 004, section 8; table 10, waiting); a start
// by a user without admin or setup is refused, naming why, and the run
// keeps waiting; then started, kept logs and ended exited 0.
func TestRunToolManualStart(t *testing.T) {
	needs(t, "ocxd")
	n := newNode(t)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	startDaemon(t, n, program("ocxd"))
	root := n.result(admin, "run", "post", "--message", manualRun(node, "echo started by hand"))
	n.waiting(root)
	if s := n.startedOf(root); s != nil {
		t.Fatalf("a manual run started before anyone started it: %+v", s)
	}
	if e := n.endedOf(root); e != nil {
		t.Fatalf("a manual run ended before anyone started it: %+v", e)
	}
	if out := n.must("", "run", "status", root).stdout; !strings.Contains(out, root+" waiting") {
		t.Errorf("ocx run status does not say waiting:\n%s", out)
	}

	a, r := n.answer(person, "run", "start", root)
	if a.Stopped == nil || !strings.Contains(*a.Stopped, "admin") {
		t.Fatalf("a start by %s was not refused naming admin or setup: %s", person, r)
	}
	n.barrier()
	if s := n.startedOf(root); s != nil {
		t.Fatalf("a refused start started the run: %+v", s)
	}

	started := n.result(admin, "run", "start", root)
	st := n.startedOf(root)
	if st == nil || st.Run != root {
		t.Fatalf("no started after the admin's start (answer %s)", started)
	}
	n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })
	e := n.endedOf(root)
	if e.Outcome != runmsg.RunExited || e.Exit == nil || *e.Exit != 0 {
		t.Errorf("ended %+v, want exited 0", e)
	}
	logs := false
	for _, p := range n.runThread(root) {
		if p.Msg == nil && p.Sender == node && strings.Contains(p.Text, "```stdout\nstarted by hand\n```") {
			logs = true
		}
	}
	if !logs {
		t.Errorf("no kept logs holding the run's output: %+v", n.runThread(root))
	}
	if out := n.must("", "run", "status", root).stdout; !strings.Contains(out, root+" ended") || !strings.Contains(out, "exited exit 0") {
		t.Errorf("ocx run status does not say ended exited 0:\n%s", out)
	}
	// A second start is refused: the run has started.
	if a, r := n.answer(admin, "run", "start", root); a.Stopped == nil || !strings.Contains(*a.Stopped, "ended") {
		t.Errorf("a start of an ended run was not refused naming that: %s", r)
	}
}

// TestRunToolStopWaiting: ocx run stop of a waiting manual run by a user
// without admin or setup is refused before anything is written; by the
// admin, the run ends stopped with no started (table 10: waiting, a stop).
func TestRunToolStopWaiting(t *testing.T) {
	needs(t, "ocxd")
	n := newNode(t)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	startDaemon(t, n, program("ocxd"))
	root := n.result(admin, "run", "post", "--message", manualRun(node, "echo never"))
	n.waiting(root)

	a, r := n.answer(person, "run", "stop", root)
	if a.Stopped == nil || !strings.Contains(*a.Stopped, "admin") || a.Result != nil {
		t.Fatalf("a stop by %s was not refused naming admin or setup: %s", person, r)
	}
	if posts := n.runThread(root); len(posts) != 1 {
		t.Fatalf("a refused stop wrote something: %d posts", len(posts))
	}

	n.result(admin, "run", "stop", root)
	n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })
	if e := n.endedOf(root); e.Outcome != runmsg.RunStopped || e.Exit != nil {
		t.Errorf("ended %+v, want stopped", e)
	}
	if s := n.startedOf(root); s != nil {
		t.Errorf("a stopped waiting run was started: %+v", s)
	}
	if a, r := n.answer(admin, "run", "stop", root); a.Stopped == nil || !strings.Contains(*a.Stopped, "ended") {
		t.Errorf("a stop of an ended run was not refused naming that: %s", r)
	}
}

// TestRunToolCheckPrintsLost: the daemon killed while a run's process
// runs, the process killed; ocx run check starts the daemon, whose check
// ends the run lost, and prints it (seed 002, "check the node's runs").
func TestRunToolCheckPrintsLost(t *testing.T) {
	needs(t, "ocxd")
	n := newNode(t)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	d := startDaemon(t, n, program("ocxd"))
	run := fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Wait.",
"process": {"user": "builder", "command": ["sleep", "600"], "env": {"PATH": "/usr/bin:/bin"}}}`, node)
	root := n.result(admin, "run", "post", "--message", run)
	id := n.heldRun(root)
	d.kill9()
	syscall.Kill(id.PID, syscall.SIGKILL)
	n.waitFor("the run's process gone", func() bool { return !procAlive(id) })

	a, r := n.answer("", "run", "check")
	if a.Stopped != nil || a.Result == nil {
		t.Fatalf("ocx run check: %s", r)
	}
	if !strings.Contains(strings.Join(a.Log, "\n"), "ended lost run "+root) {
		t.Errorf("ocx run check does not print the run it ended lost: %s", r)
	}
	if e := n.endedOf(root); e == nil || e.Outcome != runmsg.RunLost {
		t.Errorf("ended %+v, want lost", e)
	}
	// Again: nothing more to end.
	a, r = n.answer("", "run", "check")
	if a.Stopped != nil || !strings.Contains(strings.Join(a.Log, "\n"), "no run of this node is to end lost") {
		t.Errorf("a second check: %s", r)
	}
}
