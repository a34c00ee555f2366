package unixhost

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
)

// errNoCgroups is wrapped by Cgroups.Make's error on a host where no
// cgroup can be made: Cgroups.Why says why.
var errNoCgroups = errors.New("no cgroup can be made on this host")

// errCgroupGone is what cgroup.Wait returns once its cgroup is removed.
var errCgroupGone = errors.New("the cgroup is gone")

// cgroupPollEvery is how often cgroup.Wait reads the counts when nothing
// woke it: cgroup v1's pids.events tells nobody when it changes (measured
// on Linux 6.18: neither inotify nor poll), so a fork refused at pids.max is
// seen within this; an OOM kill wakes it at once (v1: an eventfd on
// memory.oom_control; v2: poll on memory.events and pids.events).
const cgroupPollEvery = time.Second

// Cgroups is where this host makes cgroups (host.ChooseCgroups over the
// mounts), or why it makes none. The node's cgroups are made at the top of
// each hierarchy, below host.Layout.CgroupNode, whichever cgroup the daemon
// itself runs in: a session outlives the daemon, and a daemon started again
// from elsewhere finds its sessions' cgroups by their names.
type Cgroups struct {
	h   host.CgroupHierarchies
	why string
}

var hostCgroups = sync.OnceValue(probeCgroups)

// HostCgroups returns this host's cgroups, found once per process: what is
// mounted does not change while the node runs.
func HostCgroups() *Cgroups { return hostCgroups() }

func probeCgroups() *Cgroups {
	mi, err := readSmall("/proc/self/mountinfo")
	if err != nil {
		return &Cgroups{why: fmt.Sprintf("the node's mounts cannot be read: %v", err)}
	}
	mounts := host.ParseCgroupMounts(mi)
	var unified []byte
	for _, m := range mounts {
		if m.Version == host.CgroupV2 {
			unified, _ = readSmall(filepath.Join(m.At, "cgroup.controllers"))
			break
		}
	}
	h, why := host.ChooseCgroups(mounts, unified)
	if why != "" {
		return &Cgroups{why: why}
	}
	for _, d := range h.Dirs() {
		if err := unix.Access(d, unix.W_OK); err != nil {
			return &Cgroups{why: fmt.Sprintf("the node, running as uid %d, cannot write the cgroup hierarchy at %s (%v): it makes its cgroups at the top of the hierarchy, which root alone may", os.Geteuid(), d, err)}
		}
	}
	return &Cgroups{h: h}
}

// Why says why no cgroup can be made here, "" when one can.
func (c *Cgroups) Why() string { return c.why }

// Hierarchies says where the cgroups are made (zero when Why is set).
func (c *Cgroups) Hierarchies() host.CgroupHierarchies { return c.h }

// cgroup is one cgroup of the node: its directory in each hierarchy (two
// for v1, memory's and pids', one for v2).
type cgroup struct {
	name    string
	version int
	mem     string
	pids    string
	limits  host.CgroupLimits
}

// Name is the cgroup's name below each hierarchy's top.
func (g *cgroup) Name() string { return g.name }

// Limits are the limits it holds.
func (g *cgroup) Limits() host.CgroupLimits { return g.limits }

// Dirs are its directories, memory's first.
func (g *cgroup) Dirs() []string {
	if g.mem == g.pids {
		return []string{g.mem}
	}
	return []string{g.mem, g.pids}
}

// checkCgroupName refuses a name that is not a clean relative path of two
// or more parts (the node's directory, then the cgroup's).
func checkCgroupName(name string) error {
	parts := strings.Split(name, "/")
	if len(parts) < 2 || filepath.Clean(name) != name || filepath.IsAbs(name) {
		return fmt.Errorf("unixhost: cgroup %q: not NODE/NAME, a clean relative path", name)
	}
	for _, p := range parts {
		if p == "" || p == "." || p == ".." || strings.ContainsAny(p, "\n\x00") {
			return fmt.Errorf("unixhost: cgroup %q: %q is not a cgroup's name", name, p)
		}
	}
	return nil
}

func (c *Cgroups) at(name string) *cgroup {
	return &cgroup{name: name, version: c.h.Version, mem: filepath.Join(c.h.Memory, name), pids: filepath.Join(c.h.Pids, name)}
}

