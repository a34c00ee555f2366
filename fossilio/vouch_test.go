package fossilio_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/itest/harness"
)

// vouchedClone is a node on another host's clone of n's server, as
// `ocx init --other-host` makes it: cloned as a node user (dave, who may
// read), its vouch tables made.
func (n *node) vouchedClone() (*fossilio.Fossil, *fossilio.Admin) {
	n.t.Helper()
	f := n.fossil()
	clone := filepath.Join(n.t.TempDir(), "demo.fossil")
	if err := f.Clone(n.ctx, fossilio.CloneOptions{URL: n.srv.URL, Login: "dave", Password: n.pw["dave"], ProjectCode: n.srv.ProjectCode}, clone); err != nil {
		n.t.Fatal(err)
	}
	a := &fossilio.Admin{Repository: clone, Fossil: f}
	if err := a.MakeVouched(n.ctx); err != nil {
		n.t.Fatal(err)
	}
	return f, a
}

// vouch does what a node on another host does after each pull: it asks the
// server's repository for what the clone received past its mark, and of
// an artifact of each sender it knows, and keeps the answers: the
// receipts, and the standing of the senders they name (D81).
func (n *node) vouch(a *fossilio.Admin) fossilio.VouchedQuery {
	n.t.Helper()
	q, err := a.Unvouched(n.ctx)
	if err != nil {
		n.t.Fatal(err)
	}
	asked := slices.Clone(q.Hashes)
	for _, s := range q.Senders {
		asked = append(asked, s.Hash)
	}
	receipts, _, err := n.repo.Receipts(n.ctx, asked...)
	if err != nil {
		n.t.Fatal(err)
	}
	standings := []fossilio.Standing{}
	named := map[string]bool{}
	for _, rc := range receipts {
		if rc.Known && rc.Login != "" && !named[rc.Login] {
			named[rc.Login] = true
			standings = append(standings, fossilio.Standing{Login: rc.Login, Privileged: rc.Privileged})
		}
	}
	if err := a.StoreVouched(n.ctx, q.Through, receipts[:len(q.Hashes)], standings); err != nil {
		n.t.Fatal(err)
	}
	return q
}

