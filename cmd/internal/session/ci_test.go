package session_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// ciCommand is a CI command: it reads the check-in's verdict file, prints a
// few lines, and fails unless the verdict says pass.
var ciCommand = []string{"sh", "-c", `echo "testing $OCX_CHECKIN"
cat verdict.txt
grep -q '^pass' verdict.txt`}

func ciDefinition() *messages.SessionDefinition {
	return &messages.SessionDefinition{Kind: messages.Mechanical, Command: ciCommand, Lifetime: messages.Completes}
}

// devTree is a developer's own clone and tree, to check in from.
type devTree struct {
	n     *node
	f     *fossilio.Fossil
	clone string
	tree  string
}

func (n *node) devTree() *devTree {
	t := n.t
	t.Helper()
	dir := t.TempDir()
	d := &devTree{n: n, f: &fossilio.Fossil{Home: dir, User: "dev"}, clone: filepath.Join(dir, "clone"), tree: filepath.Join(dir, "tree")}
	if err := d.f.Clone(n.ctx, fossilio.CloneOptions{URL: n.srv.URL, Login: "dev", Password: "dev-pw", ProjectCode: n.srv.ProjectCode}, d.clone); err != nil {
		t.Fatal(err)
	}
	if err := d.f.OpenCheckout(n.ctx, d.clone, d.tree, "trunk"); err != nil {
		t.Fatal(err)
	}
	return d
}

// commit checks in verdict.txt on trunk as dev and pushes it to the node.
func (d *devTree) commit(verdict string) string {
	t := d.n.t
	t.Helper()
	if err := os.WriteFile(filepath.Join(d.tree, "verdict.txt"), []byte("a line before\n"+verdict+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := *d.f
	f.Dir = d.tree
	if _, err := f.Run(d.n.ctx, []string{"add", "verdict.txt"}); err != nil {
		t.Fatal(err)
	}
	out, err := f.Run(d.n.ctx, []string{"commit", "-m", "verdict " + verdict, "--no-warnings"})
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
	if err := d.f.Push(d.n.ctx, d.clone); err != nil {
		t.Fatal(err)
	}
	return hash
}

// ciTag is the latest ci tag the login sent on checkin, as the node's
// repository records the sender.
func (n *node) ciTag(checkin, login string) (string, bool) {
	n.t.Helper()
	changes, err := n.repo.CheckinTags(n.ctx, checkin)
	if err != nil {
		n.t.Fatal(err)
	}
	c, ok := fossilio.LatestTag(changes, messages.CITagName, login)
	return c.Value, ok
}

// runCI launches a CI run for checkin on a fresh record of w and waits for
// its exit.
func (w *wsFixture) runCI(checkin string, sandboxed bool) rec {
	t := w.n.t
	t.Helper()
	r := w.record(messages.ListenThread, "CI for trunk.", ciDefinition(), checkin)
	p := w.serve(r.launch, sandboxed)
	if code := p.wait(); code != 0 {
		t.Fatalf("the CI run exited %d, want 0:\n%s", code, w.logText())
	}
	return r
}

func testCIGreenAndRed(t *testing.T, sandboxed bool) {
	n := newNode(t)
	w := n.workspace("ci-1")
	d := n.devTree()
	good := d.commit("pass: all 12 good")
	bad := d.commit("fail: 2 of 12 broken")

	r := w.runCI(good, sandboxed)
	if v, ok := n.ciTag(good, w.login); !ok || v != "green: pass: all 12 good" {
		t.Errorf("ci tag on the good check-in: %q %v", v, ok)
	}
	if ns := w.notes(r, messages.KindCI); len(ns) != 0 {
		t.Errorf("a green result was said on the record: %v", ns)
	}
	w.turnFileGone()

	r = w.runCI(bad, sandboxed)
	if v, ok := n.ciTag(bad, w.login); !ok || v != "red: fail: 2 of 12 broken" {
		t.Errorf("ci tag on the bad check-in: %q %v", v, ok)
	}
	ns := w.notes(r, messages.KindCI)
	if len(ns) != 1 {
		t.Fatalf("%d ci notes on the red run's record, want 1", len(ns))
	}
	if cn := ns[0].(*messages.CINote); cn.Checkin != bad || cn.Result != messages.CIRed || cn.Line != "fail: 2 of 12 broken" {
		t.Errorf("ci note %s", cn)
	}
	// The good check-in kept its own result: each run tests the one it was
	// launched for.
	if v, _ := n.ciTag(good, w.login); v != "green: pass: all 12 good" {
		t.Errorf("the good check-in's tag became %q", v)
	}
	// A CI run answers no post: nothing but its notes is on its record.
	if rs := w.replies(r, r.first); len(rs) != 0 {
		t.Errorf("a CI run answered the record: %+v", rs)
	}
}

func TestCIGreenAndRed(t *testing.T) { testCIGreenAndRed(t, false) }

func TestCIGreenAndRedInBwrap(t *testing.T) { testCIGreenAndRed(t, true) }
