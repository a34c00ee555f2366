package itest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
)

// committer makes check-ins on the node as a person would: a clone of its
// own over HTTP, a commit, a push, then the backoffice so that the hook
// sees the check-in at once (D11).
type committer struct {
	t               testing.TB
	n               *testNode
	dir             string
	home            string
	login, password string
}

func newCommitter(t testing.TB, n *testNode) *committer {
	t.Helper()
	return newCommitterAs(t, n, n.srv.AdminLogin, n.srv.AdminPassword)
}

// newCommitterAs is a committer that pushes as login, and whom each
// check-in names as its user.
func newCommitterAs(t testing.TB, n *testNode, login, password string) *committer {
	t.Helper()
	n.fossilClients = true
	c := &committer{t: t, n: n, dir: t.TempDir(), home: t.TempDir(), login: login, password: password}
	clone := filepath.Join(t.TempDir(), "demo.fossil")
	c.fossil("", "clone", n.srv.UserURL(login, password), clone)
	c.fossil(c.dir, "open", clone, "--nosync")
	c.fossil(c.dir, "settings", "autosync", "off")
	return c
}

func (c *committer) fossil(dir string, args ...string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.FossilPath, args...)
	cmd.Dir = dir
	if dir == "" {
		cmd.Dir = c.home
	}
	cmd.Env = harness.FossilEnv(c.home, c.login)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		c.t.Fatalf("fossil %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// commit checks in a new file on trunk and returns the check-in's hash.
func (c *committer) commit(name string) string {
	c.t.Helper()
	return c.commitOn(name, "")
}

// commitOn checks in a new file on branch, as it stands on the node (""
// for where the checkout is), and returns the check-in's hash.
func (c *committer) commitOn(name, branch string) string {
	c.t.Helper()
	return c.commitWith(name, branch)
}

// commitWith is commitOn with more arguments to fossil commit, such as
// --user-override NAME (the U card the check-in carries).
func (c *committer) commitWith(name, branch string, extra ...string) string {
	c.t.Helper()
	if branch != "" {
		c.fossil(c.dir, "pull", c.n.srv.UserURL(c.n.srv.AdminLogin, c.n.srv.AdminPassword))
		c.fossil(c.dir, "update", branch)
	}
	if err := os.WriteFile(filepath.Join(c.dir, name), []byte(name+"\n"), 0o644); err != nil {
		c.t.Fatal(err)
	}
	before := checkinHash(c.fossil(c.dir, "info", "current"))
	add := c.fossil(c.dir, "add", name)
	commit := c.fossil(c.dir, append([]string{"commit", "-m", "add " + name, "--no-warnings"}, extra...)...)
	push := c.fossil(c.dir, "push", c.n.srv.UserURL(c.login, c.password))
	hash := checkinHash(c.fossil(c.dir, "info", "current"))
	if hash == before {
		c.t.Fatalf("committing %s made no new check-in (still %s)\nadd: %s\ncommit: %s\npush: %s", name, hash, add, commit, push)
	}
	if err := c.n.srv.Backoffice(); err != nil {
		c.t.Fatal(err)
	}
	r := c.n.repo()
	defer r.Close()
	full, err := r.Resolve(context.Background(), hash)
	if err != nil {
		c.t.Fatalf("the check-in %q is not on the node: %v\npush: %s", hash, err, push)
	}
	return full
}

// checkinHash takes the hash from `fossil info current`'s "hash:" line.
func checkinHash(info string) string {
	for _, l := range strings.Split(info, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "hash:" {
			return f[1]
		}
	}
	return info
}

// ciTag is the latest `ci` tag the login sent on a check-in.
func (n *testNode) ciTag(checkin, login string) (string, bool) {
	r := n.repo()
	defer r.Close()
	tags, err := r.CheckinTags(context.Background(), checkin)
	if err != nil {
		n.t.Fatal(err)
	}
	t, ok := fossilio.LatestTag(tags, "ci", login)
	return t.Value, ok
}

// ciLaunches are the launch notes the node user wrote on a record.
func (n *testNode) ciLaunches(record string) []*messages.LaunchNote {
	var out []*messages.LaunchNote
	for _, e := range notesOn[*messages.LaunchNote](n, record) {
		if e.P.Sender == "ocx" && e.Note.Checkin != "" {
			out = append(out, e.Note)
		}
	}
	return out
}

// TestDaemonCI is seed 002's "launch for a waiting check-in" with the real
// daemon, session and hook (D5): a check-in on a branch a `completes`
// session listens to launches it; a check-in during the run only waits (no
// note of any kind); when the run ends with a result, the daemon launches
// it again for the newest untested check-in; once none waits, nothing more.
// A run stopped before it left a result is not launched again by itself.
func TestDaemonCI(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	admin := n.srv.AdminLogin
	startDaemon(t, n, program("ocxd"), "--grace", "1s", "--log-level", "debug")
	const ci = "ci-bot"
	n.must("", "login", "add", ci)
	record := n.result(admin, "workspace", "add", "--login", ci, "--project", "demo", "--branch", "trunk")
	// The CI session: its run waits for the file go in its workspace (HOME)
	// before it passes, so that a test can hold a run.
	def := &messages.SessionDefinition{Kind: messages.Mechanical, Lifetime: messages.Completes,
		Command: []string{"/bin/sh", "-c", `while [ ! -e "$HOME/go" ]; do sleep 0.05; done; echo all tests pass`}}
	block, err := def.Encode()
	if err != nil {
		t.Fatal(err)
	}
	n.result(admin, "post", "--to", record, "--text", "The CI session.\n\n"+string(block))
	n.result("", "listener", "add", ci+"/demo", "--kind", "branch", "--names", "trunk")
	c := newCommitter(t, n)
	ws := n.workspaceDir(ci)

	c1 := c.commit("one.txt")
	n.waitFor("the first CI run", func() bool { return len(n.ciLaunches(record)) == 1 })
	if l := n.ciLaunches(record)[0]; l.Checkin != c1 {
		t.Fatalf("the first CI launch is for %s, not %s", l.Checkin, c1)
	}
	n.waitFor("the first run to hold the workspace", func() bool {
		for _, p := range n.status().Sessions {
			if p.Login == ci {
				return true
			}
		}
		return false
	})

	// A check-in during the run: it waits, with no note.
	c2 := c.commit("two.txt")
	n.waitFor("the daemon to see the second check-in", func() bool {
		return strings.Contains(n.daemonLog(), c2)
	})
	if ls := n.ciLaunches(record); len(ls) != 1 {
		t.Errorf("%d CI launches while the first run holds the workspace", len(ls))
	}
	if rs := notesOn[*messages.RefusalNote](n, record); len(rs) != 0 {
		t.Errorf("refusal notes for a check-in: %d", len(rs))
	}

	// Let the runs pass: the first ends with its result, and the daemon
	// launches again for the second check-in, then nothing more.
	if err := os.WriteFile(filepath.Join(ws, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	n.waitFor("both check-ins tagged green", func() bool {
		v1, ok1 := n.ciTag(c1, ci)
		v2, ok2 := n.ciTag(c2, ci)
		return ok1 && ok2 && strings.HasPrefix(v1, "green") && strings.HasPrefix(v2, "green")
	})
	ls := n.ciLaunches(record)
	if len(ls) != 2 || ls[1].Checkin != c2 {
		t.Fatalf("CI launches: %v; want two, the second for %s", ls, c2)
	}
	launches := launchHashes(n, record)
	n.waitFor("two end notes with their results", func() bool {
		return len(n.endsOf(record, launches[0])) == 1 && len(n.endsOf(record, launches[1])) == 1
	})
	for i, h := range launches {
		e := n.endsOf(record, h)[0]
		want := []string{c1, c2}[i]
		if e.Status != messages.EndExited || *e.ExitCode != 0 || e.Checkin != want || e.Result != messages.CIGreen {
			t.Errorf("end of CI run %d: %s; want exited 0, checkin %s, result green", i, e, want)
		}
	}
	n.waitFor("the listener to find nothing untested", func() bool {
		return strings.Contains(n.daemonLog(), "untested on trunk: none")
	})
	if ls := n.ciLaunches(record); len(ls) != 2 {
		t.Errorf("%d CI launches once nothing waits", len(ls))
	}

	// A run stopped before its result is not launched again by itself (D5),
	// though its check-in stays untested; the next check-in launches again.
	os.Remove(filepath.Join(ws, "go"))
	c3 := c.commit("three.txt")
	n.waitFor("the third CI run", func() bool { return len(n.ciLaunches(record)) == 3 })
	n.waitFor("the third run to hold the workspace", func() bool {
		for _, p := range n.status().Sessions {
			if p.Login == ci {
				return true
			}
		}
		return false
	})
	n.must("", "session", "stop", ci+"/demo")
	launches = launchHashes(n, record)
	n.waitFor("the third run's end note", func() bool { return len(n.endsOf(record, launches[2])) == 1 })
	if e := n.endsOf(record, launches[2])[0]; e.Result != messages.CINone || e.Checkin != c3 {
		t.Errorf("the stopped run's end: %s; want result none on %s", e, c3)
	}
	if _, ok := n.ciTag(c3, ci); ok {
		t.Errorf("the stopped run tagged its check-in")
	}
	n.waitFor("the listener to log that it does not launch again", func() bool {
		return strings.Contains(n.daemonLog(), "the run left no result on its check-in; not launched again")
	})
	if ls := n.ciLaunches(record); len(ls) != 3 {
		t.Errorf("%d CI launches after a run without result", len(ls))
	}
	if err := os.WriteFile(filepath.Join(ws, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c4 := c.commit("four.txt")
	t.Logf("the fourth check-in: %s", c4)
	n.waitFor("the next check-in tagged", func() bool {
		v, ok := n.ciTag(c4, ci)
		return ok && strings.HasPrefix(v, "green")
	})
	if ls := n.ciLaunches(record); len(ls) < 4 || ls[3].Checkin != c4 {
		t.Fatalf("CI launches after a new check-in: %v; want a fourth, for %s", ls, c4)
	}
	// The fourth run left its result, so the daemon launches again for the
	// check-in still waiting: the third, whose run was stopped (D5).
	n.waitFor("the stopped run's check-in tagged at last", func() bool {
		v, ok := n.ciTag(c3, ci)
		return ok && strings.HasPrefix(v, "green")
	})
	if ls := n.ciLaunches(record); len(ls) != 5 || ls[4].Checkin != c3 {
		t.Errorf("CI launches once the fourth run ended: %v; want a fifth, for %s", ls, c3)
	}
	n.waitFor("the fifth run's end", func() bool {
		launches := launchHashes(n, record)
		return len(launches) == 5 && len(n.endsOf(record, launches[4])) == 1
	})
	n.waitFor("the CI session to be gone", func() bool {
		for _, p := range n.status().Sessions {
			if p.Login == ci {
				return false
			}
		}
		return true
	})
}

// launchHashes are the hashes of the node user's CI launch notes on a
// record, in the server's order.
func launchHashes(n *testNode, record string) []string {
	var out []string
	for _, e := range notesOn[*messages.LaunchNote](n, record) {
		if e.P.Sender == "ocx" && e.Note.Checkin != "" {
			out = append(out, e.P.Hash)
		}
	}
	return out
}
