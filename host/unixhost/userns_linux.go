package unixhost

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// UserNSWhy says why the launcher cannot hold its sandboxes' user
// namespaces to their counts (D82), "" when it can.
func (l *Launcher) UserNSWhy() string {
	if l.nsenter == "" {
		return "nsenter is not installed (Debian's util-linux)"
	}
	return ""
}

// nsGetParent is linux/nsfs.h's NS_GET_PARENT: a descriptor of the user
// namespace that owns (for a user namespace: is the parent of) the one
// given.
const nsGetParent = 0xb702

// blockedWait bounds how long limitUserNS waits for bwrap's child to
// reach its block pipe.
const blockedWait = 5 * time.Second

// limitUserNS holds the user namespaces of bwrap's child child (which
// waits on its block pipe, descriptor blockFD in it, before its first
// instruction) to the launcher's counts: user.max_inotify_instances and
// user.max_inotify_watches, which the kernel keeps for each user
// namespace and checks at every level up to the node's uid, so that the
// top one of the sandbox's (bwrap's first: a run with another uid than
// root has a second inside it) bounds all below it. Only a process in the
// namespace writes them (the sysctl's set is the writer's user
// namespace), with CAP_SYS_RESOURCE there, which entering it gives and an
// exec keeps only as its root: nsenter enters the top one, whose root is
// the node's uid, keeping the node's credentials. It waits for the child
// to be reading its block pipe, by then every namespace made and its uid
// map written. The sandbox itself is given no CAP_SYS_RESOURCE
// (host.BwrapArgs; a run's drops every capability it does not ask), so it
// cannot raise them.
func (l *Launcher) limitUserNS(child, blockFD int) error {
	if l.nsenter == "" {
		return nil // UserNSWhy says so
	}
	gone := func() bool { return unix.Kill(child, 0) == unix.ESRCH }
	if err := waitBlocked(child, blockFD); err != nil {
		if gone() {
			return nil // gone before it ran anything: bwrap's exit says why
		}
		return err
	}
	ns, err := topUserNS(child)
	if err != nil {
		if gone() {
			return nil
		}
		return fmt.Errorf("hold the sandbox's user namespace (of %d) to its counts: %w", child, err)
	}
	defer ns.Close()
	n := l.userNS
	script := "echo " + strconv.FormatUint(n.InotifyInstances, 10) + " > /proc/sys/user/max_inotify_instances && " +
		"echo " + strconv.FormatUint(n.InotifyWatches, 10) + " > /proc/sys/user/max_inotify_watches"
	cmd := exec.Command(l.nsenter, "--user=/proc/self/fd/3", "--preserve-credentials", "--", "/bin/sh", "-c", script)
	cmd.ExtraFiles = []*os.File{ns}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	if out, err := cmd.CombinedOutput(); err != nil {
		if gone() {
			return nil
		}
		return fmt.Errorf("hold the sandbox's user namespace (of %d) to its counts: nsenter: %w: %s", child, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// waitBlocked waits until process pid is in read(2) on its descriptor fd,
// as /proc/PID/syscall shows a process blocked in a system call.
func waitBlocked(pid, fd int) error {
	want := fmt.Sprintf("%d %#x ", unix.SYS_READ, fd)
	p := fmt.Sprintf("/proc/%d/syscall", pid)
	deadline := time.Now().Add(blockedWait)
	for delay := 100 * time.Microsecond; ; delay = min(2*delay, 10*time.Millisecond) {
		b, err := readSmall(p)
		if err != nil {
			return fmt.Errorf("wait for bwrap's child %d at its block: %w", pid, err)
		}
		if strings.HasPrefix(string(b), want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bwrap's child %d did not reach its block within %s (it is at %q)", pid, blockedWait, strings.TrimSpace(string(b)))
		}
		time.Sleep(delay)
	}
}

// topUserNS opens the user namespace of pid's that is a child of this
// process's own: the top of its sandbox's.
func topUserNS(pid int) (*os.File, error) {
	var self unix.Stat_t
	if err := unix.Stat("/proc/self/ns/user", &self); err != nil {
		return nil, err
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", pid))
	if err != nil {
		return nil, err
	}
	for range 32 {
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			f.Close()
			return nil, err
		}
		if st.Ino == self.Ino && st.Dev == self.Dev {
			f.Close()
			return nil, fmt.Errorf("process %d runs in the node's own user namespace", pid)
		}
		pfd, err := unix.IoctlRetInt(int(f.Fd()), nsGetParent)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("the parent of process %d's user namespace: %w", pid, err)
		}
		var pst unix.Stat_t
		if err := unix.Fstat(pfd, &pst); err != nil {
			unix.Close(pfd)
			f.Close()
			return nil, err
		}
		if pst.Ino == self.Ino && pst.Dev == self.Dev {
			unix.Close(pfd)
			return f, nil
		}
		f.Close()
		f = os.NewFile(uintptr(pfd), "user namespace")
	}
	f.Close()
	return nil, fmt.Errorf("process %d's user namespace is nested too deep", pid)
}
