package itest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// Two nodes against one fossil server (issue 16, item 11): two agents
// roots, two node users, one repository. Both nodes live on this host and
// read the server's repository file; the hook installed on it runs each
// node's hook in turn, each with its own mark.

// newSecondNode makes a second node of n's server: its own agents root made
// by `ocx init --node-user user` on the same repository, and the one hook
// of the repository set to wake both nodes.
func newSecondNode(t *testing.T, n *testNode, user string) *testNode {
	t.Helper()
	b := &testNode{t: t, ctx: context.Background(), srv: n.srv, agents: filepath.Join(t.TempDir(), "agents"), pw: n.pw}
	t.Cleanup(b.shutdown)
	b.must("", "init", "--project", "demo="+n.srv.Repo+","+n.srv.URL, "--release", relRoot, "--node-user", user)
	b.must("", "hook", "install")
	// The hook was installed already (A's), so B's install wrote no mark
	// of its own: B starts where A is, missing nothing after it.
	mark, err := os.ReadFile(filepath.Join(n.agents, "hook.mark.demo"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.agents, "hook.mark.demo"), mark, 0o600); err != nil {
		t.Fatal(err)
	}
	// One after-receive hook per repository is OCX's: make it run both
	// nodes' hooks, each under its own mark in its own agents root.
	line := hookLine(n) + "; " + hookLine(b)
	if err := (&fossilio.Admin{Repository: n.srv.Repo}).InstallHook(n.ctx, line); err != nil {
		t.Fatal(err)
	}
	return b
}

func hookLine(n *testNode) string {
	return "'" + program(host.HookProgram) + "' --agents '" + n.agents + "' --repo %R"
}

// threadBy counts the posts of a thread each user wrote.
func threadBy(n *testNode, root string) map[string]int {
	out := map[string]int{}
	for _, p := range n.runThread(root) {
		out[p.Sender]++
	}
	return out
}

