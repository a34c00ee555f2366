package itest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// TestRunOutlivesTheDaemon: a run's process is its holder's, its watcher's
// (seed 002, "watch a run"), never the daemon's: a feeding session goes on
// while its daemon is killed outright, and while a daemon re-execs. The
// daemon started again, and the re-exec's new image, take the run back
// from its care file and feed it what it hears, and its own exit then ends
// it exited with its code: every line given once, in the server's order
// (section 9), one ended.
func TestRunOutlivesTheDaemon(t *testing.T) {
	needs(t, "ocxd", "ocx")
	n := newNode(t)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	d := startDaemon(t, n, program("ocxd"), "--grace", "2s")
	// What the session read so far, for the test to see while it runs.
	heard := filepath.Join(t.TempDir(), "heard")
	run := fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Echo what is said.",
"process": {"user": "builder", "command": ["sh", "-c", "while read l; do echo \"got $l\"; echo \"$l\" >> %s; case \"$l\" in *farewell*) exit 7;; esac; done"],
"env": {"PATH": "/usr/bin:/bin"}, "session": true, "hears": ["alice"], "keep": {"stdout_when": "always"}}}`, node, heard)
	root := n.result(admin, "thread", "--title", "Echo", "--text", block(run))
	holder := n.heldRun(root)
	var want []string
	say := func(text string) {
		t.Helper()
		h := n.result(person, "post", "--to", root, "--text", text)
		want = append(want, n.postLine(h, person, text))
	}
	given := func(what string) {
		t.Helper()
		last := want[len(want)-1]
		n.waitFor("the session given "+what, func() bool {
			b, _ := os.ReadFile(heard)
			return strings.Contains(string(b), last+"\n")
		})
	}

	say("one")
	given("the first post")
	d.kill9()
	if !procAlive(holder) {
		t.Fatalf("the run's holder %s did not outlive the daemon", holder)
	}
	d = startDaemon(t, n, program("ocxd"), "--grace", "2s")
	say("two")
	given("a post after the daemon started again")

	n.send("reexec")
	n.waitFor("the re-exec's new image", func() bool {
		for _, l := range n.logLines() {
			if l.Msg == "re-exec: running the new image" && l.OCXD == d.pid() {
				return true
			}
		}
		return false
	})
	say("three, after the re-exec")
	given("a post after the re-exec")
	if !procAlive(holder) {
		t.Fatalf("the run's holder %s did not outlive the re-exec", holder)
	}
	say("farewell")
	n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })
	e := n.endedOf(root)
	if e.Outcome != runmsg.RunExited || e.Exit == nil || *e.Exit != 7 {
		t.Errorf("ended %+v, want exited 7 (the process's own exit, read from its holder)", e)
	}
	n.waitFor("the holder gone", func() bool { return !procAlive(holder) })

	n.expectFed(root, want)
	count := 0
	for _, p := range n.runThread(root) {
		if _, ok := p.Msg.(*runmsg.RunEnded); ok {
			count++
		}
	}
	if count != 1 {
		t.Errorf("%d ended in the thread, want 1", count)
	}
}

// TestRunOneAtATimeForEachUser: the server's node sets a run user's
// password afresh in the password step, so "it runs one run at a time for
// each user" (seed 004, section 5): a second run of runner waits, started
// only once the first has ended (seed 002: "a watcher that ends hands on
// the next waiting run of its user"), and its clone then pulls with the
// password it set; a third, stopped while it waits, ends stopped and is
// never started. Another user's run does not wait.
func TestRunOneAtATimeForEachUser(t *testing.T) {
	needs(t, "ocxd", "ocx")
	n := newNodeWith(t, harness.User{Login: "runner", Password: "runner-pw-1", Caps: fossilio.AgentCaps},
		harness.User{Login: "other", Password: "other-pw-1", Caps: fossilio.AgentCaps})
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	startDaemon(t, n, program("ocxd"), "--grace", "2s")
	run := func(user, command string) string {
		return block(fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Hold the clone.",
"workspace": [
  {"step": "directory", "at": "$$root$$/$$user$$/projects/$$project$$/$$run$$"},
  {"step": "password"},
  {"step": "clone", "into": "$$workspace$$/clone"}
],
"process": {"user": %q, "command": %s, "env": {"PATH": "/usr/bin:/bin", "HOME": "$$workspace$$"}}}`, node, user, command))
	}
	waits := func(hash string) func() bool {
		return func() bool {
			for _, l := range n.logLines() {
				if strings.Contains(l.Msg, "waits for its user's run before it") && l.Run == hash {
					return true
				}
			}
			return false
		}
	}
	first := n.result(admin, "thread", "--title", "first", "--text", run("runner", `["sleep", "600"]`))
	n.heldRun(first)
	second := n.result(admin, "thread", "--title", "second", "--text", run("runner", `["fossil", "pull", "-R", "$$clone$$"]`))
	n.waitFor("the second run waiting for the first", waits(second))
	third := n.result(admin, "thread", "--title", "third", "--text", run("runner", `["true"]`))
	n.waitFor("the third run waiting", waits(third))
	elsewhere := n.result(admin, "thread", "--title", "another user", "--text", run("other", `["true"]`))
	n.waitFor("another user's run ended", func() bool { return n.endedOf(elsewhere) != nil })
	if e := n.endedOf(elsewhere); e.Outcome != runmsg.RunExited {
		t.Errorf("another user's run ended %+v, want exited", e)
	}
	if n.startedOf(second) != nil || n.startedOf(third) != nil {
		t.Fatal("a run of runner was started while its first run ran")
	}

	stop := func(root string) {
		n.result(admin, "post", "--to", root, "--text", block(fmt.Sprintf(`{"ocx": 1, "kind": "stop", "node": %q, "run": %q}`, node, root)))
	}
	stop(third)
	n.waitFor("the waiting third run's ended", func() bool { return n.endedOf(third) != nil })
	if e := n.endedOf(third); e.Outcome != runmsg.RunStopped || n.startedOf(third) != nil {
		t.Errorf("the third run, stopped while it waited, ended %+v (started %v), want stopped and never started", e, n.startedOf(third) != nil)
	}
	stop(first)
	n.waitFor("the first run's ended", func() bool { return n.endedOf(first) != nil })
	n.waitFor("the second run's ended", func() bool { return n.endedOf(second) != nil })
	if e := n.endedOf(second); e.Outcome != runmsg.RunExited || e.Exit == nil || *e.Exit != 0 {
		t.Errorf("the second run (a pull with the password its step set) ended %+v, want exited 0", e)
	}
	// Started only after the first's ended, in the server's order.
	_, startedSecond := nodeAnswer[runmsg.RunStarted](n, second)
	_, endedFirst := nodeAnswer[runmsg.RunEnded](n, first)
	if n.posAt(startedSecond).Before(n.posAt(endedFirst)) {
		t.Error("the second run's started came before the first run's ended")
	}
}
