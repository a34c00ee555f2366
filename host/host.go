package host

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// The errors the implementations return, wrapped with the operation and path
// or process they concern.
var (
	// ErrGone: the process with that identity has ended (or its PID now names
	// another process), so nothing was sent to it.
	ErrGone = errors.New("host: process is gone")
	// ErrLocked: another process holds the lock.
	ErrLocked = errors.New("host: lock is held by another process")
	// ErrNoReader: nobody holds the named pipe open for reading.
	ErrNoReader = errors.New("host: nobody reads the pipe")
	// ErrPipeFull: the pipe stayed full for longer than the writer waits.
	ErrPipeFull = errors.New("host: pipe stayed full")
	// ErrLineTooLong: a line, with its newline, is longer than PipeBuf.
	ErrLineTooLong = errors.New("host: line is longer than one atomic pipe write")
	// errRefused: a sandbox path reaches the node's own files.
	errRefused = errors.New("host: path reaches the node's own files")
	// ErrClosed: the implementation was closed.
	ErrClosed = errors.New("host: closed")
)

// PipeBuf is PIPE_BUF on Linux: the longest write to a pipe that is atomic.
const PipeBuf = 4096

// Signal is a signal number, so that the actors need not import syscall.
type Signal int

// The signals OCX sends or catches (Linux's numbers; unixhost.OSSignal
// makes each an os.Signal).
const (
	SIGHUP  Signal = 1
	SIGINT  Signal = 2
	SIGQUIT Signal = 3
	SIGKILL Signal = 9
	SIGUSR1 Signal = 10
	SIGUSR2 Signal = 12
	SIGPIPE Signal = 13
	SIGTERM Signal = 15
	// SIGXCPU is what a session stops as when its wall limit runs out.
	SIGXCPU Signal = 24
)

func (s Signal) String() string { return SignalName(int(s)) }

// SpawnSpec says what to start. The child gets a session and process group of
// its own (so it outlives the daemon and a stop reaches all of it), standard
// input from /dev/null, standard output and error appended to Log, exactly
// Env as its environment, and Dir as its working directory. It never gets a
// parent-death signal.
type SpawnSpec struct {
	Path string   // the program, an absolute path (no PATH search)
	Args []string // its argv, Args[0] included
	Env  []string // its whole environment, "NAME=value"
	Dir  string   // its working directory; inside the sandbox when Sandbox is set
	Log  string   // stdout and stderr are appended here; created mode 0600
	// Sandbox, when set, runs the program inside bwrap as BwrapArgs builds it.
	Sandbox *SandboxSpec
	// Cgroup, when set, is the cgroup the sandbox's processes are put in
	// before their first instruction (Layout.SessionCgroup), holding
	// Limits; it needs Sandbox. The spawner makes it; whoever follows the
	// session removes it once it has ended.
	Cgroup string
	Limits CgroupLimits
}

// Exit is the end of a process: what a reaper or a watcher reports once, as
// a message, for each process it was given.
type Exit struct {
	ID protocol.ProcID
	// Known is false for a process that was not the daemon's child (found after
	// a restart): it ended, but its status cannot be had (D6: "status unknown").
	Known  bool
	Code   int  // the exit code, when Signal is 0
	Signal int  // the signal that ended it; 0 when it exited
	Core   bool // it dumped core
	User   time.Duration
	System time.Duration
	MaxRSS int64 // bytes
	// Sandbox is set for a process started inside bwrap: what bwrap's
	// --json-status-fd said.
	Sandbox *SandboxExit
	// Cgroup is set for a run's process held in a cgroup: what the
	// cgroup's counts said once the process had ended.
	Cgroup *CgroupExit
	// CPULimit is the CPU time each process of a run was given
	// (RLIMIT_CPU, limits.cpu); 0 for none.
	CPULimit time.Duration
	At       time.Time // when it was seen gone
}

// PastCPULimit says whether a sandboxed run's command was ended by the
// kernel's SIGXCPU at its limits.cpu (seed 004, table 7): bwrap reports
// that as the exit code 128+24, and under a cpu limit that code is read as
// the kernel's signal (D83). A command may exit 152 by itself, which bwrap
// reports alike; nothing tells the two apart, since bwrap's init in the
// sandbox's PID namespace takes the command's CPU time with it (its exit's
// rusage holds only bwrap's own): such a run is said to be past its limit.
func (e Exit) PastCPULimit() bool {
	return e.Known && e.Sandbox != nil && e.Sandbox.Reported && e.Sandbox.Code == 128+int(SIGXCPU) && e.CPULimit > 0
}