// Make makes the cgroup name (host.Layout.SessionCgroup or RunCgroup),
// holding l: its parents first (for v2 with the memory and pids
// controllers enabled below each), then the limits (host.CgroupLimitFiles).
// One left by an earlier session or run, empty, is made again; one that
// still holds processes is an error naming them. On any error nothing of it
// is left.
func (c *Cgroups) Make(name string, l host.CgroupLimits) (*cgroup, error) {
	if c.why != "" {
		return nil, fmt.Errorf("unixhost: cgroup %s: %w: %s", name, errNoCgroups, c.why)
	}
	if err := checkCgroupName(name); err != nil {
		return nil, err
	}
	g := c.at(name)
	g.limits = l
	// One left by an earlier session, empty, may hold its server's cgroup
	// below (D80): it goes first, its processes killed (the session it
	// served is over), so that the cgroup is made again.
	if procs, err := g.Procs(); err == nil && len(procs) == 0 {
		g.EndBelow(time.Second)
	}
	var err error
	// A parent removed by another cgroup's Remove between our mkdirs is
	// made again.
	for range 3 {
		if err = g.mkdirs(c.h); !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		g.Remove(0)
		return nil, err
	}
	for _, f := range host.CgroupLimitFiles(g.version, l) {
		dir := g.mem
		if f.Controller == "pids" {
			dir = g.pids
		}
		p := filepath.Join(dir, f.Name)
		err := writeCgroupFile(p, f.Value)
		if err != nil && !(f.Optional && errors.Is(err, fs.ErrNotExist)) {
			g.Remove(0)
			return nil, fmt.Errorf("unixhost: cgroup %s: set %s to %s: %w", name, f.Name, f.Value, err)
		}
	}
	return g, nil
}

// mkdirs makes g's directories and their parents in each hierarchy.
func (g *cgroup) mkdirs(h host.CgroupHierarchies) error {
	for _, top := range h.Dirs() {
		parts := strings.Split(g.name, "/")
		dir := top
		for i, p := range parts {
			if g.version == host.CgroupV2 {
				// Below a v2 cgroup, a child has a controller only when
				// its parent's subtree_control enables it.
				if err := enableControllers(dir); err != nil {
					return fmt.Errorf("unixhost: cgroup %s: %w", g.name, err)
				}
			}
			dir = filepath.Join(dir, p)
			err := unix.Mkdir(dir, 0o755)
			if err == unix.EEXIST && i == len(parts)-1 {
				// Left by an earlier one: made again if empty.
				if err = unix.Rmdir(dir); err == nil {
					err = unix.Mkdir(dir, 0o755)
				} else if err == unix.EBUSY {
					procs, _ := readProcs(dir)
					return fmt.Errorf("unixhost: cgroup %s: it still holds processes %v", g.name, procs)
				}
			}
			if err != nil && err != unix.EEXIST {
				return pathErr("make cgroup", dir, err)
			}
		}
	}
	return nil
}

// enableControllers enables memory and pids for the children of the v2
// cgroup dir, unless it does already.
func enableControllers(dir string) error {
	b, err := readSmall(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	on := strings.Fields(string(b))
	if slices.Contains(on, "memory") && slices.Contains(on, "pids") {
		return nil
	}
	if err := writeCgroupFile(filepath.Join(dir, "cgroup.subtree_control"), "+memory +pids"); err != nil {
		return fmt.Errorf("enable the memory and pids controllers below %s (a cgroup v2 cgroup that holds processes itself cannot): %w", dir, err)
	}
	return nil
}

// Open finds the cgroup name made earlier, by this process or another
// (a daemon started again): an error wrapping fs.ErrNotExist when it is not
// there.
func (c *Cgroups) Open(name string) (*cgroup, error) {
	if c.why != "" {
		return nil, fmt.Errorf("unixhost: cgroup %s: %w: %s", name, errNoCgroups, c.why)
	}
	if err := checkCgroupName(name); err != nil {
		return nil, err
	}
	g := c.at(name)
	for _, d := range g.Dirs() {
		var st unix.Stat_t
		if err := unix.Lstat(d, &st); err != nil {
			return nil, pathErr("open cgroup", d, err)
		}
	}
	memFile := "memory.limit_in_bytes"
	if g.version == host.CgroupV2 {
		memFile = "memory.max"
	}
	mem, _ := readSmall(filepath.Join(g.mem, memFile))
	pids, _ := readSmall(filepath.Join(g.pids, "pids.max"))
	g.limits = host.ParseCgroupLimits(mem, pids)
	return g, nil
}

// Child makes (or finds) the cgroup name below g, in each hierarchy, with
// no limits of its own and, for v2, no controller enabled for it (g may
// hold processes itself): g's limits hold its processes, which g's counts
// and its memory count (Events). It is the session's MCP server's (D80).
func (g *cgroup) Child(name string) (*cgroup, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\n\x00") {
		return nil, fmt.Errorf("unixhost: cgroup %s: %q is not a cgroup's name", g.name, name)
	}
	child := &cgroup{name: g.name + "/" + name, version: g.version, mem: filepath.Join(g.mem, name), pids: filepath.Join(g.pids, name)}
	for _, d := range child.Dirs() {
		if err := unix.Mkdir(d, 0o755); err != nil && err != unix.EEXIST {
			return nil, pathErr("make cgroup", d, err)
		}
	}
	return child, nil
}

