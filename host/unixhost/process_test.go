//go:build linux

package unixhost

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
)

// host's signal numbers are this system's, both ways.
func TestSignalValues(t *testing.T) {
	for _, c := range []struct {
		h host.Signal
		s syscall.Signal
	}{
		{host.SIGHUP, syscall.SIGHUP}, {host.SIGINT, syscall.SIGINT}, {host.SIGQUIT, syscall.SIGQUIT},
		{host.SIGKILL, syscall.SIGKILL}, {host.SIGUSR1, syscall.SIGUSR1}, {host.SIGUSR2, syscall.SIGUSR2},
		{host.SIGPIPE, syscall.SIGPIPE}, {host.SIGTERM, syscall.SIGTERM},
	} {
		if got := OSSignal(c.h); got != os.Signal(c.s) {
			t.Errorf("OSSignal(%s) = %v, want %v", c.h, got, c.s)
		}
		if got, ok := SignalOf(c.s); !ok || got != c.h {
			t.Errorf("SignalOf(%v) = %v %v, want %s", c.s, got, ok, c.h)
		}
		if c.h.String() != host.SignalName(int(c.s)) {
			t.Errorf("%s is named %q", c.h, c.h.String())
		}
	}
	if got, ok := SignalOf(os.Interrupt); !ok || got != host.SIGINT {
		t.Errorf("SignalOf(os.Interrupt) = %v %v", got, ok)
	}
	if _, ok := SignalOf(notASignal{}); ok {
		t.Error("SignalOf took an os.Signal of another kind for a signal")
	}
	if got := OSSignals(host.SIGHUP, host.SIGTERM); len(got) != 2 || got[0] != syscall.SIGHUP || got[1] != syscall.SIGTERM {
		t.Errorf("OSSignals = %v", got)
	}
}

type notASignal struct{}

func (notASignal) String() string { return "not a signal" }
func (notASignal) Signal()        {}

// Kill and KillGroup refuse the numbers kill(2) reads as more than one
// process or group (tried with signal 0, which would only probe).
func TestKillRefusesWhatIsNotAChild(t *testing.T) {
	for _, pid := range []int{0, -1, -os.Getpid()} {
		if err := Kill(pid, 0); err == nil {
			t.Errorf("Kill(%d) was sent", pid)
		}
	}
	for _, pgid := range []int{1, 0, -1} {
		if err := KillGroup(pgid, 0); err == nil {
			t.Errorf("KillGroup(%d) was sent", pgid)
		}
	}
}

// A child started with GroupAttr leads a group KillGroup ends whole, and
// EndingSignal reads how it ended; one started with SessionAttr leads its
// own session; Kill reaches one process.
func TestProcessGroupsAndSessions(t *testing.T) {
	sh := exec.Command("/bin/sh", "-c", "sleep 1000 & echo $!; wait")
	sh.SysProcAttr = GroupAttr()
	out, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	var member int
	if _, err := fmt.Fscan(out, &member); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killReap(member) })
	if st, err := ReadStat(sh.Process.Pid); err != nil || st.PGID != sh.Process.Pid || st.SID == sh.Process.Pid {
		t.Fatalf("a GroupAttr child: %+v %v; want a group of its own in this session", st, err)
	}
	if err := KillGroup(sh.Process.Pid, host.SIGKILL); err != nil {
		t.Fatal(err)
	}
	sh.Wait()
	if sig, ok := EndingSignal(sh.ProcessState); !ok || sig != host.SIGKILL {
		t.Fatalf("EndingSignal = %v %v, want SIGKILL", sig, ok)
	}
	eventually(t, "the group's other member ended", func() bool {
		st, err := ReadStat(member)
		return err != nil || st.Zombie()
	})

	ses := exec.Command("/bin/sh", "-c", "exit 3")
	ses.SysProcAttr = SessionAttr()
	if err := ses.Run(); err == nil {
		t.Fatal("exit 3 was a success")
	}
	if _, ok := EndingSignal(ses.ProcessState); ok || ses.ProcessState.ExitCode() != 3 {
		t.Fatalf("an exit read as %v", ses.ProcessState)
	}
	if _, ok := EndingSignal(nil); ok {
		t.Fatal("EndingSignal(nil) found a signal")
	}
	sl := exec.Command("/bin/sleep", "1000")
	sl.SysProcAttr = SessionAttr()
	if err := sl.Start(); err != nil {
		t.Fatal(err)
	}
	if st, err := ReadStat(sl.Process.Pid); err != nil || st.SID != sl.Process.Pid || st.PGID != sl.Process.Pid {
		t.Errorf("a SessionAttr child: %+v %v; want a session of its own", st, err)
	}
	if err := Kill(sl.Process.Pid, host.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sl.Wait()
	if sig, ok := EndingSignal(sl.ProcessState); !ok || sig != host.SIGTERM {
		t.Fatalf("EndingSignal after Kill = %v %v", sig, ok)
	}
}

// PointAtDevNull points the standard descriptors away: nothing written
// after it reaches the file they were.
func TestPointAtDevNull(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	cmd := startHelper(t, "devnull", out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, readFile(t, out))
	}
	if got := readFile(t, out); got != "before\n" {
		t.Fatalf("the helper's output %q, want only what it wrote before", got)
	}
}

// Exec that fails returns, naming the program; the image is not replaced.
func TestExecFailure(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "ocxd")
	err := Exec(missing, []string{missing}, nil)
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Op != "exec" || pe.Path != missing || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Exec of a missing program = %v", err)
	}
}

// OpenLog appends, creates 0600 and refuses a link at the log's name.
func TestOpenLog(t *testing.T) {
	dir := t.TempDir()
	old := unix.Umask(0)
	defer unix.Umask(old)
	p := filepath.Join(dir, "hook.log")
	for _, line := range []string{"one\n", "two\n"} {
		f, err := OpenLog(p, LogText)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte(line))
		f.Close()
	}
	if got := readFile(t, p); got != "one\ntwo\n" {
		t.Fatalf("log %q", got)
	}
	if m := mode(t, p); m != 0o600 {
		t.Fatalf("log mode %v", m)
	}
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("keep\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.log")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if f, err := OpenLog(link, LogText); err == nil || !strings.Contains(err.Error(), link) {
		if f != nil {
			f.Close()
		}
		t.Fatalf("OpenLog through a link = %v", err)
	}
	if got := readFile(t, target); got != "keep\n" {
		t.Fatalf("the link's target changed: %q", got)
	}
}

// CloseOnExec sets the flag again on a descriptor kept for an exec.
func TestCloseOnExec(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
		t.Fatal(err)
	}
	CloseOnExec(fd, -1)
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Fatalf("flags %#x %v after CloseOnExec", flags, err)
	}
	if err := CloseFD(-1); err != nil {
		t.Fatalf("CloseFD(-1) = %v", err)
	}
}
