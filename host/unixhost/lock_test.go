//go:build linux

package unixhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
)

// startHelper starts the test binary as a helper with os/exec, its output
// appended to out.
func startHelper(t *testing.T, mode string, out string, env ...string) *exec.Cmd {
	t.Helper()
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(testExe(t))
	cmd.Env = append(append(os.Environ(), helperEnv+"="+mode), env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd
}

func TestLockAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, "ocxd.lock")
	readyP, lines := readyPipe(t, dir)
	if _, held, err := LockHolder(lock); err != nil || held {
		t.Fatalf("Held before anyone locked = %v %v", held, err)
	}
	cmd := startHelper(t, "lock", filepath.Join(dir, "out"), "HELPER_LOCK="+lock, "HELPER_READY="+readyP)
	if got := await(t, lines, "lock"); got != fmt.Sprintf("locked %d", cmd.Process.Pid) {
		t.Fatalf("helper said %q; its output: %s", got, readFile(t, filepath.Join(dir, "out")))
	}
	if _, held, err := LockHolder(lock); err != nil || !held {
		t.Fatalf("Held while the helper holds it = %v %v", held, err)
	}
	if pid, held, err := LockHolder(lock); err != nil || !held || pid != cmd.Process.Pid {
		t.Fatalf("LockHolder = %d %v %v, want %d", pid, held, err, cmd.Process.Pid)
	}
	if held, err := HoldsLock(cmd.Process.Pid, lock); err != nil || !held {
		t.Fatalf("HoldsLock(helper) while it holds it = %v %v", held, err)
	}
	if held, err := HoldsLock(os.Getpid(), lock); err != nil || held {
		t.Fatalf("HoldsLock(the test) while the helper holds it = %v %v", held, err)
	}
	_, err := AcquireLock(lock)
	if !errors.Is(err, host.ErrLocked) || !strings.Contains(err.Error(), fmt.Sprint(cmd.Process.Pid)) || !strings.Contains(err.Error(), lock) {
		t.Fatalf("Acquire while held = %v", err)
	}
	helper := cmd.Process.Pid
	cmd.Process.Kill()
	cmd.Wait()
	if _, held, err := LockHolder(lock); err != nil || held {
		t.Fatalf("Held after the holder died = %v %v", held, err)
	}
	if held, err := HoldsLock(helper, lock); err != nil || held {
		t.Fatalf("HoldsLock(helper) after it died = %v %v", held, err)
	}
	l, err := AcquireLock(lock)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(lock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("lock file %v %v", fi, err)
	}
	if pid, held, _ := LockHolder(lock); !held || pid != os.Getpid() {
		t.Fatalf("LockHolder after Acquire = %d %v", pid, held)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if _, held, _ := LockHolder(lock); held {
		t.Fatal("still held after Release")
	}
}

// A probe never takes the lock, so probes running flat out in another
// process never make an Acquire fail.
func TestLockProbeNeverBlocksAcquire(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, "ocxd.lock")
	l, err := AcquireLock(lock)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	var probers []*exec.Cmd
	for i := range 2 {
		probers = append(probers, startHelper(t, "probe", filepath.Join(dir, fmt.Sprint("probe", i)), "HELPER_LOCK="+lock, "HELPER_N=20000"))
	}
	acquired := 0
	for range 2000 {
		l, err := AcquireLock(lock)
		if err != nil {
			t.Fatalf("Acquire failed while only probes ran (after %d): %v", acquired, err)
		}
		acquired++
		l.Release()
	}
	for i, p := range probers {
		if err := p.Wait(); err != nil {
			t.Fatalf("prober %d: %v: %s", i, err, readFile(t, filepath.Join(dir, fmt.Sprint("probe", i))))
		}
	}
}

// The lock's descriptor survives an exec: the holder execs itself and the
// lock is held throughout, by the same PID.
func TestLockSurvivesExec(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, "ocxd.lock")
	readyP, lines := readyPipe(t, dir)
	cmd := startHelper(t, "lock", filepath.Join(dir, "out"), "HELPER_LOCK="+lock, "HELPER_READY="+readyP, "HELPER_EXEC=1")
	if got := await(t, lines, "adoption"); got != fmt.Sprintf("adopted %d", cmd.Process.Pid) {
		t.Fatalf("helper said %q; its output: %s", got, readFile(t, filepath.Join(dir, "out")))
	}
	if pid, held, err := LockHolder(lock); err != nil || !held || pid != cmd.Process.Pid {
		t.Fatalf("LockHolder after the exec = %d %v %v", pid, held, err)
	}
	if _, err := AcquireLock(lock); !errors.Is(err, host.ErrLocked) {
		t.Fatalf("Acquire after the exec = %v", err)
	}
	cmd.Process.Signal(os.Interrupt)
	cmd.Process.Kill()
	cmd.Wait()
}

