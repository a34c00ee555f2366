package itest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/itest/harness"
)

// signalled is one subtest of TestDaemonSignals: a node with a release root
// of its own (releases a and b, current at a), its daemon, and a session
// running under it.
type signalled struct {
	t          *testing.T
	n          *testNode
	root       string
	d          *daemonProc
	name       string // HUP, INT, ...
	record     string
	launch     string
	serve, top int
	// serveID and topID are the session's processes as PID@START.
	serveID, topID string
	// mark is the number of log lines before the signal.
	mark int
	// held is a writer holding the pipe open from before the signal, so
	// that a stop waits in its last read until release.
	held *unixhost.LineWriter
}

// release closes the held writer, once.
func (s *signalled) release() {
	if s.held != nil {
		s.held.Close()
		s.held = nil
	}
}

// alive waits for cond while the daemon runs; a daemon that ends
// meanwhile fails the test at once, saying how it ended.
func (s *signalled) alive(what string, cond func() bool) {
	s.t.Helper()
	s.n.waitFor(what, func() bool {
		if s.d.exited() {
			s.t.Fatalf("ocxd (%s) ended, %v, while the test waited for %s\nstderr (start):\n%s\nocxd.log:\n%s",
				s.name, s.d.cmd.ProcessState, what, clipLines(s.d.stderr.String(), 12), s.n.daemonLog())
		}
		return cond()
	})
}

// after is the index of the first log line from the signal on that
// satisfies match, -1 when none does.
func (s *signalled) after(lines []logLine, match func(logLine) bool) int {
	return logIndex(lines, s.mark, match)
}

// stillReads checks that the daemon still holds the lock and reads its
// pipe: a line sent now is read, after the log line at index from.
func (s *signalled) stillReads(from int) {
	s.t.Helper()
	line := "stop ghost-" + strings.ToLower(s.name) + " demo"
	s.n.send(line)
	s.alive("the daemon to read a line sent after "+s.name, func() bool {
		return logIndex(s.n.logLines(), max(from, s.mark), func(l logLine) bool {
			return l.Msg == "read" && l.Line == line && l.OCXD == s.d.pid()
		}) >= 0
	})
	if pid := s.n.daemonPID(); pid != s.d.pid() || s.d.exited() {
		s.t.Errorf("after %s the lock is held by %d, not the daemon %d (exited %v)", s.name, pid, s.d.pid(), s.d.exited())
	}
}

// sessionUntouched checks that the session's processes are the ones it had
// before the signal, alive, and that no end is recorded for it.
func (s *signalled) sessionUntouched() {
	s.t.Helper()
	if ends := s.n.endsOf(s.record, s.launch); len(ends) != 0 {
		s.t.Errorf("after %s the session that runs has end notes: %v", s.name, ends)
	}
	_, top := procOf(s.t, s.top)
	_, serve := procOf(s.t, s.serve)
	if top != s.topID || serve != s.serveID || !harness.Alive(s.top) || !harness.Alive(s.serve) {
		s.t.Errorf("after %s the session is bwrap %s, serve %s (alive %v, %v); was %s, %s",
			s.name, top, serve, harness.Alive(s.top), harness.Alive(s.serve), s.topID, s.serveID)
	}
}

