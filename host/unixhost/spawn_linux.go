package unixhost

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages/protocol"
)

// Launcher spawns children, reaps them, watches processes it did not start,
// and signals them. Each child is followed through its own pidfd, waited on
// by Go's poller; once the pidfd says the child ended, wait4 on that PID
// alone reaps it with its resource usage. It never waits on -1, so os/exec's
// own children (the fossil CLI) keep their statuses, and it never sets a
// parent-death signal: sessions outlive the daemon.
type Launcher struct {
	bwrap   string
	root    *Root
	clock   host.Clock
	cgroups *Cgroups
	// userNS are the counts each sandbox's user namespace is held to,
	// written with nsenter (none found: not held, UserNSWhy says so).
	userNS  host.UserNSLimits
	nsenter string
	devnull int // read end, for standard input
	nullW   int // write end, for a child without a log

	mu     sync.Mutex
	kids   map[int]*child
	closed bool
	wg     sync.WaitGroup
}

var (
	_ host.Spawner  = (*Launcher)(nil)
	_ host.Signaler = (*Launcher)(nil)
	_ host.Watcher  = (*Launcher)(nil)
)

// LauncherOptions configures a Launcher.
type LauncherOptions struct {
	// Bwrap is bwrap's path; "" looks it up in /usr/bin and /bin.
	Bwrap string
	// Root, when set, opens each log that lies below it without following a
	// link (session/log lies in the agent's own workspace).
	Root *Root
	// Clock stamps exits; nil uses the system clock.
	Clock host.Clock
	// Cgroups is where sessions' and runs' cgroups are made; nil is the
	// host's (HostCgroups).
	Cgroups *Cgroups
	// UserNS are the counts each sandbox's own user namespace is held to
	// (D82); nil is host.DefaultUserNSLimits.
	UserNS *host.UserNSLimits
}

type child struct {
	id     protocol.ProcID
	own    bool // the launcher's own child: wait4 gives its status
	pidfd  *os.File
	onExit func(host.Exit)
	ready  chan struct{}
	done   bool

	// A sandboxed child's bwrap status pipe, and what was read of it.
	sandboxed bool
	smu       sync.Mutex
	status    int // read end, non-blocking; -1 when none
	statusBuf []byte
	inner     int // pidfd of the sandbox's first process; -1 until known

	// cg is a run's cgroup, read and removed once the run has ended.
	cg *runCgroup
}

// sessionBlockFD is the descriptor a session's bwrap reads its block
// pipe on.
const sessionBlockFD = 4

// NewLauncher opens /dev/null for the children's standard input.
func NewLauncher(opts LauncherOptions) (*Launcher, error) {
	l := &Launcher{bwrap: opts.Bwrap, root: opts.Root, clock: opts.Clock, cgroups: opts.Cgroups, kids: map[int]*child{}}
	l.userNS = host.DefaultUserNSLimits
	if opts.UserNS != nil {
		l.userNS = *opts.UserNS
	}
	l.nsenter = sbinTool("nsenter")
	if l.clock == nil {
		l.clock = Clock{}
	}
	if l.cgroups == nil {
		l.cgroups = HostCgroups()
	}
	if l.bwrap == "" {
		for _, p := range []string{"/usr/bin/bwrap", "/bin/bwrap"} {
			if _, err := os.Stat(p); err == nil {
				l.bwrap = p
				break
			}
		}
	}
	fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, pathErr("open", "/dev/null", err)
	}
	w, err := unix.Open("/dev/null", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(fd)
		return nil, pathErr("open", "/dev/null", err)
	}
	l.devnull, l.nullW = fd, w
	return l, nil
}