func TestAdoptLockRefusesStrangers(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, "ocxd.lock")
	other, err := os.Create(filepath.Join(dir, "other"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := AdoptLock(int(other.Fd()), lock); err == nil {
		t.Fatal("adopted a descriptor of another file")
	}
}

// TestHoldsLockUnderChurn: while other locks come and go as fast as
// goroutines can take and drop them, HoldsLock finds the lock held
// throughout every time it is asked, where a read of /proc/locks may let
// it slip past (holderOf's comment).
func TestHoldsLockUnderChurn(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, "ocxd.lock")
	l, err := AcquireLock(lock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	stop := make(chan struct{})
	done := make(chan error, 4)
	for i := range 4 {
		go func() {
			p := filepath.Join(dir, fmt.Sprintf("churn%d", i))
			for {
				select {
				case <-stop:
					done <- nil
					return
				default:
				}
				other, err := AcquireLock(p)
				if errors.Is(err, host.ErrLocked) {
					// HoldsLock's read of this process's fdinfo held the
					// file dropped last time for a moment: its lock goes
					// when that read ends.
					continue
				}
				if err != nil {
					done <- err
					return
				}
				other.Release()
			}
		}()
	}
	for n := range 500 {
		if held, err := HoldsLock(os.Getpid(), lock); err != nil || !held {
			t.Errorf("ask %d: HoldsLock = %v %v while the lock is held throughout", n, held, err)
			break
		}
	}
	close(stop)
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if held, err := HoldsLock(os.Getpid(), filepath.Join(dir, "churn0")); err != nil || held {
		t.Fatalf("HoldsLock on a file dropped = %v %v", held, err)
	}
	if held, err := HoldsLock(os.Getpid(), filepath.Join(dir, "absent")); err != nil || held {
		t.Fatalf("HoldsLock on no file = %v %v", held, err)
	}
}

// TestFdinfoLocks: the lock lines of an fdinfo file read as /proc/locks's.
func TestFdinfoLocks(t *testing.T) {
	b := "pos:\t0\nflags:\t02100002\nmnt_id:\t24\nino:\t9977894\nlock:\t1: FLOCK  ADVISORY  WRITE 23401 fe:00:9977894 0 EOF\n"
	got := parseLocks(fdinfoLocks([]byte(b)))
	want := []lockEntry{{Kind: "FLOCK", Mode: "WRITE", PID: 23401, Major: 0xfe, Minor: 0, Inode: 9977894}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ParseLocks(fdinfoLocks) = %+v, want %+v", got, want)
	}
}

// FuzzParseLocks: any bytes read as /proc/locks or as an fdinfo file give
// entries or nothing, never a panic, and a lock line reads the same in
// either shape.
func FuzzParseLocks(f *testing.F) {
	f.Add([]byte("1: FLOCK  ADVISORY  WRITE 4321 00:1f:123456 0 EOF\n2: POSIX  ADVISORY  READ 99 08:01:42 0 EOF\n"))
	f.Add([]byte("1: FLOCK  ADVISORY  WRITE 1 fe:00:1 0 EOF\n1: -> FLOCK  ADVISORY  WRITE 2 fe:00:1 0 EOF\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		direct := parseLocks(b)
		var info []byte
		for line := range bytes.Lines(b) {
			info = append(append(info, "lock:\t"...), line...)
		}
		if got := parseLocks(fdinfoLocks(info)); len(got) != len(direct) {
			t.Fatalf("as fdinfo %d entries, as /proc/locks %d", len(got), len(direct))
		}
	})
}

func TestParseLocks(t *testing.T) {
	b := readFile(t, filepath.Join("testdata", "locks.txt"))
	got := parseLocks([]byte(b))
	want := []lockEntry{
		{Kind: "FLOCK", Mode: "WRITE", PID: 4321, Major: 0, Minor: 0x1f, Inode: 123456},
		{Kind: "POSIX", Mode: "READ", PID: 99, Major: 8, Minor: 1, Inode: 42},
		{Kind: "OFDLCK", Mode: "WRITE", PID: -1, Major: 0xfd, Minor: 0, Inode: 7},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ParseLocks = %+v", got)
	}
}

// holdFlock starts a helper holding a flock on path (shared when shared is
// set) and returns it once it holds it.
func holdFlock(t *testing.T, dir, path string, shared bool) *exec.Cmd {
	t.Helper()
	readyP, lines := readyPipe(t, dir)
	env := []string{"HELPER_LOCK=" + path, "HELPER_READY=" + readyP}
	if shared {
		env = append(env, "HELPER_SHARED=1")
	}
	out := filepath.Join(dir, "out")
	cmd := startHelper(t, "flock", out, env...)
	if got := await(t, lines, "flock"); got != fmt.Sprintf("flocked %d", cmd.Process.Pid) {
		t.Fatalf("helper said %q; its output: %s", got, readFile(t, out))
	}
	return cmd
}

// checkHeldBy checks that err is LockFile's refusal while pid holds f's lock: a
// *fs.PathError naming the operation and the file, wrapping host.ErrLocked
// with the holder's PID.
func checkHeldBy(t *testing.T, what string, err error, f *os.File, pid int) {
	t.Helper()
	var pe *fs.PathError
	var held *HeldError
	switch {
	case !errors.Is(err, host.ErrLocked):
		t.Errorf("%s = %v, want host.ErrLocked", what, err)
	case !errors.As(err, &pe) || pe.Op != "lock" || pe.Path != f.Name():
		t.Errorf("%s = %v, want an *fs.PathError lock %s", what, err, f.Name())
	case !errors.As(err, &held) || held.PID != pid:
		t.Errorf("%s = %v, want the holder's PID %d", what, err, pid)
	case !strings.Contains(err.Error(), fmt.Sprintf("(pid %d)", pid)):
		t.Errorf("%s = %q, does not name the holder", what, err)
	}
}

// LockFile and TryLock against a lock another process holds, on a directory
// (as the workspace's lock and the listening index's are): refused at once,
// or after the bound, or when the context ends, each naming the holder; and
// taken as soon as the holder is gone while waiting.
func TestLockFileAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	locked := filepath.Join(dir, "session")
	if err := os.Mkdir(locked, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := holdFlock(t, dir, locked, false)
	pid := cmd.Process.Pid
	f, err := os.Open(locked)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	checkHeldBy(t, "TryLock exclusive", TryLock(f, Exclusive), f, pid)
	checkHeldBy(t, "TryLock shared", TryLock(f, Shared), f, pid)

	const bound = 150 * time.Millisecond
	start := time.Now()
	err = LockFile(context.Background(), f, Exclusive, bound)
	if took := time.Since(start); took < bound {
		t.Errorf("LockFile gave up after %s, before its bound %s", took, bound)
	}
	checkHeldBy(t, "LockFile past its bound", err, f, pid)
	if !strings.Contains(err.Error(), "still after "+bound.String()) {
		t.Errorf("LockFile past its bound = %q, does not say the bound", err)
	}

	const long = 10 * time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start = time.Now()
	err = LockFile(ctx, f, Exclusive, long)
	if took := time.Since(start); took >= long {
		t.Errorf("LockFile waited its bound %s although its context ended", took)
	}
	checkHeldBy(t, "LockFile whose context ended", err, f, pid)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("LockFile whose context ended = %v, want context.Canceled", err)
	}

	// While one waits, the holder goes: the lock is taken.
	got := make(chan error, 1)
	go func() { got <- LockFile(context.Background(), f, Exclusive, long) }()
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	if err := <-got; err != nil {
		t.Fatalf("LockFile once the holder ended = %v", err)
	}
	if p, held, err := LockHolder(locked); err != nil || !held || p != os.Getpid() {
		t.Fatalf("LockHolder while the test holds it = %d %v %v", p, held, err)
	}
	if err := Unlock(f); err != nil {
		t.Fatal(err)
	}
	if _, held, _ := LockHolder(locked); held {
		t.Fatal("still held after Unlock")
	}
}

// A shared lock admits other shared holders and keeps an exclusive one out,
// as the hook watch's probe needs of the hook's mark.
func TestLockFileShared(t *testing.T) {
	dir := t.TempDir()
	mark := filepath.Join(dir, "hook.mark.demo")
	if err := os.WriteFile(mark, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := holdFlock(t, dir, mark, true)
	f, err := os.Open(mark)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	checkHeldBy(t, "TryLock exclusive beside a shared holder", TryLock(f, Exclusive), f, cmd.Process.Pid)
	if err := TryLock(f, Shared); err != nil {
		t.Fatalf("TryLock shared beside a shared holder = %v", err)
	}
	f.Close()
	// A free lock is taken even by a context already ended.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g, err := os.OpenFile(filepath.Join(dir, "free"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := LockFile(ctx, g, Exclusive, time.Second); err != nil {
		t.Fatalf("LockFile of a free lock with an ended context = %v", err)
	}
}
