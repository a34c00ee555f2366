package daemon

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/actors/hookwatch"
	"github.com/ocx-go/ocx/host/unixhost"
)

// defaultHookWatch is the longest time between two looks at a repository
// (--hook-watch): the fallback under the file events, which make the watch
// look Settle after each write.
const defaultHookWatch = hookwatch.DefaultEvery

// defaultDrain is how long a stop waits, by default, for the writers
// still holding the daemon's pipe open.
const defaultDrain = 5 * time.Second

// options is ocxd's parsed command line.
type options struct {
	// Agents is the agents root, absolute and clean.
	Agents string
	// Grace is how long a session the daemon started has between TERM and
	// KILL after a stop.
	Grace time.Duration
	// RetryAfter is how long a write the daemon could not make (an end
	// note, a run's started or ended) waits before it is tried again.
	RetryAfter time.Duration
	// Drain is how long a stop waits for the writers that still hold the
	// daemon's pipe open, so that every line written is read.
	Drain time.Duration
	// Level is the least level written to the log.
	Level slog.Level
	// HookWatch is the longest time between two checks that the wake hook
	// keeps up with a repository's receipts (the file events make one
	// after each write); the daemon runs the hook when it does not
	// (hookWatch, D29). Zero turns the checks off, events and all.
	HookWatch time.Duration
	// Restore says the process is the new image of a re-exec: it takes the
	// lock, the pipe and the children over from AGENTS/ocxd.handoff.
	Restore bool
	// CPUProfile, when set, is where the daemon writes a CPU profile of its
	// run (runtime/pprof's format, for go tool pprof), when it stops or
	// re-execs.
	CPUProfile string
	// HandoffCheck asks the build to read the hand-off a re-exec would give
	// it (AGENTS/ocxd.handoff), as the new image reads it at its start, and
	// to answer protocol.HandoffCheckAnswer, taking nothing over: the old image
	// execs a release's ocxd only once it answered so (D73).
	HandoffCheck bool
	// HandoffVersion asks only for the hand-off version this build reads,
	// which the old image checks before it execs a release's ocxd.
	HandoffVersion bool
	// Version asks only for the build's version line (host/version),
	// which `ocx release` checks before it accepts a release.
	Version bool
	// ReexecDelay widens the re-exec's window for the integration tests:
	// the old image waits this long after pausing, before it detaches its
	// children, and the new image as long before it adopts them. It comes
	// from the environment (envReexecDelay), never from a flag, and is zero
	// in use. ReexecDelayAt, when set, is the points it applies to, each
	// after a comma.
	ReexecDelay   time.Duration
	ReexecDelayAt string
	// TriggerClock, when set, is the clock the triggers' schedules read
	// (D101), a faster one for the integration tests; it comes from the
	// environment (envTriggerClock) alone.
	TriggerClock *unixhost.FastClock
}

// envTriggerClock names the environment variable that sets TriggerClock:
// "AT@FROM*RATE" (unixhost.ParseFastClock). It is for tests only.
const envTriggerClock = "OCXD_TEST_TRIGGER_CLOCK"

// envReexecDelay names the environment variable that sets ReexecDelay, a
// duration such as "3s", for every point of the window, or "3s@exec" for
// the one point named ("3s@checked,signal": for those two). It is for
// tests only.
const envReexecDelay = "OCXD_TEST_REEXEC_DELAY"

// ParseEnv reads what the environment sets, through getenv: a value it
// cannot read is a bad command line, named.
func (o *options) ParseEnv(getenv func(string) string) error {
	if v := getenv(envTriggerClock); v != "" {
		c, err := unixhost.ParseFastClock(v)
		if err != nil {
			return &usageError{msg: fmt.Sprintf("%s: %v", envTriggerClock, err)}
		}
		o.TriggerClock = &c
	}
	v := getenv(envReexecDelay)
	if v == "" {
		return nil
	}
	dur, at, _ := strings.Cut(v, "@")
	d, err := time.ParseDuration(dur)
	if err != nil || d < 0 {
		return &usageError{msg: fmt.Sprintf("%s: %q is not a duration such as 3s (or 3s@exec, for one point)", envReexecDelay, v)}
	}
	o.ReexecDelay, o.ReexecDelayAt = d, at
	return nil
}

// errHelp is --help: the usage on standard output, exit 0.
var errHelp = errors.New("help")

// usageError is a bad command line: the daemon did not start, and exits 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

