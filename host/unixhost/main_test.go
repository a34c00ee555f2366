//go:build linux

package unixhost

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// TestMain runs the test binary either as the tests or, when helperEnv is
// set, as one of the helper programs the tests start (a `workspace` session,
// a lock holder, a pipe writer, an image that re-execs).
func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperMain(mode))
	}
	// Orphans of the tests (a sandbox whose bwrap was killed, the grandchild
	// of a helper that exited) are reparented to this process instead of to
	// PID 1, which on some hosts never reaps them; the cleanup below finds
	// any left and fails the run.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "PR_SET_CHILD_SUBREAPER:", err)
		os.Exit(2)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if strays := endStrays(); len(strays) > 0 {
			fmt.Fprintf(os.Stderr, "processes left behind by the tests (now ended): %s\n", strings.Join(strays, "; "))
			if code == 0 {
				code = 1
			}
		}
		os.Exit(code)
	}))
}

// children lists this process's children as /proc shows them.
func children() map[int]string {
	out := map[int]string{}
	self := os.Getpid()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := ReadStat(pid)
		if err != nil || st.PPID != self {
			continue
		}
		cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out[pid] = fmt.Sprintf("pid %d state %c %q", pid, st.State, strings.ReplaceAll(string(cl), "\x00", " "))
	}
	return out
}

// endStrays kills and reaps every child left, by PID, and describes them.
func endStrays() []string {
	var out []string
	for pid, desc := range children() {
		out = append(out, desc)
		unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, 0, nil)
	}
	return out
}
