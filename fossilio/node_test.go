package fossilio_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/itest/harness"
)

// node is a real fossil server with a few users, and the repository opened
// for reading as the node's.
type node struct {
	t    *testing.T
	ctx  context.Context
	srv  *harness.Server
	repo *fossilio.Repo
	pw   map[string]string
}

// Users of every test node: alice and bob may push (i); carol may only post
// through the web, moderated (3); dave may read (o) but not write.
var testUsers = []harness.User{
	{Login: "alice", Password: "alice-pw", Caps: "gio"},
	{Login: "bob", Password: "bob-pw", Caps: "gio"},
	{Login: "carol", Password: "carol-pw", Caps: "3"},
	{Login: "dave", Password: "dave-pw", Caps: "go"},
}

func newNode(t *testing.T) *node {
	t.Helper()
	srv := harness.StartServer(t, harness.Options{Users: testUsers})
	repo, err := fossilio.OpenNode(srv.Repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	n := &node{t: t, ctx: context.Background(), srv: srv, repo: repo, pw: map[string]string{srv.AdminLogin: srv.AdminPassword}}
	for _, u := range testUsers {
		n.pw[u.Login] = u.Password
	}
	return n
}

func (n *node) client(login string) *fossilio.Client {
	return &fossilio.Client{URL: n.srv.URL, Login: login, Password: n.pw[login], ProjectCode: n.srv.ProjectCode}
}

// fossil returns a fossil runner with a private home for this test.
func (n *node) fossil() *fossilio.Fossil {
	home := filepath.Join(n.t.TempDir(), "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		n.t.Fatal(err)
	}
	return &fossilio.Fossil{Home: home}
}

// sql runs a query with the fossil CLI: a second, independent reader of
// the repository, against which fossilio's reading is checked.
func (n *node) sql(query string) string {
	n.t.Helper()
	out, err := n.srv.Fossil("sql", "-R", n.srv.Repo, query)
	if err != nil {
		n.t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// senderByFossil is who the repository recorded as the sender, read by the
// fossil CLI's own SQL.
func (n *node) senderByFossil(hash string) string {
	return strings.Trim(n.sql("SELECT u.login FROM blob b JOIN rcvfrom r ON r.rcvid=b.rcvid JOIN user u ON u.uid=r.uid WHERE b.uuid='"+hash+"'"), "'")
}

// workspace clones the node as login and opens a check-out of branch.
type workspace struct {
	n     *node
	f     *fossilio.Fossil
	clone string
	tree  string
}

func (n *node) workspace(login, branch string) *workspace {
	n.t.Helper()
	dir := n.t.TempDir()
	w := &workspace{n: n, f: n.fossil(), clone: filepath.Join(dir, "clone"), tree: filepath.Join(dir, "tree")}
	if err := w.f.Clone(n.ctx, fossilio.CloneOptions{URL: n.srv.URL, Login: login, Password: n.pw[login], ProjectCode: n.srv.ProjectCode}, w.clone); err != nil {
		n.t.Fatal(err)
	}
	if err := w.f.OpenCheckout(n.ctx, w.clone, w.tree, branch); err != nil {
		n.t.Fatal(err)
	}
	return w
}

// commit writes a file, commits it (on a new branch when newBranch is not
// ""), pushes, and returns the check-in's hash.
func (w *workspace) commit(file, content, comment, newBranch string) string {
	t := w.n.t
	t.Helper()
	if err := os.WriteFile(filepath.Join(w.tree, file), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	f := *w.f
	f.Dir = w.tree
	if _, err := f.Run(w.n.ctx, []string{"add", file}); err != nil {
		t.Fatal(err)
	}
	args := []string{"commit", "-m", comment, "--no-warnings"}
	if newBranch != "" {
		args = append(args, "--branch", newBranch)
	}
	out, err := f.Run(w.n.ctx, args)
	if err != nil {
		t.Fatal(err)
	}
	var hash string
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "New_Version:"); ok {
			hash = strings.TrimSpace(v)
		}
	}
	if !fossilio.IsHash(hash) {
		t.Fatalf("no New_Version in fossil commit's output:\n%s", out)
	}
	if err := w.f.Push(w.n.ctx, w.clone); err != nil {
		t.Fatal(err)
	}
	return hash
}

// at is a clock for drafts: fixed, so tests can build artifacts twice.
func at(s string) func() time.Time {
	return func() time.Time {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			panic(err)
		}
		return t
	}
}
