package itest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// Triggers (D101), end to end: a real fossil server, the hook, the daemon.

// triggerCheckins is how many check-ins TestRunTriggerOnCheckins pushes at
// once (OCX_TRIGGER_CHECKINS sets it).
func triggerCheckins(t *testing.T) int {
	if s := os.Getenv("OCX_TRIGGER_CHECKINS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return 100
}

// firing is a fired the node wrote in a trigger's thread, and its run's
// answers.
type firing struct {
	hash    string
	at      protocol.RunPosition
	checkin string
	started []string
	ended   []*runmsg.RunEnded
}

// firings reads the firings of the trigger root from its thread, in the
// server's order, each with the started and ended the node wrote for it.
func (n *testNode) firings(root, node string) []*firing {
	n.t.Helper()
	by := map[string]*firing{}
	var out []*firing
	posts := n.runThread(root)
	for _, p := range posts {
		if f, ok := p.Msg.(*runmsg.RunFired); ok && p.Sender == node && f.Run == root {
			fi := &firing{hash: p.Hash, checkin: f.Checkin}
			by[p.Hash] = fi
			out = append(out, fi)
		}
	}
	for _, p := range posts {
		if p.Sender != node {
			continue
		}
		switch m := p.Msg.(type) {
		case *runmsg.RunStarted:
			if f := by[m.Run]; f != nil {
				f.started = append(f.started, p.Hash)
			}
		case *runmsg.RunEnded:
			if f := by[m.Run]; f != nil {
				f.ended = append(f.ended, m)
			}
		}
	}
	for _, f := range out {
		f.at = n.posAt(f.hash)
	}
	slices.SortFunc(out, func(a, b *firing) int {
		if a.at.Before(b.at) {
			return -1
		}
		return 1
	})
	return out
}

// TestRunTriggerOnCheckins: a trigger on trunk's check-ins; N check-ins
// pushed at once (and one on another branch) fire N runs, one for each
// check-in on trunk, in the server's order, each started and ended once,
// exited 0; the trigger itself is never started. Check-ins pushed while
// the daemon is down fire once each when it is back. The admin's stop
// ends it stopped, and a check-in after fires nothing.
func TestRunTriggerOnCheckins(t *testing.T) {
	needs(t, "ocxd")
	n := newNode(t)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	d := startDaemon(t, n, program("ocxd"))
	c := newCommitter(t, n)
	before := c.commit("before.txt") // before the trigger: never fires it

	trigger := fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Test each check-in on trunk.",
"process": {"user": "builder", "command": ["true"], "env": {"PATH": "/usr/bin:/bin"}, "on": {"checkin": ["trunk"]}}}`, node)
	root := n.result(admin, "thread", "--title", "CI on trunk", "--text", block(trigger))

	count := triggerCheckins(t)
	var want []string
	for i := range count {
		want = append(want, c.commitLocal(fmt.Sprintf("f%03d.txt", i), ""))
	}
	other := c.commitLocal("other.txt", "feature")
	start := time.Now()
	c.pushAll()
	t.Logf("%d check-ins pushed at once", count+1)
	for i := range want {
		want[i] = n.resolve(want[i])
	}
	other = n.resolve(other)

	deadline := time.Now().Add(time.Duration(60+count) * time.Second)
	var fs []*firing
	for {
		fs = n.firings(root, node)
		done := len(fs) >= count
		for _, f := range fs {
			done = done && len(f.ended) > 0
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			ended := 0
			for _, f := range fs {
				if len(f.ended) > 0 {
					ended++
				}
			}
			t.Fatalf("%d firings, %d ended, after %s; want %d", len(fs), ended, time.Since(start), count)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%d firings written, started and ended in %s", count, time.Since(start).Round(time.Millisecond))

	// The server's order of the check-ins.
	slices.SortFunc(want, func(a, b string) int {
		if n.posAt(a).Before(n.posAt(b)) {
			return -1
		}
		return 1
	})
	var got []string
	for _, f := range fs {
		got = append(got, f.checkin)
		if len(f.started) != 1 || len(f.ended) != 1 || f.ended[0].Outcome != runmsg.RunExited || *f.ended[0].Exit != 0 {
			t.Errorf("firing %s (check-in %s): %d started, ended %+v; want one started and one ended exited 0", f.hash, f.checkin, len(f.started), f.ended)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the firings name\n%v\nwant the check-ins on trunk in the server's order\n%v", got, want)
	}
	if slices.Contains(got, other) || slices.Contains(got, before) {
		t.Errorf("a check-in on another branch, or one before the trigger, fired it")
	}
	// Each firing's started in the server's order too.
	var startedAt []protocol.RunPosition
	for _, f := range fs {
		startedAt = append(startedAt, n.posAt(f.started[0]))
	}
	if !slices.IsSortedFunc(startedAt, func(a, b protocol.RunPosition) int {
		if a.Before(b) {
			return -1
		}
		return 1
	}) {
		t.Errorf("the firings' started are not in the server's order")
	}
	if s := n.startedOf(root); s != nil && s.Run == root {
		t.Errorf("the trigger itself was started: %+v", s)
	}

	// The daemon killed outright; three check-ins pushed while it is
	// down (the hook may start a daemon of its own, which the test's
	// replaces). Each fires once, in the server's order, after the rest.
	d.kill9()
	var missed []string
	for i := range 3 {
		missed = append(missed, c.commitOn(fmt.Sprintf("down%d.txt", i), "trunk"))
	}
	startDaemon(t, n, program("ocxd"))
	n.waitFor("the check-ins missed fired", func() bool {
		fs = n.firings(root, node)
		done := len(fs) >= count+len(missed)
		for _, f := range fs {
			done = done && len(f.ended) > 0
		}
		return done
	})
	got = got[:0]
	for _, f := range fs {
		got = append(got, f.checkin)
		if len(f.started) != 1 || len(f.ended) != 1 {
			t.Errorf("firing %s (check-in %s): %d started, %d ended; want one each", f.hash, f.checkin, len(f.started), len(f.ended))
		}
	}
	if want = append(want, missed...); !slices.Equal(got, want) {
		t.Fatalf("after the restart the firings name\n%v\nwant\n%v", got, want)
	}
	count += len(missed)

	// The stop ends the trigger; a check-in after fires nothing.
	stop := fmt.Sprintf(`{"ocx": 1, "kind": "stop", "node": %q, "run": %q}`, node, root)
	n.result(admin, "post", "--to", root, "--text", block(stop))
	var e *runmsg.RunEnded
	n.waitFor("the trigger's ended", func() bool {
		for _, p := range n.runThread(root) {
			if m, ok := p.Msg.(*runmsg.RunEnded); ok && m.Run == root && p.Sender == node {
				e = m
				return true
			}
		}
		return false
	})
	if e.Outcome != runmsg.RunStopped {
		t.Errorf("the trigger ended %+v, want stopped", e)
	}
	after := c.commitOn("after.txt", "trunk")
	// A run posted after the check-in: once it has ended, the daemon has
	// read the check-in too.
	echo := fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Say hello.",
"process": {"user": "builder", "command": ["true"], "env": {"PATH": "/usr/bin:/bin"}}}`, node)
	last := n.result(admin, "thread", "--title", "After", "--text", block(echo))
	n.waitFor("the run after", func() bool { return n.endedOf(last) != nil })
	for _, f := range n.firings(root, node) {
		if f.checkin == after {
			t.Fatalf("a check-in after the stop fired the trigger: %s", f.hash)
		}
	}
	if fs2 := n.firings(root, node); len(fs2) != count {
		t.Errorf("%d firings after the stop, want %d", len(fs2), count)
	}
}

