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
	if e.Outcome != messages.RunRefused || !strings.Contains(e.Note, "sandbox.tmp") ||
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