const usageText = `usage: ocxd --agents AGENTS [--grace DURATION] [--retry-after DURATION]
            [--drain DURATION] [--log-level LEVEL] [--hook-watch DURATION] [--cpu-profile FILE]
       ocxd --agents AGENTS --handoff-check
       ocxd --handoff-version
       ocxd --version

The daemon of the agents root AGENTS: it reads AGENTS/ocxd, launches and stops
sessions, records their ends, and re-execs itself on request. One runs per
agents root; a second start exits 0 at once, saying one runs. TERM or INT
stops it (its sessions keep running); USR1 writes its memory to its log.

  --agents AGENTS        the agents root (it holds node.json)
  --grace DURATION       between TERM and KILL after a stop (default 10s)
  --retry-after DURATION before a write that failed is tried again (default
                         10s); one the server was not there for is tried
                         for as long as the daemon runs
  --drain DURATION       how long a stop waits for the writers still holding
                         the daemon's pipe open, reading what they write
                         (default 5s); a writer past it is cut off
  --log-level LEVEL      debug, info, warn or error (default info)
  --hook-watch DURATION  the longest time between two checks that the wake
                         hook keeps up with a repository's receipts (each
                         write to it is checked at once), running it when
                         nothing else will (default 2s; 0 turns it off)
  --cpu-profile FILE     write a CPU profile of the run to FILE (for go tool
                         pprof) when the daemon stops or re-execs
  --handoff-check        read the hand-off a re-exec would give this build
                         (AGENTS/ocxd.handoff), as its new image would, take
                         nothing over, and answer one line; a daemon execs a
                         release's ocxd only once it answered
  --handoff-version      print the re-exec hand-off version this build reads
  --version              print the build's version and check-in, one line
`

// parseArgs reads the command line after the program's name; every value is
// checked before anything is opened.
func parseArgs(args []string) (options, error) {
	fs := flag.NewFlagSet("ocxd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := options{Grace: actors.DefaultGrace, HookWatch: defaultHookWatch, RetryAfter: actors.DefaultRetryAfter, Drain: defaultDrain}
	var level string
	fs.StringVar(&o.Agents, "agents", "", "")
	fs.DurationVar(&o.Grace, "grace", actors.DefaultGrace, "")
	fs.DurationVar(&o.RetryAfter, "retry-after", actors.DefaultRetryAfter, "")
	fs.DurationVar(&o.Drain, "drain", defaultDrain, "")
	fs.StringVar(&level, "log-level", "info", "")
	fs.DurationVar(&o.HookWatch, "hook-watch", defaultHookWatch, "")
	fs.BoolVar(&o.Restore, "restore", false, "")
	fs.StringVar(&o.CPUProfile, "cpu-profile", "", "")
	fs.BoolVar(&o.HandoffCheck, "handoff-check", false, "")
	fs.BoolVar(&o.HandoffVersion, "handoff-version", false, "")
	fs.BoolVar(&o.Version, "version", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, errHelp
		}
		return o, &usageError{msg: err.Error()}
	}
	if fs.NArg() > 0 {
		return o, &usageError{msg: fmt.Sprintf("unexpected argument %q; ocxd takes flags only", fs.Arg(0))}
	}
	if o.HandoffVersion || o.Version {
		return o, nil
	}
	if o.Agents == "" {
		return o, &usageError{msg: "--agents: no agents root given"}
	}
	if !filepath.IsAbs(o.Agents) {
		abs, err := filepath.Abs(o.Agents)
		if err != nil {
			return o, &usageError{msg: fmt.Sprintf("--agents: %q: %v", o.Agents, err)}
		}
		o.Agents = abs
	}
	o.Agents = filepath.Clean(o.Agents)
	if o.Grace <= 0 {
		return o, &usageError{msg: fmt.Sprintf("--grace: %s is not a positive duration", o.Grace)}
	}
	if o.RetryAfter <= 0 {
		return o, &usageError{msg: fmt.Sprintf("--retry-after: %s is not a positive duration", o.RetryAfter)}
	}
	if o.Drain <= 0 {
		return o, &usageError{msg: fmt.Sprintf("--drain: %s is not a positive duration", o.Drain)}
	}
	if o.HookWatch < 0 {
		return o, &usageError{msg: fmt.Sprintf("--hook-watch: %s is negative; 0 turns the watch off", o.HookWatch)}
	}
	if err := o.Level.UnmarshalText([]byte(level)); err != nil {
		return o, &usageError{msg: fmt.Sprintf("--log-level: %q is not debug, info, warn or error", level)}
	}
	if o.HandoffCheck && o.Restore {
		return o, &usageError{msg: "--handoff-check takes nothing over: it is not given with --restore"}
	}
	return o, nil
}

// argv is the command line that gives these options again, for the image a
// re-exec starts (with --restore).
func (o options) argv(program string) []string {
	argv := []string{program, "--agents", o.Agents, "--grace", o.Grace.String(),
		"--log-level", strings.ToLower(o.Level.String()), "--hook-watch", o.HookWatch.String(), "--restore"}
	if o.RetryAfter != actors.DefaultRetryAfter {
		// Named only when set, so that a release from before the flag
		// (a rollback's) takes the argv of a daemon that does not set it.
		argv = append(argv[:len(argv)-1], "--retry-after", o.RetryAfter.String(), "--restore")
	}
	if o.Drain != defaultDrain {
		argv = append(argv[:len(argv)-1], "--drain", o.Drain.String(), "--restore")
	}
	return argv
}

// checkArgv is the command line of the check the old image runs before the
// exec: the exec's own (argv), asking the new program to check the hand-off
// rather than take it over.
func (o options) checkArgv(program string) []string {
	argv := o.argv(program)
	return append(argv[:len(argv)-1], "--handoff-check")
}