// TestDaemonSignals is D26 against the real binary: each signal ocxd may
// meet, sent to a running daemon with a running session, and its exact
// outcome.
//   - HUP re-execs the current release in place: the same PID holds the
//     lock and runs release b's ocxd, its session still its child, a line
//     sent after read by the new image. A second HUP, current at a release
//     that cannot be exec'd, is refused and the old image reads on; a third,
//     back at release a, re-execs again (HUP is caught again after a failed
//     exec).
//   - INT, TERM and QUIT stop it: exit 0, the pipe's name removed, the lock
//     free, the session untouched. A writer holds the stop in its last read
//     meanwhile: a HUP then is ignored, and logged; USR2 still answers,
//     showing the drain.
//   - USR1 logs the memory, USR2 every goroutine's stack, and it reads on.
//   - PIPE, left to Go, changes nothing: once delivered, the daemon reads on.
//
// Each subtest ends what it started: the session through a daemon's stop,
// awaited gone by its PIDs; the daemons by TERM (startDaemon's cleanup).
// Before D26, HUP ended the daemon ("signal: hangup"), so did a HUP during
// the stop; QUIT ended it with exit 2 and a goroutine dump on stderr,
// leaving the pipe's name; USR2 logged nothing.
func TestDaemonSignals(t *testing.T) {
	needs(t, "ocxd", "workspace")
	for _, c := range []struct {
		name  string
		sig   syscall.Signal
		hold  bool // a writer holds the pipe open across the signal
		check func(*signalled)
	}{
		{"HUP", syscall.SIGHUP, false, reexecsOnHUP},
		{"INT", syscall.SIGINT, true, stopsOnSignal},
		{"TERM", syscall.SIGTERM, true, stopsOnSignal},
		{"QUIT", syscall.SIGQUIT, true, stopsOnSignal},
		{"USR1", syscall.SIGUSR1, false, logsMemory},
		{"USR2", syscall.SIGUSR2, false, logsGoroutines},
		{"PIPE", syscall.SIGPIPE, false, leftToGo},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			makeRelease(t, root, "a")
			makeRelease(t, root, "b")
			setCurrent(t, root, "a")
			n := newNodeRelease(t, root)
			// A stop waits for the writer the test holds until the test
			// lets it go: --drain past anything the test waits for, so
			// that a slow machine never cuts the writer off first.
			d := startDaemon(t, n, filepath.Join(root, "current", "ocxd"), "--grace", "1s", "--drain", "5m")
			s := &signalled{t: t, n: n, root: root, d: d, name: c.name}
			s.record, s.launch, s.serve, s.top = startSession(t, n, d.pid(), agent)
			_, s.topID = procOf(t, s.top)
			_, s.serveID = procOf(t, s.serve)
			if c.sig == syscall.SIGHUP {
				// The re-exec runs the current release: moved, so that the
				// test sees which ocxd runs after.
				setCurrent(t, root, "b")
			}
			if c.hold {
				s.held = n.pipeWriter()
				t.Cleanup(s.release)
			}
			s.mark = len(n.logLines())
			if err := syscall.Kill(d.pid(), c.sig); err != nil {
				t.Fatal(err)
			}
			c.check(s)

			// The session is stopped through the daemon running now, and
			// awaited gone, by its PIDs.
			n.must("", "session", "stop", key(agent))
			n.waitFor("the session's processes to be gone", func() bool {
				return !harness.Alive(s.serve) && !harness.Alive(s.top)
			})
		})
	}
}

// reexecsOnHUP: HUP is a re-exec of the current release in place, the
// same path as a `reexec` line: to release b; then, current at a release
// whose ocxd answers the version probe and then cannot be exec'd (it takes
// its own execute bit away), refused, the old image running on; then, HUP
// caught again after that failed exec, to release a.
func reexecsOnHUP(s *signalled) {
	n, pid := s.n, s.d.pid()
	running := s.awaitReexec("b")
	s.stillReads(running)
	s.sessionUntouched()
	if pp := ppidOf(s.t, s.top); pp != pid {
		s.t.Errorf("after HUP the session's bwrap %d has parent %d, not the daemon %d", s.top, pp, pid)
	}

	noexec := filepath.Join(s.root, "releases", "noexec")
	if err := os.MkdirAll(noexec, 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(noexec, "ocxd"), []byte("#!/bin/sh\nchmod a-x \"$0\"\necho 1\n"), 0o755); err != nil {
		s.t.Fatal(err)
	}
	setCurrent(s.t, s.root, "noexec")
	s.mark = len(n.logLines())
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		s.t.Fatal(err)
	}
	failed := -1
	s.alive("the re-exec on HUP to fail", func() bool {
		failed = s.after(n.logLines(), func(l logLine) bool {
			return l.Msg == "re-exec failed; still running the old image" && l.OCXD == pid
		})
		return failed >= 0
	})
	if exe := exeOf(pid); exe != filepath.Join(s.root, "releases", "b", "ocxd") {
		s.t.Errorf("after a failed re-exec the daemon runs %s, not release b's ocxd", exe)
	}
	s.stillReads(failed)

	setCurrent(s.t, s.root, "a")
	s.mark = len(n.logLines())
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		s.t.Fatal(err)
	}
	s.stillReads(s.awaitReexec("a"))
	s.sessionUntouched()
	if pp := ppidOf(s.t, s.top); pp != pid {
		s.t.Errorf("after the last HUP the session's bwrap %d has parent %d, not the daemon %d", s.top, pp, pid)
	}
}

