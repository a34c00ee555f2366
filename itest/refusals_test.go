package itest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/docs/design"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// Refusals at a run's arrival (seed 004, section 11) that the node decides
// from what it is: issue 27 items 3 and 4, through the real hook, daemon
// and run engine.

// TestRunTmpHidingItsWorkspaceRefused is seed 004's section 14, second
// example, as written, on a node whose agents root lies under /tmp: its
// tmp, "/tmp", applied last (table 6), would cover its workspace, so bwrap
// could not chdir there and the run would end exited 1. It is refused at
// its arrival (row 8), its note naming sandbox.tmp and the workspace it
// would hide; nothing is started and no workspace made.
func TestRunTmpHidingItsWorkspaceRefused(t *testing.T) {
	needs(t, "ocxd")
	n := newNodeWith(t, harness.User{Login: "claude-1", Password: "claude-pw-1", Caps: fossilio.AgentCaps})
	if !strings.HasPrefix(n.agents, "/tmp/") {
		t.Fatalf("the agents root %s does not lie under /tmp, which this test is about (TMPDIR %q)", n.agents, os.Getenv("TMPDIR"))
	}
	startDaemon(t, n, program("ocxd"))
	run := strings.Replace(design.Example("run-claude.json"), `"node": "lab-1"`, fmt.Sprintf(`"node": %q`, n.nodeUser()), 1)
	root := n.result(n.srv.AdminLogin, "thread", "--title", "Claude", "--text", block(run))
	n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })
	e := n.endedOf(root)
	t.Logf("ended %s: %s", e.Outcome, e.Note)
	ws := "/claude-1/projects/demo/" + root
	if e.Outcome != runmsg.RunRefused || !strings.Contains(e.Note, "sandbox.tmp") ||
		!strings.Contains(e.Note, "/tmp would hide the workspace "+n.agents) || !strings.Contains(e.Note, ws) {
		t.Errorf("ended %s %q, want refused naming sandbox.tmp and the workspace %s...%s it hides", e.Outcome, e.Note, n.agents, ws)
	}
	if s := n.startedOf(root); s != nil {
		t.Errorf("the run was started: %+v", s)
	}
	found := false
	filepath.WalkDir(n.agents, func(p string, d os.DirEntry, err error) error {
		found = found || strings.HasSuffix(p, ws)
		return nil
	})
	if found {
		t.Errorf("a workspace was made for the refused run")
	}
}

// TestRunUnconfinedRefusedOnAConfinedNode is section 11's row 7: a node
// made with `ocx init --confined-only` (node.json's confined_only, kept
// when init runs again without it) says so in its status, and its daemon
// answers seed 004's section 14 first run, the unconfined echo, ended
// refused, naming that; nothing is started.
func TestRunUnconfinedRefusedOnAConfinedNode(t *testing.T) {
	needs(t, "ocxd")
	n := newNode(t)
	n.must("", "init", "--confined-only")
	n.must("", "init", "--project", "demo="+n.srv.Repo+","+n.srv.URL)
	b, err := os.ReadFile(filepath.Join(n.agents, "node.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := messages.DecodeNodeConfig(b); err != nil || !cfg.ConfinedOnly {
		t.Fatalf("node.json after init --confined-only, then init without it: %v\n%s", err, b)
	}
	startDaemon(t, n, program("ocxd"))
	if d := n.status().Daemon; d == nil || !d.Running || !d.ConfinedOnly {
		t.Errorf("the status's daemon %+v, want one running and confined_only", d)
	}
	if out := n.must("", "status").stdout; !strings.Contains(out, "runs=confined_only") {
		t.Errorf("ocx status does not say the node runs nothing unconfined:\n%s", out)
	}
	run := fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Say hello.",
"process": {"user": "builder", "command": ["echo", "hello"], "env": {"PATH": "/usr/bin:/bin"},
"keep": {"stdout_when": "always"}}}`, n.nodeUser())
	root := n.result(n.srv.AdminLogin, "thread", "--title", "Say hello", "--text", block(run))
	n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })
	e := n.endedOf(root)
	t.Logf("ended %s: %s", e.Outcome, e.Note)
	if e.Outcome != runmsg.RunRefused || !strings.Contains(e.Note, "no sandbox") || !strings.Contains(e.Note, "runs nothing unconfined") {
		t.Errorf("ended %s %q, want refused naming that the node runs nothing unconfined", e.Outcome, e.Note)
	}
	if s := n.startedOf(root); s != nil {
		t.Errorf("the run was started: %+v", s)
	}
	if posts := n.runThread(root); len(posts) != 2 {
		t.Errorf("the thread holds %d posts, want the run and ended", len(posts))
	}
}