// TestVouchedClone: a clone the server vouched for reads as the server's
// own repository does: each artifact's sender (the receipt's user, never
// the name inside), its place in the server's order (where the clone's
// pull stored what it received in the order of their hashes), the
// server's users; and nothing it received past the vouched mark.
func TestVouchedClone(t *testing.T) {
	n := newNode(t)
	f, a := n.vouchedClone()
	// bob writes a post naming alice inside; then alice and bob write
	// replies, so that the server's order is not the order of the hashes.
	root, err := n.client("bob").NewThread(n.ctx, "from bob", "signed alice")
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	order = append(order, root)
	for i := range 6 {
		who := []string{"alice", "bob"}[i%2]
		h, err := n.client(who).Reply(n.ctx, root, root, "reply "+strings.Repeat("x", i))
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, h)
	}
	if err := f.Pull(n.ctx, a.Repository); err != nil {
		t.Fatal(err)
	}
	// Before the server vouched: nothing has arrived.
	r, err := fossilio.OpenNode(a.Repository, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.Vouched() {
		t.Fatal("the clone with vouch tables does not read as vouched")
	}
	if got, _, err := r.Received(n.ctx, 0); err != nil || len(got) != 0 {
		t.Fatalf("before the server vouched, Received = %v, %v; want nothing", got, err)
	}
	info, err := r.Info(n.ctx, root)
	if err != nil || info.Sender != "" {
		t.Fatalf("an artifact not vouched for: sender %q, %v; want unknown", info.Sender, err)
	}
	q := n.vouch(a)
	if len(q.Hashes) < len(order) {
		t.Fatalf("asked the server for %d artifacts, want at least the %d posts", len(q.Hashes), len(order))
	}
	got, last, err := r.Received(n.ctx, 0)
	if err != nil || last != q.Through {
		t.Fatalf("Received: last %d, %v; want %d", last, err, q.Through)
	}
	var posts []string
	differ := 0
	infos, err := r.Classify(n.ctx, got...)
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		if info.Kind != fossilio.KindPost {
			continue
		}
		posts = append(posts, info.Hash)
		want, err := n.repo.Info(n.ctx, info.Hash)
		if err != nil {
			t.Fatal(err)
		}
		if info.Sender != want.Sender || info.Rcvid != want.Rcvid || info.Rid != want.Rid || info.Via != want.Via || !info.Received.Equal(want.Received) {
			t.Errorf("post %s on the clone: sender %q rcvid %d rid %d via %s at %v; the server's: %q %d %d %s %v",
				info.Hash[:10], info.Sender, info.Rcvid, info.Rid, info.Via, info.Received, want.Sender, want.Rcvid, want.Rid, want.Via, want.Received)
		}
		if info.Receipt != info.Rcvid || info.Row != info.Rid {
			differ++
		}
	}
	if differ == 0 {
		t.Errorf("every post's receipt and row in the clone are the server's: the test shows nothing")
	}
	if !slices.Equal(posts, order) {
		t.Errorf("the clone lists the posts in the order %v, the server received them %v", short(posts), short(order))
	}
	if info, _ := r.Info(n.ctx, root); info.Sender != "bob" || info.Author != "bob" {
		t.Errorf("the root post's sender %q author %q, want bob", info.Sender, info.Author)
	}
	thread, err := r.Thread(n.ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	var inThread []string
	for _, p := range thread {
		inThread = append(inThread, p.Hash)
	}
	if !slices.Equal(inThread, order) {
		t.Errorf("the thread on the clone is %v, on the server %v", short(inThread), short(order))
	}
	sent, err := r.SentBy(n.ctx, "alice", "")
	if err != nil || len(sent) != 3 {
		t.Errorf("SentBy alice on the clone: %d posts, %v; want 3", len(sent), err)
	}
	// The users are the senders the server named (the admin sent the
	// server's first check-in), with their standing, not the clone's own
	// (whose admin is dave), and no other (D81).
	us, err := r.Users(n.ctx)
	want := []fossilio.User{{Login: n.srv.AdminLogin, Caps: "s"}, {Login: "alice"}, {Login: "bob"}}
	if err != nil || !slices.Equal(us, want) {
		t.Errorf("users on the clone %+v, %v; want %+v: the admin holding setup, alice and bob neither", us, err, want)
	}
	if _, err := r.User(n.ctx, "carol"); !errors.Is(err, fossilio.ErrNoSuchUser) {
		t.Errorf("carol, who sent nothing, on the clone: %v; want no such user: the server tells nothing of her", err)
	}
	// alice given setup on the server: the next vouch, though nothing new
	// came, asks of her again.
	if _, err := n.srv.Fossil("user", "capabilities", "alice", "gios", "-R", n.srv.Repo); err != nil {
		t.Fatal(err)
	}
	n.vouch(a)
	if priv, err := r.PrivilegedUsers(n.ctx); err != nil || !slices.Equal(priv, []string{n.srv.AdminLogin, "alice"}) {
		t.Errorf("privileged users on the clone once alice holds setup: %v, %v; want the admin and alice", priv, err)
	}
	if _, err := n.srv.Fossil("user", "capabilities", "alice", "gio", "-R", n.srv.Repo); err != nil {
		t.Fatal(err)
	}
	n.vouch(a)
	if priv, err := r.PrivilegedUsers(n.ctx); err != nil || !slices.Equal(priv, []string{n.srv.AdminLogin}) {
		t.Errorf("privileged users on the clone once alice's setup is taken: %v, %v; want the admin alone", priv, err)
	}
	// A later pull: what arrived stays unseen until the server vouched.
	h, err := n.client("alice").Reply(n.ctx, root, root, "later")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Pull(n.ctx, a.Repository); err != nil {
		t.Fatal(err)
	}
	if more, _, _ := r.Received(n.ctx, last); len(more) != 0 {
		t.Errorf("after a pull not vouched for, Received = %v; want nothing", short(more))
	}
	n.vouch(a)
	more, _, err := r.Received(n.ctx, last)
	if err != nil || !slices.Contains(more, h) {
		t.Errorf("after vouching, Received = %v, %v; want %s", short(more), err, h[:10])
	}
	// The server's own place of an artifact finds where the clone keeps
	// what came after it.
	hi, _ := r.Info(n.ctx, h)
	from, err := r.ReceiptBefore(n.ctx, hi.Rcvid, hi.Rid)
	if err != nil || from != hi.Receipt-1 {
		t.Errorf("ReceiptBefore the last reply = %d, %v; want %d", from, err, hi.Receipt-1)
	}
	// A clone is never the server: it answers no receipts.
	if _, _, err := r.Receipts(n.ctx, root); !errors.Is(err, fossilio.ErrBadInput) {
		t.Errorf("Receipts on a clone: %v, want ErrBadInput", err)
	}
	// Fossil keeps the tables through a rebuild.
	if _, err := f.Run(n.ctx, []string{"rebuild", "-R", a.Repository}); err != nil {
		t.Fatal(err)
	}
	r2, err := fossilio.OpenNode(a.Repository, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if info, err := r2.Info(n.ctx, root); err != nil || !r2.Vouched() || info.Sender != "bob" {
		t.Errorf("after fossil rebuild: vouched %v, sender %q, %v", r2.Vouched(), info.Sender, err)
	}
}

// TestReceipts: what the server's repository answers of an artifact: who
// sent it, where, and whether the sender holds admin or setup now and
// held it at the receipt, known only while nothing that counts changed.
func TestReceipts(t *testing.T) {
	n := newNode(t)
	// The users were made a minute before anything was posted, as they are
	// on a live server (Fossil stamps a change to the second).
	n.sql("UPDATE user SET mtime=mtime-60")
	byAdmin, err := n.client(n.srv.AdminLogin).NewThread(n.ctx, "t", "by the admin")
	if err != nil {
		t.Fatal(err)
	}
	byAlice, err := n.client("alice").Reply(n.ctx, byAdmin, byAdmin, "by alice")
	if err != nil {
		t.Fatal(err)
	}
	missing := strings.Repeat("ab", 32)
	rs, users, err := n.repo.Receipts(n.ctx, byAdmin, byAlice, missing)
	if err != nil {
		t.Fatal(err)
	}
	if len(users) == 0 || len(rs) != 3 {
		t.Fatalf("%d receipts, %d users", len(rs), len(users))
	}
	admin, alice, none := rs[0], rs[1], rs[2]
	want, _ := n.repo.Info(n.ctx, byAlice)
	if !alice.Known || alice.Login != "alice" || alice.Rcvid != want.Rcvid || alice.Rid != want.Rid || alice.Via != fossilio.ViaSync || alice.Privileged {
		t.Errorf("alice's receipt %+v; the repository's %+v", alice, want)
	}
	if alice.PrivilegedAtReceipt == nil || *alice.PrivilegedAtReceipt {
		t.Errorf("alice at the receipt: %v, want known false", alice.PrivilegedAtReceipt)
	}
	if !admin.Privileged || admin.PrivilegedAtReceipt == nil || !*admin.PrivilegedAtReceipt {
		t.Errorf("the admin's receipt %+v, want privileged now and at the receipt", admin)
	}
	if none.Known || none.Login != "" {
		t.Errorf("a hash the server lacks: %+v, want unknown", none)
	}
	// alice is made an admin after her post: now, but not known at the
	// receipt (her row changed since).
	if _, err := n.srv.Fossil("user", "capabilities", "alice", "gios", "-R", n.srv.Repo); err != nil {
		t.Fatal(err)
	}
	rs, _, err = n.repo.Receipts(n.ctx, byAlice)
	if err != nil {
		t.Fatal(err)
	}
	if !rs[0].Privileged || rs[0].PrivilegedAtReceipt != nil {
		t.Errorf("alice made an admin after her post: privileged %v, at the receipt %v; want true, unknown", rs[0].Privileged, rs[0].PrivilegedAtReceipt)
	}
	if _, _, err := n.repo.Receipts(n.ctx, "nothex"); err == nil {
		t.Error("Receipts took a string that is no hash")
	}
}

func short(hs []string) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h[:10]
	}
	return out
}

