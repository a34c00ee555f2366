package unixhost

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
)

// A shell in a run's sandbox (`ocx run shell`, D100). Go cannot join a
// user or mount namespace (setns refuses a process of many threads), so
// util-linux's nsenter joins the sandbox's namespaces, from descriptors
// opened here, and runs this very ocx's program, by a descriptor too (the
// sandbox need not see it), as `ocx run enter`: EnterMain. That process
// tells the starter it is there (its PID, as the host sees it, carried by
// the kernel), waits while the starter puts it in the run's cgroup and
// sets the run's rlimits on it, then reads the shell's spec (the command,
// environment and directory: never on a command line, which the host's
// users can read), sets no_new_privs and the run's capabilities, and
// execs the command.

// nsenterPaths are where util-linux's nsenter is looked for.
var nsenterPaths = []string{"/usr/bin/nsenter", "/bin/nsenter"}

// enterNamespaces are the namespaces a shell joins, as nsenter names
// them, with their /proc/PID/ns files: user first, the one that must
// differ from the node's.
var enterNamespaces = []struct{ flag, file string }{
	{"--user", "user"}, {"--mount", "mnt"}, {"--pid", "pid"}, {"--uts", "uts"},
	{"--ipc", "ipc"}, {"--net", "net"}, {"--cgroup", "cgroup"},
}

// enterHello is the byte the process in the sandbox sends once it is
// there; the kernel attaches its credentials.
const enterHello = 'r'

// enterSpecMax bounds the spec the shell's process reads.
const enterSpecMax = 16 << 20

// enterWait bounds how long the starter waits for the process in the
// sandbox to say it is there.
const enterWait = 10 * time.Second

// EnterSpec is what the process in the sandbox is given, once it is in
// the run's cgroup.
type EnterSpec struct {
	Command      []string `json:"command"`
	Env          []string `json:"env"`
	Dir          string   `json:"dir"`
	UID          int      `json:"uid"`
	GID          int      `json:"gid"`
	Capabilities []string `json:"capabilities"`
	// Terminal: its standard input is a terminal, which becomes the
	// controlling terminal of the session it makes.
	Terminal bool `json:"terminal"`
}

// Enter is a shell to start in a run's sandbox.
type Enter struct {
	// Init is the sandbox's first process (SandboxInit), whose namespaces
	// are joined.
	Init int
	Spec EnterSpec
	// Limits are the run's rlimits, set on the shell's process before it
	// execs (cpu and processes; the cgroup holds memory).
	Limits host.RunLimits
	// Cgroup names the run's own cgroup, "" when it has none.
	Cgroup string
	// Stdin, Stdout and Stderr are the shell's streams; with
	// Spec.Terminal, Stdin is the terminal the shell's session takes.
	Stdin, Stdout, Stderr *os.File
	// Exe is the ocx run in the sandbox as `ocx run enter`; empty for
	// this process's own program, the very file it runs (/proc/self/exe:
	// the running inode, whatever a release's swap did to its path).
	Exe string
}

// Entered is a shell started in a sandbox, its process waiting for Go.
type Entered struct {
	// PID is the shell's process, as the host sees it.
	PID  int
	cmd  *exec.Cmd
	sock *os.File
	spec []byte
	// mu guards pidfd, which a signal from another goroutine may use
	// while Wait closes it.
	mu    sync.Mutex
	pidfd int
}

// Wait waits for the shell to end: its exit code, or 128 and N for a
// signal N (nsenter passes its child's end on as its own).
func (e *Entered) Wait() (code int, signal string, err error) {
	err = e.cmd.Wait()
	e.close()
	st := e.cmd.ProcessState
	if st == nil {
		return -1, "", err
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), unix.SignalName(ws.Signal()), nil
	}
	return st.ExitCode(), "", nil
}

// SandboxInit is the first process of the sandbox bwrap runs (bwrap's one
// child, PID 1 in the sandbox's PID namespace), checked to be in a user
// namespace other than this process's.
func SandboxInit(bwrap int) (int, error) {
	b, err := readSmall(fmt.Sprintf("/proc/%d/task/%d/children", bwrap, bwrap))
	if err != nil {
		return 0, fmt.Errorf("the sandbox's process: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		return 0, fmt.Errorf("the sandbox's process: bwrap %d has %d children, not one", bwrap, len(f))
	}
	child, err := strconv.Atoi(f[0])
	if err != nil {
		return 0, fmt.Errorf("the sandbox's process: %q: %w", f[0], err)
	}
	ours, err1 := os.Readlink("/proc/self/ns/user")
	its, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/user", child))
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("the sandbox's process: %w", err)
	}
	if ours == its {
		return 0, fmt.Errorf("the sandbox's process %d is in the node's own user namespace: it is no sandbox", child)
	}
	return child, nil
}

