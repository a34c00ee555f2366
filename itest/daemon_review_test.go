package itest

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// verdictOf is the latest audited tag change the login sent on a check-in,
// as the node's repository recorded its sender.
func (n *testNode) verdictOf(checkin, login string) (fossilio.TagChange, bool) {
	r := n.repo()
	defer r.Close()
	tags, err := r.CheckinTags(context.Background(), checkin)
	if err != nil {
		n.t.Fatal(err)
	}
	return fossilio.LatestTag(tags, messages.AuditedTag, login)
}

// reviewOf is the login's review in the status, if any.
func (n *testNode) reviewOf(login string) (messages.ReviewStatus, bool) {
	for _, r := range n.status().Reviews {
		if r.Login == login {
			return r, true
		}
	}
	return messages.ReviewStatus{}, false
}

// TestDaemonReviewQueue is seed 002's "queue a review" and seed 001 E6 with
// the real fossil server, daemon, hook and session (D42): a reviewer is a
// `completes` session on a branch listener whose result is its verdict.
// Its queue, the check-ins on its branch without its verdict, is derived:
// a check-in made while no daemon ran is judged when the daemon starts;
// one arriving later is judged when it arrives; each gets the audited tag,
// pass or fail with the command's last line against the reviewer's own
// record, sent by the reviewer's login; a check-in the reviewer sent gets
// no verdict and is logged as skipped; and a daemon started again judges
// nothing twice, with nothing written to remember what it judged.
func TestDaemonReviewQueue(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	admin := n.srv.AdminLogin
	const rev = "rev-bot"
	n.must("", "login", "add", rev)
	record := n.result(admin, "workspace", "add", "--login", rev, "--project", "demo", "--branch", "trunk")
	// The reviewer fails a check-in whose tree holds bad.txt, and says why
	// on its last line.
	def := &messages.SessionDefinition{Kind: messages.Mechanical, Lifetime: messages.Completes, Result: messages.ResultVerdict,
		Command: []string{"/bin/sh", "-c", `echo reviewing "$OCX_CHECKIN"; if [ -e bad.txt ]; then echo "bad.txt is in the tree"; exit 1; fi; echo "looks right"`}}
	block, err := def.Encode()
	if err != nil {
		t.Fatal(err)
	}
	n.result(admin, "post", "--to", record, "--text", "The reviewer.\n\n"+string(block))
	n.result("", "listener", "add", rev+"/demo", "--kind", "branch", "--names", "trunk")

	// A check-in while no daemon runs: the hook, which may have started one
	// for the posts above, is removed and that daemon stopped, so nothing
	// starts one or tells it; the status already shows it waiting.
	n.must("", "hook", "remove")
	stopLateDaemons(t, n)
	c := newCommitter(t, n)
	c1 := c.commit("one.txt")
	if n.daemonPID() != 0 {
		t.Fatalf("a daemon runs (pid %d) though the hook is removed", n.daemonPID())
	}
	if r, ok := n.reviewOf(rev); !ok || !slices.Equal(r.Pending, []string{c1}) {
		t.Fatalf("the reviewer's queue before the daemon starts: %+v, %v; want %s pending", r, ok, c1)
	}
	n.must("", "hook", "install")

	// The daemon starts: it derives the queue and judges c1.
	d := startDaemon(t, n, program("ocxd"), "--grace", "1s", "--log-level", "debug")
	n.waitFor("the verdict on the check-in made before the daemon started", func() bool {
		_, ok := n.verdictOf(c1, rev)
		return ok
	})
	want := "pass: looks right (against " + record + ")"
	if v, _ := n.verdictOf(c1, rev); v.Value != want || v.Sender != rev {
		t.Errorf("the verdict on %s: %q sent by %q; want %q by %q", c1, v.Value, v.Sender, want, rev)
	}

	// A check-in while it runs, failing the review.
	c2 := c.commit("bad.txt")
	n.waitFor("the verdict on the second check-in", func() bool {
		_, ok := n.verdictOf(c2, rev)
		return ok
	})
	want = "fail: bad.txt is in the tree (against " + record + ")"
	if v, _ := n.verdictOf(c2, rev); v.Value != want || v.Sender != rev {
		t.Errorf("the verdict on %s: %q sent by %q; want %q by %q", c2, v.Value, v.Sender, want, rev)
	}
	// E6: the status counts both, as the reviewer's.
	for _, h := range []string{c1, c2} {
		found := false
		for _, v := range n.status().Verdicts {
			found = found || (v.Checkin == h && v.User == rev && v.Against == record)
		}
		if !found {
			t.Errorf("the status lists no verdict of %s on %s", rev, h)
		}
	}

	// A check-in the reviewer sent itself: it may not judge it (E6); the
	// daemon logs the skip and launches nothing for it.
	pw, err := fossilio.ReadPasswordFile(filepath.Join(n.agents, rev, "password"))
	if err != nil {
		t.Fatal(err)
	}
	own := newCommitterAs(t, n, rev, pw)
	c3 := own.commit("mine.txt")
	n.waitFor("the daemon to log that the reviewer's own check-in is skipped", func() bool {
		log := n.daemonLog()
		return strings.Contains(log, "may not judge is skipped") && strings.Contains(log, c3)
	})
	launches := launchHashes(n, record)
	if len(launches) != 2 {
		t.Fatalf("%d launch notes; want 2, none for the reviewer's own check-in", len(launches))
	}
	n.waitFor("both runs' end notes", func() bool {
		return len(n.endsOf(record, launches[0])) == 1 && len(n.endsOf(record, launches[1])) == 1
	})
	for i, res := range []messages.CIResult{messages.CIPass, messages.CIFail} {
		if e := n.endsOf(record, launches[i])[0]; e.Status != messages.EndExited || e.Result != res {
			t.Errorf("end of review %d: %s; want exited, result %s", i, e, res)
		}
	}
	if _, ok := n.verdictOf(c3, rev); ok {
		t.Errorf("the reviewer judged its own check-in %s", c3)
	}
	if r, ok := n.reviewOf(rev); !ok || len(r.Pending) != 0 || r.Skipped != 1 {
		t.Errorf("the reviewer's queue after its runs: %+v, %v; want none pending, one skipped", r, ok)
	}

	// The daemon starts again: it derives the queue anew, finds nothing
	// waiting, and judges nothing twice.
	n.waitFor("the reviewer's session to be gone", func() bool {
		for _, p := range n.status().Sessions {
			if p.Login == rev {
				return false
			}
		}
		return true
	})
	d.stop()
	before := strings.Count(n.daemonLog(), "untested on trunk: none")
	startDaemon(t, n, program("ocxd"), "--grace", "1s", "--log-level", "debug")
	n.waitFor("the next daemon to look at the queue and find nothing", func() bool {
		return strings.Count(n.daemonLog(), "untested on trunk: none") > before
	})
	if ls := launchHashes(n, record); len(ls) != 2 {
		t.Errorf("%d launch notes after the restart; want still 2", len(ls))
	}
	for _, h := range []string{c1, c2} {
		r := n.repo()
		tags, err := r.CheckinTags(context.Background(), h)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for _, tc := range tags {
			if tc.Name == messages.AuditedTag && tc.Sender == rev {
				k++
			}
		}
		if k != 1 {
			t.Errorf("%d verdicts of %s on %s; want 1", k, rev, h)
		}
	}
}