// Spawn starts spec's program as a child in a new session and process group,
// standard input /dev/null, standard output and error appended to spec.Log,
// exactly spec.Env as its environment. With spec.Sandbox it runs inside
// bwrap, spec.Path then being the program bwrap runs (as its argv[0]).
// onExit is called once, after Spawn returned, when the child has been reaped.
func (l *Launcher) Spawn(spec host.SpawnSpec, onExit func(host.Exit)) (protocol.ProcID, error) {
	if err := checkSpawn(spec); err != nil {
		return protocol.ProcID{}, err
	}
	if onExit == nil {
		return protocol.ProcID{}, errors.New("unixhost: spawn: no onExit")
	}
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return protocol.ProcID{}, fmt.Errorf("unixhost: spawn %s: %w", spec.Path, host.ErrClosed)
	}
	logfd, err := l.openLog(spec.Log)
	if err != nil {
		return protocol.ProcID{}, err
	}
	defer unix.Close(logfd)
	path, argv, dir := spec.Path, spec.Args, spec.Dir
	files := []uintptr{uintptr(l.devnull), uintptr(logfd), uintptr(logfd)}
	statusR := -1
	var cb *cgroupBlock
	if spec.Sandbox != nil {
		if l.bwrap == "" {
			return protocol.ProcID{}, errors.New("unixhost: spawn: bwrap is not installed")
		}
		sb := *spec.Sandbox
		// In its cgroup (D46), its user namespace held to its counts
		// (D82), before its first instruction.
		if cb, err = l.newCgroupBlock(spec.Cgroup, spec.Limits); err != nil {
			return protocol.ProcID{}, err
		}
		defer cb.close()
		sb.BlockFD = sessionBlockFD
		inside := append([]string{spec.Path}, spec.Args[1:]...)
		argv, err = host.BwrapArgs(sb, 3, spec.Dir, inside)
		if err != nil {
			return protocol.ProcID{}, err
		}
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			return protocol.ProcID{}, fmt.Errorf("unixhost: spawn %s: status pipe: %w", spec.Path, err)
		}
		statusR = p[0]
		defer unix.Close(p[1])
		if err := unix.SetNonblock(statusR, true); err != nil {
			unix.Close(statusR)
			return protocol.ProcID{}, fmt.Errorf("unixhost: spawn %s: status pipe: %w", spec.Path, err)
		}
		files = append(files, uintptr(p[1]))
		if cb != nil {
			files = append(files, uintptr(cb.r)) // descriptor 4
		}
		path, dir = l.bwrap, "/"
	} else if spec.Cgroup != "" {
		return protocol.ProcID{}, fmt.Errorf("unixhost: spawn %s: a cgroup needs a sandbox, whose first process waits for it", spec.Path)
	}
	pidfd := -1
	attr := &syscall.ProcAttr{Dir: dir, Env: spec.Env, Files: files,
		Sys: &syscall.SysProcAttr{Setsid: true, PidFD: &pidfd}}
	if attr.Env == nil {
		attr.Env = []string{}
	}
	pid, err := syscall.ForkExec(path, argv, attr)
	if err != nil {
		if statusR >= 0 {
			unix.Close(statusR)
		}
		return protocol.ProcID{}, &fs.PathError{Op: "spawn", Path: path, Err: err}
	}
	var statusBuf []byte
	if cb != nil {
		if statusBuf, err = l.joinCgroup(cb, pid, pidfd, statusR); err != nil {
			return protocol.ProcID{}, fmt.Errorf("unixhost: spawn %s: %w", spec.Path, err)
		}
	}
	return l.track(path, pid, pidfd, spec.Sandbox != nil, statusR, statusBuf, onExit)
}

// track follows a child just forked: it opens a pidfd on it if the fork gave
// none, reads its start time and registers it, so that onExit hears of its
// end. On failure the child is killed and reaped. statusR is bwrap's status
// pipe (-1 for none), statusBuf what was already read of it.
func (l *Launcher) track(path string, pid, pidfd int, sandboxed bool, statusR int, statusBuf []byte, onExit func(host.Exit)) (protocol.ProcID, error) {
	return l.trackWith(path, pid, pidfd, sandboxed, statusR, statusBuf, nil, onExit)
}

