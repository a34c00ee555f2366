package node_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ocx-go/ocx/cmd/internal/workspaces"
	"github.com/ocx-go/ocx/messages"
)

// TestNoPidFilesOnlyTheProcessTable is seed 000's migration row 5 (issue
// 27 item 9, D57): ~/run, launch.pid and Sandbox.running_in's --chdir scan
// are gone, the process table alone says what runs. Files of the old kind,
// planted where they lived and naming a live process (this test's own),
// make no session and no active workspace: the status lists none, the
// workspace stays idle, and a stop is refused because no process names
// the workspace.
func TestNoPidFilesOnlyTheProcessTable(t *testing.T) {
	f := newFix(t)
	f.AddWorkspace()
	live := []byte(strconv.Itoa(os.Getpid()) + "\n")
	for _, p := range []string{
		filepath.Join(f.WS(), "launch.pid"),
		filepath.Join(f.WS(), "session", "launch.pid"),
		filepath.Join(f.Agents, "run", agent+"-demo"),
		filepath.Join(f.Agents, agent, "run", "demo"),
		// ~ in a sandbox is the workspace.
		filepath.Join(f.WS(), "run", "launch.pid"),
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, live, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	st, err := f.N.Status(f.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Sessions {
		if s.Login == agent {
			t.Errorf("a pid file made a session: %+v", s)
		}
	}
	for _, w := range st.Workspaces {
		if w.Login == agent && w.State != messages.WorkspaceIdle {
			t.Errorf("a pid file made the workspace %s, want idle", w.State)
		}
	}
	f.Refused(workspaces.Of(f.N).SessionStop(f.Ctx, agent+"/demo", false), "no process names it")
}
