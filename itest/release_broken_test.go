package itest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// The check-ins of the releases of TestReleaseBrokenDaemon.
var (
	brokenCiA = strings.Repeat("a7", 20) // runs: this tree's ocxd and workspace, stamped
	brokenCiB = strings.Repeat("b7", 20) // broken: its ocxd cannot run as the daemon
	brokenCiZ = strings.Repeat("c7", 20) // previous before B's accepts: scripts, never run
)

// versionLine is the version line a release's program says.
func versionLine(program, checkin string) string {
	return program + " version v0.0.0-20261201000000-" + checkin[:12] + " checkin " + checkin
}

// ocxWrapper is a release's ocx that says its own version line and is the
// test release's ocx otherwise (the hook, the tools).
func ocxWrapper(t *testing.T, dir, checkin string) {
	t.Helper()
	writeScript(t, filepath.Join(dir, "ocx"), fmt.Sprintf("#!/bin/sh\nif [ \"$1\" = version ]; then echo '%s'; exit 0; fi\nexec '%s' \"$@\"\n",
		versionLine("ocx", checkin), filepath.Join(release(), "ocx")))
}

// brokenOcxd is an ocxd that answers --version and --handoff-version as
// the real one does and cannot run as the daemon: it exits 1 saying so.
// While the file pass exists, it answers --handoff-check right too, so
// that the daemon execs it and it ends at once.
func brokenOcxd(t *testing.T, dir, checkin, pass string) {
	t.Helper()
	writeScript(t, filepath.Join(dir, "ocxd"), fmt.Sprintf(`#!/bin/sh
case "$1" in
--version) echo '%s'; exit 0 ;;
--handoff-version) echo %d; exit 0 ;;
esac
for a in "$@"; do
	if [ "$a" = --handoff-check ] && [ -e '%s' ]; then echo '%s'; exit 0; fi
done
echo 'ocxd: this release cannot run as the daemon' >&2
exit 1
`, versionLine("ocxd", checkin), protocol.HandoffVersion, pass, protocol.HandoffCheckAnswer))
}

