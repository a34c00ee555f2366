package itest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
)

// TestDaemonOneRunsAndLogs is issue 5's first point: the lock admits one
// daemon per agents root, a second start exits 0 at once saying one runs,
// the log is one JSON line per event, and TERM stops the daemon and frees
// the lock.
func TestDaemonOneRunsAndLogs(t *testing.T) {
	needs(t, "ocxd")
	n := newNode(t)
	d := startDaemon(t, n, program("ocxd"), "--grace", "1s")

	// A second daemon that took the lock would run until stopped: bounded,
	// as every wait of these tests is.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	second := exec.CommandContext(ctx, program("ocxd"), "--agents", n.agents)
	second.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + n.agents, "LANG=C.UTF-8"}
	second.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	second.Stdout, second.Stderr = &out, &out
	if err := second.Run(); err != nil {
		t.Fatalf("a second ocxd: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "already runs") {
		t.Errorf("a second ocxd does not say one runs: %q", out.String())
	}
	if got := n.daemonPID(); got != d.pid() {
		t.Errorf("after a second start the lock is held by %d, not the first daemon %d", got, d.pid())
	}

	bad := exec.CommandContext(ctx, program("ocxd"), "--grace", "1s")
	var badOut bytes.Buffer
	bad.Stderr = &badOut
	err := bad.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(badOut.String(), "--agents") {
		t.Errorf("ocxd without --agents: %v, %q", err, badOut.String())
	}

	// A line that is not one the daemon reads is logged, and it goes on.
	n.send("launch agent-1 demo", "stop ghost demo")
	n.waitFor("the stop line in the log", func() bool {
		for _, l := range n.logLines() {
			if l.Msg == "read" && l.Line == "stop ghost demo" {
				return true
			}
		}
		return false
	})
	d.stop()
	if d.cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("ocxd on TERM exited %d: %s", d.cmd.ProcessState.ExitCode(), d.stderr)
	}
	if pid := n.daemonPID(); pid != 0 {
		t.Errorf("the lock is still held by %d after TERM", pid)
	}
	var started, refused, stopped bool
	for _, l := range n.logLines() {
		started = started || l.Msg == "started" && l.OCXD == d.pid()
		refused = refused || l.Msg == "a pipe line refused" && strings.Contains(l.Line, "launch agent-1")
		stopped = stopped || l.Msg == "stopped" && l.OCXD == d.pid()
	}
	if !started || !refused || !stopped {
		t.Errorf("the log lacks started %v, the refused line %v, stopped %v:\n%s", started, refused, stopped, n.daemonLog())
	}
}

// sessionTop walks up from a session's `workspace serve` to the daemon's
// child (bwrap): the process whose parent is the daemon.
func sessionTop(t *testing.T, serve, daemon int) int {
	t.Helper()
	p := serve
	for i := 0; i < 8; i++ {
		pp := ppidOf(t, p)
		if pp == daemon {
			return p
		}
		if pp <= 1 {
			break
		}
		p = pp
	}
	t.Fatalf("session %d is not a descendant of the daemon %d", serve, daemon)
	return 0
}