// below lists the cgroups below g (by the memory hierarchy's directory).
func (g *cgroup) below() []*cgroup {
	ents, err := os.ReadDir(g.mem)
	if err != nil {
		return nil
	}
	var out []*cgroup
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, &cgroup{name: g.name + "/" + e.Name(), version: g.version,
				mem: filepath.Join(g.mem, e.Name()), pids: filepath.Join(g.pids, e.Name())})
		}
	}
	return out
}

// EndBelow ends the cgroups below g: it waits up to wait for each to hold
// no process (the session's MCP server ends on its own once the sandbox
// is gone, D80), kills what is left then, and removes each.
func (g *cgroup) EndBelow(wait time.Duration) error {
	deadline := time.Now().Add(wait)
	var errs []error
	for _, c := range g.below() {
		for {
			procs, err := c.Procs()
			if err != nil || len(procs) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		errs = append(errs, c.Kill(time.Second), c.Remove(time.Second))
	}
	return errors.Join(errs...)
}

// Join moves the process pid into the cgroup (in each hierarchy); the
// processes it starts from then on are in it too.
func (g *cgroup) Join(pid int) error {
	for _, d := range g.Dirs() {
		if err := writeCgroupFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("unixhost: cgroup %s: join %d: %w", g.name, pid, err)
		}
	}
	return nil
}

// Procs lists the processes in the cgroup (its memory hierarchy's).
func (g *cgroup) Procs() ([]int, error) { return readProcs(g.mem) }

// Events reads the counts of its limits reached, by its processes and
// those of the cgroups below it (its MCP server's, D80): v1 counts an OOM
// kill or a fork refused in the cgroup of the process it hit (measured on
// Linux 6.18), so theirs are added; v2 counts a child without controllers
// of its own in its parent.
func (g *cgroup) Events() (host.CgroupEvents, error) {
	e, err := g.ownEvents()
	if err != nil || g.version == host.CgroupV2 {
		return e, err
	}
	for _, c := range g.below() {
		if ce, err := c.ownEvents(); err == nil { // a child going meanwhile
			e.OOMKills += ce.OOMKills
			e.PidsMax += ce.PidsMax
		}
	}
	return e, nil
}

func (g *cgroup) ownEvents() (host.CgroupEvents, error) {
	memName, pidsName := host.CgroupEventFiles(g.version)
	mem, err := readSmall(filepath.Join(g.mem, memName))
	if err != nil {
		return host.CgroupEvents{}, fmt.Errorf("unixhost: cgroup %s: %w", g.name, err)
	}
	pids, err := readSmall(filepath.Join(g.pids, pidsName))
	if err != nil {
		return host.CgroupEvents{}, fmt.Errorf("unixhost: cgroup %s: %w", g.name, err)
	}
	return host.ParseCgroupEvents(mem, pids), nil
}

