package unixhost

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// ProcOptions configures a ProcTable.
type ProcOptions struct {
	// Layout is the agents root whose workspaces the table looks for.
	Layout host.Layout
	// ReleaseRoot is node.json's release root; "" without one.
	ReleaseRoot string
	// Daemon is the daemon's PID, to tell its children; 0 when none runs.
	Daemon int
	// Subreaper says whether a PID is a child subreaper, so that its children
	// count as orphans. nil treats `systemd` user managers as subreapers.
	Subreaper func(pid int) bool
}

// ProcTable reads the process table from /proc. Scan walks all of /proc.
// Once Watch has been called, it also follows every fork, exec and exit
// through the kernel's proc connector, so that Naming (the refusal check)
// and Scan read only the processes that name a workspace.
type ProcTable struct {
	opts   ProcOptions
	procfd int
	ix     *watchIndex
	// self is the reader's own PID namespace, users the uids a session
	// may run as, root the agents root where the node's sandbox records
	// are (nil when it cannot be opened: no record is then read).
	self  uint64
	users []int
	root  *Root
	// betweenReads, when set (by tests), runs after the command lines were
	// read and before the rest: where a process can vanish mid-scan.
	betweenReads func()
	// examined, when set (by tests, before Watch), is called with each
	// process the index read for an event and what it found, after the
	// read and before the index's lock is taken to apply it.
	examined func(pid int, found examination)

	// wakeMu guards wakeFD: the descriptor through which each process was
	// last seen to hold its wake pipe open for reading, which the next
	// scan looks at first (a listening session keeps its descriptor), so
	// that a scan reads one descriptor of a listening session, not all.
	// It is a hint: what the scan says is what it reads then.
	wakeMu sync.Mutex
	wakeFD map[protocol.ProcID]string
}

var _ host.ProcTable = (*ProcTable)(nil)

