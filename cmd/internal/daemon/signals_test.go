package daemon

import (
	"os"
	"slices"
	"syscall"
	"testing"

	"github.com/ocx-go/ocx/host"
)

// TestSignalActions is D26's table: what each signal the daemon may meet
// means to it, running and stopping.
func TestSignalActions(t *testing.T) {
	for _, c := range []struct {
		sig               syscall.Signal
		running, stopping sigAction
	}{
		{syscall.SIGHUP, sigReexec, sigIgnored},
		{syscall.SIGINT, sigStop, sigIgnored},
		{syscall.SIGTERM, sigStop, sigIgnored},
		{syscall.SIGQUIT, sigStop, sigIgnored},
		{syscall.SIGUSR1, sigMemory, sigMemory},
		{syscall.SIGUSR2, sigStacks, sigStacks},
		{syscall.SIGPIPE, sigLeft, sigLeft},
		{syscall.SIGCHLD, sigLeft, sigLeft},
		{syscall.SIGWINCH, sigLeft, sigLeft},
	} {
		name := host.SignalName(int(c.sig))
		if got := actionOf(c.sig, false); got != c.running {
			t.Errorf("%s while running: %s, want %s", name, got, c.running)
		}
		if got := actionOf(c.sig, true); got != c.stopping {
			t.Errorf("%s while stopping: %s, want %s", name, got, c.stopping)
		}
	}
}

// TestCaughtSignals: Run catches exactly the signals that mean something to
// the daemon, so none with an action is left to Go's default and none
// left to Go (PIPE) is caught.
func TestCaughtSignals(t *testing.T) {
	for n := 1; n < 32; n++ {
		sig := syscall.Signal(n)
		caught := slices.Contains(caughtSignals, os.Signal(sig))
		acts := actionOf(sig, false) != sigLeft
		if caught != acts {
			t.Errorf("%s: caught %v, but its action is %s", host.SignalName(n), caught, actionOf(sig, false))
		}
	}
	if slices.Contains(caughtSignals, os.Signal(syscall.SIGPIPE)) {
		t.Errorf("SIGPIPE is caught; D26 leaves it to Go")
	}
}