// Wait returns the counts once done says they are what it waits for (an
// OOM kill, a fork refused), errCgroupGone once the cgroup is removed, or
// ctx's error. An OOM kill wakes it at once (v1: an eventfd registered on
// memory.oom_control through cgroup.event_control; v2: poll's POLLPRI on
// memory.events and pids.events); otherwise it reads the counts every
// cgroupPollEvery, which is how a fork refused is seen on v1.
func (g *cgroup) Wait(ctx context.Context, done func(host.CgroupEvents) bool) (host.CgroupEvents, error) {
	cancel, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return host.CgroupEvents{}, fmt.Errorf("unixhost: cgroup %s: eventfd: %w", g.name, err)
	}
	defer unix.Close(cancel)
	stop := context.AfterFunc(ctx, func() { unix.Write(cancel, []byte{1, 0, 0, 0, 0, 0, 0, 0}) })
	defer stop()
	fds := []unix.PollFd{{Fd: int32(cancel), Events: unix.POLLIN}}
	memName, pidsName := host.CgroupEventFiles(g.version)
	if g.version == host.CgroupV2 {
		for _, p := range []string{filepath.Join(g.mem, memName), filepath.Join(g.pids, pidsName)} {
			fd, err := openRetry(func() (int, error) { return unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0) })
			if err != nil {
				return host.CgroupEvents{}, g.gone(pathErr("watch cgroup", p, err))
			}
			defer unix.Close(fd)
			fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLPRI})
		}
	} else if fd, err := g.oomEventFD(); err == nil {
		defer unix.Close(fd)
		fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	} else {
		return host.CgroupEvents{}, g.gone(err)
	}
	for {
		e, err := g.Events()
		if err != nil {
			return e, g.gone(err)
		}
		if done(e) {
			return e, nil
		}
		if ctx.Err() != nil {
			return e, ctx.Err()
		}
		for i := range fds {
			fds[i].Revents = 0
		}
		if _, err := unix.Poll(fds, int(cgroupPollEvery/time.Millisecond)); err != nil && err != unix.EINTR {
			return e, fmt.Errorf("unixhost: cgroup %s: poll: %w", g.name, err)
		}
		if g.version != host.CgroupV2 && fds[1].Revents&unix.POLLIN != 0 {
			var b [8]byte
			unix.Read(int(fds[1].Fd), b[:])
		}
	}
}

// gone is err, or errCgroupGone when the cgroup's directory is no more.
func (g *cgroup) gone(err error) error {
	var st unix.Stat_t
	if e := unix.Lstat(g.mem, &st); e == unix.ENOENT {
		return fmt.Errorf("unixhost: cgroup %s: %w", g.name, errCgroupGone)
	}
	return err
}

// oomEventFD is an eventfd the kernel signals at each OOM in the v1
// cgroup (and when the cgroup is removed).
func (g *cgroup) oomEventFD() (int, error) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return -1, fmt.Errorf("unixhost: cgroup %s: eventfd: %w", g.name, err)
	}
	oc := filepath.Join(g.mem, "memory.oom_control")
	ofd, err := openRetry(func() (int, error) { return unix.Open(oc, unix.O_RDONLY|unix.O_CLOEXEC, 0) })
	if err != nil {
		unix.Close(efd)
		return -1, pathErr("watch cgroup", oc, err)
	}
	defer unix.Close(ofd)
	if err := writeCgroupFile(filepath.Join(g.mem, "cgroup.event_control"), fmt.Sprintf("%d %d", efd, ofd)); err != nil {
		unix.Close(efd)
		return -1, fmt.Errorf("unixhost: cgroup %s: register for OOM events: %w", g.name, err)
	}
	return efd, nil
}

// Remove removes the cgroup's directories, waiting up to wait for the
// processes still leaving it (a killed process is in it until it is
// reaped) and the cgroups below it (EndBelow), then the node's directory
// above it if nothing else is in it. A cgroup already gone is no error.
func (g *cgroup) Remove(wait time.Duration) error {
	deadline := time.Now().Add(wait)
	var errs []error
	for _, d := range g.Dirs() {
		for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
			rmdirBelow(d)
			err := unix.Rmdir(d)
			if err == nil || err == unix.ENOENT {
				break
			}
			if err != unix.EBUSY || time.Now().After(deadline) {
				procs, _ := readProcs(d)
				errs = append(errs, fmt.Errorf("unixhost: remove cgroup %s (processes %v): %w", d, procs, err))
				break
			}
			time.Sleep(delay)
		}
		// The node's directory goes with its last cgroup; another being
		// made meanwhile makes it again (Make).
		unix.Rmdir(filepath.Dir(d))
	}
	return errors.Join(errs...)
}

