//go:build linux

package unixhost

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages/protocol"
)

func TestSpawnChild(t *testing.T) {
	dir := t.TempDir()
	l := newLauncher(t, nil)
	x := newExits()
	log := filepath.Join(dir, "log")
	os.WriteFile(log, []byte("before\n"), 0o600)
	// The environment is exactly what is given; the working directory is
	// Dir; stdin is /dev/null; stdout and stderr are appended to the log.
	script := `echo "env:$(env | sort | tr '\n' ' ')"; echo "wd:$(pwd)"; echo "in:$(cat)"; ` +
		`echo "ids:$$ $(cut -d' ' -f5,6 /proc/$$/stat)"; echo err >&2; exit 7`
	spec := host.SpawnSpec{Path: "/bin/sh", Args: []string{"sh", "-c", script}, Env: []string{"A=1", "B=two words"}, Dir: dir, Log: log}
	id, err := l.Spawn(spec, x.on)
	if err != nil {
		t.Fatal(err)
	}
	st, err := ReadStat(id.PID)
	if err == nil && st.Start != id.Start {
		t.Fatalf("start time %d, stat says %d", id.Start, st.Start)
	}
	e := x.wait(t, id)
	if out, status := e.Outcome(); !e.Known || out != host.OutcomeExited || status != 7 {
		t.Fatalf("exit %s", e)
	}
	if e.At.IsZero() || e.MaxRSS <= 0 {
		t.Fatalf("exit without time or usage: %+v", e)
	}
	got := readFile(t, log)
	for _, want := range []string{"before\n", "env:A=1 B=two words PWD=" + dir + " \n", "wd:" + dir + "\n", "in:\n",
		fmt.Sprintf("ids:%d %d %d\n", id.PID, id.PID, id.PID), "err\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
	if fi, _ := os.Stat(log); fi.Mode().Perm() != 0o600 {
		t.Errorf("log mode %v", fi.Mode())
	}
	if n := x.count(id); n != 1 {
		t.Fatalf("%d exits reported", n)
	}
}

func TestSpawnRefuses(t *testing.T) {
	l := newLauncher(t, nil)
	x := newExits()
	dir := t.TempDir()
	bad := []host.SpawnSpec{
		{Path: "sh", Args: []string{"sh"}, Dir: "/"},
		{Path: "/bin/sh", Dir: "/"},
		{Path: "/bin/sh", Args: []string{"sh"}, Dir: "rel"},
		{Path: "/bin/sh", Args: []string{"sh"}, Dir: "/", Log: "rel"},
		{Path: "/nonexistent/prog", Args: []string{"prog"}, Dir: "/"},
		{Path: "/bin/sh", Args: []string{"sh"}, Dir: "/nonexistent"},
	}
	for i, s := range bad {
		if _, err := l.Spawn(s, x.on); err == nil {
			t.Errorf("spec %d was accepted", i)
		}
	}
	// A log that is a planted link is not followed.
	link := filepath.Join(dir, "log")
	os.Symlink(filepath.Join(dir, "target"), link)
	if _, err := l.Spawn(host.SpawnSpec{Path: "/bin/true", Args: []string{"true"}, Dir: "/", Log: link}, x.on); err == nil {
		t.Error("a log link was followed")
	}
	if _, err := os.Stat(filepath.Join(dir, "target")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("the link's target was made")
	}
}

// Every child is reaped and reported exactly once; none is left a zombie;
// os/exec's own children keep their statuses (no wait on -1 steals them).
func TestReapManyAlongsideOSExec(t *testing.T) {
	l := newLauncher(t, nil)
	x := newExits()
	const n = 60
	var ids []protocol.ProcID
	var wg sync.WaitGroup
	execErrs := make(chan error, n)
	for i := range n {
		id, err := l.Spawn(host.SpawnSpec{Path: "/bin/sh", Args: []string{"sh", "-c", "exit " + strconv.Itoa(i%5)}, Dir: "/"}, x.on)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := exec.Command("/bin/sh", "-c", "exit 3").Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 3 {
				execErrs <- fmt.Errorf("os/exec child: %v", err)
			}
		}()
	}
	wg.Wait()
	close(execErrs)
	for err := range execErrs {
		t.Error(err)
	}
	for i, id := range ids {
		e := x.wait(t, id)
		if _, status := e.Outcome(); status != i%5 || !e.Known {
			t.Errorf("child %d: %s", i, e)
		}
	}
	for _, id := range ids {
		if c := x.count(id); c != 1 {
			t.Errorf("%s reported %d times", id, c)
		}
		if st, err := ReadStat(id.PID); err == nil && st.PPID == os.Getpid() {
			t.Errorf("%s left behind in state %c", id, st.State)
		}
	}
}

