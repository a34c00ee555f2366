package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Host is a host of the test's own on this machine: network and mount
// namespaces made for it, held by a process that sleeps in them, so
// that what runs on the host (through Command) has a network of its own,
// only its loopback, and a file system in which the directories the test
// hides are empty. It reaches the test's servers only through the
// forwarders the test makes (Reach), and the test reaches it through
// others (Expose): all traffic stays on loopback addresses, each side's
// own.
//
//	h := harness.NewHost(t, srv.Dir)        // srv.Dir is empty on the host
//	h.Reach(srv.Port)                        // the host's 127.0.0.1:PORT is the server
//	cmd := h.Command(ctx, "ocx", "status")   // runs on the host
//	outer := h.Expose(8091)                  // 127.0.0.1:outer here is the host's 8091
//	h.KillAll()                              // every process on the host, as a crash
//
// At the test's end every process on the host is killed, by PID, and the
// forwarders end; a process left alive fails the test.
type Host struct {
	t      testing.TB
	holder *exec.Cmd
	pid    int
	ns     uint64 // the inode of its namespace of kind nsKind
	// nsKind is the namespace that tells the host's processes: "net", or
	// "mnt" for a host that shares the test's network.
	nsKind    string
	sharedNet bool
	// netns is the host's network namespace, held open for Reach and
	// Expose; self is the test's.
	netns, self *os.File

	mu    sync.Mutex
	lns   []net.Listener
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// Tmpfs is a tmpfs of Size (mount's size=, "64m") a host mounts at Dir:
// a small disk of the host's own, to fill.
type Tmpfs struct {
	Dir, Size string
}

// HostOptions say how NewHostWith makes a host.
type HostOptions struct {
	// SharedNetwork keeps the test's network (only a mount namespace is
	// made): the host reaches the test's servers directly, and Reach and
	// Expose are not used.
	SharedNetwork bool
	// Hide are directories the host sees empty (a tmpfs of 1 MB each).
	Hide []string
	// Tmpfs are the host's small disks.
	Tmpfs []Tmpfs
}

// NewHost makes a host, hiding the directories hide (each an empty tmpfs
// there). It needs root, unshare, nsenter and ip.
func NewHost(t testing.TB, hide ...string) *Host {
	t.Helper()
	return NewHostWith(t, HostOptions{Hide: hide})
}

// NewHostWith makes a host as o says.
func NewHostWith(t testing.TB, o HostOptions) *Host {
	t.Helper()
	for _, name := range []string{"unshare", "nsenter", "ip"} {
		if _, err := exec.LookPath(name); err != nil {
			t.Fatalf("harness: a host of the test's own needs %s (util-linux, iproute2; make deps installs them): %v", name, err)
		}
	}
	script := "set -e\n"
	if !o.SharedNetwork {
		script += "ip link set lo up\n"
	}
	mounts := append([]Tmpfs{}, o.Tmpfs...)
	for _, d := range o.Hide {
		mounts = append(mounts, Tmpfs{Dir: d, Size: "1m"})
	}
	for _, m := range mounts {
		abs, err := filepath.Abs(m.Dir)
		if err != nil {
			t.Fatalf("harness: %v", err)
		}
		script += "mount -t tmpfs -o mode=0700,size=" + m.Size + " ocx-hidden '" + strings.ReplaceAll(abs, "'", `'\''`) + "'\n"
	}
	script += "echo ready\nexec sleep 86400\n"
	args := []string{"--mount", "--net", "--propagation", "private", "--", "/bin/sh", "-c", script}
	ns := "net"
	if o.SharedNetwork {
		args = append(args[:1], args[2:]...)
		ns = "mnt"
	}
	cmd := exec.Command("unshare", args...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuf
	cmd.Stderr = &stderr
	// The holder dies with the test binary: a host never outlives its test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // Pdeathsig is the thread's: it ends with the goroutine
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
	}()
	if err := <-started; err != nil {
		t.Fatalf("harness: start a host: %v", err)
	}
	h := &Host{t: t, holder: cmd, pid: cmd.Process.Pid, conns: map[net.Conn]bool{}, nsKind: ns, sharedNet: o.SharedNetwork}
	t.Cleanup(h.cleanup)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("harness: the host's namespaces were not made: %q %v: %s", line, err, stderr.String())
	}
	if h.netns, err = os.Open(fmt.Sprintf("/proc/%d/ns/net", h.pid)); err != nil {
		t.Fatal(err)
	}
	if h.self, err = os.Open("/proc/self/ns/net"); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/%s", h.pid, ns), &st); err != nil {
		t.Fatal(err)
	}
	h.ns = st.Ino
	return h
}

// Path is the file at the absolute path p as the host sees it, for the
// test to read: through the holder's root (/proc/PID/root), in the host's
// mount namespace.
func (h *Host) Path(p string) string {
	return fmt.Sprintf("/proc/%d/root%s", h.pid, p)
}

// Command is a command run on the host: in its network and mount
// namespaces (nsenter, which execs the command itself, so its PID is the
// command's).
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	all := append([]string{"--target", strconv.Itoa(h.pid), "--net", "--mount", "--", name}, args...)
	if h.sharedNet {
		all = append([]string{"--target", strconv.Itoa(h.pid), "--mount", "--", name}, args...)
	}
	if ctx == nil {
		return exec.Command("nsenter", all...)
	}
	return exec.CommandContext(ctx, "nsenter", all...)
}

