package record_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/messages"
)

// TestPinReadsStandingOnce: a pin reads what arrived in one transaction;
// whom D7 counts is read in that same transaction when what arrived holds
// a note, the first time an answer asks when it holds none, and never
// again under the pin; its answers are the repository's own.
func TestPinReadsStandingOnce(t *testing.T) {
	f := newFix(t)
	var mu sync.Mutex
	var ops []string
	r, err := fossilio.OpenNode(f.srv.Repo, &fossilio.Options{ReadBegun: func(op string) {
		mu.Lock()
		defer mu.Unlock()
		ops = append(ops, op)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	take := func() []string {
		mu.Lock()
		defer mu.Unlock()
		o := ops
		ops = nil
		return o
	}
	x := record.NewIndex(r, "ocx")
	home := f.thread(f.admin, f.srv.AdminLogin, f.block(wsDef("agent-1")))
	if err := x.Refresh(f.ctx); err != nil {
		t.Fatal(err)
	}
	take()

	// A plain post: one read; standing read once, when first asked.
	f.reply(f.alice, "alice", home, "a plain reply")
	ctx, err := x.Pin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := take(); len(got) != 1 {
		t.Errorf("pinning after a plain post: %v, want one read", got)
	}
	want, err := f.repo.PrivilegedUsers(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		got, err := x.PrivilegedUsers(ctx)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("privileged under the pin: %v %v, want %v", got, err, want)
		}
		if !x.Privileged(ctx, f.srv.AdminLogin) || x.Privileged(ctx, "alice") {
			t.Errorf("standing under the pin: admin %v, alice %v", x.Privileged(ctx, f.srv.AdminLogin), x.Privileged(ctx, "alice"))
		}
	}
	if got := take(); len(got) != 1 {
		t.Errorf("standing asked six times under a pin: %v, want one read", got)
	}

	// A note: standing in the same read.
	f.reply(f.admin, f.srv.AdminLogin, home, f.block(&messages.TerminatedNote{Login: "agent-1", Project: "demo"}))
	ctx, err = x.Pin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !x.Privileged(ctx, f.srv.AdminLogin) {
		t.Error("the admin is not privileged under the pin")
	}
	if got := take(); len(got) != 1 {
		t.Errorf("a pin after a note, standing asked: %v, want one read", got)
	}
	// Nothing arrived: PinStanding still reads standing in its one read.
	ctx, err = x.PinStanding(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := x.PrivilegedUsers(ctx); !slices.Equal(got, want) {
		t.Errorf("privileged under PinStanding: %v, want %v", got, want)
	}
	if got := take(); len(got) != 1 {
		t.Errorf("PinStanding with nothing new: %v, want one read", got)
	}
}