// TestReleaseBrokenDaemon is issue 38's third item (D73) with the real
// daemon, hook, sessions in bwrap and a release root of the test's own.
// Release A runs this tree's ocxd and workspace; Z is previous; B's ocxd
// answers --version and --handoff-version as a real one and exits 1 as a
// daemon.
//
//  1. B staged and accepted with a daemon and a session running: the
//     daemon's check of B's ocxd on the hand-off fails, so it does not
//     exec; it keeps its PID, its program and its child, and accept puts
//     the links back (current A, previous Z) saying why.
//  2. B's check now passes, but its daemon exits at once: accept sees the
//     daemon end and rolls the links back; the session runs on, and the
//     hook's next run starts a daemon on A, which finds it.
//  3. The same with nobody waiting (accept's bound shorter than the
//     daemon's test delay): the links stay at B until the hook's next run,
//     which rolls them back, once, and starts the daemon on A.
//
// The status, the daemon's log and the next `ocx release` answer say what
// happened.
func TestReleaseBrokenDaemon(t *testing.T) {
	needs(t, "ocxd", "workspace")
	dir := t.TempDir()
	dirA, dirB, dirZ := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "z")
	for _, d := range []string{dirA, dirB, dirZ} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const v = "github.com/ocx-go/ocx/host/version"
	for _, p := range []string{"ocxd", "workspace"} {
		build := exec.Command("go", "build", "-ldflags", fmt.Sprintf("-X %s.Version=v0.0.0-20261201000000-%s -X %s.Checkin=%s", v, brokenCiA[:12], v, brokenCiA),
			"-o", filepath.Join(dirA, p), "github.com/ocx-go/ocx/cmd/"+p)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build %s stamped %s: %v\n%s", p, brokenCiA, err, out)
		}
	}
	ocxWrapper(t, dirA, brokenCiA)
	pass := filepath.Join(dir, "check-passes")
	for d, ci := range map[string]string{dirB: brokenCiB, dirZ: brokenCiZ} {
		ocxWrapper(t, d, ci)
		writeScript(t, filepath.Join(d, "workspace"), fmt.Sprintf("#!/bin/sh\necho '%s'\n", versionLine("workspace", ci)))
		brokenOcxd(t, d, ci, pass)
	}

	root := filepath.Join(dir, "release")
	if r := runOCX(t, "release", "init", root, "--from", dirA); r.code != 0 {
		t.Fatalf("%s", r)
	}
	n := newNodeRelease(t, root)
	admin := n.srv.AdminLogin
	wantLinks := func(when string, want map[string]string) {
		t.Helper()
		if got := links(t, root); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s the links are %v, want %v", when, got, want)
		}
		if _, err := os.Lstat(filepath.Join(root, "undo", brokenCiB)); err == nil {
			t.Fatalf("%s undo/%s is left", when, brokenCiB)
		}
	}
	// Z becomes previous, no daemon running: accepted, then rolled back.
	if pid := n.daemonPID(); pid != 0 {
		t.Fatalf("a daemon (pid %d) runs before the first session", pid)
	}
	n.must("", "release", "stage", "--from", dirZ)
	n.must("", "release", "accept")
	n.must("", "release", "rollback")
	ab := map[string]string{"current": "releases/" + brokenCiA, "previous": "releases/" + brokenCiZ}
	wantLinks("with Z previous", ab)

	// A session on A, the daemon's child.
	n.must("", "login", "add", "agent-1")
	record := n.result(admin, "workspace", "add", "--login", "agent-1", "--project", "demo", "--branch", "trunk")
	launch := n.result(admin, "session", "start", "agent-1/demo", "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript)
	daemon := n.daemonPID()
	exeA := filepath.Join(root, "releases", brokenCiA, "ocxd")
	if exe := exeOf(daemon); exe != exeA {
		t.Fatalf("the daemon %d runs %s, not A's ocxd", daemon, exe)
	}
	serve, ok := n.serving(launch)
	if !ok {
		t.Fatal("no workspace serve for agent-1")
	}
	top := topOf(t, serve, daemon)
	rolledBack := func() int {
		c := 0
		for _, l := range n.logLines() {
			if l.Msg == "re-exec: the release was rolled back" {
				c++
			}
		}
		return c
	}
	sessionOn := func(when string) {
		t.Helper()
		if st, err := os.ReadFile("/proc/" + strconv.Itoa(serve) + "/cmdline"); err != nil || !strings.Contains(string(st), "serve") {
			t.Fatalf("%s the session's workspace serve (pid %d) is gone: %v", when, serve, err)
		}
		s, ok := sessionOf(n.status(), "agent-1")
		if !ok || s.Launch != launch {
			t.Fatalf("%s the status's session of agent-1: %+v (found %v)", when, s, ok)
		}
	}

	// 1. Refused before the exec: the daemon runs on, the links go back.
	n.must("", "release", "stage", "--from", dirB)
	r := n.ocx("", "release", "accept")
	for _, w := range []string{"refused release " + brokenCiB + " before the exec", "--handoff-check: exit status 1: ocxd: this release cannot run as the daemon",
		"it runs its old image on", "the links are put back: current is " + brokenCiA + " again"} {
		if r.code == 0 || !strings.Contains(r.stdout+r.stderr, w) {
			t.Fatalf("the accept of a release refused: want %q\n%s", w, r)
		}
	}
	wantLinks("after the refused accept", ab)
	if pid := n.daemonPID(); pid != daemon || exeOf(daemon) != exeA || ppidOf(t, top) != daemon {
		t.Fatalf("after the refused accept the lock is held by %d running %s, the session's parent %d; want %d, A's ocxd, the daemon",
			pid, exeOf(daemon), ppidOf(t, top), daemon)
	}
	sessionOn("after the refused accept")
	d := n.status().Daemon
	if d == nil || !d.Running || d.PID != daemon || d.Reexec == nil || d.Reexec.State != messages.ReexecRefused || d.Reexec.From != brokenCiA || d.Reexec.Release != brokenCiB {
		t.Fatalf("the status's daemon after the refusal: %+v %+v", d, d.Reexec)
	}
	if st := n.must("", "release", "status"); !strings.Contains(st.stdout, "reexec=failed reexec_state=refused reexec_release="+brokenCiB) {
		t.Fatalf("ocx release status after the refusal:\n%s", st)
	}

	// 2. Exec'd, and ended at once, accept waiting.
	if err := os.WriteFile(pass, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	n.must("", "release", "stage", "--from", dirB)
	r = n.ocx("", "release", "accept")
	for _, w := range []string{"release " + brokenCiB + " was rolled back: its daemon ended before it recorded its outcome",
		"current names " + brokenCiA + " again, previous names " + brokenCiZ, "the next start of the daemon"} {
		if r.code == 0 || !strings.Contains(r.stdout+r.stderr, w) {
			t.Fatalf("the accept of a release whose daemon ends: want %q\n%s", w, r)
		}
	}
	wantLinks("after the accept of a release whose daemon ended", ab)
	if c := rolledBack(); c != 1 {
		t.Fatalf("the daemon's log says %d rollbacks, want 1:\n%s", c, n.daemonLog())
	}
	// The hook's next run: a person's post starts the daemon, on A.
	post := n.result(person, "post", "--to", record, "--text", "after the broken release")
	if reply := n.awaitReply(record, post); !strings.Contains(reply.Text, "echo: after the broken release") {
		t.Errorf("the session's reply after the broken release: %q", reply.Text)
	}
	n.waitFor("a daemon on A", func() bool { return n.daemonPID() != 0 && pipeHasReader(n) })
	daemon = n.daemonPID()
	if exe := exeOf(daemon); exe != exeA {
		t.Fatalf("the daemon the hook started (%d) runs %s, not A's ocxd", daemon, exe)
	}
	sessionOn("after the hook's run")
	d = n.status().Daemon
	if d == nil || d.Release != brokenCiA || d.Reexec == nil || d.Reexec.State != messages.ReexecRolledBack || !strings.Contains(d.Reexec.Error, "release "+brokenCiB+" was rolled back") {
		t.Fatalf("the status's daemon after the rollback: %+v %+v", d, d.Reexec)
	}
	dry := n.must("", "release", "rollback", "--dry-run")
	if !strings.Contains(dry.stdout, "the daemon's last re-exec, at ") || !strings.Contains(dry.stdout, "release "+brokenCiB+" was rolled back") {
		t.Fatalf("the next `ocx release` answer does not say the rollback:\n%s", dry)
	}
	wantLinks("after a dry run", ab)

	// 3. Nobody waiting: the daemon is given a test delay longer than
	// accept's bound, so accept answers before the exec.
	if err := syscall.Kill(daemon, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	n.waitFor("the daemon to stop", func() bool { return n.daemonPID() == 0 })
	dd := startDaemonEnv(t, n, filepath.Join(root, "current", "ocxd"), []string{envReexecDelay + "=2s@checked"})
	n.must("", "release", "stage", "--from", dirB)
	r = n.ocx("", "release", "accept", "--wait", "1s") // ocx bounds it below at 1s
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "within 1s") {
		t.Fatalf("accept with a bound shorter than the re-exec: %s", r)
	}
	n.waitFor("the daemon to exec the broken release and end", dd.exited)
	// A hook run of an earlier receipt may come first and roll back; else
	// the links are as accepted until the run the post makes.
	o := n.status().Daemon.Reexec
	if o == nil || o.Release != brokenCiB || o.From != brokenCiA || o.PID != dd.pid() || o.State != messages.ReexecPending && o.State != messages.ReexecRolledBack {
		t.Fatalf("the outcome the ended daemon left: %+v", o)
	}
	if got := links(t, root); o.State == messages.ReexecPending && (got["current"] != "releases/"+brokenCiB || got["previous"] != "releases/"+brokenCiA) {
		t.Fatalf("before the hook's next run the links are %v, want as accepted", got)
	}
	post = n.result(person, "post", "--to", record, "--text", "after nobody waited")
	if reply := n.awaitReply(record, post); !strings.Contains(reply.Text, "echo: after nobody waited") {
		t.Errorf("the session's reply after nobody waited: %q", reply.Text)
	}
	n.waitFor("a daemon on A again", func() bool { return n.daemonPID() != 0 && pipeHasReader(n) })
	wantLinks("after the hook's run", ab)
	if exe := exeOf(n.daemonPID()); exe != exeA {
		t.Fatalf("the daemon the hook started runs %s, not A's ocxd", exe)
	}
	sessionOn("after the hook rolled back")
	if c := rolledBack(); c != 2 {
		t.Fatalf("the daemon's log says %d rollbacks, want 2:\n%s", c, n.daemonLog())
	}
	o = n.status().Daemon.Reexec
	if o == nil || o.State != messages.ReexecRolledBack || o.PID != dd.pid() || !strings.Contains(o.Error, "its daemon ended before it recorded its outcome (pid "+strconv.Itoa(dd.pid())) {
		t.Fatalf("the outcome after the hook rolled back: %+v", o)
	}
	// Once: the hook's next run rolls nothing back again.
	post = n.result(person, "post", "--to", record, "--text", "once")
	n.awaitReply(record, post)
	if c := rolledBack(); c != 2 {
		t.Fatalf("the daemon's log says %d rollbacks after another hook run, want 2", c)
	}
	wantLinks("after another hook run", ab)
}