// TestRunTwoNodes: each node answers only the runs naming it (its node
// field), and a run user bound to node A (its first run an admin sent
// named A) is refused by node B, ended's note naming node A (section 11,
// row 5); the user of a run is never a node's own either (row 4).
func TestRunTwoNodes(t *testing.T) {
	needs(t, "ocxd")
	a := newNode(t)
	b := newSecondNode(t, a, "nodeb")
	admin := a.srv.AdminLogin
	nodeA, nodeB := a.nodeUser(), b.nodeUser()
	if nodeA == nodeB {
		t.Fatalf("both nodes are %s", nodeA)
	}
	startDaemon(t, a, program("ocxd"))
	startDaemon(t, b, program("ocxd"))

	echo := func(node, user, word string) string {
		return block(fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Say %s.",
"process": {"user": %q, "command": ["echo", %q], "env": {"PATH": "/usr/bin:/bin"}, "keep": {"stdout_when": "always"}}}`, node, word, user, word))
	}
	// builder's first run names A: builder works for A from now on.
	runA := a.result(admin, "thread", "--title", "For A", "--text", echo(nodeA, "builder", "from-a"))
	// runner's first run names B.
	runB := a.result(admin, "thread", "--title", "For B", "--text", echo(nodeB, "runner", "from-b"))
	a.waitFor("A's run ended", func() bool { return a.endedOf(runA) != nil })
	b.waitFor("B's run ended", func() bool { return b.endedOf(runB) != nil })
	if e := a.endedOf(runA); e.Outcome != runmsg.RunExited || e.Exit == nil || *e.Exit != 0 {
		t.Errorf("A's run ended %+v, want exited 0", e)
	}
	if e := b.endedOf(runB); e.Outcome != runmsg.RunExited || e.Exit == nil || *e.Exit != 0 {
		t.Errorf("B's run ended %+v, want exited 0", e)
	}
	if s := b.startedOf(runB); s == nil || s.Values["node"] != nodeB {
		t.Errorf("B's started %+v, want values.node %s", s, nodeB)
	}

	// Row 5: a run for B with builder, who works for A.
	bound := a.result(admin, "thread", "--title", "builder for B", "--text", echo(nodeB, "builder", "nope"))
	b.waitFor("the bound user's run ended", func() bool { return b.endedOf(bound) != nil })
	e := b.endedOf(bound)
	if e.Outcome != runmsg.RunRefused || !strings.Contains(e.Note, "works for the node") || !strings.Contains(e.Note, nodeA) {
		t.Errorf("B ended the run of A's user %+v, want refused naming node %s (row 5)", e, nodeA)
	}
	// And the other way: runner works for B.
	boundB := a.result(admin, "thread", "--title", "runner for A", "--text", echo(nodeA, "runner", "nope"))
	a.waitFor("the other bound user's run ended", func() bool { return a.endedOf(boundB) != nil })
	if e := a.endedOf(boundB); e.Outcome != runmsg.RunRefused || !strings.Contains(e.Note, nodeB) {
		t.Errorf("A ended the run of B's user %+v, want refused naming node %s (row 5)", e, nodeB)
	}
	// Row 4: B's own node user as a run's user on A.
	asNode := a.result(admin, "thread", "--title", "nodeb for A", "--text", echo(nodeA, nodeB, "nope"))
	a.waitFor("the node user's run ended", func() bool { return a.endedOf(asNode) != nil })
	if e := a.endedOf(asNode); e.Outcome != runmsg.RunRefused {
		t.Errorf("A ended a run as B's node user %+v, want refused (row 4)", e)
	}

	// Each answers only its own: the other node wrote nothing in any thread.
	time.Sleep(time.Second)
	for root, owner := range map[string]string{runA: nodeA, bound: nodeB, runB: nodeB, boundB: nodeA, asNode: nodeA} {
		by := threadBy(a, root)
		other := nodeA
		if owner == nodeA {
			other = nodeB
		}
		if by[other] != 0 {
			t.Errorf("node %s wrote %d posts in %s, a run for %s", other, by[other], root, owner)
		}
		if by[owner] == 0 {
			t.Errorf("node %s wrote nothing in its run %s", owner, root)
		}
	}
	if by := threadBy(a, runA); by[nodeA] != 3 {
		t.Errorf("A wrote %d posts in its run, want started, the kept logs, ended: %v", by[nodeA], by)
	}
}

// otherHost marks every project of n's node.json other_host: the node is
// not the server's node, and reads its run users' passwords from
// AGENTS/run-passwords, which is written holding pws ("USER PASSWORD").
func otherHost(t *testing.T, n *testNode, pws ...string) {
	t.Helper()
	path := filepath.Join(n.agents, "node.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := messages.DecodeNodeConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range cfg.Projects {
		p.OtherHost = true
		cfg.Projects[name] = p
	}
	if b, err = cfg.Encode(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	file := ""
	for _, l := range pws {
		file += l + "\n"
	}
	if err := os.WriteFile(filepath.Join(n.agents, "run-passwords"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRunPasswordOnAnotherHost: node B is not the server's node
// (node.json's other_host). A run with a password step whose user its file
// of passwords holds clones the server as that user with the file's
// password (the server's password is left as it was); a run whose user the
// file lacks is refused naming the user (section 11, row 6), nothing made.
// Node A, the server's node, answers neither.
func TestRunPasswordOnAnotherHost(t *testing.T) {
	needs(t, "ocxd")
	const runnerPW = "runner-pw-1"
	a := newNodeWith(t, harness.User{Login: "runner", Password: runnerPW, Caps: fossilio.AgentCaps},
		harness.User{Login: "stranger", Password: "stranger-pw-1", Caps: fossilio.AgentCaps})
	b := newSecondNode(t, a, "nodeb")
	otherHost(t, b, "runner "+runnerPW)
	admin := a.srv.AdminLogin
	nodeA, nodeB := a.nodeUser(), b.nodeUser()
	startDaemon(t, a, program("ocxd"))
	startDaemon(t, b, program("ocxd"))

	clone := func(user string) string {
		return block(fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Clone.",
"workspace": [
  {"step": "directory", "at": "$$root$$/$$user$$/projects/$$project$$/$$run$$"},
  {"step": "password"},
  {"step": "clone", "into": "$$workspace$$/clone"}
],
"process": {"user": %q, "command": ["test", "-s", "$$clone$$"], "env": {"PATH": "/usr/bin:/bin"}}}`, nodeB, user))
	}
	ok := a.result(admin, "thread", "--title", "runner on B", "--text", clone("runner"))
	b.waitFor("the run's ended", func() bool { return b.endedOf(ok) != nil })
	if e := b.endedOf(ok); e.Outcome != runmsg.RunExited || e.Exit == nil || *e.Exit != 0 {
		t.Fatalf("the run with the file's password ended %+v, want exited 0", e)
	}
	s := b.startedOf(ok)
	if s == nil || s.Values["clone"] == "" {
		t.Fatalf("started %+v lists no clone", s)
	}
	if _, err := os.Stat(s.Values["clone"]); err != nil {
		t.Errorf("the run's clone: %v", err)
	}
	// The other host set no password: the server's is the one it had.
	if _, err := a.srv.LoginCookie("runner", runnerPW); err != nil {
		t.Errorf("runner no longer logs in with its password: %v", err)
	}

	refused := a.result(admin, "thread", "--title", "stranger on B", "--text", clone("stranger"))
	b.waitFor("the run's ended", func() bool { return b.endedOf(refused) != nil })
	e := b.endedOf(refused)
	if e.Outcome != runmsg.RunRefused || !strings.Contains(e.Note, "holds no password") || !strings.Contains(e.Note, "stranger") {
		t.Errorf("the run whose user the file lacks ended %+v, want refused naming stranger (row 6)", e)
	}
	if s := b.startedOf(refused); s != nil {
		t.Errorf("a refused run was started: %+v", s)
	}
	if _, err := os.Stat(filepath.Join(b.agents, "ocxd.work", "stranger")); !os.IsNotExist(err) {
		t.Errorf("a workspace was made for the refused run: %v", err)
	}
	for _, root := range []string{ok, refused} {
		if by := threadBy(a, root); by[nodeA] != 0 {
			t.Errorf("the server's node %s wrote in %s, a run for %s", nodeA, root, nodeB)
		}
	}
}