// nsenter finds util-linux's nsenter.
func nsenter() (string, error) {
	for _, p := range nsenterPaths {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("nsenter (util-linux) is not installed: looked for %s", strings.Join(nsenterPaths, " and "))
}

// StartEnter starts a shell in the sandbox whose first process is e.Init.
// The namespaces are opened first and the init checked to be the same
// process after (its start time), so a PID reused meanwhile is never
// entered.
func StartEnter(e Enter) (*Entered, error) {
	nse, err := nsenter()
	if err != nil {
		return nil, err
	}
	before, err := ReadStat(e.Init)
	if err != nil {
		return nil, fmt.Errorf("the sandbox's process %d: %w", e.Init, err)
	}
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	exePath := e.Exe
	if exePath == "" {
		exePath = "/proc/self/exe"
	}
	exe, err := os.Open(exePath)
	if err != nil {
		return nil, err
	}
	files = append(files, exe)
	ours, theirs, err := socketPair()
	if err != nil {
		return nil, err
	}
	defer func() {
		if ours != nil {
			ours.Close()
		}
	}()
	files = append(files, theirs)
	// ExtraFiles become 3, 4, ...: the program, the socket, the namespaces.
	args := []string{nse}
	for i, ns := range enterNamespaces {
		f, err := os.Open(fmt.Sprintf("/proc/%d/ns/%s", e.Init, ns.file))
		if err != nil {
			return nil, fmt.Errorf("the sandbox's namespaces: %w", err)
		}
		files = append(files, f)
		args = append(args, fmt.Sprintf("%s=/proc/self/fd/%d", ns.flag, 5+i))
	}
	if after, err := ReadStat(e.Init); err != nil || after.Start != before.Start || after.Zombie() {
		return nil, fmt.Errorf("the sandbox's process %d ended: the run's sandbox is gone", e.Init)
	}
	args = append(args, "--preserve-credentials", "--", "/proc/self/fd/3", "run", "enter", "--socket-fd", "4")
	cmd := &exec.Cmd{Path: nse, Args: args, Env: []string{}, Dir: "/",
		Stdin: e.Stdin, Stdout: e.Stdout, Stderr: e.Stderr, ExtraFiles: files,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	if err := cmd.Start(); err != nil {
		return nil, &fs.PathError{Op: "start", Path: nse, Err: err}
	}
	for _, f := range files {
		f.Close()
	}
	files = nil
	started := &Entered{cmd: cmd, pidfd: -1}
	fail := func(err error) (*Entered, error) {
		cmd.Process.Kill()
		cmd.Wait()
		started.close()
		return nil, err
	}
	pid, err := enterHelloFrom(ours)
	if err != nil {
		return fail(err)
	}
	started.PID = pid
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fail(fmt.Errorf("the shell's process %d: pidfd: %w", pid, err))
	}
	started.pidfd = pidfd
	if e.Cgroup != "" {
		g, err := HostCgroups().Open(e.Cgroup)
		if err != nil {
			return fail(fmt.Errorf("the run's cgroup: %w", err))
		}
		if err := g.Join(pid); err != nil {
			return fail(fmt.Errorf("the run's cgroup: %w", err))
		}
	}
	if err := setRunRlimits(pid, e.Limits); err != nil {
		return fail(err)
	}
	if started.spec, err = json.Marshal(e.Spec); err != nil {
		return fail(err)
	}
	started.sock, ours = ours, nil
	return started, nil
}

// Go lets the shell's process, waiting in the sandbox, exec its command:
// its spec is written, and the socket closed.
func (e *Entered) Go() error {
	defer e.sock.Close()
	if _, err := e.sock.Write(e.spec); err != nil {
		return fmt.Errorf("give the shell its spec: %w", err)
	}
	return nil
}

// Abandon ends a shell that is not to start: the process in the sandbox
// reads no spec and exits, and its starter is waited for.
func (e *Entered) Abandon() {
	e.sock.Close()
	e.cmd.Wait()
	e.close()
}

// HangUp sends SIGHUP to the shell's process, and Kill SIGKILL (through
// its pidfd, so a PID reused meanwhile is never hit).
func (e *Entered) HangUp() { e.signal(unix.SIGHUP) }

// Kill: see HangUp.
func (e *Entered) Kill() { e.signal(unix.SIGKILL) }

func (e *Entered) signal(sig unix.Signal) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pidfd >= 0 {
		pidfdSignal(e.pidfd, sig, false)
	}
}

