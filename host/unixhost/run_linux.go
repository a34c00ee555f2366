package unixhost

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ocx-go/ocx/messages/protocol"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
)

var _ host.RunStarter = (*Launcher)(nil)

// childPIDWait bounds how long StartRun waits for bwrap to say its child's
// PID, which it does right after the clone.
const childPIDWait = 10 * time.Second

// RunSupport says what this host can provide a run (refusal row 8): bwrap,
// cpu (RLIMIT_CPU, which the kernel enforces on everyone), processes (a
// cgroup's pids.max where one can be made; else RLIMIT_NPROC, which the
// kernel does not count for root's user: a node running as root without a
// cgroup cannot provide it) and memory (a cgroup's memory limit: refused
// where no cgroup can be made, the reason naming what the host lacks).
func (l *Launcher) RunSupport() host.RunSupport {
	var s host.RunSupport
	why := l.cgroups.Why()
	if os.Geteuid() == 0 && why != "" {
		s.Processes = "the node runs as root: its sandboxes' users are root outside them, whose processes the kernel does not count against RLIMIT_NPROC, and no cgroup can be made: " + why
	}
	s.Memory = why
	s.Disk = DiskWhy()
	if l.bwrap == "" {
		s.Sandbox = "bwrap is not installed (looked for /usr/bin/bwrap and /bin/bwrap)"
	}
	return s
}

// readSmall reads a small file of /proc or /sys, retrying EINTR.
func readSmall(p string) ([]byte, error) {
	for {
		b, err := os.ReadFile(p)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		return b, err
	}
}

// StartRun starts a run's process (seed 004, sections 6 to 8): with a
// sandbox, bwrap with host.RunBwrapArgs, the files' texts in memfds, and,
// when a limit is asked, the recipe that leaves no window: bwrap is given
// --json-status-fd and --block-fd, StartRun reads the PID of bwrap's child,
// sets RLIMIT_CPU and RLIMIT_NPROC on it with prlimit, and only then writes
// the byte that lets it go on to the command; the command's process and every
// one it starts inherit the limits. Without a sandbox the program is started
// alone (found on spec.Env's PATH when named without '/'), and no limit may
// be asked. It returns the process to watch (bwrap, with a sandbox) and
// follows it as Spawn's children are: onExit hears of its end once.
//
// With EndsWithNode, bwrap is given --die-with-parent: the sandbox is killed
// when the process that called StartRun ends, or rather the thread that
// forked bwrap (bubblewrap #692); Go ends a thread only when a goroutine
// locked to it exits, and StartRun does not lock. That process is the run's
// watcher, never the daemon, whose going down ends no run.
func (l *Launcher) StartRun(spec host.RunSpec, onExit func(host.Exit)) (protocol.ProcID, error) {
	if onExit == nil {
		return protocol.ProcID{}, errors.New("unixhost: start run: no onExit")
	}
	if len(spec.Command) == 0 || spec.Command[0] == "" {
		return protocol.ProcID{}, errors.New("unixhost: start run: no command")
	}
	prog := spec.Command[0]
	if !filepath.IsAbs(spec.Dir) || filepath.Clean(spec.Dir) != spec.Dir {
		return protocol.ProcID{}, fmt.Errorf("unixhost: start run %s: directory %q is not an absolute, clean path", prog, spec.Dir)
	}
	if err := l.RunSupport().Check(spec.Sandbox, spec.Limits); err != nil {
		return protocol.ProcID{}, fmt.Errorf("unixhost: start run %s: %w", prog, err)
	}
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return protocol.ProcID{}, fmt.Errorf("unixhost: start run %s: %w", prog, host.ErrClosed)
	}
	files := []uintptr{uintptr(l.devnull), uintptr(l.nullW), uintptr(l.nullW)}
	for i, f := range []host.FD{spec.Stdin, spec.Stdout, spec.Stderr} {
		if f != nil {
			files[i] = f.Fd()
		}
	}
	env := spec.Env
	if env == nil {
		env = []string{}
	}
	if spec.Sandbox == nil {
		return l.startUnconfined(spec, env, files, onExit)
	}
	return l.startSandboxed(spec, env, files, onExit)
}

