package fossilio_test

import (
	"errors"
	"net"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ocx-go/ocx/fossilio"
)

func TestWorkspaceCloneOpenPullPush(t *testing.T) {
	n := newNode(t)
	ctx := n.ctx
	ws := n.workspace("alice", "trunk")

	// The clone remembers the login and the password it was made with (the
	// shared secret here, since the project code was known).
	rem, err := fossilio.Remembered(ctx, ws.clone)
	if err != nil {
		t.Fatal(err)
	}
	if rem.URL != n.srv.URL || rem.Login != "alice" || rem.Password != fossilio.SharedSecret(n.srv.ProjectCode, "alice", "alice-pw") {
		t.Fatalf("remembered %+v", rem)
	}
	// What it remembers is enough to write as alice.
	c := &fossilio.Client{URL: rem.URL, Login: rem.Login, Password: rem.Password, ProjectCode: n.srv.ProjectCode}
	h, err := c.NewThread(ctx, "from the clone's password", "x")
	if err != nil {
		t.Fatal(err)
	}
	if s := n.senderByFossil(h); s != "alice" {
		t.Fatalf("sender %q", s)
	}

	// Pull brings the new post into the clone.
	clone, err := fossilio.OpenClone(ws.clone, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer clone.Close()
	if _, err := clone.Info(ctx, h); !errors.Is(err, fossilio.ErrNotFound) {
		t.Fatalf("before pull: %v", err)
	}
	if err := ws.f.Pull(ctx, ws.clone); err != nil {
		t.Fatal(err)
	}
	if p, err := clone.Post(ctx, h); err != nil || p.Text != "x" {
		t.Fatalf("after pull: %+v %v", p, err)
	}

	// A check-in from the tree reaches the node as alice's, on its branch.
	ci := ws.commit("f.txt", "hello\n", "from the workspace", "work")
	info, err := n.repo.Info(ctx, ci)
	if err != nil || info.Kind != fossilio.KindCheckin || info.Sender != "alice" || info.Branch != "work" || info.Via != fossilio.ViaSync {
		t.Fatalf("check-in on the node: %+v %v", info, err)
	}
}

func TestCloneWithCleartextRemembersIt(t *testing.T) {
	n := newNode(t)
	f := n.fossil()
	dest := filepath.Join(t.TempDir(), "clone")
	if err := f.Clone(n.ctx, fossilio.CloneOptions{URL: n.srv.URL, Login: "bob", Password: "bob-pw"}, dest); err != nil {
		t.Fatal(err)
	}
	rem, err := fossilio.Remembered(n.ctx, dest)
	if err != nil || rem.Password != "bob-pw" || rem.Login != "bob" {
		t.Fatalf("remembered %+v %v", rem, err)
	}
	// Fossil itself decodes the same password: a pull with it succeeds.
	if err := f.Pull(n.ctx, dest); err != nil {
		t.Fatal(err)
	}
}

func TestCloneRefused(t *testing.T) {
	n := newNode(t)
	f := n.fossil()
	dir := t.TempDir()
	dest := filepath.Join(dir, "clone")
	err := f.Clone(n.ctx, fossilio.CloneOptions{URL: n.srv.URL, Login: "alice", Password: "wrong-pw"}, dest)
	var ce *fossilio.CommandError
	if !errors.As(err, &ce) || !strings.Contains(ce.Output, "login failed") {
		t.Fatalf("clone with a wrong password: %v", err)
	}
	if strings.Contains(err.Error(), "wrong-pw") {
		t.Fatalf("the error shows the password: %v", err)
	}
	if _, err := os.Stat(dest); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused clone left %s behind: %v", dest, err)
	}
	// A pull that the server refuses exits 0 in fossil; fossilio reports it.
	good := filepath.Join(dir, "good")
	if err := f.Clone(n.ctx, fossilio.CloneOptions{URL: n.srv.URL, Login: "dave", Password: "dave-pw"}, good); err != nil {
		t.Fatal(err)
	}
	if err := n.admin().SetPassword(n.ctx, "dave", "changed-pw"); err != nil {
		t.Fatal(err)
	}
	if err := f.Pull(n.ctx, good); !errors.As(err, &ce) {
		t.Fatalf("pull with a stale password: %v", err)
	}
	if err := f.Push(n.ctx, good); err == nil {
		t.Fatal("push with a stale password reported success")
	}
	// Once the clone remembers the new password, Fossil pulls with it.
	if err := fossilio.Remember(n.ctx, good, fossilio.Remote{URL: n.srv.URL, Login: "dave", Password: "changed-pw"}); err != nil {
		t.Fatal(err)
	}
	if rem, err := fossilio.Remembered(n.ctx, good); err != nil || rem.Password != "changed-pw" || rem.Login != "dave" {
		t.Fatalf("remembered %+v %v", rem, err)
	}
	if err := f.Pull(n.ctx, good); err != nil {
		t.Fatalf("pull with the new password: %v", err)
	}
}

// TestPullThroughAProxy: with Fossil.Proxy a pull reaches the server
// through that HTTP proxy (fossil's --proxy), with the URL and the
// password the clone remembers, sent in the proxy's form (an absolute
// URL); a pull that cannot connect at all is a failure, though fossil
// exits 0 and says "Pull done" then (D49).
func TestPullThroughAProxy(t *testing.T) {
	n := newNode(t)
	f := n.fossil()
	dest := filepath.Join(t.TempDir(), "clone")
	if err := f.Clone(n.ctx, fossilio.CloneOptions{URL: n.srv.URL, Login: "bob", Password: "bob-pw", ProjectCode: n.srv.ProjectCode}, dest); err != nil {
		t.Fatal(err)
	}
	c := &fossilio.Client{URL: n.srv.URL, Login: "bob", Password: "bob-pw", ProjectCode: n.srv.ProjectCode}
	h, err := c.NewThread(n.ctx, "after the clone", "through the proxy")
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(n.srv.URL)
	var mu sync.Mutex
	var seen []string
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		mu.Lock()
		seen = append(seen, pr.In.Method+" "+pr.In.RequestURI)
		mu.Unlock()
		pr.SetURL(target)
		pr.Out.URL.Path = target.Path
	}})
	defer proxy.Close()
	via := *f
	via.Proxy = proxy.URL
	if err := via.Pull(n.ctx, dest); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := append([]string(nil), seen...)
	mu.Unlock()
	if len(got) == 0 || !strings.HasPrefix(got[0], "POST http://bob@"+target.Host) {
		t.Errorf("the proxy saw %q, want a POST naming the remembered server", got)
	}
	clone, err := fossilio.OpenClone(dest, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer clone.Close()
	if p, err := clone.Post(n.ctx, h); err != nil || p.Text != "through the proxy" {
		t.Errorf("the post written after the clone: %+v %v", p, err)
	}
	if rem, err := fossilio.Remembered(n.ctx, dest); err != nil || rem.URL != n.srv.URL {
		t.Errorf("after a pull through the proxy the clone remembers %+v %v, not the server", rem, err)
	}

	// A proxy nobody listens on: fossil says "cannot connect to host",
	// "Pull done", and exits 0.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	via.Proxy = closed
	var ce *fossilio.CommandError
	if err := via.Pull(n.ctx, dest); !errors.As(err, &ce) || !strings.Contains(ce.Output, "cannot connect") {
		t.Errorf("a pull through a proxy nobody listens on: %v", err)
	}
}
