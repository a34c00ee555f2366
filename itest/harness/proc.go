package harness

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// proc names one process: its PID and its start time (field 22 of
// /proc/PID/stat), so a PID reused by another process is never mistaken for it.
type proc struct {
	pid   int
	start uint64
}

// readStat returns a process's state letter and start time.
func readStat(pid int) (state byte, start uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) may hold spaces and parentheses; the
	// fields after it start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, errGone
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 20 {
		return 0, 0, errGone
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	return f[0][0], start, err
}

// alive reports whether the process still runs: it exists with the same start
// time and is not a zombie.
func (p proc) alive() bool {
	state, start, err := readStat(p.pid)
	return err == nil && start == p.start && state != 'Z' && state != 'X'
}

// exited reports whether the process has finished exiting: gone, its PID
// another's, or a zombie none of whose threads is still exiting. A process
// killed is a zombie, and out of its namespaces, before the threads of its
// group have closed their files: until the last has, a lock it holds
// (flock, released by the last close) is still held.
func (p proc) exited() bool {
	state, start, err := readStat(p.pid)
	if err != nil || start != p.start {
		return true
	}
	if state != 'Z' && state != 'X' {
		return false
	}
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(p.pid) + "/task")
	return err != nil || len(tasks) <= 1
}

func waitGone(p proc, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for p.alive() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// pidsNaming lists the processes whose command line contains s.
func pidsNaming(s string) []proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(s)) {
			continue
		}
		state, start, err := readStat(pid)
		if err != nil || state == 'Z' {
			continue
		}
		out = append(out, proc{pid: pid, start: start})
	}
	return out
}

// Track registers a process the test started, which must be gone by the
// test's end: if it is still alive then, it is killed by PID and the test
// fails.
func Track(t testing.TB, pid int) {
	t.Helper()
	_, start, err := readStat(pid)
	if err != nil {
		return // already gone and reaped: nothing to end
	}
	p := proc{pid: pid, start: start}
	t.Cleanup(func() {
		if !p.alive() {
			return
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		waitGone(p, 5*time.Second)
		t.Errorf("harness: process %d was still alive at the end of the test; killed it", pid)
	})
}

// Alive reports whether a process runs (exists and is not a zombie).
func Alive(pid int) bool {
	state, _, err := readStat(pid)
	return err == nil && state != 'Z' && state != 'X'
}