func (l *Launcher) startUnconfined(spec host.RunSpec, env []string, files []uintptr, onExit func(host.Exit)) (protocol.ProcID, error) {
	path, err := lookPath(spec.Command[0], env)
	if err != nil {
		return protocol.ProcID{}, err
	}
	pidfd := -1
	attr := &syscall.ProcAttr{Dir: spec.Dir, Env: env, Files: files, Sys: runAttr(spec, &pidfd)}
	pid, err := syscall.ForkExec(path, spec.Command, attr)
	if err != nil {
		return protocol.ProcID{}, &fs.PathError{Op: "start run", Path: path, Err: err}
	}
	return l.track(path, pid, pidfd, false, -1, nil, onExit)
}

// runAttr is a run's process's session: its own, with its standard input
// as the controlling terminal when it is one (Ctty is a descriptor number
// in the child, golang/go#29458), and SIGHUP when its starter's thread ends
// when asked (Go ends no thread that locked no goroutine).
func runAttr(spec host.RunSpec, pidfd *int) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setsid: true, PidFD: pidfd}
	if spec.Terminal {
		a.Setctty, a.Ctty = true, 0
	}
	if spec.HangUpWithStarter {
		a.Pdeathsig = syscall.SIGHUP
	}
	return a
}

// lookPath finds prog on env's PATH, as the run's process would: a program
// named without '/' with no PATH in env is an error, not a guess.
func lookPath(prog string, env []string) (string, error) {
	if strings.Contains(prog, "/") {
		if !filepath.IsAbs(prog) {
			return "", fmt.Errorf("unixhost: start run: program %q is neither absolute nor a name to find on PATH", prog)
		}
		return prog, nil
	}
	path, ok := "", false
	for _, kv := range env {
		if v, found := strings.CutPrefix(kv, "PATH="); found {
			path, ok = v, true
		}
	}
	if !ok {
		return "", fmt.Errorf("unixhost: start run: program %q is named without '/', and env has no PATH", prog)
	}
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, prog)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && unix.Access(p, unix.X_OK) == nil {
			return p, nil
		}
	}
	return "", &fs.PathError{Op: "start run: find on PATH " + path, Path: prog, Err: fs.ErrNotExist}
}

// toldCPULimit has a run's exit say its CPU limit, so that SIGXCPU can
// be told from the same code exited by the command
// (host.Exit.PastCPULimit).
func toldCPULimit(seconds uint64, onExit func(host.Exit)) func(host.Exit) {
	if seconds == 0 {
		return onExit
	}
	limit := time.Duration(seconds) * time.Second
	return func(x host.Exit) {
		x.CPULimit = limit
		onExit(x)
	}
}

// runCgroup makes the block of the run's cgroup, which holds its memory,
// and its processes where a cgroup can be made (RLIMIT_NPROC counts
// nothing for root); nil when its limits need none.
func (l *Launcher) runCgroup(spec host.RunSpec) (*cgroupBlock, error) {
	prog := spec.Command[0]
	cgl := host.CgroupLimits{Memory: spec.Limits.Memory}
	if spec.Limits.Processes > 0 && l.cgroups.Why() == "" {
		cgl.Processes = spec.Limits.Processes
	}
	if cgl == (host.CgroupLimits{}) {
		return nil, nil
	}
	if spec.Cgroup == "" {
		return nil, fmt.Errorf("unixhost: start run %s: its limits need a cgroup, and the spec names none", prog)
	}
	cb, err := l.newCgroupBlock(spec.Cgroup, cgl)
	if err != nil {
		return nil, fmt.Errorf("unixhost: start run %s: %w", prog, err)
	}
	return cb, nil
}

