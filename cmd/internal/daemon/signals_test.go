package daemon

import (
	"slices"
	"testing"

	"github.com/ocx-go/ocx/host"
)

// TestSignalActions is D26's table: what each signal the daemon may meet
// means to it, running and stopping.
func TestSignalActions(t *testing.T) {
	for _, c := range []struct {
		sig               host.Signal
		running, stopping sigAction
	}{
		{host.SIGHUP, sigReexec, sigIgnored},
		{host.SIGINT, sigStop, sigIgnored},
		{host.SIGTERM, sigStop, sigIgnored},
		{host.SIGQUIT, sigStop, sigIgnored},
		{host.SIGUSR1, sigMemory, sigMemory},
		{host.SIGUSR2, sigStacks, sigStacks},
		{host.SIGPIPE, sigLeft, sigLeft},
		{17, sigLeft, sigLeft}, // SIGCHLD
		{28, sigLeft, sigLeft}, // SIGWINCH
		{settleSignal, sigSettle, sigSettle},
	} {
		name := c.sig.String()
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
		sig := host.Signal(n)
		caught := slices.Contains(caughtSignals, sig)
		acts := actionOf(sig, false) != sigLeft
		if caught != acts {
			t.Errorf("%s: caught %v, but its action is %s", host.SignalName(n), caught, actionOf(sig, false))
		}
	}
	if slices.Contains(caughtSignals, host.SIGPIPE) {
		t.Errorf("SIGPIPE is caught; D26 leaves it to Go")
	}
}
