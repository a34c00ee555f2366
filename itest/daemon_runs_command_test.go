package itest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// The command step (issue 43 item 3, D99), end to end: a real fossil
// server, the hook, the daemon, bwrap. Section 5's steps, then a command
// step in $$tree$$, in the run's sandbox as uid 1000 and its limits.

// commandStepRun is a sandboxed run of builder: section 5's pattern, then
// a command step running script with sh in $$tree$$, then command.
func commandStepRun(node, script string, command []string) string {
	run, _ := json.Marshal([]string{"/bin/sh", "-c", script})
	cmd, _ := json.Marshal(command)
	return block(fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Build, then read what was built.",
"workspace": [
  {"step": "directory", "at": "$$root$$/$$user$$/projects/$$project$$/$$run$$"},
  {"step": "password"},
  {"step": "clone", "into": "$$workspace$$/clone"},
  {"step": "checkout", "of": "trunk", "into": "$$workspace$$/tree"},
  {"step": "command", "run": %s, "in": "$$tree$$"}],
"sandbox": {"uid": 1000, "gid": 1000, "capabilities": [], "network": false, "own_session": true,
  "ends_with_node": false, "read_only": ["/usr", "/bin", "/lib", "/lib64"], "read_write": ["$$workspace$$"], "homes": [],
  "files": [], "proc": "/proc", "dev": "/dev", "tmp": "/scratch"},
"limits": {"wall": "5m", "processes": 64},
"process": {"user": "builder", "command": %s, "cwd": "$$tree$$",
  "env": {"PATH": "/usr/bin:/bin", "HOME": "$$workspace$$", "STEP_SAYS": "the-run's-env"},
  "keep": {"stdout_when": "always"}}}`, node, run, cmd))
}

func newCommandStepNode(t *testing.T) *testNode {
	t.Helper()
	needs(t, "ocxd", "ocx")
	return newNodeWith(t, harness.User{Login: "builder", Password: "builder-pw-1", Caps: fossilio.AgentCaps})
}

// stepOutput is the node's reply holding a command step's output, or nil.
func stepOutput(n *testNode, root string) *runPost {
	node := n.nodeUser()
	for _, p := range n.runThread(root) {
		if p.Sender == node && p.Msg == nil && strings.Contains(p.Text, "a command step") {
			return &p
		}
	}
	return nil
}

func logThread(t *testing.T, n *testNode, root string) {
	for _, p := range n.runThread(root) {
		t.Logf("%s by %s:\n%s", p.Hash, p.Sender, p.Text)
	}
}

// TestRunCommandStep: (a) a command step writes a file into the checkout,
// as the sandbox's uid, with the run's environment, and the process reads
// it: ended exited 0, the kept logs show it, and the step's own output is
// posted before started; (c) the step sees none of the node's files
// outside its sandbox.
func TestRunCommandStep(t *testing.T) {
	n := newCommandStepNode(t)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	startDaemon(t, n, program("ocxd"))
	secret := filepath.Join(t.TempDir(), "node-secret")
	if err := os.WriteFile(secret, []byte("the node's own\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var probe []string
	// The node's files (its node.json, the repository) and a file of the
	// host's; the directories above the workspace are there, empty, as
	// the bind of $$workspace$$ makes them.
	for _, f := range []string{filepath.Join(n.agents, "node.json"), n.srv.Repo, secret, filepath.Join(n.agents, "ocxd.runs")} {
		probe = append(probe, fmt.Sprintf(`if test -e %[1]q; then echo "sees %[1]s"; else echo "hidden %[1]s"; fi`, f))
	}
	script := `echo built > out; echo "uid $(id -u) gid $(id -g)"; echo "env $STEP_SAYS"; echo "in $(pwd)"; ` +
		strings.Join(probe, "; ") + `; echo to-stderr >&2`
	root := n.result(admin, "thread", "--title", "Build", "--text", commandStepRun(node, script, []string{"cat", "out"}))
	n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })
	logThread(t, n, root)
	e := n.endedOf(root)
	if e.Outcome != runmsg.RunExited || e.Exit == nil || *e.Exit != 0 {
		t.Fatalf("ended %+v, want exited 0", e)
	}
	st := n.startedOf(root)
	tree := st.Values["tree"]
	out := stepOutput(n, root)
	if out == nil {
		t.Fatal("no reply holds the command step's output")
	}
	for _, want := range []string{"workspace[4], a command step", "uid 1000 gid 1000", "env the-run's-env", "in " + tree, "to-stderr", "Its end: exit 0."} {
		if !strings.Contains(out.Text, want) {
			t.Errorf("the step's output does not say %q", want)
		}
	}
	_, printed, _ := strings.Cut(out.Text, "```output\n")
	if strings.Contains(printed, "sees ") {
		t.Errorf("the step saw a node's file outside its sandbox:\n%s", printed)
	}
	if c := strings.Count(printed, "hidden "); c != 4 {
		t.Errorf("%d files hidden, want 4:\n%s", c, printed)
	}
	// The thread: the run, the step's output, started, the kept logs,
	// ended.
	posts := n.runThread(root)
	if len(posts) != 5 || posts[1].Hash != out.Hash {
		t.Fatalf("the thread holds %d posts, want the run, the step's output, started, the kept logs, ended", len(posts))
	}
	if _, ok := posts[2].Msg.(*runmsg.RunStarted); !ok {
		t.Errorf("the post after the step's output is not started: %s", posts[2].Text)
	}
	if logs := posts[3]; logs.Msg != nil || !strings.Contains(logs.Text, "```stdout\nbuilt\n```") {
		t.Errorf("the process's kept logs do not show what the step built:\n%s", logs.Text)
	}
	if b, err := os.ReadFile(filepath.Join(st.Values["workspace"], "step-4.log")); err != nil || !strings.Contains(string(b), "uid 1000") {
		t.Errorf("the step's log file: %q %v", b, err)
	}
}