// A child outlives the launcher: Close signals nothing and sets no
// parent-death signal, and a grandchild started by a launcher in a process
// that exits keeps running.
func TestChildrenOutliveTheLauncher(t *testing.T) {
	l, err := NewLauncher(LauncherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	x := newExits()
	id, err := l.Spawn(host.SpawnSpec{Path: "/bin/sleep", Args: []string{"sleep", "1000"}, Dir: "/"}, x.on)
	if err != nil {
		t.Fatal(err)
	}
	defer killReap(id.PID)
	l.Close()
	st, err := ReadStat(id.PID)
	if err != nil || st.Zombie() || st.Start != id.Start {
		t.Fatalf("the child did not outlive Close: %+v %v", st, err)
	}
	if x.count(id) != 0 {
		t.Fatal("an exit was reported after Close")
	}
	if _, err := l.Spawn(host.SpawnSpec{Path: "/bin/true", Args: []string{"true"}, Dir: "/"}, x.on); !errors.Is(err, host.ErrClosed) {
		t.Fatalf("Spawn after Close = %v", err)
	}
}

func TestSignalGroup(t *testing.T) {
	dir := t.TempDir()
	l := newLauncher(t, nil)
	x := newExits()
	bg := filepath.Join(dir, "bg")
	// The shell starts a background sleep in its own process group (the
	// child's), then waits: TERM to the group must reach both.
	id, err := l.Spawn(host.SpawnSpec{Path: "/bin/sh", Args: []string{"sh", "-c", "sleep 1000 & echo $! > " + bg + "; wait"}, Dir: "/"}, x.on)
	if err != nil {
		t.Fatal(err)
	}
	var bgPID int
	eventually(t, "the background sleep started", func() bool {
		b, err := os.ReadFile(bg)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		bgPID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return bgPID > 0
	})
	if err := l.Signal(protocol.ProcID{PID: id.PID, Start: id.Start + 1}, host.SIGTERM); !errors.Is(err, host.ErrGone) {
		t.Fatalf("Signal with a wrong start time = %v", err)
	}
	if err := l.Signal(id, host.SIGTERM); err != nil {
		t.Fatal(err)
	}
	e := x.wait(t, id)
	if out, status := e.Outcome(); out != host.OutcomeSignaled || status != 128+15 {
		t.Fatalf("exit %s", e)
	}
	// The sleep was in the group: it got TERM too, and, orphaned, came to
	// this test process (a subreaper) to be reaped.
	eventually(t, "the background sleep ended", func() bool {
		st, err := ReadStat(bgPID)
		return err != nil || st.Zombie()
	})
	killReap(bgPID)
	if err := l.Signal(id, host.SIGTERM); !errors.Is(err, host.ErrGone) {
		t.Fatalf("Signal after the exit = %v", err)
	}
}

// A process the launcher did not start (a terminal session) is signalled
// too, but only while its identity holds.
func TestSignalOther(t *testing.T) {
	l := newLauncher(t, nil)
	cmd := exec.Command("/bin/sleep", "1000")
	cmd.SysProcAttr = &unix.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	st, err := ReadStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	id := protocol.ProcID{PID: cmd.Process.Pid, Start: st.Start}
	if err := l.Signal(protocol.ProcID{PID: id.PID, Start: id.Start - 1}, host.SIGTERM); !errors.Is(err, host.ErrGone) {
		t.Fatalf("Signal with a wrong start time = %v", err)
	}
	if err := l.Signal(id, host.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Fatalf("the process ended with %v", err)
	}
	if err := l.Signal(id, host.SIGTERM); !errors.Is(err, host.ErrGone) {
		t.Fatalf("Signal after the end = %v", err)
	}
}

// A process the daemon did not start is watched through a pidfd and its end
// reported as status unknown.
func TestWatchOther(t *testing.T) {
	dir := t.TempDir()
	readyP, lines := readyPipe(t, dir)
	l := newLauncher(t, nil)
	x := newExits()
	// A helper whose child is a session: the session's parent is the
	// helper, not this process.
	argv := `["/x/workspace","run","alice/demo","--root","/agents"]`
	par := startHelper(t, "parent", filepath.Join(dir, "out"), "HELPER_CHILD_ARGV="+argv, "HELPER_READY="+readyP)
	pid, _ := strconv.Atoi(strings.Fields(await(t, lines, "grandchild"))[0])
	t.Cleanup(func() {
		// Should the test stop early, the orphaned session comes to this
		// process (a subreaper): end it.
		if st, err := ReadStat(pid); err == nil && st.PPID == os.Getpid() {
			killReap(pid)
		}
	})
	st, err := ReadStat(pid)
	if err != nil || st.PPID != par.Process.Pid {
		t.Fatalf("grandchild %d: %+v %v", pid, st, err)
	}
	id := protocol.ProcID{PID: pid, Start: st.Start}
	if err := l.Watch(id, x.on); err != nil {
		t.Fatal(err)
	}
	if err := l.Watch(id, x.on); err == nil {
		t.Fatal("watched twice")
	}
	unix.Kill(pid, unix.SIGKILL)
	e := x.wait(t, id)
	if out, _ := e.Outcome(); e.Known || out != host.OutcomeUnknown || e.At.IsZero() {
		t.Fatalf("exit of a process not ours: %s", e)
	}
	par.Process.Signal(unix.SIGTERM)
	par.Wait()
	// Already gone, or a PID that now names another process: reported at once.
	gone := protocol.ProcID{PID: pid, Start: st.Start}
	if err := l.Watch(gone, x.on); err != nil {
		t.Fatal(err)
	}
	self, _ := ReadStat(os.Getpid())
	other := protocol.ProcID{PID: os.Getpid(), Start: self.Start + 1}
	if err := l.Watch(other, x.on); err != nil {
		t.Fatal(err)
	}
	for _, id := range []protocol.ProcID{gone, other} {
		if e := x.wait(t, id); e.Known {
			t.Fatalf("exit %s", e)
		}
	}
	eventually(t, "the second report", func() bool { return x.count(gone) == 2 })
}

// After a re-exec the new image finds its children, a zombie among them, and
// reaps them with their real status.
func TestReexecHandoff(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	cmd := startHelper(t, "reexec", out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v: %s", err, readFile(t, out))
	}
	got := readFile(t, out)
	if !strings.Contains(got, " state Z\n") || !strings.Contains(got, "exited 5\n") ||
		!strings.Contains(got, "after reaping: stat err open /proc/") || strings.Contains(got, "reported before") {
		t.Fatalf("helper output:\n%s", got)
	}
}

// TestSignalWatchedNonLeader: a process the launcher only watches (not its
// child) that leads no process group, as `workspace serve` inside a sandbox
// found at start, gets the signal itself; before the fix the watch made
// Signal take it for a child leading its group, and the signal was lost.
func TestSignalWatchedNonLeader(t *testing.T) {
	l := newLauncher(t, nil)
	x := newExits()
	sh := exec.Command("/bin/sh", "-c", "sleep 60 & echo $!; wait")
	out, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if sh.ProcessState == nil {
			sh.Process.Kill()
			sh.Wait()
		}
	}()
	var pid int
	if _, err := fmt.Fscan(out, &pid); err != nil {
		t.Fatal(err)
	}
	st, err := ReadStat(pid)
	if err != nil || st.PGID == pid || st.PPID == os.Getpid() {
		t.Fatalf("sleep %d: %+v %v; want a grandchild in another's group", pid, st, err)
	}
	id := protocol.ProcID{PID: pid, Start: st.Start}
	if err := l.Watch(id, x.on); err != nil {
		t.Fatal(err)
	}
	if err := l.Signal(id, host.SIGTERM); err != nil {
		t.Fatalf("signal a watched process: %v", err)
	}
	if e := x.wait(t, id); e.Known {
		t.Fatalf("exit of a process not ours: %s", e)
	}
	// The shell reaps sleep and ends by itself: killing it first could
	// leave sleep a zombie of this process (a subreaper).
	sh.Wait()
	if err := l.Signal(id, host.SIGTERM); !errors.Is(err, host.ErrGone) {
		t.Fatalf("signal after its end: %v", err)
	}
}