func (e *Entered) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pidfd >= 0 {
		unix.Close(e.pidfd)
		e.pidfd = -1
	}
}

// setRunRlimits sets a run's cpu and processes limits on pid, as the
// launcher sets them on a sandbox's first process.
func setRunRlimits(pid int, lim host.RunLimits) error {
	if lim.CPU > 0 {
		if err := unix.Prlimit(pid, unix.RLIMIT_CPU, &unix.Rlimit{Cur: lim.CPU, Max: lim.CPU + 1}, nil); err != nil {
			return fmt.Errorf("limits.cpu: prlimit on %d: %w", pid, err)
		}
	}
	if lim.Processes > 0 {
		if err := unix.Prlimit(pid, unix.RLIMIT_NPROC, &unix.Rlimit{Cur: lim.Processes, Max: lim.Processes}, nil); err != nil {
			return fmt.Errorf("limits.processes: prlimit on %d: %w", pid, err)
		}
	}
	return nil
}

// socketPair makes the starter's end (receiving credentials) and the
// sandbox's end of a stream socket pair.
func socketPair() (ours, theirs *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	if err := unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("SO_PASSCRED: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "shell-socket"), os.NewFile(uintptr(fds[1]), "shell-socket"), nil
}

// enterHelloFrom reads the hello of the process in the sandbox, and the
// PID the kernel says sent it, as this process's namespace sees it.
func enterHelloFrom(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	deadline := time.Now().Add(enterWait)
	for {
		var n, oobn int
		var rerr error
		buf := make([]byte, 1)
		oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred))
		if err := rc.Control(func(fd uintptr) {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			left := time.Until(deadline)
			if left <= 0 {
				rerr = unix.ETIMEDOUT
				return
			}
			if _, rerr = unix.Poll(pfd, int(left/time.Millisecond)+1); rerr != nil {
				return
			}
			if pfd[0].Revents == 0 {
				rerr = unix.EAGAIN
				return
			}
			n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_DONTWAIT)
		}); err != nil {
			return 0, err
		}
		switch {
		case rerr == unix.EINTR || rerr == unix.EAGAIN:
			continue
		case rerr == unix.ETIMEDOUT:
			return 0, fmt.Errorf("the shell's process did not reach the sandbox within %s", enterWait)
		case rerr != nil:
			return 0, fmt.Errorf("the shell's process: %w", rerr)
		case n == 0:
			return 0, errors.New("the shell's process ended before it reached the sandbox (nsenter says why, above)")
		case buf[0] != enterHello:
			return 0, fmt.Errorf("the shell's process said %q, not hello", buf[0])
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) != 1 {
			return 0, fmt.Errorf("the shell's process: no credentials came with its hello (%v)", err)
		}
		cred, err := unix.ParseUnixCredentials(&msgs[0])
		if err != nil {
			return 0, fmt.Errorf("the shell's process: %w", err)
		}
		if cred.Pid <= 0 {
			return 0, errors.New("the shell's process: its PID is not in this namespace")
		}
		return int(cred.Pid), nil
	}
}

