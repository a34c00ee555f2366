package itest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
)

// Nodes on other hosts (issue 25, D72): a node whose record is a clone of
// the server it pulls as its node user, the senders and order of what it
// pulled vouched for by the server's node on its console's receipt page.

// serverNode is the server's node of nodes on other hosts: its fossil
// server serves the console (whose receipt page the remote nodes ask),
// and the hook is installed.
func serverNode(t *testing.T, people ...harness.User) *testNode {
	t.Helper()
	a := consoleNode(t, people...)
	a.must("", "hook", "install")
	return a
}

// remoteOpts say how a remote node is made.
type remoteOpts struct {
	// every is its pull's timer; poke, the address it takes pokes on
	// ("" takes none).
	every, poke string
}

// newRemoteNode makes a node on another host of a's server: the node user
// listed on a (`ocx node add`, with the poke URL when the node takes
// pokes), then `ocx init --other-host` making its clone. Its commands run
// as n.ocx does, in its own agents root.
func newRemoteNode(t *testing.T, a *testNode, user string, o remoteOpts) *testNode {
	t.Helper()
	b := &testNode{t: t, ctx: a.ctx, srv: a.srv, agents: filepath.Join(t.TempDir(), "agents"), pw: a.pw}
	t.Cleanup(b.shutdown)
	pwFile := filepath.Join(t.TempDir(), "node-password")
	if err := os.WriteFile(pwFile, []byte(user+"-pw-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	add := []string{"node", "add", user, "--password-file", pwFile}
	if o.poke != "" {
		add = append(add, "--poke", "http://"+o.poke+"/")
	}
	a.must("", add...)
	args := []string{"init", "--other-host", "--project", "demo=" + filepath.Join(filepath.Dir(b.agents), "clone", "demo.fossil") + "," + a.srv.URL,
		"--node-user", user, "--password-file", pwFile, "--release", relRoot}
	if o.every != "" {
		args = append(args, "--pull-every", o.every)
	}
	if o.poke != "" {
		args = append(args, "--poke-listen", o.poke)
	}
	b.must("", args...)
	return b
}

// TestRemoteNodeAnswersItsRun: seed 004 section 14's echo posted on the
// server for a node on another host is answered by that node alone: its
// started (listing node), the kept logs holding hello, ended exited 0,
// each sent by its node user; the server's node writes nothing there.
func TestRemoteNodeAnswersItsRun(t *testing.T) {
	needs(t, "ocxd")
	a := serverNode(t)
	startDaemon(t, a, program("ocxd"))
	b := newRemoteNode(t, a, "lab-b", remoteOpts{every: "500ms"})
	startDaemon(t, b, program("ocxd"))
	admin := a.srv.AdminLogin
	echo := block(fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Say hello.",
"process": {"user": "builder", "command": ["echo", "hello"], "env": {"PATH": "/usr/bin:/bin"}, "keep": {"stdout_when": "always"}}}`, "lab-b"))
	run := a.result(admin, "thread", "--title", "For B", "--text", echo)
	a.waitFor("B's run ended", func() bool { return b.endedOf(run) != nil })
	e := b.endedOf(run)
	if e.Outcome != messages.RunExited || e.Exit == nil || *e.Exit != 0 {
		t.Errorf("B's run ended %+v, want exited 0", e)
	}
	if s := b.startedOf(run); s == nil || s.Values["node"] != "lab-b" {
		t.Errorf("B's started %+v, want values.node lab-b", s)
	}
	by := threadBy(a, run)
	if by[a.nodeUser()] != 0 || by["lab-b"] != 3 {
		t.Errorf("the run's thread by sender %v: want lab-b's started, kept logs and ended, nothing of the server's node", by)
	}
}