// CgroupExit is what a run's cgroup said at its process's end: its limits
// and the counts of the limits reached (Events.Limit names the one).
type CgroupExit struct {
	Name   string
	Limits CgroupLimits
	Events CgroupEvents
	// Err says the cgroup could not be read or removed; Events is then
	// what could be read.
	Err string
}

// SandboxExit is what bwrap reported about the command it ran.
type SandboxExit struct {
	// ChildPID is the sandbox's first process, as the host numbers it (the
	// init of its PID namespace); 0 when bwrap never reported one.
	ChildPID int
	// Reported is true when bwrap reported the command's exit; false means the
	// sandbox never ran the command to its end (a bad bind, say).
	Reported bool
	// Code is the command's exit code as bwrap gives it: 128+N for signal N.
	Code int
}

// outcome is how a process ended.
type outcome string

// The outcomes.
const (
	OutcomeExited        outcome = "exited"         // Status is its exit code
	OutcomeSignaled      outcome = "signaled"       // Status is 128 + the signal
	OutcomeSandboxFailed outcome = "sandbox-failed" // bwrap exited without running the command to its end
	OutcomeUnknown       outcome = "unknown"        // not the daemon's child: no status
)

// Outcome says how the process ended, and its status in the convention of seed
// 004's ended: the exit code, or 128 + N for signal N.
func (e Exit) Outcome() (outcome, int) {
	switch {
	case !e.Known:
		return OutcomeUnknown, 0
	case e.Sandbox != nil && e.Sandbox.Reported:
		// bwrap gives 128+N for a command killed by signal N, which cannot be
		// told from a command that exited with that code: both are "exited".
		return OutcomeExited, e.Sandbox.Code
	case e.Signal != 0:
		return OutcomeSignaled, 128 + e.Signal
	case e.Sandbox != nil:
		return OutcomeSandboxFailed, e.Code
	}
	return OutcomeExited, e.Code
}

// String renders the exit as one line.
func (e Exit) String() string {
	o, status := e.Outcome()
	var b strings.Builder
	fmt.Fprintf(&b, "exit %s %s", e.ID, o)
	if o != OutcomeUnknown {
		fmt.Fprintf(&b, " status %d", status)
	}
	if e.Sandbox != nil {
		fmt.Fprintf(&b, " sandbox-child %d", e.Sandbox.ChildPID)
		if o == OutcomeSandboxFailed || o == OutcomeSignaled && !e.Sandbox.Reported {
			fmt.Fprintf(&b, " bwrap-code %d bwrap-signal %d", e.Code, e.Signal)
		}
	}
	if e.Known {
		fmt.Fprintf(&b, " user %s system %s maxrss %d", e.User, e.System, e.MaxRSS)
	}
	return b.String()
}

// Spawner starts a process. onExit is called exactly once with its end, on
// another goroutine, never before Spawn has returned; it must not block.
type Spawner interface {
	Spawn(spec SpawnSpec, onExit func(Exit)) (protocol.ProcID, error)
}

// Watcher follows a process the daemon did not start in this image (found in
// the table after a restart, or a child kept across a re-exec). onExit is
// called exactly once when it ends, with Known set only if it turned out to be
// the daemon's own child. A process already gone is reported at once.
type Watcher interface {
	Watch(id protocol.ProcID, onExit func(Exit)) error
}

// Signaler sends a signal to the process group id leads (to id alone when it
// leads none), only while id's PID still has id's start time. ErrGone when it
// does not. A sandboxed child of the daemon is signalled inside its sandbox,
// so that bwrap stays to report the command's exit.
type Signaler interface {
	Signal(id protocol.ProcID, sig Signal) error
}

// ProcTable reads the process table.
type ProcTable interface {
	// Scan returns every process that names a workspace of the agents root.
	Scan() (Table, error)
	// Naming answers whether a process names the workspace k: the refusal
	// check made before every launch.
	Naming(k messages.WorkspaceKey) (Verdict, error)
}

// Clock is the time, and timers on it.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f on its own goroutine once d has passed; stop cancels
	// it and reports whether that prevented the call.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// SignalName names signal n as an end note writes it ("SIGTERM"); "SIGRTMIN+K"
// or "signal N" for the others.
func SignalName(n int) string { return messages.SignalName(n) }