// rmdirBelow removes the empty cgroups below the cgroup directory d.
func rmdirBelow(d string) {
	ents, err := os.ReadDir(d)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.IsDir() {
			unix.Rmdir(filepath.Join(d, e.Name()))
		}
	}
}

// Sweep removes every cgroup below the node's directory node that holds no
// process, nor does any cgroup below it (left by sessions that ended while
// no daemon ran, and their MCP servers', D80), and the node's directory if
// it is then empty. It returns the names it removed.
func (c *Cgroups) Sweep(node string) ([]string, error) {
	if c.why != "" {
		return nil, nil
	}
	if strings.Contains(node, "/") || node == "" || node == "." || node == ".." {
		return nil, fmt.Errorf("unixhost: sweep cgroups: %q is not a node's directory", node)
	}
	var removed []string
	var errs []error
	for _, top := range c.h.Dirs() {
		dir := filepath.Join(top, node)
		ents, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			// The cgroups below go only with it: their counts are its
			// (Events) while it holds a process.
			if procs, err := readProcs(filepath.Join(dir, e.Name())); err != nil || len(procs) == 0 {
				rmdirBelow(filepath.Join(dir, e.Name()))
			}
			if err := unix.Rmdir(filepath.Join(dir, e.Name())); err == nil && !slices.Contains(removed, node+"/"+e.Name()) {
				removed = append(removed, node+"/"+e.Name())
			}
		}
		unix.Rmdir(dir)
	}
	return removed, errors.Join(errs...)
}

// writeCgroupFile writes s to a cgroup's control file in one write, as
// the kernel reads it.
func writeCgroupFile(p, s string) error {
	fd, err := openRetry(func() (int, error) { return unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0) })
	if err != nil {
		return pathErr("write", p, err)
	}
	defer unix.Close(fd)
	for {
		_, err = unix.Write(fd, []byte(s))
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return pathErr("write", p, err)
	}
	return nil
}