// trackWith is track for a run held in its cgroup cg (nil for none), which
// is read and removed once the run has ended.
func (l *Launcher) trackWith(path string, pid, pidfd int, sandboxed bool, statusR int, statusBuf []byte, cg *runCgroup, onExit func(host.Exit)) (protocol.ProcID, error) {
	var err error
	if pidfd < 0 {
		// Without CLONE_PIDFD: the child is ours and unreaped, so its PID
		// cannot have been reused yet.
		if pidfd, err = unix.PidfdOpen(pid, 0); err != nil {
			l.abandon(pid, statusR)
			return protocol.ProcID{}, fmt.Errorf("unixhost: spawn %s: pidfd_open %d: %w", path, pid, err)
		}
	}
	st, err := readStatRaw(pid)
	if err != nil {
		unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
		unix.Close(pidfd)
		l.abandon(pid, statusR)
		return protocol.ProcID{}, fmt.Errorf("unixhost: spawn %s: read the child's start time: %w", path, err)
	}
	c := &child{id: protocol.ProcID{PID: pid, Start: st.Start}, own: true, onExit: onExit, ready: make(chan struct{}),
		sandboxed: sandboxed, status: statusR, statusBuf: statusBuf, inner: -1, cg: cg}
	defer close(c.ready)
	if err := l.register(c, pidfd); err != nil {
		// Closed meanwhile: nobody would reap the child, and the caller is
		// told it did not start, so it must not run.
		l.abandon(pid, statusR)
		return protocol.ProcID{}, err
	}
	return c.id, nil
}

// abandon reaps a child Spawn could not register, after killing it.
func (l *Launcher) abandon(pid, statusR int) {
	unix.Kill(pid, unix.SIGKILL)
	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(pid, &ws, 0, nil); err != unix.EINTR {
			break
		}
	}
	if statusR >= 0 {
		unix.Close(statusR)
	}
}

func checkSpawn(spec host.SpawnSpec) error {
	switch {
	case !filepath.IsAbs(spec.Path):
		return fmt.Errorf("unixhost: spawn: program %q is not an absolute path", spec.Path)
	case len(spec.Args) == 0:
		return fmt.Errorf("unixhost: spawn %s: no argv", spec.Path)
	case !filepath.IsAbs(spec.Dir):
		return fmt.Errorf("unixhost: spawn %s: directory %q is not an absolute path", spec.Path, spec.Dir)
	case spec.Log != "" && !filepath.IsAbs(spec.Log):
		return fmt.Errorf("unixhost: spawn %s: log %q is not an absolute path", spec.Path, spec.Log)
	}
	return nil
}

// openLog opens the log for appending, created 0600. Below the root it
// follows no link; elsewhere no link as its last name. "" is /dev/null.
func (l *Launcher) openLog(p string) (int, error) {
	const flags = unix.O_WRONLY | unix.O_APPEND | unix.O_CREAT
	if p == "" {
		fd, err := unix.Dup(l.nullW)
		if err != nil {
			return -1, pathErr("open log", "/dev/null", err)
		}
		unix.CloseOnExec(fd)
		return fd, nil
	}
	if l.root != nil {
		if rel, err := l.root.rel("open log", p); err == nil {
			fd, err := l.root.openBeneath(rel, flags, 0o600)
			if err != nil {
				return -1, pathErr("open log", p, err)
			}
			return fd, nil
		}
	}
	fd, err := openLogNoFollow(p)
	if err != nil {
		return -1, pathErr("open log", p, err)
	}
	return fd, nil
}

// register files the child and starts following its pidfd.
func (l *Launcher) register(c *child, pidfd int) error {
	if err := unix.SetNonblock(pidfd, true); err != nil {
		unix.Close(pidfd)
		return fmt.Errorf("unixhost: watch %s: %w", c.id, err)
	}
	c.pidfd = os.NewFile(uintptr(pidfd), fmt.Sprintf("pidfd:%d", c.id.PID))
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		c.pidfd.Close()
		return fmt.Errorf("unixhost: watch %s: %w", c.id, host.ErrClosed)
	}
	l.kids[c.id.PID] = c
	l.wg.Add(1)
	l.mu.Unlock()
	go l.follow(c)
	return nil
}