// resolve is a check-in's hash in full, as the node's repository holds it.
func (n *testNode) resolve(hash string) string {
	n.t.Helper()
	r := n.repo()
	defer r.Close()
	full, err := r.Resolve(n.ctx, hash)
	if err != nil {
		n.t.Fatalf("the check-in %s is not on the node: %v", hash, err)
	}
	return full
}

// commitLocal checks in a new file on branch ("" where the checkout is)
// without pushing it, and returns the check-in's hash as fossil prints it.
func (c *committer) commitLocal(name, branch string) string {
	c.t.Helper()
	if err := os.WriteFile(filepath.Join(c.dir, name), []byte(name+"\n"), 0o644); err != nil {
		c.t.Fatal(err)
	}
	c.fossil(c.dir, "add", name)
	args := []string{"commit", "-m", "add " + name, "--no-warnings"}
	if branch != "" {
		args = append(args, "--branch", branch)
	}
	c.fossil(c.dir, args...)
	return checkinHash(c.fossil(c.dir, "info", "current"))
}

// pushAll pushes every check-in made locally at once, and runs the
// server's backoffice.
func (c *committer) pushAll() {
	c.t.Helper()
	c.fossil(c.dir, "push", c.n.srv.UserURL(c.login, c.password))
	if err := c.n.srv.Backoffice(); err != nil {
		c.t.Fatal(err)
	}
}