// awaitReexec waits for the new image a HUP sent after s.mark asked for,
// and checks that it is release id's ocxd in the same process, the hand-off
// file gone. It returns the index of the new image's first log line.
func (s *signalled) awaitReexec(id string) int {
	s.t.Helper()
	n, pid := s.n, s.d.pid()
	var lines []logLine
	running := -1
	s.alive("the new image to run after HUP", func() bool {
		lines = n.logLines()
		running = s.after(lines, func(l logLine) bool { return l.Msg == "re-exec: running the new image" && l.OCXD == pid })
		return running >= 0
	})
	hup := s.after(lines, func(l logLine) bool {
		return l.Msg == "HUP: re-exec the current release" && l.OCXD == pid && l.Signal == "SIGHUP"
	})
	if hup < 0 || hup > running {
		s.t.Errorf("the log does not say HUP asked for the re-exec before the new image ran (line %d, new image at %d):\n%s", hup, running, n.daemonLog())
	}
	if exe := exeOf(pid); exe != filepath.Join(s.root, "releases", id, "ocxd") {
		s.t.Errorf("after HUP the daemon runs %s, not the current release's (%s) ocxd", exe, id)
	}
	if got := n.daemonPID(); got != pid {
		s.t.Errorf("after HUP the lock is held by %d, not the daemon %d", got, pid)
	}
	if _, err := os.Stat(filepath.Join(n.agents, "ocxd.handoff")); err == nil {
		s.t.Errorf("the hand-off file is left behind")
	}
	return running
}

// exeOf is the program a process runs.
func exeOf(pid int) string {
	exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	return exe
}

// stopsOnSignal: INT, TERM and QUIT are the graceful stop. The session is
// then stopped through the next daemon, which the test starts.
func stopsOnSignal(s *signalled) {
	n, d := s.n, s.d
	// The writer holds the stop in its last read: a HUP meanwhile is
	// ignored, and said so; USR2 still answers.
	s.alive("the daemon to say it stops", func() bool {
		return s.after(n.logLines(), func(l logLine) bool {
			return l.Msg == "stopping on a signal; sessions keep running" && l.OCXD == d.pid()
		}) >= 0
	})
	if err := syscall.Kill(d.pid(), syscall.SIGHUP); err != nil {
		s.t.Fatal(err)
	}
	// USR2 is asked again until its stacks show the stop in the drain:
	// the stop stops the socket and the hook watch first, and a USR2
	// answered before it reaches the drain shows them (once under make
	// test).
	var usr2 time.Time
	s.alive("the HUP during the stop to be ignored, and USR2 answered", func() bool {
		lines := n.logLines()
		drained := s.after(lines, func(l logLine) bool {
			return l.Msg == "goroutines" && strings.Contains(l.Stacks, "daemon.(*inputs).drain") && l.OCXD == d.pid()
		}) >= 0
		if !drained && time.Since(usr2) > 200*time.Millisecond {
			if err := syscall.Kill(d.pid(), syscall.SIGUSR2); err != nil {
				s.t.Fatal(err)
			}
			usr2 = time.Now()
		}
		return drained && s.after(lines, func(l logLine) bool {
			return l.Msg == "signal ignored: the daemon is stopping" && l.Signal == "SIGHUP" && l.OCXD == d.pid()
		}) >= 0
	})
	s.release()
	n.waitFor("the daemon to end on "+s.name, d.exited)
	if st := d.cmd.ProcessState; st.ExitCode() != 0 {
		s.t.Errorf("on %s the daemon ended %v, not with exit 0\nstderr (start):\n%s", s.name, st, clipLines(d.stderr.String(), 12))
	}
	if _, err := os.Stat(filepath.Join(n.agents, "ocxd")); !errors.Is(err, os.ErrNotExist) {
		s.t.Errorf("after %s the pipe's name is left behind (%v)", s.name, err)
	}
	if pid := n.daemonPID(); pid != 0 {
		s.t.Errorf("after %s the lock is held by %d", s.name, pid)
	}
	lines := n.logLines()
	stopping := s.after(lines, func(l logLine) bool {
		return l.Msg == "stopping on a signal; sessions keep running" && l.Signal == "SIG"+s.name && l.OCXD == d.pid()
	})
	if stopping < 0 || logIndex(lines, stopping, func(l logLine) bool { return l.Msg == "stopped" && l.OCXD == d.pid() }) < 0 {
		s.t.Errorf("the log does not say the daemon stopped on %s:\n%s", s.name, n.daemonLog())
	}
	if logIndex(lines, s.mark, func(l logLine) bool { return strings.HasPrefix(l.Msg, "re-exec") && l.OCXD == d.pid() }) >= 0 {
		s.t.Errorf("a HUP during the stop began a re-exec:\n%s", n.daemonLog())
	}
	s.sessionUntouched()
	s.d = startDaemon(s.t, n, filepath.Join(s.root, "current", "ocxd"), "--grace", "1s")
}