// TestDaemonLaunchRefusalStopWithGrace is seed 002's "launch a session",
// "record a session's end" and "stop a session" on the real daemon: the
// session is the daemon's child in a process group and session of its own,
// inside bwrap; a second launch into its workspace is refused with a note
// naming it; a stop sends TERM, and a turn that ignores TERM is killed after
// the grace, which the end note says.
func TestDaemonLaunchRefusalStopWithGrace(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	admin := n.srv.AdminLogin
	d := startDaemon(t, n, program("ocxd"), "--grace", "1s")
	n.must("", "login", "add", agent)
	record := n.result(admin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")

	// A turn that ignores TERM: it marks its start in the workspace (its
	// HOME) and sleeps.
	script := `trap '' TERM; read -r line; touch "$HOME/turn-started"; sleep 120; echo never`
	launch := n.result(admin, "session", "start", key(agent), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", script)
	serve, ok := n.serving(launch)
	if !ok {
		t.Fatalf("no workspace serve for launch %s", launch)
	}
	top := sessionTop(t, serve, d.pid())
	st, err := unixhost.ReadStat(top)
	if err != nil {
		t.Fatal(err)
	}
	if st.PGID != top || st.SID != top {
		t.Errorf("the daemon's child %d is in group %d, session %d: not its own", top, st.PGID, st.SID)
	}
	if cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(top) + "/cmdline"); !bytes.HasPrefix(cmd, []byte("bwrap\x00")) && !strings.Contains(string(cmd), "/bwrap\x00") {
		t.Errorf("the daemon's child is not bwrap: %q", cmd)
	}

	// A second launch note while it runs: refused with one note naming it.
	second := n.launchAgain(record)
	n.waitFor("the refusal note", func() bool { return len(n.refusalsOf(record, second)) > 0 })
	refs := n.refusalsOf(record, second)
	if len(refs) != 1 || refs[0].Holder == nil || refs[0].Holder.PID != serve || refs[0].Holder.StartedBy != messages.OriginDaemon ||
		!strings.Contains(refs[0].Reason, "already") {
		t.Errorf("the refusal of %s: %+v (holder %+v), want one naming %d started by the daemon", second, refs, refs[0].Holder, serve)
	}

	// Wake the turn, then stop: TERM, ignored; KILL after the grace.
	n.result(person, "post", "--to", record, "--text", "work")
	n.waitFor("the turn to start", func() bool {
		_, err := os.Stat(filepath.Join(n.workspaceDir(agent), "turn-started"))
		return err == nil
	})
	n.must("", "session", "stop", key(agent))
	n.waitFor("the end note", func() bool { return len(n.endsOf(record, launch)) > 0 })
	ends := n.endsOf(record, launch)
	if len(ends) != 1 {
		t.Fatalf("%d end notes for %s", len(ends), launch)
	}
	e := ends[0]
	if e.PID != top || e.StartTime != st.Start || e.Status != messages.EndSignaled || e.Signal != "SIGKILL" || !e.Killed || e.Release != "test" {
		t.Errorf("the end note: %s; want pid %d start %d signaled SIGKILL killed, release test", e, top, st.Start)
	}
	var graceRanOut bool
	for _, l := range n.logLines() {
		graceRanOut = graceRanOut || strings.Contains(l.Msg, "grace ran out")
	}
	if !graceRanOut {
		t.Errorf("the log does not say the grace ran out:\n%s", n.daemonLog())
	}
	n.waitFor("the session's processes to be gone", func() bool {
		_, serving := n.serving(launch)
		return !serving && !harness.Alive(top)
	})
	// Still one end note once everything settled.
	if ends := n.endsOf(record, launch); len(ends) != 1 {
		t.Errorf("%d end notes for %s after settling", len(ends), launch)
	}
	// Its record is no protocol v1 record, so its end note is no response:
	// the daemon withdraws nothing (D35), and the login keeps its letters.
	rd := n.repo()
	u, err := rd.User(n.ctx, agent)
	rd.Close()
	if err != nil || u.Caps != fossilio.AgentCaps {
		t.Errorf("after the end note %s has capabilities %q (%v), want %q", agent, u.Caps, err, fossilio.AgentCaps)
	}
}

// TestDaemonRefusesATerminalSession: a session started by hand at a
// terminal names its workspace, so the daemon refuses a launch there with a
// note naming that process (started at a terminal), never starts one, and a
// stop sends it TERM alone.
func TestDaemonRefusesATerminalSession(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	admin := n.srv.AdminLogin
	startDaemon(t, n, program("ocxd"), "--grace", "1s")
	const login = "agent-2"
	n.must("", "login", "add", login)
	record := n.result(admin, "workspace", "add", "--login", login, "--project", "demo", "--branch", "trunk")
	def := &messages.SessionDefinition{Kind: messages.Mechanical, Command: []string{"/bin/sh", "-c", "cat"}, Lifetime: messages.Stays}
	block, err := def.Encode()
	if err != nil {
		t.Fatal(err)
	}
	n.result(admin, "post", "--to", record, "--text", "A session for the terminal.\n\n"+string(block))

	ws := n.workspaceDir(login)
	term := exec.Command(program("workspace"), "run", login+"/demo", "--root", n.agents)
	term.Env = []string{"PATH=" + release() + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + ws, "LANG=C.UTF-8"}
	term.Dir = filepath.Join(ws, "tree")
	var termOut bytes.Buffer
	term.Stdout, term.Stderr = &termOut, &termOut
	if err := term.Start(); err != nil {
		t.Fatal(err)
	}
	termDone := make(chan error, 1)
	go func() { termDone <- term.Wait() }()
	t.Cleanup(func() {
		select {
		case <-termDone:
		default:
			term.Process.Kill()
			<-termDone
		}
	})
	n.waitFor("the terminal session to listen", func() bool {
		st := n.status()
		return len(st.Sessions) == 1 && st.Sessions[0].Listening && st.Sessions[0].StartedBy == messages.OriginTerminal
	})

	// `session start` refuses before writing anything, naming the terminal
	// session (D33); a launch note written anyway is refused by the daemon.
	a, r := n.answer(admin, "session", "start", login+"/demo", "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", "cat")
	if r.code != 1 || a.Result != nil || a.Stopped == nil || !strings.Contains(*a.Stopped, fmt.Sprintf("pid %d", term.Process.Pid)) || !strings.Contains(*a.Stopped, "nothing written") {
		t.Fatalf("a start beside a terminal session: %s", r)
	}
	launch := n.launchAgain(record)
	n.waitFor("the refusal note", func() bool { return len(n.refusalsOf(record, launch)) > 0 })
	refs := n.refusalsOf(record, launch)
	h := refs[0].Holder
	if len(refs) != 1 || h == nil || h.PID != term.Process.Pid || h.StartedBy != messages.OriginTerminal || len(h.Command) < 2 || h.Command[1] != "run" {
		t.Errorf("the refusal: %+v, holder %+v; want one naming pid %d, run, at a terminal", refs, h, term.Process.Pid)
	}
	if _, ok := n.serving(launch); ok {
		t.Errorf("the daemon started a session beside the terminal one")
	}

	// A stop reaches the terminal session: TERM to it alone; it stops by
	// itself (exit 0, D17).
	n.must("", "session", "stop", login+"/demo")
	select {
	case err := <-termDone:
		termDone <- err
		if err != nil {
			t.Errorf("the terminal session after the stop: %v\n%s", err, termOut.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the terminal session did not stop\n%s\nocxd.log:\n%s", termOut.String(), n.daemonLog())
	}
	if ends := n.endsOf(record, launch); len(ends) != 0 {
		t.Errorf("end notes for a launch never started: %v", ends)
	}
}

// TestDaemonKill9AndRestart: sessions outlive a daemon killed with KILL
// (never Pdeathsig, never --die-with-parent); the next daemon finds them in
// the process table (orphans now), refuses launches beside them, restarts
// nothing, and records their end as "unknown" when it comes.
func TestDaemonKill9AndRestart(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	admin := n.srv.AdminLogin
	d := startDaemon(t, n, program("ocxd"), "--grace", "1s")
	n.must("", "login", "add", agent)
	record := n.result(admin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	launch := n.result(admin, "session", "start", key(agent), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript)
	serve, ok := n.serving(launch)
	if !ok {
		t.Fatalf("no session for %s", launch)
	}
	top := sessionTop(t, serve, d.pid())
	// The session reads its wake pipe before the daemon goes: a post
	// that came earlier would find no reader, whatever the daemon did.
	n.waitFor("the session to listen", func() bool {
		for _, s := range n.status().Sessions {
			if s.Login == agent && s.Listening {
				return true
			}
		}
		return false
	})

	d.kill9()
	if !harness.Alive(serve) || !harness.Alive(top) {
		t.Fatalf("the session died with the daemon (serve %d alive %v, bwrap %d alive %v)", serve, harness.Alive(serve), top, harness.Alive(top))
	}
	if n.daemonPID() != 0 {
		t.Fatalf("the lock is held after the daemon was killed")
	}
	if pp := ppidOf(t, top); pp == d.pid() {
		t.Fatalf("the session's bwrap still has the dead daemon as its parent")
	}
	// The next daemon (started here before any post, which would make the
	// hook start one).
	d2 := startDaemon(t, n, program("ocxd"), "--grace", "1s")
	// The orphan still answers.
	hello := n.result(person, "post", "--to", record, "--text", "still there")
	if r := n.awaitReply(record, hello); !strings.Contains(r.Text, "echo: still there") {
		t.Errorf("the orphaned session's answer: %q", r.Text)
	}
	var found int
	for _, l := range n.logLines() {
		if l.Msg == "started" && l.OCXD == d2.pid() {
			found++
		}
	}
	if found != 1 {
		t.Errorf("the new daemon's start is logged %d times", found)
	}
	// Known for refusals: a launch beside it is refused, naming it.
	again := n.launchAgain(record)
	n.waitFor("the refusal", func() bool { return len(n.refusalsOf(record, again)) == 1 })
	if h := n.refusalsOf(record, again)[0].Holder; h == nil || h.PID != serve || h.StartedBy != messages.OriginOrphan {
		t.Errorf("the refusal's holder: %+v, want the orphan %d", h, serve)
	}
	if len(n.endsOf(record, launch)) != 0 {
		t.Errorf("an end note before the session ended")
	}
	// Stopped through the new daemon; its end recorded as unknown, once.
	n.must("", "session", "stop", key(agent))
	n.waitFor("the end note", func() bool { return len(n.endsOf(record, launch)) > 0 })
	ends := n.endsOf(record, launch)
	if len(ends) != 1 || ends[0].Status != messages.EndUnknown || ends[0].PID != serve || ends[0].ExitCode != nil || ends[0].Release != "test" {
		t.Errorf("end notes of the orphan: %v; want one, unknown, pid %d, release test", ends, serve)
	}
	n.waitFor("the session's processes to be gone", func() bool {
		_, serving := n.serving(launch)
		return !serving && !harness.Alive(top)
	})
}