// follow waits, through the poller, for the pidfd to say the process ended,
// reaps it if it is ours, and reports it.
func (l *Launcher) follow(c *child) {
	defer l.wg.Done()
	<-c.ready
	rc, err := c.pidfd.SyscallConn()
	var exit host.Exit
	report := false
	if err == nil {
		rc.Read(func(fd uintptr) bool {
			var stop bool
			exit, report, stop = l.check(c, int(fd))
			return stop
		})
	}
	l.mu.Lock()
	delete(l.kids, c.id.PID)
	c.done = true
	l.mu.Unlock()
	c.pidfd.Close()
	c.smu.Lock()
	initNS := host.ParseBwrapStatus(c.statusBuf).PIDNamespace
	if c.status >= 0 && report {
		unix.Close(c.status)
		c.status = -1
	}
	if c.inner >= 0 {
		unix.Close(c.inner)
		c.inner = -1
	}
	c.smu.Unlock()
	if report && exit.Sandbox != nil && exit.Sandbox.ChildPID > 0 {
		l.awaitInit(exit, initNS)
	}
	if c.cg != nil {
		exit.Cgroup = c.cg.end(report)
	}
	if report {
		c.onExit(exit)
	}
}

// awaitInit follows the sandbox's init once bwrap has been reaped. bwrap
// reports the command's exit and exits without waiting for its init, which
// ends a moment later, reparented to PID 1 or to this process if it is a
// child subreaper. Unless bwrap itself was killed (the init then goes on,
// an orphaned session), the exit is reported only once the init has ended,
// up to a bound, so that nothing of the session still names the workspace
// when the daemon hears of its end. An init that is this process's child is
// reaped here, since nobody else will.
func (l *Launcher) awaitInit(exit host.Exit, ns uint64) {
	pid := exit.Sandbox.ChildPID
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	// The pidfd holds whatever has the PID now: the init if it lives in the
	// sandbox's PID namespace.
	link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil || ns == 0 || link != fmt.Sprintf("pid:[%d]", ns) {
		return
	}
	st, err := ReadStat(pid)
	if err != nil {
		return
	}
	ours := st.PPID == os.Getpid()
	if exit.Signal != 0 {
		if ours {
			l.adopt(protocol.ProcID{PID: pid, Start: st.Start}, -1, nil, func(host.Exit) {})
		}
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		closed := l.closed
		l.mu.Unlock()
		if closed {
			return
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, _ := unix.Poll(pfd, 100); n > 0 {
			break
		}
	}
	if ours {
		var ws unix.WaitStatus
		for {
			r, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
			if err == unix.EINTR {
				continue
			}
			if err == nil && r == 0 {
				// Still running past the bound: reap it whenever it ends.
				l.adopt(protocol.ProcID{PID: pid, Start: st.Start}, -1, nil, func(host.Exit) {})
			}
			break
		}
	}
}

// check says whether the process ended; for the launcher's own child it reaps
// it. stop ends the wait; report says whether exit is to be reported (not when
// the launcher was closed or detached).
func (l *Launcher) check(c *child, pidfd int) (exit host.Exit, report, stop bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return exit, false, true
	}
	exit.ID = c.id
	if !c.own {
		pfd := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, 0)
		if err != nil || n == 0 {
			return exit, false, false
		}
		exit.At = l.clock.Now()
		return exit, true, true
	}
	var ws unix.WaitStatus
	var ru unix.Rusage
	var pid int
	var err error
	for {
		pid, err = unix.Wait4(c.id.PID, &ws, unix.WNOHANG, &ru)
		if err != unix.EINTR {
			break
		}
	}
	switch {
	case err == unix.ECHILD:
		// Someone else reaped it: the status is lost.
		exit.At = l.clock.Now()
		return exit, true, true
	case err != nil || pid == 0:
		return exit, false, false
	}
	exit.Known = true
	exit.At = l.clock.Now()
	if ws.Exited() {
		exit.Code = ws.ExitStatus()
	}
	if ws.Signaled() {
		exit.Signal = int(ws.Signal())
		exit.Core = ws.CoreDump()
	}
	exit.User = time.Duration(ru.Utime.Nano())
	exit.System = time.Duration(ru.Stime.Nano())
	exit.MaxRSS = ru.Maxrss * 1024
	if c.sandboxed {
		c.smu.Lock()
		c.readStatus()
		st := host.ParseBwrapStatus(c.statusBuf)
		c.smu.Unlock()
		exit.Sandbox = &host.SandboxExit{ChildPID: st.ChildPID, Reported: st.Exited, Code: st.ExitCode}
	}
	return exit, true, true
}