// logsMemory: USR1 logs the memory, and the daemon reads on.
func logsMemory(s *signalled) {
	var at int
	s.alive("the memory line after USR1", func() bool {
		at = s.after(s.n.logLines(), func(l logLine) bool { return l.Msg == "memory" && l.OCXD == s.d.pid() })
		return at >= 0
	})
	s.stillReads(at)
	s.sessionUntouched()
}

// logsGoroutines: USR2 logs every goroutine's stack as one record (the
// signal loop's and the pipe reader's among them), and the daemon reads on.
func logsGoroutines(s *signalled) {
	var dump logLine
	at := -1
	s.alive("the goroutine dump after USR2", func() bool {
		lines := s.n.logLines()
		at = s.after(lines, func(l logLine) bool { return l.Msg == "goroutines" && l.OCXD == s.d.pid() })
		if at >= 0 {
			dump = lines[at]
		}
		return at >= 0
	})
	for _, want := range []string{"goroutine 1 [", "daemon.run(", "daemon.(*inputs).start"} {
		if !strings.Contains(dump.Stacks, want) {
			s.t.Errorf("the goroutine dump lacks %q:\n%s", want, clipLines(dump.Stacks, 40))
		}
	}
	if dump.Signal != "SIGUSR2" {
		s.t.Errorf("the goroutine dump does not name USR2: %q", dump.Signal)
	}
	s.stillReads(at)
	s.sessionUntouched()
}

// leftToGo: PIPE sent from outside is caught and dropped by Go's runtime.
// Once the kernel has delivered it (it is no longer pending), the daemon
// still runs and reads a line sent after.
func leftToGo(s *signalled) {
	s.alive("PIPE to be delivered", func() bool {
		pending, err := shdPending(s.d.pid(), syscall.SIGPIPE)
		if err != nil {
			s.t.Fatal(err)
		}
		return !pending
	})
	s.stillReads(s.mark)
	s.sessionUntouched()
}

// shdPending says whether sig waits in a process's shared pending set
// (ShdPnd of /proc/PID/status): a signal sent with kill is there until a
// thread of the process takes it.
func shdPending(pid int, sig syscall.Signal) (bool, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "ShdPnd:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return false, fmt.Errorf("/proc/%d/status: ShdPnd %q: %w", pid, v, err)
			}
			return mask&(1<<(uint(sig)-1)) != 0, nil
		}
	}
	return false, fmt.Errorf("/proc/%d/status has no ShdPnd", pid)
}

// clipLines is the first n lines of s.
func clipLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "\n")
}