// NewProcTable opens /proc.
func NewProcTable(opts ProcOptions) (*ProcTable, error) {
	if opts.Layout.Root() == "" {
		return nil, errors.New("unixhost: process table: no agents root")
	}
	fd, err := openRetry(func() (int, error) {
		return unix.Open("/proc", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, pathErr("open", "/proc", err)
	}
	t := &ProcTable{opts: opts, procfd: fd}
	if t.opts.Subreaper == nil {
		t.opts.Subreaper = t.systemdSubreaper
	}
	link, err := readlinkAt(fd, "self/ns/pid")
	if err == nil {
		t.self, err = host.ParseNSLink(link, "pid")
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("unixhost: process table: read its own PID namespace: %w", err)
	}
	t.users = []int{0}
	var st unix.Stat_t
	if unix.Stat(opts.Layout.Root(), &st) == nil && !slices.Contains(t.users, int(st.Uid)) {
		t.users = append(t.users, int(st.Uid))
	}
	if me := os.Geteuid(); !slices.Contains(t.users, me) {
		t.users = append(t.users, me)
	}
	if r, err := OpenRoot(opts.Layout.Root()); err == nil {
		t.root = r
	}
	return t, nil
}

// Close stops following events and closes /proc.
func (t *ProcTable) Close() error {
	if t.ix != nil {
		t.ix.close()
	}
	if t.root != nil {
		t.root.Close()
	}
	return unix.Close(t.procfd)
}

// readAt reads the file rel below /proc into buf, growing it as needed:
// for the kernel's own small files (stat, status, fdinfo), whose length no
// process chooses. A command line is read by readCmdline.
func (t *ProcTable) readAt(rel string, buf []byte) ([]byte, error) {
	return t.readAtMost(rel, buf, 0)
}

// readCmdline reads /proc/PID/cmdline into buf, at most
// host.MaxCmdline+1 bytes (host.ParseCmdline tells a command line cut
// there): what an agent writes in its argv costs a read no more than
// that (D78).
func (t *ProcTable) readCmdline(pid int, buf []byte) ([]byte, error) {
	var name [24]byte
	rel := append(strconv.AppendInt(name[:0], int64(pid), 10), "/cmdline"...)
	return t.readAtMost(string(rel), buf, host.MaxCmdline+1)
}

// readAtMost reads the file rel below /proc into buf, growing it as
// needed, up to limit bytes (0: to its end).
func (t *ProcTable) readAtMost(rel string, buf []byte, limit int) ([]byte, error) {
	fd, err := openRetry(func() (int, error) {
		return unix.Openat(t.procfd, rel, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return buf[:0], err
	}
	defer unix.Close(fd)
	n := 0
	buf = buf[:cap(buf)]
	if len(buf) == 0 {
		buf = make([]byte, 4096)
	}
	for {
		end := len(buf)
		if limit > 0 {
			end = min(end, limit)
		}
		m, err := unix.Read(fd, buf[n:end])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return buf[:n], err
		}
		if m == 0 {
			return buf[:n], nil
		}
		n += m
		if limit > 0 && n >= limit {
			return buf[:n], nil
		}
		if n == len(buf) {
			buf = append(buf, make([]byte, len(buf))...)
		}
	}
}

// gone says whether err means the process no longer exists.
func gone(err error) bool { return err == unix.ENOENT || err == unix.ESRCH }

// pids lists the numeric entries of /proc.
func (t *ProcTable) pids() ([]int, error) {
	fd, err := openRetry(func() (int, error) {
		return unix.Openat(t.procfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, pathErr("open", "/proc", err)
	}
	d := os.NewFile(uintptr(fd), "/proc")
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil && err != io.EOF {
		return nil, pathErr("read", "/proc", err)
	}
	pids := make([]int, 0, len(names))
	for _, n := range names {
		if n[0] < '0' || n[0] > '9' {
			continue
		}
		if pid, err := strconv.Atoi(n); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// candidate is a process whose command line may name a workspace.
type candidate struct {
	pid     int
	cmdline []byte // as first read
	err     error  // set when it could not be read at all
	pidns   uint64 // its PID namespace, read just after; 0 when unknown
	// known is what the kernel's process events kept of it (its exec's
	// command line, where it runs), nil when the table follows none.
	known *known
}

// known is what a process's exec fixed and the table keeps: its start
// time, command line and PID namespace (NSpid's count where that could
// not be read), none of which changes until it execs again.
type known struct {
	start  uint64
	argv   []string
	cut    bool
	names  []host.Naming // what argv names, parsed once
	pidns  uint64
	levels int
}

// candidates reads every process's command line, in parallel, and returns
// those whose program is `workspace` or `bwrap`, and those that could not be
// read. A process that vanished before its command line was read has ended:
// it names nothing.
func (t *ProcTable) candidates(pids []int) []candidate {
	workers := min(runtime.GOMAXPROCS(0), 8, max(1, len(pids)/256))
	var mu sync.Mutex
	var out []candidate
	var wg sync.WaitGroup
	chunk := (len(pids) + workers - 1) / workers
	for w := range workers {
		lo, hi := w*chunk, min((w+1)*chunk, len(pids))
		if lo >= hi {
			continue
		}
		wg.Add(1)
		go func(part []int) {
			defer wg.Done()
			buf := make([]byte, 4096)
			var mine []candidate
			for _, pid := range part {
				var err error
				buf, err = t.readCmdline(pid, buf)
				switch {
				case err == nil:
					if host.MayName(buf) {
						// Where it runs, read at once: should it vanish
						// before the rest is read, a process in another
						// workspace's sandbox is a look-alike, not unknown.
						ns, _ := t.pidNS(pid)
						mine = append(mine, candidate{pid: pid, cmdline: bytes.Clone(buf), pidns: ns})
					}
				case gone(err):
				default:
					mine = append(mine, candidate{pid: pid, err: err})
				}
			}
			mu.Lock()
			out = append(out, mine...)
			mu.Unlock()
		}(pids[lo:hi])
	}
	wg.Wait()
	return out
}

// identity is what identify reads of one process: its stat, command line,
// where it runs (its PID namespace, or NSpid's count where that cannot be
// read) and its owner.
type identity struct {
	st     host.Stat
	argv   []string
	cut    bool          // the command line is longer than host.MaxCmdline
	names  []host.Naming // what argv names, when known already
	pidns  uint64
	levels int
	uid    int
}

// identify reads a process's stat, its command line, its PID namespace and
// owner, and its stat again, so that all of it belongs to the start time it
// is filed under. ok is false when the process ended before it was read.
func (t *ProcTable) identify(pid int) (id identity, ok bool, err error) {
	prefix := strconv.Itoa(pid) + "/"
	var buf []byte
	for range 3 {
		b, err := t.readAt(prefix+"stat", buf)
		if err != nil {
			if gone(err) {
				return id, false, nil
			}
			return id, true, err
		}
		if id.st, err = host.ParseStat(b); err != nil {
			return id, true, err
		}
		cl, err := t.readCmdline(pid, nil)
		if err != nil {
			if gone(err) {
				return id, false, nil
			}
			return id, true, err
		}
		id.pidns, id.levels = 0, 0
		if id.pidns, err = t.pidNS(pid); err != nil {
			if gone(err) {
				return id, false, nil
			}
			id.levels = t.nsLevels(pid)
		}
		id.uid = t.owner(pid)
		b, err = t.readAt(prefix+"stat", b)
		if err != nil {
			if gone(err) {
				return id, false, nil
			}
			return id, true, err
		}
		again, err := host.ParseStat(b)
		if err != nil {
			return id, true, err
		}
		if again.Start == id.st.Start {
			id.st = again
			id.argv, id.cut = host.ParseCmdline(cl)
			return id, true, nil
		}
		// The PID was reused while we read: read the new process.
	}
	return id, true, errors.New("the PID kept being reused while it was read")
}

// identifyAgain is identify for a process the process events keep: its
// stat and owner read now, its command line and namespace as its exec
// left them, when its stat still has the start time they were kept under.
// Otherwise (its PID reused, or no events kept it) it is read whole.
func (t *ProcTable) identifyAgain(c candidate) (id identity, ok bool, err error) {
	if c.known == nil {
		return t.identify(c.pid)
	}
	// The owner first: a stat read after it with the kept start time says
	// the process lived all along, so the owner is its own.
	id.uid = t.owner(c.pid)
	if id.st, err = t.readStat(c.pid); gone(err) {
		return id, false, nil
	} else if err != nil {
		return id, true, err
	}
	if id.st.Start != c.known.start {
		return t.identify(c.pid) // its PID was reused
	}
	id.argv, id.cut, id.names, id.pidns, id.levels = c.known.argv, c.known.cut, c.known.names, c.known.pidns, c.known.levels
	return id, true, nil
}

// owner is the uid owning /proc/PID, -1 when it cannot be read.
func (t *ProcTable) owner(pid int) int {
	var own unix.Stat_t
	if unix.Fstatat(t.procfd, strconv.Itoa(pid), &own, 0) != nil {
		return -1
	}
	return int(own.Uid)
}

// pidNS reads the PID namespace process pid runs in (/proc/PID/ns/pid).
func (t *ProcTable) pidNS(pid int) (uint64, error) {
	link, err := readlinkAt(t.procfd, strconv.Itoa(pid)+"/ns/pid")
	if err != nil {
		return 0, err
	}
	return host.ParseNSLink(link, "pid")
}

// nsLevels counts the PID namespaces process pid is in from /proc's own
// (NSpid, which anyone may read); 0 when it cannot be read.
func (t *ProcTable) nsLevels(pid int) int {
	b, err := t.readAt(strconv.Itoa(pid)+"/status", nil)
	if err != nil {
		return 0
	}
	n, _ := host.ParseNSpid(b)
	return n
}

// Scan returns every process that names a workspace of the agents root, with
// its identity, parent, command line, release, whether it listens, and how it
// was started; and every process it could not read.
func (t *ProcTable) Scan() (host.Table, error) {
	cands, unreadable, err := t.gather()
	if err != nil {
		return host.Table{}, err
	}
	if t.betweenReads != nil {
		t.betweenReads()
	}
	tab := host.Table{Unreadable: unreadable}
	type read struct {
		id  identity
		ok  bool
		err error
	}
	reads := make([]read, len(cands))
	each(len(cands), func(i int) { reads[i].id, reads[i].ok, reads[i].err = t.identifyAgain(cands[i]) })
	for i, c := range cands {
		pid := c.pid
		id, ok, err := reads[i].id, reads[i].ok, reads[i].err
		if !ok {
			// It ended while it was read. If its command line, read a moment
			// before, named a workspace, that evidence went missing: the
			// process is unknown, never simply gone (unless it ran in a
			// sandbox none of those workspaces' is: SeparateLookAlikes).
			argv, _ := host.ParseCmdline(c.cmdline)
			if names := host.Namings(argv, t.opts.Layout); len(names) > 0 {
				tab.Unreadable = append(tab.Unreadable, host.Unreadable{PID: pid,
					Err:   fmt.Sprintf("it named workspace %s and vanished while it was read", names[0].Key),
					Names: names, PIDNS: c.pidns})
			}
			continue
		}
		if err != nil {
			tab.Unreadable = append(tab.Unreadable, host.Unreadable{PID: pid, Err: err.Error()})
			continue
		}
		names := id.names
		if names == nil {
			names = host.Namings(id.argv, t.opts.Layout)
		}
		if len(names) == 0 {
			continue
		}
		st := id.st
		p := host.Process{
			ID: protocol.ProcID{PID: pid, Start: st.Start}, PPID: st.PPID, PGID: st.PGID, SID: st.SID,
			Comm: st.Comm, Argv: id.argv, Cut: id.cut, Names: names, PIDNS: id.pidns, NSLevels: id.levels, UID: id.uid,
		}
		tab.Procs = append(tab.Procs, p)
	}
	t.separate(&tab)
	wakes := t.wakePipes(tab.Procs)
	hints := make([]string, len(tab.Procs))
	t.wakeMu.Lock()
	last := t.wakeFD
	each(len(tab.Procs), func(i int) {
		p := &tab.Procs[i]
		hints[i] = t.inspect(p, wakes, last[p.ID])
	})
	t.wakeFD = make(map[protocol.ProcID]string, len(tab.Procs))
	for i, h := range hints {
		if h != "" {
			t.wakeFD[tab.Procs[i].ID] = h
		}
	}
	t.wakeMu.Unlock()
	tab.SetOrigins(t.opts.Daemon, memoSubreaper(t.opts.Subreaper))
	return tab, nil
}

// gather lists the processes a scan reads: those the kernel's process
// events keep when the table follows them, else every process whose
// program is `workspace` or `bwrap` (candidates); a process that does not
// read is unreadable.
func (t *ProcTable) gather() (cands []candidate, unreadable []host.Unreadable, err error) {
	if t.ix != nil {
		return t.ix.snapshot()
	}
	all, err := t.pids()
	if err != nil {
		return nil, nil, err
	}
	for _, c := range t.candidates(all) {
		if c.err != nil {
			unreadable = append(unreadable, host.Unreadable{PID: c.pid, Err: c.err.Error()})
		} else {
			cands = append(cands, c)
		}
	}
	return cands, unreadable, nil
}

// each calls f for every index below n, on as many goroutines as the
// processors allow (8 at most): the reads of a scan wait on the kernel,
// one process at a time.
func each(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), 8, max(1, n/8))
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}

// wakePipes finds the wake pipe of each workspace procs name (surely): its
// device and inode, nil when it is not a FIFO.
func (t *ProcTable) wakePipes(procs []host.Process) map[messages.WorkspaceKey]*unix.Stat_t {
	wakes := map[messages.WorkspaceKey]*unix.Stat_t{}
	for _, p := range procs {
		for _, n := range p.Names {
			if _, ok := wakes[n.Key]; ok || n.Unsure {
				continue
			}
			var st *unix.Stat_t
			if w, err := t.opts.Layout.Workspace(n.Key); err == nil {
				var s unix.Stat_t
				if unix.Stat(w.Wake, &s) == nil && s.Mode&unix.S_IFMT == unix.S_IFIFO {
					st = &s
				}
			}
			wakes[n.Key] = st
		}
	}
	return wakes
}

// memoSubreaper asks f once per PID: the sessions of a scan share their
// few parents.
func memoSubreaper(f func(pid int) bool) func(pid int) bool {
	seen := map[int]bool{}
	return func(pid int) bool {
		v, ok := seen[pid]
		if !ok {
			v = f(pid)
			seen[pid] = v
		}
		return v
	}
}

// separate moves the look-alikes out of tab's processes (D45), reading the
// node's sandbox records for the workspaces a process in a sandbox names
// that no live bwrap accounts for.
func (t *ProcTable) separate(tab *host.Table) {
	p := host.Provenance{Self: t.self, Users: t.users}
	if keys := tab.Unanchored(p); len(keys) > 0 {
		p.Recorded = t.recorded(keys)
	}
	tab.SeparateLookAlikes(p)
}

// recorded reads the node's sandbox record of each workspace of keys and
// returns the PID namespace of each that is good: its init alive, with its
// start time, in that namespace. A record that is missing, unreadable or
// stale counts for nothing.
func (t *ProcTable) recorded(keys []messages.WorkspaceKey) map[messages.WorkspaceKey]uint64 {
	if t.root == nil {
		return nil
	}
	out := map[messages.WorkspaceKey]uint64{}
	for _, k := range keys {
		ws, err := t.opts.Layout.Workspace(k)
		if err != nil {
			continue
		}
		b, err := t.root.ReadFile(ws.Sandbox, SmallFile)
		if err != nil {
			continue
		}
		rec, err := host.DecodeSandboxRecord(b)
		if err != nil || !t.sandboxAlive(rec) {
			continue
		}
		out[k] = rec.PIDNamespace
	}
	return out
}

// sandboxAlive says whether the record's init still runs, with its start
// time, in the record's PID namespace.
func (t *ProcTable) sandboxAlive(rec host.SandboxRecord) bool {
	st, err := t.readStat(rec.Init.PID)
	if err != nil || st.Start != rec.Init.Start || st.Zombie() {
		return false
	}
	ns, err := t.pidNS(rec.Init.PID)
	return err == nil && ns == rec.PIDNamespace
}

// inspect reads the executable and the wake pipes a process holds (looking
// first at the descriptor hint), and returns the descriptor through which it
// holds one open for reading ("" if none). What it cannot read stays
// unknown, and Partial says why.
func (t *ProcTable) inspect(p *host.Process, wakes map[messages.WorkspaceKey]*unix.Stat_t, hint string) string {
	prefix := strconv.Itoa(p.ID.PID) + "/"
	exe, err := readlinkAt(t.procfd, prefix+"exe")
	if err == nil {
		p.Exe = exe
		p.Release = t.release(p.ID.PID, exe)
	} else {
		p.Partial = "executable: " + err.Error()
	}
	var fd string
	p.Listening, fd = t.listening(p, wakes, hint)
	if p.Listening == host.Unknown && p.Partial == "" {
		p.Partial = "open files could not be read"
	}
	return fd
}

// Executable reads the program process pid runs (/proc/PID/exe, " (deleted)"
// when its file is gone) and the release it belongs to, as the table names a
// session's: what the status says of the daemon.
func (t *ProcTable) Executable(pid int) (exe, release string, err error) {
	if pid <= 0 {
		return "", "", fmt.Errorf("unixhost: executable of pid %d: not a process", pid)
	}
	exe, err = readlinkAt(t.procfd, strconv.Itoa(pid)+"/exe")
	if err != nil {
		return "", "", &fs.PathError{Op: "readlink", Path: "/proc/" + strconv.Itoa(pid) + "/exe", Err: err}
	}
	return exe, t.release(pid, strings.TrimSuffix(exe, " (deleted)")), nil
}

func readlinkAt(dirfd int, rel string) (string, error) {
	buf := make([]byte, 512)
	for {
		n, err := unix.Readlinkat(dirfd, rel, buf)
		if err != nil {
			return "", err
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		buf = make([]byte, 2*len(buf))
	}
}

// release says which release exe belongs to. Inside a sandbox that binds the
// release root's current (or previous) link, the path reads .../current/NAME:
// the release is then found by the executable's inode among releases/*.
func (t *ProcTable) release(pid int, exe string) string {
	r := host.ReleaseOf(exe, t.opts.ReleaseRoot)
	root := t.opts.ReleaseRoot
	if root == "" || r != filepath.Dir(exe) || !strings.HasPrefix(exe, filepath.Clean(root)+"/") {
		return r
	}
	var st unix.Stat_t
	if unix.Fstatat(t.procfd, strconv.Itoa(pid)+"/exe", &st, 0) != nil {
		return r
	}
	ids, err := os.ReadDir(filepath.Join(root, "releases"))
	if err != nil {
		return r
	}
	for _, id := range ids {
		var cand unix.Stat_t
		if unix.Stat(filepath.Join(root, "releases", id.Name(), filepath.Base(exe)), &cand) == nil &&
			cand.Dev == st.Dev && cand.Ino == st.Ino {
			return id.Name()
		}
	}
	return r
}

// listening says whether p holds the wake pipe of a workspace it names open
// for reading: one of its descriptors is that pipe (same device and inode,
// whatever path its mount namespace shows) and was opened O_RDONLY or O_RDWR.
// The descriptor hint is read first; when it is not such a descriptor
// (any more), every descriptor is. fd is the descriptor found.
func (t *ProcTable) listening(p *host.Process, wakes map[messages.WorkspaceKey]*unix.Stat_t, hint string) (e host.Evidence, fd string) {
	var targets []*unix.Stat_t
	for _, n := range p.Names {
		if st := wakes[n.Key]; st != nil && !n.Unsure {
			targets = append(targets, st)
		}
	}
	if len(targets) == 0 {
		return host.No, ""
	}
	dir := strconv.Itoa(p.ID.PID) + "/fd"
	if hint != "" && t.readsWake(p, dir, hint, targets) == host.Yes {
		return host.Yes, hint
	}
	dfd, err := openRetry(func() (int, error) {
		return unix.Openat(t.procfd, dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return host.Unknown, ""
	}
	d := os.NewFile(uintptr(dfd), dir)
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil && err != io.EOF {
		return host.Unknown, ""
	}
	for _, n := range names {
		if n == hint {
			continue // read just now
		}
		switch t.readsWake(p, dir, n, targets) {
		case host.Yes:
			return host.Yes, n
		case host.Unknown:
			return host.Unknown, ""
		}
	}
	return host.No, ""
}

// readsWake says whether descriptor n of p (below dir, its /proc fd
// directory) is one of the wake pipes targets open for reading: Yes; No
// when it is not; Unknown when its flags could not be read.
func (t *ProcTable) readsWake(p *host.Process, dir, n string, targets []*unix.Stat_t) host.Evidence {
	var st unix.Stat_t
	if unix.Fstatat(t.procfd, dir+"/"+n, &st, 0) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return host.No
	}
	for _, w := range targets {
		if st.Dev != w.Dev || st.Ino != w.Ino {
			continue
		}
		info, err := t.readAt(strconv.Itoa(p.ID.PID)+"/fdinfo/"+n, nil)
		if err != nil {
			return host.Unknown
		}
		if flags, ok := fdinfoFlags(info); !ok {
			return host.Unknown
		} else if flags&unix.O_ACCMODE != unix.O_WRONLY {
			return host.Yes
		}
	}
	return host.No
}

// fdinfoFlags reads the octal "flags:" line of /proc/PID/fdinfo/N.
func fdinfoFlags(b []byte) (int, bool) {
	for line := range bytes.Lines(b) {
		v, ok := bytes.CutPrefix(line, []byte("flags:"))
		if !ok {
			continue
		}
		f, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 8, 64)
		return int(f), err == nil
	}
	return 0, false
}

// systemdSubreaper treats a systemd user manager (not PID 1) as a subreaper,
// since it makes itself one.
func (t *ProcTable) systemdSubreaper(pid int) bool {
	if pid <= 1 {
		return false
	}
	b, err := t.readAt(strconv.Itoa(pid)+"/stat", nil)
	if err != nil {
		return false
	}
	st, err := host.ParseStat(b)
	return err == nil && st.Comm == "systemd"
}

// Naming answers whether a process names the workspace k. After Watch it
// reads only its index; before, it scans all of /proc.
func (t *ProcTable) Naming(k messages.WorkspaceKey) (host.Verdict, error) {
	if t.ix != nil {
		return t.ix.naming(k)
	}
	tab, err := t.Scan()
	if err != nil {
		return host.Verdict{Key: k}, fmt.Errorf("naming %s: %w", k, err)
	}
	return tab.Naming(k), nil
}

// readStat reads /proc/PID/stat.
func (t *ProcTable) readStat(pid int) (host.Stat, error) {
	b, err := t.readAt(strconv.Itoa(pid)+"/stat", nil)
	if err != nil {
		return host.Stat{}, err
	}
	return host.ParseStat(b)
}

// ReadStat reads /proc/PID/stat.
func ReadStat(pid int) (host.Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return host.Stat{}, err
	}
	return host.ParseStat(b)
}