// readStatus reads what bwrap wrote so far, without waiting. Under c.smu.
func (c *child) readStatus() {
	if c.status < 0 {
		return
	}
	var b [512]byte
	for {
		n, err := unix.Read(c.status, b[:])
		if err == unix.EINTR {
			continue
		}
		if n <= 0 || err != nil {
			return
		}
		c.statusBuf = append(c.statusBuf, b[:n]...)
	}
}

// Watch follows a process this launcher did not start, found after a restart
// or kept across a re-exec. If it turns out to be this process's own child
// (its parent is us), it is reaped and its status is known; otherwise its end
// is reported with Known false. A process already gone is reported at once.
func (l *Launcher) Watch(id protocol.ProcID, onExit func(host.Exit)) error {
	return l.adopt(id, -1, nil, onExit)
}

func (l *Launcher) adopt(id protocol.ProcID, status int, statusBuf []byte, onExit func(host.Exit)) error {
	if onExit == nil {
		return errors.New("unixhost: watch: no onExit")
	}
	l.mu.Lock()
	if c, ok := l.kids[id.PID]; ok && c.id == id {
		l.mu.Unlock()
		return fmt.Errorf("unixhost: watch %s: already followed", id)
	}
	l.mu.Unlock()
	c := &child{id: id, onExit: onExit, ready: make(chan struct{}), status: status, statusBuf: statusBuf,
		sandboxed: status >= 0, inner: -1}
	defer close(c.ready)
	goneNow := func() error {
		if status >= 0 {
			unix.Close(status)
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return fmt.Errorf("unixhost: watch %s: %w", id, host.ErrClosed)
		}
		l.wg.Add(1)
		l.mu.Unlock()
		go func() {
			defer l.wg.Done()
			<-c.ready
			onExit(host.Exit{ID: id, At: l.clock.Now()})
		}()
		return nil
	}
	pidfd, err := unix.PidfdOpen(id.PID, 0)
	if err == unix.ESRCH {
		return goneNow()
	}
	if err != nil {
		return fmt.Errorf("unixhost: watch %s: pidfd_open: %w", id, err)
	}
	// The pidfd now holds whatever process has this PID; its start time says
	// whether that is the one we were asked about.
	st, err := ReadStat(id.PID)
	if err != nil || st.Start != id.Start {
		unix.Close(pidfd)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("unixhost: watch %s: %w", id, err)
		}
		return goneNow()
	}
	c.own = st.PPID == os.Getpid()
	if err := l.register(c, pidfd); err != nil {
		if status >= 0 {
			unix.Close(status)
		}
		return err
	}
	return nil
}

// ChildHandoff is what a re-exec keeps of one child: the new image adopts it.
type ChildHandoff struct {
	ID       protocol.ProcID `json:"proc"`
	StatusFD int             `json:"status_fd"`        // bwrap's status pipe kept open across the exec; -1 for none
	Status   string          `json:"status,omitempty"` // what was already read of it
}

// Detach stops following every child without closing anything a child's end
// still needs: it clears close-on-exec on the bwrap status pipes and returns
// the hand-off for the image the daemon is about to exec. The launcher is
// closed afterwards. A child that ends meanwhile stays a zombie until the new
// image adopts and reaps it.
func (l *Launcher) Detach() ([]ChildHandoff, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, host.ErrClosed
	}
	l.closed = true
	kids := make([]*child, 0, len(l.kids))
	for _, c := range l.kids {
		kids = append(kids, c)
	}
	l.mu.Unlock()
	var out []ChildHandoff
	var err error
	for _, c := range kids {
		c.pidfd.Close()
		c.smu.Lock()
		h := ChildHandoff{ID: c.id, StatusFD: -1}
		if c.status >= 0 {
			c.readStatus()
			if _, ferr := unix.FcntlInt(uintptr(c.status), unix.F_SETFD, 0); ferr != nil && err == nil {
				err = fmt.Errorf("unixhost: detach %s: %w", c.id, ferr)
			}
			h.StatusFD, h.Status = c.status, string(c.statusBuf)
		}
		c.smu.Unlock()
		out = append(out, h)
	}
	l.wg.Wait()
	unix.Close(l.devnull)
	unix.Close(l.nullW)
	return out, err
}

