package itest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
)

// links reads the release root's links: current, previous and what staged/
// holds, each as its target.
func links(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range []string{"current", "previous"} {
		if target, err := os.Readlink(filepath.Join(root, name)); err == nil {
			out[name] = target
		}
	}
	entries, _ := os.ReadDir(filepath.Join(root, "staged"))
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join(root, "staged", e.Name())); err == nil {
			out["staged/"+e.Name()] = target
		}
	}
	return out
}

// sessionOf is the status's session in workspace login/demo.
func sessionOf(st *messages.NodeState, login string) (messages.SessionStatus, bool) {
	for _, s := range st.Sessions {
		if s.Login == login && s.Project == "demo" {
			return s, true
		}
	}
	return messages.SessionStatus{}, false
}

// TestReleaseStageAcceptRollback is issue 13's story with real builds, the
// real daemon and real sessions in bwrap: a Fossil repository holding a
// copy of this project's source and three check-ins of it (the source; a
// change; a change of the hand-off's version). The node's release root is
// made from the first (`ocx release init`), two sessions run on it; the
// second is staged and accepted while a stream of lines arrives on the
// daemon's pipe: the daemon re-execs the new current's ocxd in place (same
// PID, every line read once, the sessions still its children), and both
// sessions are flagged as on an older release. One is stopped and the
// stopped sessions restarted on current, twice: it restarts once, on the
// new release. A rollback swaps the links and re-execs again: now the
// restarted session is the one flagged. The third check-in's ocxd reads
// another hand-off version: staging it is refused by the hand-off check,
// and accepting it (laid out by hand, as an older OCX would have staged
// it) is refused too, with every link unchanged.
func TestReleaseStageAcceptRollback(t *testing.T) {
	needs(t, "ocxd", "workspace")
	src, c1 := newSourceRepo(t)
	src.edit("host/version/version.go", "package version", "package version // the second release")
	c2 := src.commit("the second release")
	src.edit("messages/protocol/daemon_handoff.go", "HandoffVersion = 1", "HandoffVersion = 2")
	c3 := src.commit("a release whose daemon reads another hand-off")

	// The release root, made from the first check-in, and a node on it.
	root := filepath.Join(t.TempDir(), "release")
	if r := runOCX(t, "release", "init", root, "--repo", src.repo, c1[:12]); r.code != 0 {
		t.Fatalf("%s", r)
	}
	if got := links(t, root); got["current"] != "releases/"+c1 || len(got) != 1 {
		t.Fatalf("after release init the links are %v, want current -> releases/%s alone", got, c1)
	}
	n := newNodeRelease(t, root)
	n.env = goEnv(t)
	admin := n.srv.AdminLogin

	// Two sessions on the first release, the daemon's children.
	logins := []string{"agent-1", "agent-2"}
	records := map[string]string{}
	for _, login := range logins {
		n.must("", "login", "add", login)
		records[login] = n.result(admin, "workspace", "add", "--login", login, "--project", "demo", "--branch", "trunk")
		n.result(admin, "session", "start", login+"/demo", "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript)
	}
	daemon := n.daemonPID()
	if exe := exeOf(daemon); exe != filepath.Join(root, "releases", c1, "ocxd") {
		t.Fatalf("the daemon %d runs %s, not the first release's ocxd", daemon, exe)
	}
	tops := map[string]int{}
	st := n.status()
	for _, login := range logins {
		s, ok := sessionOf(st, login)
		if !ok || s.Release != c1 || s.Older {
			t.Fatalf("%s's session on the first release: %+v (found %v)", login, s, ok)
		}
		serve, ok := n.serving(s.Launch)
		if !ok {
			t.Fatalf("no workspace serve for %s", login)
		}
		tops[login] = topOf(t, serve, daemon)
	}

	// Stage the second, and accept it while lines stream into the pipe.
	if r := n.ocx("", "release", "stage", "--repo", src.repo, c2[:12]); r.code != 0 {
		t.Fatalf("%s", r)
	}
	if got := links(t, root); got["staged/"+c2] != "../releases/"+c2 || got["staged/next"] != c2 {
		t.Fatalf("after the stage the links are %v", got)
	}
	if r := n.ocx("", "release", "stage", "--repo", src.repo, c2); r.code != 0 || !strings.Contains(r.stdout+r.stderr, "once") && !strings.Contains(r.stdout+r.stderr, "already") {
		t.Errorf("staging the same check-in again: %s", r)
	}
	post := pipe.PostLine{Repository: n.srv.Repo, Hash: records["agent-1"]}.String()
	from := len(n.logLines()) // the workspace's add handed its record's post once before
	written, stop, done := 0, make(chan struct{}), make(chan error, 1)
	go func() {
		w := n.pipeWriter()
		defer w.Close()
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := w.WriteLine([]byte(post)); err != nil {
				done <- err
				return
			}
			written++
			time.Sleep(100 * time.Microsecond)
		}
	}()
	accept := n.ocx("", "release", "accept")
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if accept.code != 0 || !strings.Contains(accept.stdout, c2) {
		t.Fatalf("accept: %s", accept)
	}
	if got := links(t, root); got["current"] != "releases/"+c2 || got["previous"] != "releases/"+c1 || got["staged/"+c2] != "" || got["staged/next"] != "" {
		t.Fatalf("after the accept the links are %v", got)
	}
	n.send("stop ghost-end demo")
	n.waitLogLine("the line after the stream", func(l logLine) bool { return l.Msg == "read" && l.Line == "stop ghost-end demo" })
	read := 0
	for _, l := range n.logLines()[from:] {
		if l.Msg == "read" && l.Line == post {
			read++
		}
	}
	if read != written {
		t.Errorf("%d lines written across the accept, %d read", written, read)
	}
	if pid := n.daemonPID(); pid != daemon {
		t.Fatalf("after the accept the lock is held by %d, not %d", pid, daemon)
	}
	if exe := exeOf(daemon); exe != filepath.Join(root, "releases", c2, "ocxd") {
		t.Fatalf("after the accept the daemon runs %s, not the second release's ocxd", exe)
	}
	st = n.status()
	for _, login := range logins {
		if pp := ppidOf(t, tops[login]); pp != daemon {
			t.Errorf("after the accept %s's session has parent %d, not the daemon %d", login, pp, daemon)
		}
		if s, ok := sessionOf(st, login); !ok || s.Release != c1 || !s.Older {
			t.Errorf("after the accept %s's session is %+v, want on %s and flagged older", login, s, c1)
		}
	}
	if st.Daemon == nil || st.Daemon.PID != daemon {
		t.Errorf("the status's daemon: %+v", st.Daemon)
	}

	// Stop one; restart the stopped sessions on current, twice: once.
	n.must("", "session", "stop", "agent-1/demo")
	n.waitFor("agent-1's session to end", func() bool { _, ok := sessionOf(n.status(), "agent-1"); return !ok })
	launches := len(notesOn[*messages.LaunchNote](n, records["agent-1"]))
	restart := n.must(admin, "session", "restart", "--release", "current")
	if !strings.Contains(restart.stdout, "agent-1/demo") {
		t.Errorf("restart names no agent-1/demo: %s", restart)
	}
	again := n.must(admin, "session", "restart", "--release", "current")
	if got := len(notesOn[*messages.LaunchNote](n, records["agent-1"])); got != launches+1 {
		t.Errorf("two restarts wrote %d launch notes on agent-1's record, want 1\n%s\n%s", got-launches, restart, again)
	}
	if got := len(notesOn[*messages.LaunchNote](n, records["agent-2"])); got != 1 {
		t.Errorf("the restarts wrote %d launch notes on agent-2's running session's record, want none", got-1)
	}
	st = n.status()
	if s, ok := sessionOf(st, "agent-1"); !ok || s.Release != c2 || s.Older {
		t.Errorf("the restarted session is %+v, want on %s, not flagged", s, c2)
	}

	// Roll back: the links swap, the daemon re-execs on the first release,
	// and now the restarted session is the one flagged.
	if r := n.ocx("", "release", "rollback"); r.code != 0 {
		t.Fatalf("rollback: %s", r)
	}
	if got := links(t, root); got["current"] != "releases/"+c1 || got["previous"] != "releases/"+c2 {
		t.Fatalf("after the rollback the links are %v", got)
	}
	if exe := exeOf(daemon); exe != filepath.Join(root, "releases", c1, "ocxd") || n.daemonPID() != daemon {
		t.Fatalf("after the rollback the daemon %d runs %s (lock held by %d)", daemon, exe, n.daemonPID())
	}
	st = n.status()
	if s, ok := sessionOf(st, "agent-1"); !ok || s.Release != c2 || !s.Older {
		t.Errorf("after the rollback the restarted session is %+v, want on %s, flagged", s, c2)
	}
	if s, ok := sessionOf(st, "agent-2"); !ok || s.Release != c1 || s.Older {
		t.Errorf("after the rollback agent-2's session is %+v, want on %s, not flagged", s, c1)
	}

	// The third check-in's ocxd reads another hand-off version: its stage
	// is refused by the hand-off check, and leaves nothing.
	before := links(t, root)
	bad := n.ocx("", "release", "stage", "--repo", src.repo, c3)
	if bad.code == 0 || !strings.Contains(bad.stdout+bad.stderr, "hand-off") {
		t.Fatalf("staging a release of another hand-off version: %s", bad)
	}
	if got := links(t, root); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("a refused stage changed the links: %v, were %v", got, before)
	}
	if _, err := os.Stat(filepath.Join(root, "releases", c3)); err == nil {
		t.Fatalf("a refused stage left releases/%s", c3)
	}
	// Laid out by hand, as an OCX before the checks would have staged it:
	// accept refuses it by the same check, every link unchanged.
	dir := filepath.Join(root, "releases", c3)
	buildStamped(t, src.dir, dir, c3)
	if err := os.Symlink("../releases/"+c3, filepath.Join(root, "staged", c3)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(c3, filepath.Join(root, "staged", "next")); err != nil {
		t.Fatal(err)
	}
	before = links(t, root)
	refused := n.ocx("", "release", "accept")
	if refused.code == 0 || !strings.Contains(refused.stdout+refused.stderr, "hand-off") {
		t.Fatalf("accepting a release of another hand-off version: %s", refused)
	}
	if got := links(t, root); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("a refused accept changed the links: %v, were %v", got, before)
	}
	if exe := exeOf(daemon); exe != filepath.Join(root, "releases", c1, "ocxd") || n.daemonPID() != daemon {
		t.Fatalf("after a refused accept the daemon %d runs %s", daemon, exe)
	}
}

// runOCX runs the test release's ocx with no agents root.
func runOCX(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, program("ocx"), args...)
	cmd.Env = append([]string{"HOME=" + t.TempDir(), "LANG=C.UTF-8"}, goEnv(t)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{args: args, stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("ocx %v: %v", args, err)
	}
	return r
}

// buildStamped builds the release's programs from the check-out dir into
// out, stamped with check-in as `ocx release stage` stamps them, so that
// the build cache of that stage serves them.
func buildStamped(t *testing.T, dir, out, checkin string) {
	t.Helper()
	const v = "github.com/ocx-go/ocx/host/version"
	ldflags := fmt.Sprintf("-X %s.Version=v0.0.0-test -X %s.Checkin=%s", v, v, checkin)
	for _, p := range []string{"ocx", "ocxd", "workspace"} {
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", filepath.Join(out, p), "./cmd/"+p)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=readonly")
		if o, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s of %s: %v\n%s", p, checkin, err, o)
		}
	}
}