// SignalOne reaches the process asked about and not the group it leads:
// the leader ends, the other member of its group runs on; a wrong start
// time, or a process ended, is host.ErrGone.
func TestSignalOne(t *testing.T) {
	sh := exec.Command("/bin/sh", "-c", "sleep 1000 & echo $!; wait")
	sh.SysProcAttr = &unix.SysProcAttr{Setpgid: true}
	out, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if sh.ProcessState == nil {
			unix.Kill(-sh.Process.Pid, unix.SIGKILL)
			sh.Wait()
		}
	}()
	var member int
	if _, err := fmt.Fscan(out, &member); err != nil {
		t.Fatal(err)
	}
	// Once the leader is gone, sleep is this process's (a subreaper's).
	t.Cleanup(func() { killReap(member) })
	st, err := ReadStat(sh.Process.Pid)
	if err != nil || st.PGID != sh.Process.Pid {
		t.Fatalf("sh %d: %+v %v; want a group leader", sh.Process.Pid, st, err)
	}
	id := protocol.ProcID{PID: sh.Process.Pid, Start: st.Start}
	if err := SignalOne(protocol.ProcID{PID: id.PID, Start: id.Start - 1}, host.SIGTERM); !errors.Is(err, host.ErrGone) {
		t.Fatalf("SignalOne with a wrong start time = %v", err)
	}
	if err := SignalOne(id, host.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = sh.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Fatalf("the leader ended with %v", err)
	}
	if ms, err := ReadStat(member); err != nil || ms.Zombie() || ms.PGID != id.PID {
		t.Fatalf("the group's other member after SignalOne: %+v %v; want it running", ms, err)
	}
	if err := SignalOne(id, host.SIGTERM); !errors.Is(err, host.ErrGone) {
		t.Fatalf("SignalOne after the end = %v", err)
	}
}