// readProcs lists the PIDs in a cgroup's directory's cgroup.procs.
func readProcs(dir string) ([]int, error) {
	b, err := readSmall(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out, nil
}

// cgroupBlock is a cgroup made for a process about to start in bwrap, and
// the pipe bwrap's --block-fd holds its first process on (r, its
// descriptor in the child; w, the byte that lets it go on) while the
// launcher puts it in the cgroup.
type cgroupBlock struct {
	g    *cgroup
	r, w int
	// ok says the process is in the cgroup (or ran nothing): close then
	// leaves the cgroup for whoever follows it.
	ok bool
}

// newCgroupBlock makes the cgroup name holding lim (none for a name ""),
// and the block pipe.
func (l *Launcher) newCgroupBlock(name string, lim host.CgroupLimits) (*cgroupBlock, error) {
	var g *cgroup
	if name != "" {
		var err error
		if g, err = l.cgroups.Make(name, lim); err != nil {
			return nil, err
		}
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		if g != nil {
			g.Remove(0)
		}
		return nil, fmt.Errorf("unixhost: cgroup %s: block pipe: %w", name, err)
	}
	return &cgroupBlock{g: g, r: p[0], w: p[1]}, nil
}

// close closes what is left of the pipe (the write end only once the
// process is in the cgroup or dead: its EOF lets the process go on), and
// removes the cgroup unless the process is in it.
func (b *cgroupBlock) close() {
	for _, fd := range []*int{&b.r, &b.w} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
	if !b.ok && b.g != nil {
		b.g.Remove(time.Second)
	}
}

// joinCgroup waits for bwrap (PID bwrap, its pidfd and status pipe) to say
// its first process, which waits on the block pipe before it execs, puts
// that process in the cgroup (if there is one), holds its user namespace
// to the launcher's counts (limitUserNS), and only then lets it go on: every process of
// the sandbox is in the cgroup before its first instruction. On failure the
// process is killed, then bwrap, and bwrap reaped, before the block's write
// end is closed. It returns what it read of the status pipe.
func (l *Launcher) joinCgroup(b *cgroupBlock, bwrap, pidfd, statusR int) ([]byte, error) {
	buf, child, err := waitChild(bwrap, statusR)
	if err == nil && child > 0 && b.g != nil {
		if err = b.g.Join(child); errors.Is(err, unix.ESRCH) {
			err = nil // gone before it ran anything: bwrap's exit says why
		}
	}
	if err == nil && child > 0 {
		err = l.limitUserNS(child, sessionBlockFD)
	}
	if err != nil {
		if child > 0 {
			killChildOf(child, bwrap)
		}
		if pidfd >= 0 {
			unix.Close(pidfd)
		}
		l.abandon(bwrap, statusR)
		return buf, err
	}
	b.ok = true
	// EPIPE: the process is gone already (a bind that failed).
	for {
		if _, err := unix.Write(b.w, []byte{'\n'}); err != unix.EINTR {
			break
		}
	}
	return buf, nil
}

// runCgroup follows a run's cgroup while its process runs: past its memory
// limit (an OOM kill inside it) the sandbox is ended whole, as seed 004's
// table 7 says a run past its memory is, since the kernel's OOM killer
// ends only the process it picked.
type runCgroup struct {
	g      *cgroup
	cancel context.CancelFunc
	done   chan struct{}
}

// watchRun follows g, in which bwrap's child child runs.
func watchRun(g *cgroup, child, bwrap int) *runCgroup {
	ctx, cancel := context.WithCancel(context.Background())
	rc := &runCgroup{g: g, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(rc.done)
		if _, err := g.Wait(ctx, func(e host.CgroupEvents) bool { return e.OOMKills > 0 }); err == nil {
			// The sandbox's init goes, and every process of its PID
			// namespace with it.
			killChildOf(child, bwrap)
		}
	}()
	return rc
}

// end stops following, and says what the cgroup's counts were once the
// run's process had ended; with report (the end is reported) the cgroup is
// removed. Without (the launcher was closed) the process may run on, and
// its cgroup is left to it.
func (rc *runCgroup) end(report bool) *host.CgroupExit {
	rc.cancel()
	<-rc.done
	x := &host.CgroupExit{Name: rc.g.Name(), Limits: rc.g.Limits()}
	ev, err := rc.g.Events()
	x.Events = ev
	if !report {
		return x
	}
	// What the process left running in its sandbox ends with it.
	errs := []error{err, rc.g.Kill(5 * time.Second), rc.g.Remove(5 * time.Second)}
	if err := errors.Join(errs...); err != nil {
		x.Err = err.Error()
	}
	return x
}

// Kill ends every process still in the cgroup (what a session or a run
// left running in its sandbox once its own process ended: bwrap's init
// waits for them all), with SIGKILL, again until none is left or wait has
// passed (a process forking as it is killed). Each is killed through a
// pidfd opened before its cgroup is read back, so that a PID reused by a
// process outside is never hit. v2's cgroup.kill is used where it is and
// no cgroup is below (it would end those too: the MCP server's, which
// EndBelow lets end on its own).
func (g *cgroup) Kill(wait time.Duration) error {
	deadline := time.Now().Add(wait)
	if g.version == host.CgroupV2 && len(g.below()) == 0 {
		if err := writeCgroupFile(filepath.Join(g.mem, "cgroup.kill"), "1"); err == nil {
			return g.waitEmpty(deadline)
		}
	}
	for {
		procs, err := g.Procs()
		if err != nil {
			return g.gone(err)
		}
		if len(procs) == 0 {
			return nil
		}
		for _, pid := range procs {
			g.killIfMember(pid)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("unixhost: cgroup %s: processes %v are left after SIGKILL", g.name, procs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// killIfMember sends SIGKILL to pid if, held by a pidfd, it is in g.
func (g *cgroup) killIfMember(pid int) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	b, err := readSmall("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasSuffix(line, "/"+g.name) {
			pidfdSignal(fd, unix.SIGKILL, false)
			return
		}
	}
}

// waitEmpty waits until the cgroup holds no process, or the deadline.
func (g *cgroup) waitEmpty(deadline time.Time) error {
	for {
		procs, err := g.Procs()
		if err != nil {
			return g.gone(err)
		}
		if len(procs) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("unixhost: cgroup %s: processes %v are left after cgroup.kill", g.name, procs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// MemTotal is the host's memory, in bytes, from /proc/meminfo.
func MemTotal() (uint64, error) {
	b, err := readSmall("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	n, ok := host.ParseMemTotal(b)
	if !ok {
		return 0, errors.New("unixhost: /proc/meminfo has no MemTotal")
	}
	return n, nil
}
