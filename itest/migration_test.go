package itest

import (
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages"
)

// TestSessionStartMakesTheWorkspace is seed 000's migration row 1 (issue
// 27 item 9, D57) through the real daemon, hook, sandboxed session and
// fossil server: starting a session for an agent login that has no
// workspace in the project makes it, as `workspace add` does (its
// definition, as the caller, first on a thread of its own, with the
// template's sandbox; the clone and tree on the host), then starts the
// session, which answers a post on that record. A second start finds
// the workspace and makes no second one.
func TestSessionStartMakesTheWorkspace(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	admin := n.srv.AdminLogin
	const login = "agent-57"
	n.must("", "login", "add", login)
	a, _ := n.answer(admin, "session", "start", key(login), "--hears", person, "--kind", "mechanical", "--lifetime", "stays",
		"--command", `printf 'heard: '; cat`)
	if a.Stopped != nil || a.Result == nil {
		t.Fatalf("a start without a workspace: %+v", a)
	}
	if log := strings.Join(a.Log, "\n"); !strings.Contains(log, "is not on the host") || !strings.Contains(log, "workspace add:") {
		t.Errorf("the start's log does not say it made the workspace:\n%s", log)
	}
	var ws *messages.WorkspaceStatus
	for _, w := range n.status().Workspaces {
		if w.Login == login {
			w := w
			ws = &w
		}
	}
	if ws == nil || ws.Branch != "trunk" || ws.State == messages.WorkspaceMissing {
		t.Fatalf("the status lists the start's workspace as %+v", ws)
	}
	first := n.thread(ws.Record)[0]
	if d, ok := first.Note.(*messages.WorkspaceDefinition); !ok || first.Sender != admin || d.Login != login || d.Sandbox.Network {
		t.Fatalf("the workspace's record opens with %T sent by %s: %s", first.Note, first.Sender, first.Text)
	}
	h := n.result(person, "post", "--to", ws.Record, "--text", "hello")
	n.waitFor("the session's answer on the workspace's record", func() bool {
		for _, p := range n.thread(ws.Record) {
			if p.Sender == login && p.InReplyTo == h && strings.Contains(p.Text, "heard: hello") {
				return true
			}
		}
		return false
	})

	// A second start finds the workspace: no second definition.
	a2, _ := n.answer(admin, "session", "start", key(login), "--hears", person, "--kind", "mechanical", "--lifetime", "stays",
		"--command", `printf 'again: '; cat`)
	if a2.Stopped != nil || strings.Contains(strings.Join(a2.Log, "\n"), "is not on the host") {
		t.Fatalf("the second start: %+v", a2)
	}
	defs := 0
	for _, w := range n.status().Workspaces {
		if w.Login == login {
			defs++
		}
	}
	if defs != 1 {
		t.Errorf("%d workspaces of %s after two starts, want 1", defs, login)
	}
	n.must("", "session", "stop", key(login))
}