func (l *Launcher) startSandboxed(spec host.RunSpec, env []string, files []uintptr, onExit func(host.Exit)) (protocol.ProcID, error) {
	sb := spec.Sandbox
	prog := spec.Command[0]
	onExit = toldCPULimit(spec.Limits.CPU, onExit)
	cb, err := l.runCgroup(spec)
	if err != nil {
		return protocol.ProcID{}, err
	}
	if cb != nil {
		defer cb.close()
	}
	// Every sandboxed run waits on its block pipe: its limits, and the
	// counts its user namespace is held to (D82), are set before its
	// first instruction.
	fds := host.RunFDs{Status: 3, Block: 4, Files: 5}
	argv, err := host.RunBwrapArgs(*sb, fds, spec.Dir, spec.Command)
	if err != nil {
		return protocol.ProcID{}, err
	}
	rf, err := openRunFiles(prog, files, true, cb, sb.Files)
	if err != nil {
		return protocol.ProcID{}, err
	}
	defer rf.closeChildEnds()
	statusR, blockW := rf.statusR, rf.blockW
	pidfd := -1
	attr := &syscall.ProcAttr{Dir: "/", Env: env, Files: rf.files, Sys: runAttr(spec, &pidfd)}
	pid, err := syscall.ForkExec(l.bwrap, argv, attr)
	if err != nil {
		unix.Close(statusR)
		if blockW >= 0 {
			unix.Close(blockW)
		}
		return protocol.ProcID{}, &fs.PathError{Op: "start run", Path: l.bwrap, Err: err}
	}
	rf.closeChildEnds()
	var g *cgroup
	if cb != nil {
		g = cb.g
	}
	buf, child, err := l.limit(pid, statusR, fds.Block, spec.Limits, g)
	if err != nil {
		// The child, if there is one, is killed before the block is lifted,
		// so that nothing runs without its limits.
		if st := host.ParseBwrapStatus(buf); st.ChildPID > 0 {
			killChildOf(st.ChildPID, pid)
		}
		if pidfd >= 0 {
			unix.Close(pidfd)
		}
		l.abandon(pid, statusR)
		unix.Close(blockW)
		return protocol.ProcID{}, fmt.Errorf("unixhost: start run %s: %w", prog, err)
	}
	lift(blockW)
	var rc *runCgroup
	if cb != nil {
		cb.ok = true
		rc = watchRun(cb.g, child, pid)
	}
	id, err := l.trackWith(l.bwrap, pid, pidfd, true, statusR, buf, rc, onExit)
	if err != nil && rc != nil {
		rc.end(true) // the run was killed: its cgroup goes
	}
	return id, err
}

// runFiles are the descriptors startSandboxed hands bwrap: the caller's
// files, then the status pipe's write end, the block pipe's read end (a
// limited run) and one data file per sandbox file. statusR and blockW are
// the ends the launcher keeps (blockW -1 for none); childEnds are closed
// once bwrap has them, or when the start fails.
type runFiles struct {
	files     []uintptr
	statusR   int
	blockW    int
	childEnds []int
}

// openRunFiles opens the pipes and data files of a run of prog; a limited
// run's block pipe is its cgroup's (cb), or a pipe of its own. On failure
// it closes what it opened.
func openRunFiles(prog string, files []uintptr, limited bool, cb *cgroupBlock, sbFiles []host.RunFile) (*runFiles, error) {
	rf := &runFiles{files: files, blockW: -1}
	fail := func(err error) (*runFiles, error) {
		unix.Close(rf.statusR)
		if rf.blockW >= 0 {
			unix.Close(rf.blockW)
		}
		rf.closeChildEnds()
		return nil, err
	}
	var status [2]int
	if err := unix.Pipe2(status[:], unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("unixhost: start run %s: status pipe: %w", prog, err)
	}
	rf.statusR = status[0]
	rf.childEnds = append(rf.childEnds, status[1])
	if err := unix.SetNonblock(rf.statusR, true); err != nil {
		return fail(fmt.Errorf("unixhost: start run %s: status pipe: %w", prog, err))
	}
	rf.files = append(rf.files, uintptr(status[1]))
	if limited {
		var block [2]int
		if cb != nil {
			// The cgroup's block pipe, closed below as any other.
			block[0], block[1], cb.r, cb.w = cb.r, cb.w, -1, -1
		} else if err := unix.Pipe2(block[:], unix.O_CLOEXEC); err != nil {
			return fail(fmt.Errorf("unixhost: start run %s: block pipe: %w", prog, err))
		}
		rf.blockW = block[1]
		// Closing the write end would let the child go on, as a byte does:
		// it is closed only once the limits are set or the child is dead.
		rf.childEnds = append(rf.childEnds, block[0])
		rf.files = append(rf.files, uintptr(block[0]))
	}
	for i, f := range sbFiles {
		fd, err := dataFD(f.Text)
		if err != nil {
			return fail(fmt.Errorf("unixhost: start run %s: sandbox.files[%d] at %s: %w", prog, i, f.At, err))
		}
		rf.childEnds = append(rf.childEnds, fd)
		rf.files = append(rf.files, uintptr(fd))
	}
	return rf, nil
}

// closeChildEnds closes the ends bwrap's child holds, once.
func (rf *runFiles) closeChildEnds() {
	for _, fd := range rf.childEnds {
		unix.Close(fd)
	}
	rf.childEnds = nil
}

