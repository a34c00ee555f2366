//go:build linux

package unixhost

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
	var lk Locker
	if held, err := lk.Held(lock); err != nil || held {
		t.Fatalf("Held before anyone locked = %v %v", held, err)
	}
	cmd := startHelper(t, "lock", filepath.Join(dir, "out"), "HELPER_LOCK="+lock, "HELPER_READY="+readyP)
	if got := await(t, lines, "lock"); got != fmt.Sprintf("locked %d", cmd.Process.Pid) {
		t.Fatalf("helper said %q; its output: %s", got, readFile(t, filepath.Join(dir, "out")))
	}
	if held, err := lk.Held(lock); err != nil || !held {
		t.Fatalf("Held while the helper holds it = %v %v", held, err)
	}
	if pid, held, err := LockHolder(lock); err != nil || !held || pid != cmd.Process.Pid {
		t.Fatalf("LockHolder = %d %v %v, want %d", pid, held, err, cmd.Process.Pid)
	}
	_, err := lk.Acquire(lock)
	if !errors.Is(err, host.ErrLocked) || !strings.Contains(err.Error(), fmt.Sprint(cmd.Process.Pid)) || !strings.Contains(err.Error(), lock) {
		t.Fatalf("Acquire while held = %v", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if held, err := lk.Held(lock); err != nil || held {
		t.Fatalf("Held after the holder died = %v %v", held, err)
	}
	l, err := lk.Acquire(lock)
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
	if held, _ := lk.Held(lock); held {
		t.Fatal("still held after Release")
	}
}

// A probe never takes the lock, so probes running flat out in another
// process never make an Acquire fail.
func TestLockProbeNeverBlocksAcquire(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, "ocxd.lock")
	var lk Locker
	l, err := lk.Acquire(lock)
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
		l, err := lk.Acquire(lock)
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
	if _, err := (Locker{}).Acquire(lock); !errors.Is(err, host.ErrLocked) {
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

func TestParseLocks(t *testing.T) {
	b := readFile(t, filepath.Join("testdata", "locks.txt"))
	got := ParseLocks([]byte(b))
	want := []LockEntry{
		{Kind: "FLOCK", Mode: "WRITE", PID: 4321, Major: 0, Minor: 0x1f, Inode: 123456},
		{Kind: "POSIX", Mode: "READ", PID: 99, Major: 8, Minor: 1, Inode: 42},
		{Kind: "OFDLCK", Mode: "WRITE", PID: -1, Major: 0xfd, Minor: 0, Inode: 7},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ParseLocks = %+v", got)
	}
}
