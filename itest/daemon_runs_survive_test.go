package itest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages"
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
	var holder messages.ProcID
	n.waitFor("the run's holder", func() bool {
		var ok bool
		holder, ok = n.runCare(root)
		return ok && n.startedOf(root) != nil
	})
	killAtEnd(t, holder)
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
	if e.Outcome != messages.RunExited || e.Exit == nil || *e.Exit != 7 {
		t.Errorf("ended %+v, want exited 7 (the process's own exit, read from its holder)", e)
	}
	n.waitFor("the holder gone", func() bool { return !procAlive(holder) })

	outs := n.keptStdouts(root)
	if len(outs) != 1 {
		t.Fatalf("%d kept STDOUT blocks, want 1: %q", len(outs), outs)
	}
	lines := strings.Split(strings.TrimSuffix(outs[0], "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], `got {"run"`) {
		for _, p := range n.runThread(root) {
			t.Logf("%s: %s", p.Sender, p.Text)
		}
		t.Fatalf("the kept STDOUT does not begin with the first line: %q", outs[0])
	}
	var got []string
	for _, l := range lines[1:] {
		got = append(got, strings.TrimPrefix(l, "got "))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the session got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	count := 0
	for _, p := range n.runThread(root) {
		if _, ok := p.Msg.(*messages.RunEnded); ok {
			count++
		}
	}
	if count != 1 {
		t.Errorf("%d ended in the thread, want 1", count)
	}
}