// BenchmarkReceipts500 answers the receipts of 500 posts as the receipt
// page does (one read, the users with them), beside classifying the same
// 500 as the server's own hook does: the server's cost of vouching per
// artifact, next to what its node already pays for each.
func BenchmarkReceipts500(b *testing.B) {
	srv := harness.StartServer(b, harness.Options{Users: []harness.User{{Login: "alice", Password: "alice-pw", Caps: "gio"}}})
	ctx := context.Background()
	c := &fossilio.Client{URL: srv.URL, Login: "alice", Password: "alice-pw", ProjectCode: srv.ProjectCode}
	repo, err := fossilio.OpenNode(srv.Repo, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer repo.Close()
	var batch [][]byte
	now := time.Now()
	for i := range 500 {
		data, err := fossilio.PostDraft{Date: now.Add(time.Duration(i) * time.Millisecond), User: "alice", Title: fmt.Sprintf("t%d", i), Text: "x"}.Bytes()
		if err != nil {
			b.Fatal(err)
		}
		batch = append(batch, data)
	}
	var hashes []string
	for start := 0; start < len(batch); start += 100 {
		h, err := c.PushAll(ctx, batch[start:start+100]...)
		if err != nil {
			b.Fatal(err)
		}
		hashes = append(hashes, h...)
	}
	b.Run("receipts", func(b *testing.B) {
		for b.Loop() {
			rs, _, err := repo.Receipts(ctx, hashes...)
			if err != nil || len(rs) != 500 || rs[0].Login != "alice" {
				b.Fatalf("%d receipts, %v", len(rs), err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/500, "ns/artifact")
	})
	b.Run("classify", func(b *testing.B) {
		for b.Loop() {
			if infos, err := repo.Classify(ctx, hashes...); err != nil || len(infos) != 500 {
				b.Fatalf("%d classified, %v", len(infos), err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/500, "ns/artifact")
	})
}