// inNetns runs fn on a thread in the network namespace ns, then puts the
// thread back; a thread that cannot be put back is never used again.
func (h *Host) inNetns(ns *os.File, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter the network namespace: %w", err)
			return // the thread ends with the goroutine, never unlocked
		}
		err := fn()
		if serr := unix.Setns(int(h.self.Fd()), unix.CLONE_NEWNET); serr != nil {
			errc <- errors.Join(err, fmt.Errorf("leave the network namespace: %w", serr))
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// Reach makes the test's 127.0.0.1:port reachable on the host at its own
// 127.0.0.1:port: a forwarder listening there, which dials out here.
func (h *Host) Reach(port int) {
	h.t.Helper()
	if h.sharedNet {
		h.t.Fatal("harness: Reach on a host that shares the test's network")
	}
	var ln net.Listener
	err := h.inNetns(h.netns, func() error {
		var err error
		ln, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		return err
	})
	if err != nil {
		h.t.Fatalf("harness: listen on the host's 127.0.0.1:%d: %v", port, err)
	}
	h.forward(ln, func() (net.Conn, error) {
		return net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 5*time.Second)
	})
}

// Expose makes the host's 127.0.0.1:port reachable here, at the port it
// returns: a forwarder listening here, which dials into the host.
func (h *Host) Expose(port int) int {
	h.t.Helper()
	if h.sharedNet {
		h.t.Fatal("harness: Expose on a host that shares the test's network")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.t.Fatal(err)
	}
	h.forward(ln, func() (net.Conn, error) {
		var c net.Conn
		err := h.inNetns(h.netns, func() error {
			var err error
			c, err = net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 5*time.Second)
			return err
		})
		return c, err
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// forward accepts on ln and copies each connection both ways to what
// dial gives, until either side ends.
func (h *Host) forward(ln net.Listener, dial func() (net.Conn, error)) {
	h.mu.Lock()
	h.lns = append(h.lns, ln)
	h.mu.Unlock()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := dial()
			if err != nil {
				in.Close()
				continue
			}
			if !h.track(in, out) {
				return
			}
			h.wg.Add(1)
			go func() {
				defer h.wg.Done()
				var both sync.WaitGroup
				pipe := func(dst, src net.Conn) {
					defer both.Done()
					io.Copy(dst, src)
					if tc, ok := dst.(*net.TCPConn); ok {
						tc.CloseWrite()
					}
				}
				both.Add(2)
				go pipe(out, in)
				go pipe(in, out)
				both.Wait()
				h.untrack(in, out)
			}()
		}
	}()
}

// untrack closes a connection pair both of whose copies ended.
func (h *Host) untrack(cs ...net.Conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range cs {
		c.Close()
		if h.conns != nil {
			delete(h.conns, c)
		}
	}
}

// track keeps a connection pair to close at the end; false once the
// host is being ended.
func (h *Host) track(cs ...net.Conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conns == nil {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		h.conns[c] = true
	}
	return true
}

// PIDs lists the processes on the host but its holder.
func (h *Host) PIDs() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == h.pid {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(fmt.Sprintf("/proc/%d/ns/%s", pid, h.nsKind), &st) != nil || st.Ino != h.ns {
			continue
		}
		if state, _, err := readStat(pid); err == nil && state != 'Z' && state != 'X' {
			out = append(out, pid)
		}
	}
	return out
}

// KillAll kills every process on the host, by PID, as a host that
// crashed: the daemon, its sessions, its runs and their holders. It
// returns once they are gone, each done exiting (proc.exited): a killed
// process leaves its namespaces before its threads have closed its files,
// so a lock it held could still be held just after (a daemon started again
// at once found the last one's lock, seen once in
// TestRemoteNodeKilledFindsItsRunLost).
func (h *Host) KillAll() {
	h.t.Helper()
	var killed []proc
	for try := 0; try < 50; try++ {
		pids := h.PIDs()
		if len(pids) == 0 && allExited(killed) {
			return
		}
		for _, pid := range pids {
			if _, start, err := readStat(pid); err == nil {
				killed = append(killed, proc{pid: pid, start: start})
			}
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.t.Errorf("harness: processes on the host still alive after SIGKILL: %v", h.PIDs())
}

// allExited says every process of ps is done exiting.
func allExited(ps []proc) bool {
	for _, p := range ps {
		if !p.exited() {
			return false
		}
	}
	return true
}

func (h *Host) cleanup() {
	left := h.PIDs()
	h.KillAll()
	if len(left) > 0 {
		h.t.Logf("harness: ended processes left on the host: %v", left)
	}
	syscall.Kill(-h.pid, syscall.SIGKILL)
	h.mu.Lock()
	for _, ln := range h.lns {
		ln.Close()
	}
	for c := range h.conns {
		c.Close()
	}
	h.conns = nil
	h.mu.Unlock()
	h.wg.Wait()
	if h.netns != nil {
		h.netns.Close()
	}
	if h.self != nil {
		h.self.Close()
	}
}

// lockedBuf is a buffer safe for a command's writes and the test's reads.
type lockedBuf struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	return len(p), nil
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}
