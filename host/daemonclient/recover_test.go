package daemonclient

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

var (
	relA  = strings.Repeat("a1", 20)
	relB  = strings.Repeat("b2", 20)
	relP0 = strings.Repeat("c3", 20)
)

// TestDecideRecovery: the rollback decision, each way it says no and what
// it writes when it says yes.
func TestDecideRecovery(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	pending := &messages.ReexecOutcome{At: at, PID: 42, Release: relB, From: relA, State: messages.ReexecPending, Error: "exec'd"}
	with := func(change func(o *messages.ReexecOutcome)) *messages.ReexecOutcome {
		o := *pending
		change(&o)
		return &o
	}
	base := recoveryFacts{Outcome: pending, Current: relB, Previous: relA, CurrentLinked: at.Add(-time.Second), Undo: relP0, FromRuns: true}
	for _, c := range []struct {
		name   string
		change func(f *recoveryFacts)
		want   rollback // zero: no rollback
		why    string
	}{
		{"pending, with an undo link", func(f *recoveryFacts) {}, rollback{Failed: relB, Current: relA, Previous: relP0}, ""},
		{"exited", func(f *recoveryFacts) {
			f.Outcome = with(func(o *messages.ReexecOutcome) { o.State = messages.ReexecExited })
		},
			rollback{Failed: relB, Current: relA, Previous: relP0}, ""},
		{"no undo: previous names the release put back, so it goes", func(f *recoveryFacts) { f.Undo = "" }, rollback{Failed: relB, Current: relA}, ""},
		{"no undo, previous another", func(f *recoveryFacts) { f.Undo, f.Previous = "", relP0 }, rollback{Failed: relB, Current: relA, Previous: relP0}, ""},
		{"the undo names the release that failed", func(f *recoveryFacts) { f.Undo = relB }, rollback{Failed: relB, Current: relA}, ""},
		{"linked the same instant", func(f *recoveryFacts) { f.CurrentLinked = at }, rollback{Failed: relB, Current: relA, Previous: relP0}, ""},
		{"no outcome", func(f *recoveryFacts) { f.Outcome = nil }, rollback{}, "no re-exec"},
		{"ok", func(f *recoveryFacts) {
			f.Outcome = with(func(o *messages.ReexecOutcome) { o.OK, o.State, o.Error = true, "", "" })
		}, rollback{}, "did not end the daemon"},
		{"refused: the old image runs on", func(f *recoveryFacts) {
			f.Outcome = with(func(o *messages.ReexecOutcome) { o.State = messages.ReexecRefused })
		},
			rollback{}, "did not end the daemon"},
		{"rolled back already: once", func(f *recoveryFacts) {
			f.Outcome = with(func(o *messages.ReexecOutcome) { o.State = messages.ReexecRolledBack })
		}, rollback{}, "did not end the daemon"},
		{"a failure said no more of", func(f *recoveryFacts) { f.Outcome = with(func(o *messages.ReexecOutcome) { o.State = "" }) },
			rollback{}, "did not end the daemon"},
		{"the lock held", func(f *recoveryFacts) { f.Held = true }, rollback{}, "holds the daemon's lock"},
		{"no from", func(f *recoveryFacts) { f.Outcome = with(func(o *messages.ReexecOutcome) { o.From = "" }) }, rollback{}, "names no release"},
		{"from the same release", func(f *recoveryFacts) { f.Outcome = with(func(o *messages.ReexecOutcome) { o.From = relB }) }, rollback{}, "already"},
		{"current moved since", func(f *recoveryFacts) { f.Current = relP0 }, rollback{}, "the links changed since"},
		{"current linked again after", func(f *recoveryFacts) { f.CurrentLinked = at.Add(time.Millisecond) }, rollback{}, "linked again after"},
		{"the release before is gone", func(f *recoveryFacts) { f.FromRuns = false }, rollback{}, "has no ocxd"},
	} {
		f := base
		c.change(&f)
		got, why, ok := decideRecovery(f)
		if ok != (c.want != rollback{}) || got != c.want || !strings.Contains(why, c.why) {
			t.Errorf("%s: %+v %q %v; want %+v, why %q", c.name, got, why, ok, c.want, c.why)
		}
	}
	if got := RollbackLinks(relB, relA, relA); got.Previous != "" {
		t.Errorf("previous naming current again: %+v", got)
	}
}

// recoverFix is an agents root whose node.json names a release root of
// its own, releases A, B and P0 in it (each an ocxd that exits 1).
type recoverFix struct {
	t      *testing.T
	layout host.Layout
	root   host.ReleaseRoot
}

