package fossilio_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ocx-go/ocx/fossilio"
)

// countingTransport counts the HTTP requests a client makes.
type countingTransport struct {
	n    atomic.Int32
	next http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

func countingClient(c *fossilio.Client) *countingTransport {
	ct := &countingTransport{next: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	c.HTTP = &http.Client{Transport: ct}
	return ct
}

func TestFetchReadsWhatTheServerHolds(t *testing.T) {
	n := newNode(t)
	ctx := n.ctx
	alice := n.client("alice")
	root, err := alice.NewThread(ctx, "A thread", "first post")
	if err != nil {
		t.Fatal(err)
	}
	reply, err := n.client("bob").Reply(ctx, root, root, "bob replies")
	if err != nil {
		t.Fatal(err)
	}
	change, _, err := alice.NewTicket(ctx, fossilio.Field{Name: "title", Value: "A bug"}, fossilio.Field{Name: "icomment", Value: "it breaks"})
	if err != nil {
		t.Fatal(err)
	}
	// dave may read but not write: a fetch needs only reading.
	dave := n.client("dave")
	ct := countingClient(dave)
	hashes := []string{reply, root, change, reply}
	got, err := dave.Fetch(ctx, hashes...)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(hashes) {
		t.Fatalf("%d artifacts for %d hashes", len(got), len(hashes))
	}
	for i, h := range hashes {
		want, err := n.repo.Content(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[i], want) {
			t.Errorf("artifact %d (%s) differs from the repository's:\n got %q\nwant %q", i, h, got[i], want)
		}
	}
	if c := ct.n.Load(); c != 1 {
		t.Errorf("%d requests for artifacts sent whole, want 1", c)
	}
	a, err := fossilio.Parse(got[0])
	if err != nil || a.ThreadRoot != root || a.InReplyTo != root || string(a.Text) != "bob replies" || a.User != "bob" {
		t.Errorf("the fetched reply parses as %+v, %v", a, err)
	}
	// A fetch writes nothing on the node, not even a receipt.
	if c := n.sql("SELECT count(*) FROM rcvfrom r JOIN user u ON u.uid=r.uid WHERE u.login='dave'"); c != "0" {
		t.Errorf("%s receipts by dave after a fetch", c)
	}
}

// A check-in is sent as a delta against its parent when that is much
// smaller; the fetch then asks for the parent and rebuilds the check-in.
func TestFetchFollowsADelta(t *testing.T) {
	n := newNode(t)
	ws := n.workspace("alice", "trunk")
	// Many files make a manifest large and two successive ones alike.
	for i := range 30 {
		ws.write(fmt.Sprintf("file-%02d.txt", i), fmt.Sprintf("content %d\n", i))
	}
	first := ws.commit("a.txt", "one\n", "many files", "")
	second := ws.commit("a.txt", "two\n", "one change", "")
	c := n.client("dave")
	ct := countingClient(c)
	got, err := c.Fetch(n.ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	want, err := n.repo.Content(n.ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[0], want) {
		t.Errorf("the check-in rebuilt from its delta differs:\n got %q\nwant %q", got[0], want)
	}
	if c := ct.n.Load(); c != 2 {
		t.Errorf("%d requests, want 2: the check-in as a delta, then its parent %s whole", c, first)
	}
}

func TestFetchRefusals(t *testing.T) {
	n := newNode(t)
	ctx := n.ctx
	root, err := n.client("alice").NewThread(ctx, "t", "x")
	if err != nil {
		t.Fatal(err)
	}
	var re *fossilio.RefusedError
	wrong := n.client("alice")
	wrong.Password = "not-alice-pw"
	if _, err := wrong.Fetch(ctx, root); !errors.As(err, &re) || re.Reason != "login failed" || re.Op != "fetch" {
		t.Errorf("wrong password: %v", err)
	}
	other := n.client("alice")
	other.Password = fossilio.SharedSecret(n.srv.ProjectCode, "alice", "alice-pw")
	other.ProjectCode = strings.Repeat("a", 40)
	if _, err := other.Fetch(ctx, root); !errors.As(err, &re) || !strings.Contains(re.Reason, "wrong project") {
		t.Errorf("wrong project: %v", err)
	}
	missing := strings.Repeat("ab", 32)
	var he *fossilio.HashError
	if _, err := n.client("alice").Fetch(ctx, root, missing); !errors.Is(err, fossilio.ErrNotFound) || !errors.As(err, &he) || he.Hash != missing {
		t.Errorf("a hash the server lacks: %v", err)
	}
	// A post awaiting moderation is private: the server does not send it.
	n.webPost("carol", "Carol asks", "moderated")
	pending := strings.Trim(n.sql("SELECT b.uuid FROM blob b JOIN private p ON p.rid=b.rid"), "'")
	if !fossilio.IsHash(pending) {
		t.Fatalf("no private post: %q", pending)
	}
	if _, err := n.client("alice").Fetch(ctx, pending); !errors.Is(err, fossilio.ErrNotFound) {
		t.Errorf("a post awaiting moderation: %v", err)
	}
	if _, err := n.client("alice").Fetch(ctx, root[:20]); !errors.Is(err, fossilio.ErrBadHash) {
		t.Errorf("a prefix: %v", err)
	}
	if _, err := n.client("alice").Fetch(ctx); !errors.Is(err, fossilio.ErrBadInput) {
		t.Errorf("no hash: %v", err)
	}
	if _, err := (&fossilio.Client{URL: "http://127.0.0.1:1/", Login: "alice", Password: "x", ProjectCode: n.srv.ProjectCode}).Fetch(ctx, root); err == nil {
		t.Error("a server nobody answers: no error")
	}
}

// write puts a file in the check-out and adds it, to be committed with the
// next commit.
func (w *workspace) write(file, content string) {
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
}