// lift lets a blocked child go on, and closes blockW. EPIPE means it is
// gone already (a bind that failed): bwrap says so in its exit.
func lift(blockW int) {
	for {
		_, err := unix.Write(blockW, []byte{'\n'})
		if err != unix.EINTR {
			break
		}
	}
	unix.Close(blockW)
}

// limit waits for bwrap to say its child's PID, sets the limits on it and
// puts it in its cgroup g (nil for none). It returns what it read of the
// status pipe, and the child (0 for none). A bwrap that exits before it has
// a child (bad arguments) is no error: its exit says so.
func (l *Launcher) limit(bwrap, statusR, blockFD int, lim host.RunLimits, g *cgroup) ([]byte, int, error) {
	buf, child, err := waitChild(bwrap, statusR)
	if err != nil || child == 0 {
		return buf, child, err
	}
	set := []struct {
		field string
		res   int
		lim   unix.Rlimit
		asked bool
	}{
		// SIGXCPU at the soft limit; SIGKILL a second later if it is caught.
		{"limits.cpu", unix.RLIMIT_CPU, unix.Rlimit{Cur: lim.CPU, Max: lim.CPU + 1}, lim.CPU > 0},
		{"limits.processes", unix.RLIMIT_NPROC, unix.Rlimit{Cur: lim.Processes, Max: lim.Processes}, lim.Processes > 0},
	}
	for _, s := range set {
		if !s.asked {
			continue
		}
		err := unix.Prlimit(child, s.res, &s.lim, nil)
		if err == unix.ESRCH {
			// The child is gone before the block was lifted: it ran
			// nothing (a bind that failed), and bwrap's exit says why.
			return buf, child, nil
		}
		if err != nil {
			return buf, child, fmt.Errorf("%s: prlimit on bwrap's child %d: %w", s.field, child, err)
		}
	}
	if g != nil {
		if err := g.Join(child); err != nil && !errors.Is(err, unix.ESRCH) {
			return buf, child, fmt.Errorf("limits: %w", err)
		}
	}
	if err := l.limitUserNS(child, blockFD); err != nil {
		return buf, child, err
	}
	return buf, child, nil
}

// waitChild waits for bwrap to say its child's PID on its status pipe,
// up to childPIDWait. It returns what it read, and the child: 0 when
// bwrap ended without one.
func waitChild(bwrap, statusR int) ([]byte, int, error) {
	var buf []byte
	deadline := time.Now().Add(childPIDWait)
	child := 0
	for child == 0 {
		var b [512]byte
		n, err := unix.Read(statusR, b[:])
		switch {
		case n > 0:
			buf = append(buf, b[:n]...)
			child = host.ParseBwrapStatus(buf).ChildPID
			continue
		case err == unix.EINTR:
			continue
		case n == 0 && err == nil:
			return buf, 0, nil // EOF: bwrap ended without a child
		case err != unix.EAGAIN:
			return buf, 0, fmt.Errorf("read bwrap %d's status: %w", bwrap, err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return buf, 0, fmt.Errorf("bwrap %d did not say its child's PID within %s", bwrap, childPIDWait)
		}
		pfd := []unix.PollFd{{Fd: int32(statusR), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, int(min(left, time.Second)/time.Millisecond)+1); err != nil && err != unix.EINTR {
			return buf, 0, fmt.Errorf("poll bwrap %d's status: %w", bwrap, err)
		}
	}
	return buf, child, nil
}

// killChildOf kills pid if it is still bwrap's child (checked through a
// pidfd, so that a reused PID is never hit).
func killChildOf(pid, bwrap int) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if st, err := ReadStat(pid); err == nil && st.PPID == bwrap {
		pidfdSignal(fd, unix.SIGKILL, false)
	}
}

// dataFD returns a memfd holding text, at its start, for bwrap to copy: the
// text is on no file system of the host.
func dataFD(text string) (int, error) {
	fd, err := unix.MemfdCreate("ocx-run-file", unix.MFD_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("memfd_create: %w", err)
	}
	b := []byte(text)
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("write memfd: %w", err)
		}
		b = b[n:]
	}
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("seek memfd: %w", err)
	}
	return fd, nil
}

// Bwrap is the bwrap the launcher runs sandboxes with, "" when there is
// none: a run's holder runs the same one (docs/runs.md section 8.1).
func (l *Launcher) Bwrap() string { return l.bwrap }
