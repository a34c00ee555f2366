package runhold

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host/unixhost"
)

// helperEnv selects what the test binary is when the tests start it: a
// holder ("holder", as `ocx run hold` is), or a starter that starts a
// detached holder, prints its PID and waits to be killed ("starter").
const (
	helperEnv     = "OCX_RUNHOLD_HELPER"
	helperOptsEnv = "OCX_RUNHOLD_HELPER_OPTS"
)

// TestMain runs the tests, or a helper. The tests' orphans (a holder whose
// starter was killed, a command whose holder was) are reparented to this
// process, which reaps them; any left at the end are ended by PID and fail
// the run.
func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "holder":
		log := slog.New(slog.NewTextHandler(os.Stderr, nil))
		code, err := Main(context.Background(), []string{os.Args[0]}, os.Args[1:], os.Stdout, os.Stderr, log)
		if err != nil {
			fmt.Fprintln(os.Stderr, "holder:", err)
		}
		os.Exit(code)
	case "starter":
		var o Options
		if err := json.Unmarshal([]byte(os.Getenv(helperOptsEnv)), &o); err != nil {
			fmt.Fprintln(os.Stderr, "starter:", err)
			os.Exit(2)
		}
		p, err := Start([]string{os.Args[0]}, o, holderEnv(), "")
		if err != nil {
			fmt.Fprintln(os.Stderr, "starter:", err)
			os.Exit(1)
		}
		fmt.Println(p.Pid)
		select {} // until killed
	}
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

// holderEnv is the environment a test's holder (and so its command) gets.
func holderEnv() []string {
	// GORACE: a race-built holder would sleep a second at its exit.
	env := []string{helperEnv + "=holder", "GORACE=atexit_sleep_ms=0"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, helperEnv+"=") && !strings.HasPrefix(kv, helperOptsEnv+"=") && !strings.HasPrefix(kv, "GORACE=") {
			env = append(env, kv)
		}
	}
	return env
}

// endStrays kills and reaps every child of this process left, by PID, and
// describes those that were still running.
func endStrays() []string {
	var out []string
	self := os.Getpid()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := unixhost.ReadStat(pid)
		if err != nil || st.PPID != self {
			continue
		}
		// An orphan that ended (a command's sleep, bwrap's own child) is
		// only reaped; one still running was left behind.
		if !st.Zombie() {
			out = append(out, fmt.Sprintf("pid %d %s state %c", pid, st.Comm, st.State))
		}
		unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, 0, nil)
	}
	return out
}