// TestRunTriggerOnASchedule: a trigger every minute, on a clock the test
// gives the daemon (OCXD_TEST_TRIGGER_CLOCK: the wall clock run 20 times
// as fast, so a minute is three seconds): it fires at each minute, once
// each, with no minute skipped; the daemon stopped for four of its
// minutes and started again fires once for the latest minute it missed,
// skipping the others, then at each minute again; a stop ends it.
func TestRunTriggerOnASchedule(t *testing.T) {
	needs(t, "ocxd")
	n := newNode(t)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	wall := time.Now()
	const rate = 20
	clock := fmt.Sprintf("OCXD_TEST_TRIGGER_CLOCK=%s@%d*%d", wall.UTC().Format(time.RFC3339Nano), wall.UnixNano(), rate)
	testNow := func() time.Time { return wall.Add(time.Since(wall) * rate).UTC() }
	minutes := func(m int) time.Duration { return time.Duration(m) * time.Minute / rate }
	d := startDaemonEnv(t, n, program("ocxd"), []string{clock})

	trigger := fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Every minute.",
"process": {"user": "builder", "command": ["true"], "env": {"PATH": "/usr/bin:/bin"}, "on": {"schedule": "* * * * *"}}}`, node)
	root := n.result(admin, "thread", "--title", "Every minute", "--text", block(trigger))
	fired := func() []time.Time {
		var out []time.Time
		for _, p := range n.runThread(root) {
			if f, ok := p.Msg.(*runmsg.RunFired); ok && p.Sender == node {
				out = append(out, f.At)
			}
		}
		slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
		return out
	}
	n.waitFor("three firings", func() bool { return len(fired()) >= 3 })
	got := fired()
	for i := 1; i < len(got); i++ {
		if got[i].Sub(got[i-1]) != time.Minute {
			t.Fatalf("the firings' minutes are not one apart: %v", got)
		}
	}
	if now := testNow(); got[len(got)-1].After(now) {
		t.Fatalf("a firing for %s before its minute (the clock reads %s)", got[len(got)-1], now)
	}

	// Down for four of its minutes: the node is away for that long.
	d.stop()
	down := fired()
	time.Sleep(minutes(4))
	restart := testNow()
	startDaemonEnv(t, n, program("ocxd"), []string{clock})
	n.waitFor("a firing after the restart", func() bool { return len(fired()) > len(down) })
	seen := testNow()
	catchUp := fired()[len(down)]
	if gap := catchUp.Sub(down[len(down)-1]); gap < 3*time.Minute {
		t.Fatalf("the first firing after the restart is for %s, %s after the last before it; want the latest minute missed, skipping the others", catchUp, gap)
	}
	if catchUp.After(seen) || catchUp.Before(restart.Truncate(time.Minute)) {
		t.Errorf("the catch-up firing is for %s; the daemon started again at %s, and it was seen at %s", catchUp, restart, seen)
	}
	n.waitFor("two more firings", func() bool { return len(fired()) >= len(down)+3 })
	after := fired()[len(down):]
	for i := 1; i < len(after); i++ {
		if after[i].Sub(after[i-1]) != time.Minute {
			t.Fatalf("after the restart the firings' minutes are not one apart: %v", after)
		}
	}
	// Each firing a run, started and ended once.
	fs := n.firings(root, node)
	for _, f := range fs[:len(fs)-1] {
		if len(f.started) > 1 || len(f.ended) > 1 {
			t.Errorf("firing %s: %d started, %d ended", f.hash, len(f.started), len(f.ended))
		}
	}

	stop := fmt.Sprintf(`{"ocx": 1, "kind": "stop", "node": %q, "run": %q}`, node, root)
	n.result(admin, "post", "--to", root, "--text", block(stop))
	n.waitFor("the trigger's ended", func() bool {
		for _, p := range n.runThread(root) {
			if m, ok := p.Msg.(*runmsg.RunEnded); ok && m.Run == root && p.Sender == node {
				return m.Outcome == runmsg.RunStopped
			}
		}
		return false
	})
	// Two of its minutes pass (the window in which a firing would be
	// due), and none fires.
	stopped := len(fired())
	time.Sleep(minutes(2))
	if got := len(fired()); got != stopped {
		t.Errorf("%d firings after the stop ended it", got-stopped)
	}
}

// TestRunTriggerRefusals: a trigger from a user without admin or setup is
// ended refused and never fires; a fired forged by the admin in an armed
// trigger's thread is no run (the node writes no started or ended for
// it); a check-in then fires the armed trigger once, and the refused one
// not at all.
func TestRunTriggerRefusals(t *testing.T) {
	needs(t, "ocxd")
	n := newNode(t)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	startDaemon(t, n, program("ocxd"))
	c := newCommitter(t, n)
	trig := func(objective string) string {
		return block(fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": %q,
"process": {"user": "builder", "command": ["true"], "env": {"PATH": "/usr/bin:/bin"}, "on": {"checkin": ["trunk"]}}}`, node, objective))
	}
	refused := n.result(person, "thread", "--title", "alice's trigger", "--text", trig("From alice."))
	n.waitFor("alice's trigger ended", func() bool { return n.endedOf(refused) != nil })
	if e := n.endedOf(refused); e.Outcome != runmsg.RunRefused || !strings.Contains(e.Note, "admin or setup") {
		t.Fatalf("alice's trigger ended %+v, want refused naming admin or setup", e)
	}
	armed := n.result(admin, "thread", "--title", "the admin's trigger", "--text", trig("From the admin."))
	forgedOn := c.commitLocal("forged.txt", "")
	c.pushAll()
	forgedOn = n.resolve(forgedOn)
	// The check-in fires the armed trigger: its firing is the node's.
	n.waitFor("the check-in's firing ended", func() bool {
		fs := n.firings(armed, node)
		return len(fs) == 1 && len(fs[0].ended) == 1
	})
	// A fired the admin writes, naming a check-in the node has not fired
	// for, counts for nothing.
	other := c.commitLocal("other.txt", "feature")
	c.pushAll()
	forged := n.result(admin, "post", "--to", armed, "--text", block(fmt.Sprintf(`{"ocx": 1, "kind": "fired", "node": %q, "run": %q, "checkin": %q}`, node, armed, n.resolve(other))))
	n.waitLogLine("the forged fired ignored", func(l logLine) bool {
		return strings.Contains(l.Msg, "does not act on") && strings.Contains(l.Msg, "fired")
	})
	echo := n.result(admin, "thread", "--title", "After", "--text", block(fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "After.",
"process": {"user": "builder", "command": ["true"], "env": {"PATH": "/usr/bin:/bin"}}}`, node)))
	n.waitFor("the run after", func() bool { return n.endedOf(echo) != nil })
	for _, p := range n.runThread(armed) {
		switch m := p.Msg.(type) {
		case *runmsg.RunStarted:
			if m.Run == forged {
				t.Errorf("the node started the forged firing")
			}
		case *runmsg.RunEnded:
			if m.Run == forged {
				t.Errorf("the node ended the forged firing: %+v", m)
			}
		}
	}
	if fs := n.firings(armed, node); len(fs) != 1 || fs[0].checkin != forgedOn {
		t.Errorf("the armed trigger's firings: %d, want one for %s", len(fs), forgedOn)
	}
	if fs := n.firings(refused, node); len(fs) != 0 {
		t.Errorf("the refused trigger fired %d times", len(fs))
	}
}
