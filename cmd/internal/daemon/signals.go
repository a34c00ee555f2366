package daemon

import "github.com/ocx-go/ocx/host"

// What each signal means to ocxd (decisions D26): the decision is here,
// pure; Run only routes it.

// sigAction is what the daemon does on a signal.
type sigAction int

const (
	// sigLeft: not caught; Go's runtime does what it does (PIPE: nothing
	// for a signal sent from outside, EPIPE for a write to a closed pipe).
	sigLeft sigAction = iota
	// sigReexec: re-exec the current release in place, as a `reexec` line.
	sigReexec
	// sigStop: the graceful stop (finish), exit 0; the sessions keep running.
	sigStop
	// sigMemory: the memory to the log.
	sigMemory
	// sigStacks: every goroutine's stack to the log, as one record.
	sigStacks
	// sigIgnored: caught, and nothing done but a log line: a HUP or a
	// second stop while the daemon stops.
	sigIgnored
	// sigSettle: the daemon's own settleSignal, which an exec raises to
	// know the loop acted on every signal caught before it.
	sigSettle
)

func (a sigAction) String() string {
	switch a {
	case sigLeft:
		return "left to Go"
	case sigReexec:
		return "re-exec"
	case sigStop:
		return "stop"
	case sigMemory:
		return "memory"
	case sigStacks:
		return "stacks"
	case sigIgnored:
		return "ignored"
	case sigSettle:
		return "settle"
	}
	return "unknown"
}

// caughtSignals are the signals Run catches from its very start, before the
// daemon takes its lock (a fresh start) or holds it (a re-exec'd image), so
// that none of them ever takes Go's default action on a daemon that holds
// the lock: HUP, INT and TERM would end it, QUIT would dump its goroutines
// and exit 2, each leaving the pipe's name behind. PIPE is left to Go.
var caughtSignals = []host.Signal{
	host.SIGHUP, host.SIGINT, host.SIGTERM, host.SIGQUIT, host.SIGUSR1, host.SIGUSR2, settleSignal,
}

// settleSignal is the signal the daemon sends itself before an exec
// (settleSignals): a real-time one, SIGRTMIN+6 as glibc counts, which
// nothing else sends a daemon, numbered above every signal that stops it.
const settleSignal host.Signal = 40

// actionOf is what sig means to the daemon; stopping says its stop has
// begun (no re-exec starts then, and a second stop adds nothing).
func actionOf(sig host.Signal, stopping bool) sigAction {
	switch sig {
	case host.SIGHUP:
		if stopping {
			return sigIgnored
		}
		return sigReexec
	case host.SIGINT, host.SIGTERM, host.SIGQUIT:
		if stopping {
			return sigIgnored
		}
		return sigStop
	case host.SIGUSR1:
		return sigMemory
	case host.SIGUSR2:
		return sigStacks
	case settleSignal:
		return sigSettle
	}
	return sigLeft
}