// EnterMain is `ocx run enter --socket-fd N`, the process nsenter starts
// in the sandbox's namespaces: it says hello on the socket, reads the
// shell's spec once the starter has put it in the run's cgroup, and execs
// the command as the sandbox's uid and gid, with no_new_privs and the
// run's capabilities (none when it keeps none; D100). It returns only on
// an error.
func EnterMain(sockFD int) error {
	// Capabilities are a thread's: the thread that sets them execs.
	runtime.LockOSThread()
	sock := os.NewFile(uintptr(sockFD), "shell-socket")
	if sock == nil {
		return fmt.Errorf("--socket-fd %d is not open", sockFD)
	}
	if _, err := sock.Write([]byte{enterHello}); err != nil {
		return fmt.Errorf("say hello: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(bufio.NewReader(sock), enterSpecMax+1))
	sock.Close()
	if err != nil {
		return fmt.Errorf("read the shell's spec: %w", err)
	}
	if len(b) == 0 {
		return errors.New("the starter gave no spec: the shell does not start")
	}
	var s EnterSpec
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&s); err != nil {
		return fmt.Errorf("the shell's spec: %w", err)
	}
	if len(s.Command) == 0 || s.Command[0] == "" {
		return errors.New("the shell's spec: no command")
	}
	if uid, gid := unix.Getuid(), unix.Getgid(); uid != s.UID || gid != s.GID {
		return fmt.Errorf("the shell would run as uid %d, gid %d in the sandbox, not its uid %d, gid %d", uid, gid, s.UID, s.GID)
	}
	// A session of its own, so that nothing of it reaches a terminal
	// outside (own_session), and, on a terminal, the session's
	// controlling terminal: closing its master hangs the shell up, and
	// its foreground jobs with it.
	if _, err := unix.Setsid(); err != nil {
		return fmt.Errorf("setsid: %w", err)
	}
	if s.Terminal {
		if err := unix.IoctlSetInt(0, unix.TIOCSCTTY, 0); err != nil {
			return fmt.Errorf("take the terminal (TIOCSCTTY): %w", err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	lost, err := keepOnly(s.Capabilities)
	if err != nil {
		return err
	}
	if len(lost) > 0 {
		fmt.Fprintf(os.Stderr, "ocx run shell: the run keeps %s, which a shell as uid %d in its sandbox cannot be given (D100): it runs without\n",
			strings.Join(lost, ", "), s.UID)
	}
	if err := os.Chdir(s.Dir); err != nil {
		return fmt.Errorf("the run's cwd: %w", err)
	}
	path, err := lookPath(s.Command[0], s.Env)
	if err != nil {
		return err
	}
	// Nothing of the starter's passes into the shell: the program's and
	// the namespaces' descriptors close at the exec.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("close_range: %w", err)
	}
	err = syscall.Exec(path, s.Command, s.Env)
	return &fs.PathError{Op: "exec", Path: path, Err: err}
}

// capState is the calling thread's capability sets, both words.
func capState() ([2]unix.CapUserData, error) {
	var d [2]unix.CapUserData
	h := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	if err := unix.Capget(&h, &d[0]); err != nil {
		return d, fmt.Errorf("capget: %w", err)
	}
	return d, nil
}

// keepOnly leaves the calling thread the capabilities names, and no
// other: its bounding set too, when it holds CAP_SETPCAP (as the
// sandbox's root it does after nsenter's exec), and its ambient set, so
// that they pass the exec of a command not run as root. As another uid
// the exec has cleared them all but the bounding set, which it cannot
// drop (D100): no_new_privs keeps any exec from drawing on it, and a
// capability the run keeps cannot be given back, so the shell runs
// without it: lost names those.
func keepOnly(names []string) (lost []string, err error) {
	keep, err := host.CapabilityMask(names)
	if err != nil {
		return nil, err
	}
	st, err := capState()
	if err != nil {
		return nil, err
	}
	const setpcap = 8
	if st[0].Effective&(1<<setpcap) != 0 {
		for c := 0; c < 64; c++ {
			if keep&(1<<c) != 0 {
				continue
			}
			// EINVAL: past the last capability this kernel knows.
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
				return nil, fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
			}
		}
	}
	var d [2]unix.CapUserData
	for w := range d {
		k := uint32(keep >> (32 * w))
		d[w].Permitted = st[w].Permitted & k
		d[w].Effective = d[w].Permitted
		d[w].Inheritable = d[w].Permitted
	}
	h := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	if err := unix.Capset(&h, &d[0]); err != nil {
		return nil, fmt.Errorf("capset: %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("clear the ambient set: %w", err)
	}
	held := uint64(d[0].Permitted) | uint64(d[1].Permitted)<<32
	for c := range host.Capabilities {
		if keep&(1<<c) != 0 && held&(1<<c) == 0 {
			lost = append(lost, host.Capabilities[c])
		}
		if held&(1<<c) == 0 {
			continue
		}
		if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, uintptr(c), 0, 0); err != nil {
			return nil, fmt.Errorf("keep %s past the exec: %w", host.Capabilities[c], err)
		}
	}
	return lost, nil
}
