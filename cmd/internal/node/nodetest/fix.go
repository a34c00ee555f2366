// Package nodetest is the one test fixture of a node's actions (packages
// node, workspaces and tools): a real fossil server, an agents root
// initialised for it, and, for the tests that need one, the release built
// from this tree, whose daemon runs real sessions.
package nodetest

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/node/setup"
	"github.com/ocx-go/ocx/cmd/internal/workspaces"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/itest/harness"
)

// Fix is a real fossil server and an agents root initialised for it, with
// the node opened as the repository's admin (a caller holding setup).
type Fix struct {
	T       *testing.T
	Ctx     context.Context
	Srv     *harness.Server
	Agents  string
	Release string
	N       *node.Node
}

// The person of every fixture: may read, post and open tickets, no admin;
// and the agent login the fixture's workspace is of.
const (
	Person   = "alice"
	PersonPW = "alice-pw-1"
	Agent    = "agent-1"
)

// New is a fixture whose node offers the session's stand-in runner.
func New(t *testing.T) *Fix {
	t.Helper()
	return newIn(t, standInRelease(t))
}

// standInRelease is a release directory holding the session's stand-in
// runner as ocx-runner-native, so that the node offers native (E9).
func standInRelease(t *testing.T) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "..", "session", "testdata", "ocx-runner-native"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ocx-runner-native"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// newIn is New with the node's tools run from the release directory
// release.
func newIn(t *testing.T, release string) *Fix {
	t.Helper()
	srv := harness.StartServer(t, harness.Options{Users: []harness.User{{Login: Person, Password: PersonPW, Caps: "cghijnorwz234"}}})
	f := &Fix{T: t, Ctx: context.Background(), Srv: srv, Agents: filepath.Join(t.TempDir(), "agents"), Release: release}
	a := setup.Init(f.Ctx, f.Agents, setup.InitInput{Projects: []setup.InitProject{{Name: "demo", Repository: srv.Repo, URL: srv.URL}}}, node.Options{Release: f.Release})
	f.OK(a)
	f.N = f.Open(srv.AdminLogin, srv.AdminPassword)
	return f
}

// Open opens the node as a caller.
func (f *Fix) Open(login, password string) *node.Node {
	f.T.Helper()
	n, err := node.Open(f.Agents, node.Options{Caller: node.Caller{Login: login, Password: password}, Release: f.Release})
	if err != nil {
		f.T.Fatal(err)
	}
	return n
}

// OK fails the test unless the action did its work.
func (f *Fix) OK(a *node.Answer) *node.Answer {
	f.T.Helper()
	if !a.OK() {
		f.T.Fatalf("%s stopped: %s\nlog:\n%s", a.Tool, *a.Stopped, strings.Join(a.Log, "\n"))
	}
	return a
}

// Refused fails the test unless the action stopped with a message holding
// every one of want.
func (f *Fix) Refused(a *node.Answer, want ...string) {
	f.T.Helper()
	if a.OK() {
		f.T.Fatalf("%s did its work, want a refusal holding %q\nlog:\n%s", a.Tool, want, strings.Join(a.Log, "\n"))
	}
	for _, w := range want {
		if !strings.Contains(*a.Stopped, w) {
			f.T.Errorf("%s stopped with %q, which does not say %q", a.Tool, *a.Stopped, w)
		}
	}
}

// Repo opens the server's repository, closed at the test's end.
func (f *Fix) Repo() *fossilio.Repo {
	f.T.Helper()
	r, err := fossilio.OpenNode(f.Srv.Repo, nil)
	if err != nil {
		f.T.Fatal(err)
	}
	f.T.Cleanup(func() { r.Close() })
	return r
}

// Artifacts lists what the repository received, classified.
func (f *Fix) Artifacts() []fossilio.Info {
	f.T.Helper()
	r := f.Repo()
	hashes, _, err := r.Received(f.Ctx, 0)
	if err != nil {
		f.T.Fatal(err)
	}
	infos, err := r.Classify(f.Ctx, hashes...)
	if err != nil {
		f.T.Fatal(err)
	}
	return infos
}

// Posts counts the posts and ticket changes on the record.
func (f *Fix) Posts() int {
	n := 0
	for _, i := range f.Artifacts() {
		if i.Kind == fossilio.KindPost || i.Kind == fossilio.KindTicketChange {
			n++
		}
	}
	return n
}

// Post reads a post's text and its sender, as the node's repository
// recorded it.
func (f *Fix) Post(hash string) fossilio.ForumPost {
	f.T.Helper()
	p, err := f.Repo().Post(f.Ctx, hash)
	if err != nil {
		f.T.Fatal(err)
	}
	return p
}

// WS is the workspace directory of the fixture's agent on demo.
func (f *Fix) WS() string { return filepath.Join(f.Agents, Agent, "projects", "demo") }

// ListeningDir is the agent's listening index, held by the node (D44).
func (f *Fix) ListeningDir() string {
	return filepath.Join(f.Agents, Agent, "held", "demo", "listening")
}

// Exists says a file is there (a link is, whatever it names).
func Exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// AddWorkspace provisions the agent and adds its workspace on trunk.
func (f *Fix) AddWorkspace() *node.Answer {
	f.T.Helper()
	f.OK(f.N.LoginAdd(f.Ctx, Agent, false))
	return f.OK(workspaces.Of(f.N).WorkspaceAdd(f.Ctx, workspaces.WorkspaceAddInput{Login: Agent, Project: "demo", Branch: "trunk"}))
}
