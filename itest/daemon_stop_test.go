package itest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
	"github.com/ocx-go/ocx/messages/protocol"
)

// The daemon's ends and hand-overs that the other daemon tests leave out: a
// child that exits inside the re-exec's window, a new image that cannot read
// its hand-off, TERM and INT while a session runs, and a stop while lines
// arrive.

// envReexecDelay is ocxd's test-only widening of the re-exec's window
// (cmd/internal/daemon.EnvReexecDelay, which this package cannot import).
const envReexecDelay = "OCXD_TEST_REEXEC_DELAY"

// procOf names a process as the daemon's log and notes do: PID@START.
func procOf(t *testing.T, pid int) (protocol.ProcID, string) {
	t.Helper()
	st, err := unixhost.ReadStat(pid)
	if err != nil {
		t.Fatalf("read the stat of %d: %v", pid, err)
	}
	p := protocol.ProcID{PID: pid, Start: st.Start}
	return p, p.String()
}

// startSession adds login's workspace and starts an echoing `stays` session
// in it, returning its record, its launch note, its `workspace serve` and
// the daemon's child (bwrap) above it.
func startSession(t *testing.T, n *testNode, daemon int, login string) (record, launch string, serve, top int) {
	t.Helper()
	admin := n.srv.AdminLogin
	n.must("", "login", "add", login)
	record = n.result(admin, "workspace", "add", "--login", login, "--project", "demo", "--branch", "trunk")
	launch = n.result(admin, "session", "start", login+"/demo", "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript)
	serve, ok := n.serving(launch)
	if !ok {
		t.Fatalf("no workspace serve for %s's launch %s", login, launch)
	}
	return record, launch, serve, sessionTop(t, serve, daemon)
}

// TestDaemonChildExitsDuringReexec: a child that ends inside the re-exec's
// window has its end recorded once, with its real exit status, by the new
// image. The window is widened for the test (OCXD_TEST_REEXEC_DELAY): one
// session is killed while the old image waits after pausing its inputs,
// before it detaches its children (the old image reaps it, holds the exit
// and hands it over); the other while the new image waits before adopting
// its children (a zombie nobody reaps, until the new image adopts it and
// reads bwrap's status). Both end notes say `exited 137`, bwrap's code for a
// command killed by KILL, where a lost status would say `unknown`.
func TestDaemonChildExitsDuringReexec(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	d := startDaemonEnv(t, n, program("ocxd"), []string{envReexecDelay + "=5s@detach,adopt"}, "--grace", "1s")
	recA, launchA, serveA, topA := startSession(t, n, d.pid(), "agent-1")
	recB, launchB, serveB, topB := startSession(t, n, d.pid(), "agent-2")
	_, procA := procOf(t, topA)
	_, procB := procOf(t, topB)

	n.send("reexec")
	n.waitLogLine("the old image's delay before it detaches its children", func(l logLine) bool {
		return l.Msg == "re-exec: test delay" && l.Point == "detach"
	})
	if err := syscall.Kill(serveA, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	lines := n.waitLogLine("the old image to reap agent-1's session", func(l logLine) bool { return l.Msg == "reaped" && l.PID == procA })
	if logIndex(lines, 0, func(l logLine) bool { return strings.HasPrefix(l.Msg, "re-exec: exec'ing") }) >= 0 {
		t.Fatalf("agent-1's session was reaped after the exec began: the window was missed\n%s", n.daemonLog())
	}

	n.waitLogLine("the new image's delay before it adopts its children", func(l logLine) bool {
		return l.Msg == "re-exec: test delay" && l.Point == "adopt"
	})
	if err := syscall.Kill(serveB, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	n.waitFor("agent-2's bwrap to end, a zombie that nobody reaps yet", func() bool {
		st, err := unixhost.ReadStat(topB)
		if err != nil || !st.Zombie() {
			return false
		}
		if logIndex(n.logLines(), 0, func(l logLine) bool { return l.Msg == "re-exec: running the new image" }) >= 0 {
			t.Fatalf("the new image adopted its children before agent-2's session ended: the window was missed")
		}
		return true
	})

	for _, c := range []struct{ login, record, launch, proc string }{{"agent-1", recA, launchA, procA}, {"agent-2", recB, launchB, procB}} {
		n.waitFor("the end note of "+c.login, func() bool { return len(n.endsOf(c.record, c.launch)) > 0 })
		ends := n.endsOf(c.record, c.launch)
		if len(ends) != 1 || ends[0].Status != messages.EndExited || ends[0].ExitCode == nil || *ends[0].ExitCode != 137 ||
			fmt.Sprintf("%d@%d", ends[0].PID, ends[0].StartTime) != c.proc {
			t.Errorf("%s's end notes: %v; want one, exited 137, process %s", c.login, ends, c.proc)
		}
	}
	// Both written by the new image (the same PID, which held the lock
	// throughout): after the old image's last line, the exec. The daemon
	// logs a note once its write returned, a moment after the note is on
	// the record, so the log is awaited too.
	for _, launch := range []string{launchA, launchB} {
		n.waitLogLine("the daemon to log the end note of "+launch, func(l logLine) bool { return l.Msg == "wrote a end note" && l.Launch == launch })
	}
	lines = n.logLines()
	exec := logIndex(lines, 0, func(l logLine) bool { return strings.HasPrefix(l.Msg, "re-exec: exec'ing") && l.OCXD == d.pid() })
	if exec < 0 || logIndex(lines, exec, func(l logLine) bool { return l.Msg == "re-exec: running the new image" && l.OCXD == d.pid() }) < 0 {
		t.Fatalf("the new image never ran:\n%s", n.daemonLog())
	}
	for _, launch := range []string{launchA, launchB} {
		if first := logIndex(lines, 0, func(l logLine) bool { return l.Msg == "wrote a end note" && l.Launch == launch }); first < exec {
			t.Errorf("the end note of %s was written at log line %d, not by the new image (after line %d)\n%s", launch, first, exec, n.daemonLog())
		}
	}
	// agent-2's session was reaped by the new image, after its delay.
	adopt := logIndex(lines, 0, func(l logLine) bool { return l.Msg == "re-exec: test delay" && l.Point == "adopt" })
	if reaped := logIndex(lines, 0, func(l logLine) bool { return l.Msg == "reaped" && l.PID == procB }); reaped < adopt {
		t.Errorf("agent-2's session was reaped at log line %d, not by the new image after line %d", reaped, adopt)
	}
	if pid := n.daemonPID(); pid != d.pid() || d.exited() {
		t.Errorf("after the re-exec the lock is held by %d, not the daemon %d (exited %v): %s", pid, d.pid(), d.exited(), d.stderr)
	}
	if _, err := os.Stat(filepath.Join(n.agents, "ocxd.handoff")); err == nil {
		t.Errorf("the hand-off file is left behind")
	}
}

// corruptingOCXD is a release's ocxd that answers the re-exec's version
// probe as ocxd does, then, started to restore, truncates the hand-off
// before the real ocxd reads it: a new image that cannot read its hand-off.
func corruptingOCXD(t *testing.T, dir, handoff, real string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\n" +
		"for a in \"$@\"; do\n" +
		"  if [ \"$a\" = --restore ]; then printf '{\"ocx\":\"ocxd-handoff\",\"version\":1,' > " + shellQuote(handoff) + "; fi\n" +
		"done\n" +
		"exec " + shellQuote(real) + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "ocxd"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestDaemonUnreadableHandoff: a new image that cannot read its hand-off
// (here a release whose ocxd truncates it) logs why and exits 1. What must
// then hold: the sessions keep running, untouched; the lock is free; nothing
// of the hand-off is left; and the next daemon finds the sessions at start,
// as it finds those of a daemon that died, and records their ends as
// unknown, once.
func TestDaemonUnreadableHandoff(t *testing.T) {
	needs(t, "ocxd", "workspace")
	root := t.TempDir()
	dirA := makeRelease(t, root, "a")
	setCurrent(t, root, "a")
	n := newNodeRelease(t, root)
	d := startDaemon(t, n, filepath.Join(root, "current", "ocxd"), "--grace", "1s")
	record, launch, serve, top := startSession(t, n, d.pid(), agent)
	proc, _ := procOf(t, top)
	// A session found at start is known by its `workspace serve`.
	served, _ := procOf(t, serve)

	corruptingOCXD(t, filepath.Join(root, "releases", "corrupt"), filepath.Join(n.agents, "ocxd.handoff"), filepath.Join(dirA, "ocxd"))
	setCurrent(t, root, "corrupt")
	n.send("reexec")
	n.waitFor("the new image to give up", d.exited)
	setCurrent(t, root, "a")
	if code := d.cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(d.stderr.String(), "hand-off") {
		t.Errorf("the new image exited %d, saying %q; want 1, naming the hand-off", code, d.stderr)
	}
	lines := n.logLines()
	if logIndex(lines, 0, func(l logLine) bool {
		return strings.HasPrefix(l.Msg, "re-exec: the hand-off cannot be taken over") && l.OCXD == d.pid()
	}) < 0 {
		t.Errorf("the log does not say why the new image gave up:\n%s", n.daemonLog())
	}
	if pid := n.daemonPID(); pid != 0 {
		t.Errorf("the lock is held by %d after the new image gave up", pid)
	}
	if _, err := os.Stat(filepath.Join(n.agents, "ocxd.handoff")); err == nil {
		t.Errorf("the hand-off file is left behind")
	}
	if !harness.Alive(serve) || !harness.Alive(top) {
		t.Fatalf("the session died with the image (serve %d alive %v, bwrap %d alive %v)", serve, harness.Alive(serve), top, harness.Alive(top))
	}
	if now, _ := procOf(t, top); now != proc {
		t.Fatalf("the session's bwrap is %s now, not %s", now, proc)
	}

	// The next daemon, started before any post (which would make the hook
	// start one), finds the session; it still answers.
	d2 := startDaemon(t, n, filepath.Join(root, "current", "ocxd"), "--grace", "1s")
	if pp := ppidOf(t, top); pp == d2.pid() || pp == d.pid() {
		t.Errorf("the session's parent is %d: a daemon adopted it as its child", pp)
	}
	hello := n.result(person, "post", "--to", record, "--text", "still there")
	if r := n.awaitReply(record, hello); !strings.Contains(r.Text, "echo: still there") {
		t.Errorf("the session's answer after the failed re-exec: %q", r.Text)
	}
	n.must("", "session", "stop", key(agent))
	n.waitFor("the end note", func() bool { return len(n.endsOf(record, launch)) > 0 })
	n.waitFor("the session's processes to be gone", func() bool {
		_, serving := n.serving(launch)
		return !serving && !harness.Alive(top)
	})
	ends := n.endsOf(record, launch)
	if len(ends) != 1 || ends[0].Status != messages.EndUnknown || ends[0].PID != served.PID || ends[0].StartTime != served.Start || ends[0].ExitCode != nil {
		t.Errorf("end notes of the session: %v; want one, unknown, process %s", ends, served)
	}
}

// TestDaemonSignalLeavesSessions: TERM, then INT, to a daemon while a
// session runs. Each time the daemon exits 0 and frees the lock, the
// session keeps running (the same processes) and answering, and the next
// daemon finds it. Its end, once it is stopped, is recorded once, as
// unknown: no daemon that saw it end was its parent.
func TestDaemonSignalLeavesSessions(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	d := startDaemon(t, n, program("ocxd"), "--grace", "1s")
	record, launch, serve, top := startSession(t, n, d.pid(), agent)
	proc, _ := procOf(t, top)
	served, _ := procOf(t, serve)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		if err := d.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		n.waitFor("the daemon to end on "+sig.String(), d.exited)
		if st := d.cmd.ProcessState; st.ExitCode() != 0 {
			t.Errorf("on %s the daemon exited %v: %s", sig, st, d.stderr)
		}
		if pid := n.daemonPID(); pid != 0 {
			t.Errorf("after %s the lock is held by %d", sig, pid)
		}
		if logIndex(n.logLines(), 0, func(l logLine) bool { return l.Msg == "stopped" && l.OCXD == d.pid() }) < 0 {
			t.Errorf("the daemon did not log its stop on %s:\n%s", sig, n.daemonLog())
		}
		if now, _ := procOf(t, top); now != proc || !harness.Alive(serve) {
			t.Fatalf("after %s the session is gone (bwrap %s, was %s; serve %d alive %v)", sig, now, proc, serve, harness.Alive(serve))
		}
		// The next daemon, started before any post would make the hook
		// start one.
		d = startDaemon(t, n, program("ocxd"), "--grace", "1s")
		hello := n.result(person, "post", "--to", record, "--text", "after "+sig.String())
		if r := n.awaitReply(record, hello); !strings.Contains(r.Text, "echo: after "+sig.String()) {
			t.Errorf("the session's answer after %s: %q", sig, r.Text)
		}
	}
	if len(n.endsOf(record, launch)) != 0 {
		t.Errorf("an end note for a session that runs")
	}
	n.must("", "session", "stop", key(agent))
	n.waitFor("the end note", func() bool { return len(n.endsOf(record, launch)) > 0 })
	n.waitFor("the session's processes to be gone", func() bool {
		_, serving := n.serving(launch)
		return !serving && !harness.Alive(top)
	})
	// Found at start, the session is known by its `workspace serve`.
	ends := n.endsOf(record, launch)
	if len(ends) != 1 || ends[0].Status != messages.EndUnknown || ends[0].PID != served.PID || ends[0].StartTime != served.Start {
		t.Errorf("end notes of the session: %v; want one, unknown, process %s", ends, served)
	}
}

// newNodeWithoutHook is a node whose repository runs no hook: the test
// alone hands the daemon its lines.
func newNodeWithoutHook(t *testing.T) *testNode {
	t.Helper()
	srv := harness.StartServer(t, harness.Options{Users: []harness.User{{Login: person, Password: personPW, Caps: "cghijnorwz234"}}})
	n := &testNode{t: t, ctx: context.Background(), srv: srv, agents: filepath.Join(t.TempDir(), "agents"),
		pw: map[string]string{srv.AdminLogin: srv.AdminPassword, person: personPW}}
	t.Cleanup(n.shutdown)
	n.must("", "init", "--project", "demo="+srv.Repo+","+srv.URL, "--release", relRoot)
	return n
}

// TestDaemonStopReadsEveryLine is the shutdown race: `post` lines of launch
// notes arrive while the daemon stops on TERM. No line is half-handled:
// every line a writer wrote is read and acted on to its end before the
// daemon exits (one session launched, or one refusal note each), and a
// writer that comes after cannot write at all, so it knows. The writer here
// holds the pipe open across the TERM and writes half of its lines only
// once the daemon says it is stopping.
func TestDaemonStopReadsEveryLine(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNodeWithoutHook(t)
	admin := n.srv.AdminLogin
	n.must("", "login", "add", agent)
	record := n.result(admin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	data, err := os.ReadFile(filepath.Join(n.workspaceDir(agent), "binding.json"))
	if err != nil {
		t.Fatal(err)
	}
	binding, err := messages.DecodeBinding(data)
	if err != nil {
		t.Fatal(err)
	}
	client := &fossilio.Client{URL: n.srv.URL, Login: admin, Password: n.srv.AdminPassword, ProjectCode: n.srv.ProjectCode}
	ctx := context.Background()
	def := &messages.SessionDefinition{Kind: messages.Mechanical, Command: []string{"/bin/sh", "-c", echoScript}, Lifetime: messages.Stays}
	block, err := def.Encode()
	if err != nil {
		t.Fatal(err)
	}
	defHash, err := client.Reply(ctx, record, record, "A session.\n\n"+string(block))
	if err != nil {
		t.Fatal(err)
	}
	const before, during = 6, 6
	launches := make([]string, before+during+1)
	for i := range launches {
		ln := &messages.LaunchNote{Login: agent, Project: "demo", Workspace: binding.Workspace, Session: defHash, Release: messages.ReleaseCurrent}
		lb, err := ln.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if launches[i], err = client.Reply(ctx, record, record, fmt.Sprintf("launch %d\n\n%s", i, lb)); err != nil {
			t.Fatal(err)
		}
	}
	line := func(i int) []byte {
		return []byte(pipe.PostLine{Repository: n.srv.Repo, Hash: launches[i]}.String())
	}

	d := startDaemon(t, n, program("ocxd"), "--grace", "1s")
	w := n.pipeWriter()
	delivered := make([]bool, len(launches))
	for i := 0; i < before; i++ {
		delivered[i] = w.WriteLine(line(i)) == nil
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	n.waitLogLine("the daemon to say it stops", func(l logLine) bool { return strings.HasPrefix(l.Msg, "stopping on a signal") })
	for i := before; i < before+during; i++ {
		delivered[i] = w.WriteLine(line(i)) == nil
		time.Sleep(20 * time.Millisecond)
	}
	w.Close()
	// A writer after the daemon removed its pipe's name cannot write.
	last := len(launches) - 1
	n.waitFor("the daemon to remove its pipe", func() bool {
		_, err := os.Stat(filepath.Join(n.agents, "ocxd"))
		return errors.Is(err, os.ErrNotExist) || d.exited()
	})
	if w2, err := n.openPipe(); err == nil {
		delivered[last] = w2.WriteLine(line(last)) == nil
		w2.Close()
	}
	n.waitFor("the daemon to end on TERM", d.exited)
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("on TERM the daemon exited %d: %s", code, d.stderr)
	}
	for i := 0; i < last; i++ {
		if !delivered[i] {
			t.Fatalf("line %d could not be written while the daemon read to the end of its pipe", i)
		}
	}
	if delivered[last] {
		t.Errorf("a line was written after the daemon removed its pipe's name")
	}

	// Every line written was read once, half of them after the stop began;
	// each of its launch notes has exactly one outcome, and the line that
	// could not be written has none.
	lines := n.logLines()
	stopping := logIndex(lines, 0, func(l logLine) bool { return strings.HasPrefix(l.Msg, "stopping on a signal") })
	running := ""
	for i, l := range launches {
		var reads []int
		for j, ll := range lines {
			if ll.Msg == "read" && strings.Contains(ll.Line, l) {
				reads = append(reads, j)
			}
		}
		refusals := len(n.refusalsOf(record, l))
		_, runs := n.serving(l)
		switch {
		case !delivered[i]:
			if len(reads) != 0 || refusals != 0 || runs {
				t.Errorf("launch %d, never written: read %d times, %d refusals, running %v", i, len(reads), refusals, runs)
			}
			continue
		case len(reads) != 1:
			t.Errorf("launch %d read %d times", i, len(reads))
		case i >= before && reads[0] < stopping:
			t.Errorf("launch %d, written after the daemon said it stops, was read before (log line %d < %d)", i, reads[0], stopping)
		}
		outcomes := refusals
		if runs {
			outcomes++
			if running != "" {
				t.Errorf("launches %s and %s both run a session in one workspace", running, l)
			}
			running = l
		}
		if outcomes != 1 {
			t.Errorf("launch %d has %d outcomes (%d refusal notes, running %v); want exactly one", i, outcomes, refusals, runs)
		}
	}
	if running == "" {
		t.Fatalf("no launch runs a session:\n%s", n.daemonLog())
	}

	// The session launched outlives the daemon; the next one finds it, and
	// its end is recorded once.
	startDaemon(t, n, program("ocxd"), "--grace", "1s")
	n.must("", "session", "stop", key(agent))
	n.waitFor("the session's end note", func() bool { return len(n.endsOf(record, running)) > 0 })
	if ends := n.endsOf(record, running); len(ends) != 1 || ends[0].Status != messages.EndUnknown {
		t.Errorf("end notes of launch %s: %v; want one, unknown", running, ends)
	}
	n.waitFor("the session's processes to be gone", func() bool {
		_, serving := n.serving(running)
		return !serving
	})
}

// TestDaemonStoppingIsFollowedByTheNext: a tool that hands a line to the
// daemon while one is stopping (it still holds the lock, its pipe's name is
// gone: D22) waits for it to end and starts the next, which takes the line.
// The stopping daemon is held in its last read by a writer that keeps the
// pipe open; `ocx session stop` comes meanwhile. Fails if the tool checks
// the lock once and then only waits for a reader.
func TestDaemonStoppingIsFollowedByTheNext(t *testing.T) {
	needs(t, "ocxd", "workspace", "ocx")
	n := newNodeWithoutHook(t)
	d := startDaemon(t, n, program("ocxd"), "--grace", "1s")
	record, launch, serve, top := startSession(t, n, d.pid(), agent)
	served, _ := procOf(t, serve)

	w := n.pipeWriter()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	n.waitFor("the daemon to remove its pipe's name", func() bool {
		_, err := os.Stat(filepath.Join(n.agents, "ocxd"))
		return errors.Is(err, os.ErrNotExist)
	})
	if holder := n.daemonPID(); d.exited() || holder != d.pid() {
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(holder) + "/cmdline")
		t.Fatalf("the daemon %d ended while a writer held its pipe (exited %v, lock held by %d: %q)\nocxd.log:\n%s\nps:\n%s",
			d.pid(), d.exited(), holder, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}), n.daemonLog(), psForest())
	}
	stopped := make(chan result, 1)
	go func() { stopped <- n.ocx("", "session", "stop", key(agent)) }()
	time.Sleep(time.Second)
	if d.exited() {
		t.Fatalf("the daemon ended before the writer closed its pipe")
	}
	w.Close()
	r := <-stopped
	if r.code != 0 {
		t.Fatalf("session stop while the daemon stopped: %s", r)
	}
	if !strings.Contains(r.stderr+r.stdout, "started the daemon") {
		t.Errorf("session stop did not say it started the next daemon: %s", r)
	}
	n.waitFor("the old daemon to end", d.exited)
	next := n.daemonPID()
	if next == 0 || next == d.pid() {
		t.Fatalf("after the stop the lock is held by %d (old daemon %d)", next, d.pid())
	}
	n.waitFor("the end note", func() bool { return len(n.endsOf(record, launch)) > 0 })
	n.waitFor("the session's processes to be gone", func() bool { return !harness.Alive(serve) && !harness.Alive(top) })
	ends := n.endsOf(record, launch)
	if len(ends) != 1 || ends[0].Status != messages.EndUnknown || ends[0].PID != served.PID {
		t.Errorf("end notes of the session: %v; want one, unknown, process %s", ends, served)
	}
}

// stopInReexec starts a daemon whose re-exec window is widened as delay
// says (OCXD_TEST_REEXEC_DELAY), with a session under it, asks a re-exec
// and sends the daemon TERM once the old image waits at point. It
// returns once the daemon ended with exit 0, with its log; ranOn checks
// that the lock is free and the session ran on, then stops it.
func stopInReexec(t *testing.T, delay, point string) (n *testNode, lines []logLine, ranOn func()) {
	needs(t, "ocxd", "workspace")
	n = newNode(t)
	d := startDaemonEnv(t, n, program("ocxd"), []string{envReexecDelay + "=" + delay}, "--grace", "1s")
	_, launch, serve, _ := startSession(t, n, d.pid(), "agent-1")
	n.send("reexec")
	n.waitLogLine("the old image's delay at "+point, func(l logLine) bool {
		return l.Msg == "re-exec: test delay" && l.Point == point
	})
	if err := syscall.Kill(d.pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	n.waitFor("the daemon to end on TERM", d.exited)
	if st := d.cmd.ProcessState; st.ExitCode() != 0 {
		t.Errorf("the daemon ended %v, not with exit 0", st)
	}
	ranOn = func() {
		if pid := n.daemonPID(); pid != 0 {
			t.Errorf("after the stop the lock is held by %d", pid)
		}
		if p, ok := n.serving(launch); !ok || p != serve {
			t.Errorf("the session's workspace serve %d is gone after the daemon's stop (now %d, %v)", serve, p, ok)
		}
		n.must("", "session", "stop", "agent-1/demo")
		n.waitFor("the session to end", func() bool { return !harness.Alive(serve) })
	}
	return n, n.logLines(), ranOn
}

// TestDaemonStopDuringReexec: a TERM that comes while a re-exec checks the
// release's ocxd stops the daemon, as asked: the old image execs nothing
// and ends (exit 0), its session running on; before, the stop waited
// behind the exec, and the new image, which knew nothing of it, ran on
// (D81's TestReceiptPage met it one run in five). The window is widened
// for the test (OCXD_TEST_REEXEC_DELAY).
func TestDaemonStopDuringReexec(t *testing.T) {
	n, lines, ranOn := stopInReexec(t, "2s@checked", "checked")
	if logIndex(lines, 0, func(l logLine) bool { return l.Msg == "re-exec: running the new image" }) >= 0 {
		t.Errorf("a new image ran after the stop:\n%s", n.daemonLog())
	}
	ranOn()
}

// TestDaemonStopCaughtBeforeItsExec: a TERM that Go's runtime caught
// before the exec, but that the daemon's loop had not acted on yet (it
// goes there through os/signal's goroutine), stops the daemon: the exec
// first has the loop settle every signal caught (settleSignals), so the
// old image ends, exit 0, and no new image runs. The test holds the loop
// (OCXD_TEST_REEXEC_DELAY at "signal") from the moment it takes the TERM
// until after the exec would have begun (the delay at "checked" ends
// first, having begun first); before, the exec went on and the stop died
// with the old image: the new image ran on, as TestNodeAddTakesEffectAtOnce
// met it.
func TestDaemonStopCaughtBeforeItsExec(t *testing.T) {
	n, lines, ranOn := stopInReexec(t, "2s@checked,signal", "checked")
	if logIndex(lines, 0, func(l logLine) bool { return l.Msg == "re-exec: test delay" && l.Point == "signal" }) < 0 {
		t.Errorf("the loop was not held on the TERM:\n%s", n.daemonLog())
	}
	if logIndex(lines, 0, func(l logLine) bool { return l.Msg == "re-exec: running the new image" }) >= 0 {
		t.Errorf("a new image ran after the stop:\n%s", n.daemonLog())
	}
	ranOn()
}

// TestDaemonStopDuringItsExec: a TERM that comes after the old image's
// last look at its stop, while it execs, is not lost with it: the old
// image writes it for the new one (AGENTS/ocxd.stopasked), which stops as
// soon as it runs, sessions untouched, the lock released and the word
// taken.
func TestDaemonStopDuringItsExec(t *testing.T) {
	n, lines, ranOn := stopInReexec(t, "2s@exec", "exec")
	if logIndex(lines, 0, func(l logLine) bool {
		return strings.HasPrefix(l.Msg, "stopping: the old image was asked to stop during its exec")
	}) < 0 {
		t.Errorf("the new image did not say it stopped for the old image's stop:\n%s", n.daemonLog())
	}
	if _, err := os.Stat(filepath.Join(n.agents, "ocxd.stopasked")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the stop's word is left behind: %v", err)
	}
	ranOn()
}
