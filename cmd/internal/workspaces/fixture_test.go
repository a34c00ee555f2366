package workspaces_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/node/setup"
	"github.com/ocx-go/ocx/cmd/internal/workspaces"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/itest/harness"
)

// fix is a real fossil server and an agents root initialised for it, with
// the node opened as the repository's admin (a caller holding setup).
type fix struct {
	t       *testing.T
	ctx     context.Context
	srv     *harness.Server
	agents  string
	release string
	n       *node.Node
}

// The person of every fixture: may read, post and open tickets, no admin.
const (
	person   = "alice"
	personPW = "alice-pw-1"
	agent    = "agent-1"
)

func newFix(t *testing.T) *fix {
	t.Helper()
	return newFixIn(t, standInRelease(t))
}

// standInRelease is a release directory holding the session's stand-in
// runner as ocx-runner-native, so that the node offers native (E9).
func standInRelease(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join("..", "session", "testdata", "ocx-runner-native"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ocx-runner-native"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// newFixIn is newFix with the node's tools run from the release directory
// release.
func newFixIn(t *testing.T, release string) *fix {
	t.Helper()
	srv := harness.StartServer(t, harness.Options{Users: []harness.User{{Login: person, Password: personPW, Caps: "cghijnorwz234"}}})
	f := &fix{t: t, ctx: context.Background(), srv: srv, agents: filepath.Join(t.TempDir(), "agents"), release: release}
	a := setup.Init(f.ctx, f.agents, setup.InitInput{Projects: []setup.InitProject{{Name: "demo", Repository: srv.Repo, URL: srv.URL}}}, node.Options{Release: f.release})
	f.ok(a)
	f.n = f.open(srv.AdminLogin, srv.AdminPassword)
	return f
}

// open opens the node as a caller.
func (f *fix) open(login, password string) *node.Node {
	f.t.Helper()
	n, err := node.Open(f.agents, node.Options{Caller: node.Caller{Login: login, Password: password}, Release: f.release})
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

// ok fails the test unless the action did its work.
func (f *fix) ok(a *node.Answer) *node.Answer {
	f.t.Helper()
	if !a.OK() {
		f.t.Fatalf("%s stopped: %s\nlog:\n%s", a.Tool, *a.Stopped, strings.Join(a.Log, "\n"))
	}
	return a
}

// refused fails the test unless the action stopped with a message holding
// every one of want.
func (f *fix) refused(a *node.Answer, want ...string) {
	f.t.Helper()
	if a.OK() {
		f.t.Fatalf("%s did its work, want a refusal holding %q\nlog:\n%s", a.Tool, want, strings.Join(a.Log, "\n"))
	}
	for _, w := range want {
		if !strings.Contains(*a.Stopped, w) {
			f.t.Errorf("%s stopped with %q, which does not say %q", a.Tool, *a.Stopped, w)
		}
	}
}

func (f *fix) repo() *fossilio.Repo {
	f.t.Helper()
	r, err := fossilio.OpenNode(f.srv.Repo, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { r.Close() })
	return r
}

// artifacts lists what the repository received, classified.
func (f *fix) artifacts() []fossilio.Info {
	f.t.Helper()
	r := f.repo()
	hashes, _, err := r.Received(f.ctx, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	infos, err := r.Classify(f.ctx, hashes...)
	if err != nil {
		f.t.Fatal(err)
	}
	return infos
}

// posts counts the posts and ticket changes on the record.
func (f *fix) posts() int {
	n := 0
	for _, i := range f.artifacts() {
		if i.Kind == fossilio.KindPost || i.Kind == fossilio.KindTicketChange {
			n++
		}
	}
	return n
}

// text reads a post's text and its sender, as the node's repository
// recorded it.
func (f *fix) post(hash string) fossilio.ForumPost {
	f.t.Helper()
	p, err := f.repo().Post(f.ctx, hash)
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

// ws is the workspace directory of the fixture's agent on demo.
func (f *fix) ws() string { return filepath.Join(f.agents, agent, "projects", "demo") }

// listeningDir is the agent's listening index, held by the node (D44).
func (f *fix) listeningDir() string {
	return filepath.Join(f.agents, agent, "held", "demo", "listening")
}

// addWorkspace provisions the agent and adds its workspace on trunk.
func (f *fix) addWorkspace() *node.Answer {
	f.t.Helper()
	f.ok(f.n.LoginAdd(f.ctx, agent, false))
	return f.ok(workspaces.Of(f.n).WorkspaceAdd(f.ctx, workspaces.WorkspaceAddInput{Login: agent, Project: "demo", Branch: "trunk"}))
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
