package setup_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/node/setup"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
)

// The person of these tests: may read, post and open tickets, no admin.
const (
	person   = "alice"
	personPW = "alice-pw-1"
)

// TestInitOnALiveRepository: `ocx init` on a repository a running fossil
// server serves, while another process is in the middle of writing it (a
// real `fossil sql` in a write transaction, as a server's handler writing a
// post or a backoffice run does), waits for the writer, then
// switches the repository to write-ahead logging and provisions the node
// user; the server serves a post after. It stopped at once with "switch demo
// to write-ahead logging: ... database is locked (5) (SQLITE_BUSY)", as the
// demo's start did (issue 10).
func TestInitOnALiveRepository(t *testing.T) {
	srv := harness.StartServer(t, harness.Options{Users: []harness.User{{Login: person, Password: personPW, Caps: "cghijnorwz234"}}})
	ctx := context.Background()
	agents, release := filepath.Join(t.TempDir(), "agents"), t.TempDir()
	in := setup.InitInput{Projects: []setup.InitProject{{Name: "demo", Repository: srv.Repo, URL: srv.URL}}}
	lock := harness.HoldLock(t, srv.Repo, harness.WriteLock)
	done := make(chan *node.Answer, 1)
	go func() { done <- setup.Init(ctx, agents, in, node.Options{Release: release}) }()
	// Long enough for init to meet the lock; it cannot switch while the
	// lock is held.
	select {
	case a := <-done:
		lock.Release()
		t.Fatalf("init returned while a writer held the repository: stopped %v\nlog:\n%s", deref(a.Stopped), strings.Join(a.Log, "\n"))
	case <-time.After(200 * time.Millisecond):
	}
	lock.Release()
	var a *node.Answer
	select {
	case a = <-done:
	case <-time.After(time.Minute):
		t.Fatal("init did not return within a minute of the lock's release")
	}
	if !a.OK() {
		t.Fatalf("init after the writer committed: stopped %s\nlog:\n%s", *a.Stopped, strings.Join(a.Log, "\n"))
	}
	if mode, err := srv.Fossil("sql", "-R", srv.Repo, "PRAGMA journal_mode"); err != nil || strings.TrimSpace(mode) != "'wal'" {
		t.Errorf("after init the repository's journal mode is %q (%v); want write-ahead logging", mode, err)
	}
	c := &fossilio.Client{URL: srv.URL, Login: person, Password: personPW, ProjectCode: srv.ProjectCode}
	if _, err := c.NewThread(ctx, "after init", "the server still takes a post"); err != nil {
		t.Errorf("a post after init: %v", err)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// node.json's sandbox: what init is given there, every sandbox the node
// proposes has (read-only, and on PATH after the release's), and an init
// that does not give it again keeps it, as it keeps session_limits.
func TestInitSandboxAdditions(t *testing.T) {
	srv := harness.StartServer(t, harness.Options{})
	ctx := context.Background()
	agents := filepath.Join(t.TempDir(), "agents")
	add := &messages.NodeSandbox{ReadOnly: []string{"/opt/agent-clis"}, Path: []string{"/opt/agent-clis/node_modules/.bin"}}
	in := setup.InitInput{Projects: []setup.InitProject{{Name: "demo", Repository: srv.Repo, URL: srv.URL}}, Sandbox: add}
	if a := setup.Init(ctx, agents, in, node.Options{}); !a.OK() {
		t.Fatalf("init: %s", *a.Stopped)
	}
	in.Sandbox = nil
	if a := setup.Init(ctx, agents, in, node.Options{}); !a.OK() {
		t.Fatalf("init again: %s", *a.Stopped)
	}
	n, err := node.Open(agents, node.Options{Release: "/rel"})
	if err != nil {
		t.Fatal(err)
	}
	sb := n.DefaultSandbox("/ws")
	if !slices.Contains(sb.ReadOnly, "/opt/agent-clis") || !slices.Equal(sb.Path, []string{"/rel", "/opt/agent-clis/node_modules/.bin", "/usr/local/bin", "/usr/bin", "/bin"}) {
		t.Fatalf("the proposed sandbox: read-only %q, path %q", sb.ReadOnly, sb.Path)
	}
	if _, err := messages.DecodeNodeConfig([]byte(`{"ocx": "node", "user": "ocx", "projects": {"demo": {"repository": "/x/demo.fossil", "url": "http://127.0.0.1:1/"}}, "sandbox": {"path": ["rel/bin"]}}`)); err == nil || !strings.Contains(err.Error(), "sandbox.path[0]") {
		t.Fatalf("a relative sandbox path: %v", err)
	}
}

// TestInitConfinedOnly: init --confined-only writes node.json's
// confined_only (D53), init again without it keeps it, with false undoes
// it, and the daemon's part of the status says it.
func TestInitConfinedOnly(t *testing.T) {
	srv := harness.StartServer(t, harness.Options{})
	ctx := context.Background()
	agents := filepath.Join(t.TempDir(), "agents")
	yes, no := true, false
	in := setup.InitInput{Projects: []setup.InitProject{{Name: "demo", Repository: srv.Repo, URL: srv.URL}}}
	for _, step := range []struct {
		name string
		set  *bool
		want bool
	}{{"new, not asked", nil, false}, {"--confined-only", &yes, true}, {"again without it", nil, true}, {"--confined-only=false", &no, false}} {
		in.ConfinedOnly = step.set
		if a := setup.Init(ctx, agents, in, node.Options{}); !a.OK() {
			t.Fatalf("%s: init: %s", step.name, *a.Stopped)
		}
		n, err := node.Open(agents, node.Options{})
		if err != nil {
			t.Fatal(err)
		}
		d, err := n.DaemonStatus()
		if err != nil {
			t.Fatal(err)
		}
		if n.Config.ConfinedOnly != step.want || d.ConfinedOnly != step.want {
			t.Errorf("%s: node.json's confined_only %v, the status's %v, want %v", step.name, n.Config.ConfinedOnly, d.ConfinedOnly, step.want)
		}
		if got := strings.Contains(d.String(), "runs=confined_only"); got != step.want {
			t.Errorf("%s: the daemon's line %q", step.name, d.String())
		}
	}
}