func newRecoverFix(t *testing.T) *recoverFix {
	t.Helper()
	dir := t.TempDir()
	agents := filepath.Join(dir, "agents")
	if err := os.Mkdir(agents, 0o700); err != nil {
		t.Fatal(err)
	}
	layout, err := host.NewLayout(agents)
	if err != nil {
		t.Fatal(err)
	}
	root, err := host.NewReleaseRoot(filepath.Join(dir, "release"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &messages.NodeConfig{User: "ocx", Release: root.Root(), Projects: map[string]messages.NodeProject{
		"demo": {Repository: "/srv/demo.fossil", URL: "http://127.0.0.1:8080/"}}}
	data, err := cfg.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(layout.NodeJSON(), data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{relA, relB, relP0} {
		if err := os.MkdirAll(root.Release(id), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root.Release(id), "ocxd"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return &recoverFix{t: t, layout: layout, root: root}
}

// accepted lays the links out as an accept of B over A, previous P0, left
// them: current B, previous A, undo/B P0.
func (f *recoverFix) accepted() {
	f.t.Helper()
	if err := os.MkdirAll(f.root.UndoDir(), 0o755); err != nil {
		f.t.Fatal(err)
	}
	for link, target := range map[string]string{f.root.Current(): host.RootTarget(relB), f.root.Previous(): host.RootTarget(relA), f.root.Undo(relB): host.StagedTarget(relP0)} {
		if err := unixhost.ReplaceLink(link, target); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *recoverFix) outcome(o messages.ReexecOutcome) {
	f.t.Helper()
	if err := WriteReexec(f.layout, nil, o); err != nil {
		f.t.Fatal(err)
	}
}

func (f *recoverFix) links() string {
	f.t.Helper()
	var out []string
	for _, l := range []string{f.root.Current(), f.root.Previous(), f.root.Undo(relB)} {
		id, err := ReleaseLink(l)
		if err != nil {
			f.t.Fatal(err)
		}
		out = append(out, id)
	}
	return fmt.Sprint(out)
}

func pendingOutcome() messages.ReexecOutcome {
	return messages.ReexecOutcome{At: time.Now().UTC(), PID: 4711, Target: "/r/releases/" + relB + "/ocxd", Release: relB, From: relA,
		State: messages.ReexecPending, Error: "the daemon exec'd the release's ocxd, whose image has not recorded its start"}
}

// TestRecoverRollsBackOnce: a pending re-exec found with no daemon holding
// the lock rolls the links back (current A, previous P0, the undo link
// gone), records it, says it in the daemon's log, and a second call does
// nothing; with the lock held, nothing is done.
func TestRecoverRollsBackOnce(t *testing.T) {
	f := newRecoverFix(t)
	f.accepted()
	f.outcome(pendingOutcome())

	lock, err := unixhost.AcquireLock(f.layout.Lock())
	if err != nil {
		t.Fatal(err)
	}
	if o, err := Recover(f.layout); o != nil || err != nil {
		t.Fatalf("with the lock held: %v %v", o, err)
	}
	if got := f.links(); got != fmt.Sprint([]string{relB, relA, relP0}) {
		t.Fatalf("with the lock held the links moved: %s", got)
	}
	lock.Release()

	o, err := Recover(f.layout)
	if err != nil || o == nil {
		t.Fatalf("Recover: %v %v", o, err)
	}
	if got := f.links(); got != fmt.Sprint([]string{relA, relP0, ""}) {
		t.Fatalf("after the rollback the links are %s (current, previous, undo/B)", got)
	}
	rec, err := ReadReexec(f.layout)
	if err != nil || rec == nil || rec.State != messages.ReexecRolledBack || rec.OK || rec.Release != relB || rec.From != relA || rec.PID != 4711 ||
		!strings.Contains(rec.Error, "release "+relB+" was rolled back: its daemon ended before it recorded its outcome") ||
		!strings.Contains(rec.Error, "current names "+relA+" again, previous names "+relP0) {
		t.Fatalf("the outcome recorded: %+v %v", rec, err)
	}
	log, _ := os.ReadFile(f.layout.Log())
	if strings.Count(string(log), "re-exec: the release was rolled back") != 1 {
		t.Fatalf("the daemon's log:\n%s", log)
	}
	if again, err := Recover(f.layout); again != nil || err != nil {
		t.Fatalf("a second Recover: %v %v", again, err)
	}
	if got := f.links(); got != fmt.Sprint([]string{relA, relP0, ""}) {
		t.Fatalf("a second Recover moved the links: %s", got)
	}
	log, _ = os.ReadFile(f.layout.Log())
	if strings.Count(string(log), "\n") != 1 {
		t.Fatalf("the daemon's log after a second Recover:\n%s", log)
	}
}

// TestEnsureRollsBackBeforeItStarts: Ensure, finding no daemon and a
// release whose new image exited, rolls it back before it starts one, so
// the one it starts is the release before's; an accept made since (current
// linked after the outcome) is left alone.
func TestEnsureRollsBackBeforeItStarts(t *testing.T) {
	f := newRecoverFix(t)
	f.accepted()
	o := pendingOutcome()
	o.State, o.Error = messages.ReexecExited, "the new image could not start, and exited: read node.json: boom"
	f.outcome(o)
	marker := filepath.Join(t.TempDir(), "started")
	if err := os.WriteFile(filepath.Join(f.root.Release(relA), "ocxd"), []byte("#!/bin/sh\necho A > "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	started, err := Ensure(context.Background(), f.layout, filepath.Join(f.root.Current(), "ocxd"), 300*time.Millisecond)
	if !started || err == nil {
		t.Fatalf("Ensure: started %v, %v; want it started (and no pipe read)", started, err)
	}
	if got := f.links(); got != fmt.Sprint([]string{relA, relP0, ""}) {
		t.Fatalf("after Ensure the links are %s", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, _ := os.ReadFile(marker); string(b) == "A\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Ensure did not start the release rolled back to")
		}
		time.Sleep(10 * time.Millisecond)
	}
	rec, _ := ReadReexec(f.layout)
	if rec == nil || rec.State != messages.ReexecRolledBack || !strings.Contains(rec.Error, "could not start from the hand-off, and exited (the new image could not start") {
		t.Fatalf("the outcome recorded: %+v", rec)
	}

	// Accepted again since the outcome: the links are left alone.
	g := newRecoverFix(t)
	early := pendingOutcome()
	early.At = early.At.Add(-time.Minute) // the kernel stamps a link with a coarse clock
	g.outcome(early)
	g.accepted()
	if o, err := Recover(g.layout); o != nil || err != nil {
		t.Fatalf("Recover after a later accept: %v %v", o, err)
	}
	if got := g.links(); got != fmt.Sprint([]string{relB, relA, relP0}) {
		t.Fatalf("the links of a later accept moved: %s", got)
	}
}