// TestRunCommandStepFails: (b) a command step that exits 3 ends the run
// refused, naming the step and its exit; the process never runs; what
// the step printed is posted.
func TestRunCommandStepFails(t *testing.T) {
	n := newCommandStepNode(t)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	startDaemon(t, n, program("ocxd"))
	root := n.result(admin, "thread", "--title", "Fail", "--text",
		commandStepRun(node, `echo going to fail; exit 3`, []string{"/bin/sh", "-c", "echo the process ran"}))
	n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })
	logThread(t, n, root)
	e := n.endedOf(root)
	if e.Outcome != runmsg.RunRefused || !strings.Contains(e.Note, "workspace[4], a command step, failed") || !strings.Contains(e.Note, "exit 3") {
		t.Errorf("ended %+v, want refused naming workspace[4], a command step, and exit 3", e)
	}
	if n.startedOf(root) != nil {
		t.Error("a run whose command step failed was started")
	}
	out := stepOutput(n, root)
	if out == nil || !strings.Contains(out.Text, "going to fail") || !strings.Contains(out.Text, "Its end: exit 3.") {
		t.Errorf("the step's output is not posted: %+v", out)
	}
	for _, p := range n.runThread(root) {
		if strings.Contains(p.Text, "the process ran") && p.Hash != root {
			t.Errorf("the process ran:\n%s", p.Text)
		}
	}
}

// TestRunCommandStepStopped: a stop during a command step ends the step's
// process group at once (RunEndPreparing): the run ends stopped, never
// started, and nothing of the step is left running.
func TestRunCommandStepStopped(t *testing.T) {
	n := newCommandStepNode(t)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	startDaemon(t, n, program("ocxd"))
	root := n.result(admin, "thread", "--title", "Stop", "--text",
		commandStepRun(node, `echo waiting; touch started; sleep 611 & sleep 612; wait`, []string{"true"}))
	sleeping := func() []string {
		var left []string
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			b, _ := os.ReadFile(p)
			if s := string(b); s == "sleep\x00611\x00" || s == "sleep\x00612\x00" {
				left = append(left, p)
			}
		}
		return left
	}
	n.waitFor("the step's sleeps", func() bool { return len(sleeping()) == 2 || n.endedOf(root) != nil })
	if e := n.endedOf(root); e != nil {
		logThread(t, n, root)
		t.Fatalf("ended before the stop: %+v", e)
	}
	stoppedAt := time.Now()
	n.result(admin, "post", "--to", root, "--text", block(fmt.Sprintf(`{"ocx": 1, "kind": "stop", "node": %q, "run": %q}`, node, root)))
	n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })
	logThread(t, n, root)
	if e := n.endedOf(root); e.Outcome != runmsg.RunStopped {
		t.Errorf("ended %+v, want stopped", e)
	}
	if d := time.Since(stoppedAt); d > 30*time.Second {
		t.Errorf("ended %s after the stop", d)
	}
	if n.startedOf(root) != nil {
		t.Error("a run stopped in its command step was started")
	}
	n.waitLogLine("the preparation ended by the stop", func(l logLine) bool {
		return strings.Contains(l.Msg, "preparation is ended by its stop") && l.Run == root
	})
	if left := sleeping(); len(left) > 0 {
		t.Errorf("the step's processes are left: %v", left)
	}
	if out := stepOutput(n, root); out == nil || !strings.Contains(out.Text, "waiting") {
		t.Errorf("the stopped step's output is not posted: %+v", out)
	}
}