// Adopt follows a child handed over by a previous image's Detach.
func (l *Launcher) Adopt(h ChildHandoff, onExit func(host.Exit)) error {
	if h.StatusFD >= 0 {
		unix.CloseOnExec(h.StatusFD)
	}
	return l.adopt(h.ID, h.StatusFD, []byte(h.Status), onExit)
}

// Close stops following every child, without signalling any: each keeps
// running. Their ends are not reported.
func (l *Launcher) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	kids := make([]*child, 0, len(l.kids))
	for _, c := range l.kids {
		kids = append(kids, c)
	}
	l.mu.Unlock()
	for _, c := range kids {
		c.pidfd.Close()
		c.smu.Lock()
		if c.status >= 0 {
			unix.Close(c.status)
			c.status = -1
		}
		c.smu.Unlock()
	}
	l.wg.Wait()
	unix.Close(l.nullW)
	return unix.Close(l.devnull)
}

// Signal sends sig to the process group id leads, or to id alone when it
// leads none, only while id's PID has id's start time: host.ErrGone when not.
// A sandboxed child of the launcher is signalled inside the sandbox: sig goes
// to the process group of the sandbox's first process (bwrap's init, which
// --new-session made a group leader), so that the command gets it and bwrap
// stays to report its exit. Signalling bwrap itself would end bwrap alone and
// leave the session running as an orphan.
func (l *Launcher) Signal(id protocol.ProcID, sig host.Signal) error {
	l.mu.Lock()
	c, ok := l.kids[id.PID]
	if ok && (c.id != id || c.done || !c.own) {
		// A process only watched (not our child) may lead no group, and is
		// not held unreaped by us: signalOther checks both.
		ok = false
	}
	l.mu.Unlock()
	if !ok {
		return signalOther(id, sig)
	}
	if c.sandboxed && c.own {
		if fd, ok := l.innerOf(c); ok {
			err := pidfdSignal(fd, unix.Signal(sig), true)
			c.smu.Unlock()
			if err != unix.ESRCH {
				if err != nil {
					return fmt.Errorf("unixhost: signal %s %s inside its sandbox: %w", id, sig, err)
				}
				return nil
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.done {
		return fmt.Errorf("unixhost: signal %s %s: %w", id, sig, host.ErrGone)
	}
	rc, err := c.pidfd.SyscallConn()
	if err != nil {
		return fmt.Errorf("unixhost: signal %s %s: %w", id, sig, host.ErrGone)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		// The child is a session leader (Setsid), so it leads its group; it
		// stays unreaped until check() under l.mu, so its PID and group are
		// still its own.
		serr = pidfdSignal(int(fd), unix.Signal(sig), true)
		if serr == unix.EINVAL {
			serr = unix.Kill(-id.PID, unix.Signal(sig))
		}
	}); err != nil {
		return fmt.Errorf("unixhost: signal %s %s: %w", id, sig, host.ErrGone)
	}
	if serr == unix.ESRCH {
		return fmt.Errorf("unixhost: signal %s %s: %w", id, sig, host.ErrGone)
	}
	if serr != nil {
		return fmt.Errorf("unixhost: signal %s %s: %w", id, sig, serr)
	}
	return nil
}

// innerOf learns the sandbox's first process from bwrap's status, waiting up
// to a second for bwrap to report it, and opens a pidfd on it after checking
// that its parent is our bwrap. On success it returns with c.smu held.
func (l *Launcher) innerOf(c *child) (int, bool) {
	c.smu.Lock()
	if c.inner >= 0 {
		return c.inner, true
	}
	deadline := time.Now().Add(time.Second)
	for c.status >= 0 {
		c.readStatus()
		st := host.ParseBwrapStatus(c.statusBuf)
		if st.ChildPID > 0 {
			fd, err := unix.PidfdOpen(st.ChildPID, 0)
			if err != nil {
				break
			}
			s, err := ReadStat(st.ChildPID)
			if err != nil || s.PPID != c.id.PID {
				unix.Close(fd)
				break
			}
			c.inner = fd
			return fd, true
		}
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		pfd := []unix.PollFd{{Fd: int32(c.status), Events: unix.POLLIN}}
		unix.Poll(pfd, int(min(left, 50*time.Millisecond)/time.Millisecond)+1)
	}
	c.smu.Unlock()
	return -1, false
}

// pidfdSignal sends sig through a pidfd, to the process group the process
// leads when group is set. EINVAL when the kernel cannot signal a group
// through a pidfd (before Linux 6.9).
func pidfdSignal(fd int, sig unix.Signal, group bool) error {
	flags := 0
	if group {
		flags = unix.PIDFD_SIGNAL_PROCESS_GROUP
	}
	for {
		err := unix.PidfdSendSignal(fd, sig, nil, flags)
		if err != unix.EINTR {
			return err
		}
	}
}

// SignalOne sends sig to the process id alone, not to the group it may
// lead, only while id's PID has id's start time: host.ErrGone when not (a
// zombie is gone too). It is for a process that names a workspace without
// being a session of the daemon's (a terminal session).
func SignalOne(id protocol.ProcID, sig host.Signal) error { return signalChecked(id, sig, false) }

// signalOther signals a process that is not the launcher's child, a session
// at a terminal or an orphan: the group it leads, or it alone.
func signalOther(id protocol.ProcID, sig host.Signal) error { return signalChecked(id, sig, true) }

// signalChecked is the one pidfd signal of a process known by its identity.
// The pidfd is opened first and the start time read after, so the pidfd is
// known to hold the process asked about; with group, the signal goes to the
// process group it leads, if it leads one.
func signalChecked(id protocol.ProcID, sig host.Signal, group bool) error {
	fd, err := unix.PidfdOpen(id.PID, 0)
	if err == unix.ESRCH {
		return fmt.Errorf("unixhost: signal %s %s: %w", id, sig, host.ErrGone)
	}
	if err != nil {
		return fmt.Errorf("unixhost: signal %s %s: pidfd_open: %w", id, sig, err)
	}
	defer unix.Close(fd)
	st, err := ReadStat(id.PID)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("unixhost: signal %s %s: %w", id, sig, host.ErrGone)
		}
		return fmt.Errorf("unixhost: signal %s %s: %w", id, sig, err)
	}
	if st.Start != id.Start || st.Zombie() {
		return fmt.Errorf("unixhost: signal %s %s: %w", id, sig, host.ErrGone)
	}
	leader := group && st.PGID == id.PID
	err = pidfdSignal(fd, unix.Signal(sig), leader)
	if err == unix.EINVAL && leader {
		// Before Linux 6.9: the group by its number, checked just above.
		err = unix.Kill(-id.PID, unix.Signal(sig))
	}
	if err == unix.ESRCH {
		return fmt.Errorf("unixhost: signal %s %s: %w", id, sig, host.ErrGone)
	}
	if err != nil {
		return fmt.Errorf("unixhost: signal %s %s: %w", id, sig, err)
	}
	return nil
}

// readStatRaw reads /proc/PID/stat with three system calls and no
// allocation but the result's, for Spawn's hot path.
func readStatRaw(pid int) (host.Stat, error) {
	var path [32]byte
	p := append(append(append(path[:0], "/proc/"...), strconv.Itoa(pid)...), "/stat"...)
	fd, err := openRetry(func() (int, error) { return unix.Open(string(p), unix.O_RDONLY|unix.O_CLOEXEC, 0) })
	if err != nil {
		return host.Stat{}, err
	}
	defer unix.Close(fd)
	var buf [1024]byte
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return host.Stat{}, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return host.ParseStat(buf[:n])
}
