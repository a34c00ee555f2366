package unixhost

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// The proc connector's constants (linux/connector.h, linux/cn_proc.h), which
// golang.org/x/sys does not carry.
const (
	cnIdxProc         = 1
	cnValProc         = 1
	procCnMcastListen = 1

	procEventFork = 0x00000001
	procEventExec = 0x00000002
	procEventExit = 0x80000000

	nlmsgHdrLen = 16
	cnMsgLen    = 20
	// The event's data starts after nlmsghdr, cn_msg and proc_event's what,
	// cpu and timestamp.
	eventData = nlmsgHdrLen + cnMsgLen + 16
)

// procEvent is one fork, exec or exit the kernel reported.
type procEvent struct {
	what uint32
	// fork: parent's PID and TGID, child's PID and TGID. exec and exit: the
	// process's PID and TGID in a, b.
	a, b, c, d uint32
}

// parseProcEvents reads the proc connector's messages in one datagram. A
// message it cannot read is skipped.
func parseProcEvents(b []byte) []procEvent {
	var out []procEvent
	le := binary.LittleEndian
	for len(b) >= nlmsgHdrLen {
		n := int(le.Uint32(b))
		if n < nlmsgHdrLen || n > len(b) {
			break
		}
		m := b[:n]
		if n >= eventData+16 && le.Uint32(m[nlmsgHdrLen:]) == cnIdxProc && le.Uint32(m[nlmsgHdrLen+4:]) == cnValProc {
			d := m[eventData:]
			out = append(out, procEvent{
				what: le.Uint32(m[nlmsgHdrLen+cnMsgLen:]),
				a:    le.Uint32(d), b: le.Uint32(d[4:]), c: le.Uint32(d[8:]), d: le.Uint32(d[12:]),
			})
		}
		adv := (n + 3) &^ 3
		if adv > len(b) {
			break
		}
		b = b[adv:]
	}
	return out
}

// watchIndex keeps the processes whose command line names a workspace,
// following exec, fork and exit events. Events are queued in the socket by
// the kernel as they happen, so draining it before an answer makes the
// answer as fresh as a full scan would be; when the socket overflowed
// (ENOBUFS) the index is rebuilt by a full scan before it answers again.
//
// The lock is held to take events from the socket and to change the
// index, never to read /proc for an event (D78): a drain takes what is
// queued (a batch), reads the processes it names without the lock, then
// takes the lock again to apply what it read. Each process read for an
// event carries the ticket of that event; a later event about the same
// PID (its exit, another exec, a PID given again) gives it a new ticket,
// so a read overtaken by one is dropped rather than applied.
type watchIndex struct {
	t      *ProcTable
	mu     sync.Mutex
	sock   int
	file   *os.File
	buf    []byte
	named  map[int]entry
	unread map[int]string
	dirty  bool
	closed bool
	done   chan struct{}
	// rescans counts full scans, for tests and benchmarks.
	rescans int
	// changes counts the events that changed what a scan would read of
	// the processes kept (D70): one made, changed or gone, or the parent
	// of one gone (its child is given another); parents counts the
	// processes kept by their parents' PIDs.
	changes uint64
	parents map[int]int
	// pending are the processes being read for an event, by PID: the
	// ticket of the latest event about each, and how many reads are out.
	pending map[int]*pendingRead
	ticket  uint64
	// open are the batches taken from the socket and not applied yet,
	// in the order they were taken.
	open []*batch
}

// pendingRead is what the index knows of the reads out for one PID.
type pendingRead struct {
	ticket uint64 // the latest event's
	out    int
}

// batch is the events one drain took from the socket: the processes to
// read, each with its event's ticket and, once read, what it is.
type batch struct {
	reads []eventRead
	done  chan struct{} // closed once applied
}

type eventRead struct {
	pid    int
	ticket uint64
	// forkOf is, for the child of a fork, its parent's entry as the index
	// kept it when the fork was taken: the child runs that command line
	// until it execs (and an exec is an event of its own), so only where
	// it runs and its identity are read. nil: its command line is read.
	forkOf *entry
	res    examination
}

// examination is what a read of one process found: an entry to keep, a
// reason it could not be read, or neither (it is gone, or names nothing).
type examination struct {
	keep   *entry
	unread string
}

// entry is what the index keeps of a process: enough for the table to
// tell a session from a look-alike (host.Table.SeparateLookAlikes).
type entry struct {
	start  uint64
	ppid   int
	pidns  uint64
	levels int
	uid    int
	names  []host.Naming
	// argv is the command line as its exec left it, which only another
	// exec changes: a scan takes it, and where the process runs, from
	// here rather than reading them again (known). cut says it is longer
	// than host.MaxCmdline, argv the part read.
	argv []string
	cut  bool
}

// process is the entry as the table's process.
func (e entry) process(pid int) host.Process {
	return host.Process{ID: protocol.ProcID{PID: pid, Start: e.start}, PPID: e.ppid, Names: e.names,
		PIDNS: e.pidns, NSLevels: e.levels, UID: e.uid, Argv: e.argv, Cut: e.cut}
}

// Watch subscribes to the kernel's process events; the index is built by
// the first answer's full scan. It needs the proc connector (CONFIG_PROC_EVENTS), the right
// to listen to it (root), and the host's PID namespace; where it fails,
// Naming and Scan keep scanning all of /proc.
func (t *ProcTable) Watch() error {
	if t.ix != nil {
		return nil
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_CONNECTOR)
	if err != nil {
		return fmt.Errorf("unixhost: proc connector: socket: %w", err)
	}
	// A burst of forks must not overflow the queue; a larger buffer makes a
	// rescan rare.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20) != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 32<<20)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc}); err != nil {
		unix.Close(fd)
		return fmt.Errorf("unixhost: proc connector: bind: %w", err)
	}
	msg := make([]byte, nlmsgHdrLen+cnMsgLen+4)
	le := binary.LittleEndian
	le.PutUint32(msg[0:], uint32(len(msg)))
	le.PutUint16(msg[4:], unix.NLMSG_DONE)
	le.PutUint32(msg[12:], uint32(os.Getpid()))
	le.PutUint32(msg[16:], cnIdxProc)
	le.PutUint32(msg[20:], cnValProc)
	le.PutUint16(msg[32:], 4)
	le.PutUint32(msg[36:], procCnMcastListen)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return fmt.Errorf("unixhost: proc connector: listen: %w", err)
	}
	// In a PID namespace other than the host's, the events carry PIDs this
	// process does not see, and some kernels send nothing at all outside the
	// first namespaces while accepting the subscription; an index that heard
	// nothing would answer "no process" forever. So see one exec of our own
	// child arrive, by the PID we know it by, before trusting the index.
	if err := connectorDelivers(fd); err != nil {
		unix.Close(fd)
		return err
	}
	// The index is built by its first answer's full scan, not here: a
	// daemon's new image subscribes on its way to reading its pipe, and
	// needs no answer before a line asks for one.
	ix := &watchIndex{t: t, sock: fd, buf: make([]byte, 64<<10), dirty: true, done: make(chan struct{}),
		named: map[int]entry{}, unread: map[int]string{}, parents: map[int]int{}, pending: map[int]*pendingRead{}}
	ix.file = os.NewFile(uintptr(fd), "proc-connector")
	t.ix = ix
	go ix.run()
	return nil
}

// run drains events as they arrive, so the queue stays short between
// answers.
func (ix *watchIndex) run() {
	defer close(ix.done)
	rc, err := ix.file.SyscallConn()
	if err != nil {
		return
	}
	rc.Read(func(uintptr) bool {
		return ix.drain(false) != nil
	})
}

func (ix *watchIndex) close() {
	ix.mu.Lock()
	ix.closed = true
	ix.mu.Unlock()
	// Closing wakes run's wait; the file is closed outside the lock since
	// Close waits for run's read to return.
	ix.file.Close()
	<-ix.done
}

// drain takes every queued event, reads the processes they name without
// the lock, and applies what it read. With wait, it returns only once
// the batches other drains took before it are applied too: the index
// then holds every event queued before drain was called.
func (ix *watchIndex) drain(wait bool) error {
	ix.mu.Lock()
	if ix.closed {
		ix.mu.Unlock()
		return host.ErrClosed
	}
	var before []*batch
	if wait {
		before = slices.Clone(ix.open)
	}
	b := ix.takeLocked()
	if b != nil {
		ix.open = append(ix.open, b)
	}
	ix.mu.Unlock()
	if b != nil {
		each(len(b.reads), func(i int) {
			r := &b.reads[i]
			if r.forkOf != nil {
				r.res = ix.t.examineChild(r.pid, r.forkOf)
			} else {
				r.res = ix.t.examine(r.pid)
			}
			if ix.t.examined != nil {
				ix.t.examined(r.pid, r.res)
			}
		})
		ix.mu.Lock()
		ix.applyLocked(b)
		ix.mu.Unlock()
	}
	for _, o := range before {
		<-o.done
	}
	return nil
}

// takeLocked reads every queued event: an exit (and what changes no
// command line) it applies at once; a fork or exec that may make a
// process name a workspace it lists in the batch it returns (nil for
// none), each with its ticket.
func (ix *watchIndex) takeLocked() *batch {
	var b *batch
	for {
		n, _, err := unix.Recvfrom(ix.sock, ix.buf, unix.MSG_DONTWAIT)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.ENOBUFS:
			ix.dirty = true
			continue
		case err != nil || n == 0:
			return b
		}
		for _, e := range parseProcEvents(ix.buf[:n]) {
			pid, read, forkOf := ix.eventLocked(e)
			if !read {
				continue
			}
			if b == nil {
				b = &batch{done: make(chan struct{})}
			}
			b.reads = append(b.reads, eventRead{pid: pid, ticket: ix.newTicketLocked(pid, true), forkOf: forkOf})
		}
	}
}

// eventLocked applies event e, or says which process it asks to read,
// and for a fork of a process the index keeps, the parent's entry.
func (ix *watchIndex) eventLocked(e procEvent) (pid int, read bool, forkOf *entry) {
	switch e.what {
	case procEventFork:
		child, childTGID, parent := int(e.c), int(e.d), int(e.b)
		if child != childTGID {
			return 0, false, nil // a thread
		}
		// A child runs its parent's command line until it execs, so only a
		// child of a process of the index (or of one that could not be
		// read, or is being read) can name a workspace now; the child of
		// one the index keeps names what it names.
		_, unread := ix.unread[parent]
		_, reading := ix.pending[parent]
		if p, named := ix.named[parent]; named && !reading {
			return child, true, &p
		}
		return child, unread || reading, nil
	case procEventExec:
		return int(e.b), true, nil
	case procEventExit:
		if e.a == e.b {
			pid := int(e.a)
			if ix.parents[pid] > 0 {
				ix.changes++ // its children are given another parent
			}
			ix.forgetLocked(pid)
			if _, ok := ix.pending[pid]; ok {
				ix.newTicketLocked(pid, false) // what is being read of it is past
			}
		}
	default:
		// Its owner, group, session, name or tracer changed: what a scan
		// reads of a kept process.
		if _, ok := ix.named[int(e.b)]; ok && e.a == e.b {
			ix.changes++
		}
	}
	return 0, false, nil
}

// newTicketLocked gives pid's latest event a new ticket, counting a read
// out for it when read is set.
func (ix *watchIndex) newTicketLocked(pid int, read bool) uint64 {
	ix.ticket++
	p := ix.pending[pid]
	if p == nil {
		p = &pendingRead{}
		ix.pending[pid] = p
	}
	p.ticket = ix.ticket
	if read {
		p.out++
	}
	return ix.ticket
}

// applyLocked applies what batch b read of each process, unless a later
// event about its PID came since, and marks b applied.
func (ix *watchIndex) applyLocked(b *batch) {
	for _, r := range b.reads {
		p := ix.pending[r.pid]
		if p.ticket == r.ticket {
			switch {
			case r.res.keep != nil:
				ix.keepLocked(r.pid, *r.res.keep)
			case r.res.unread != "":
				ix.unreadLocked(r.pid, r.res.unread)
			default:
				ix.forgetLocked(r.pid)
			}
		}
		if p.out--; p.out == 0 {
			delete(ix.pending, r.pid)
		}
	}
	if i := slices.Index(ix.open, b); i >= 0 {
		ix.open = slices.Delete(ix.open, i, i+1)
	}
	close(b.done)
}

// forgetLocked drops pid from the index, counting a change when it was
// there.
func (ix *watchIndex) forgetLocked(pid int) {
	if e, ok := ix.named[pid]; ok {
		if ix.parents[e.ppid]--; ix.parents[e.ppid] <= 0 {
			delete(ix.parents, e.ppid)
		}
		delete(ix.named, pid)
		ix.changes++
	}
	if _, ok := ix.unread[pid]; ok {
		delete(ix.unread, pid)
		ix.changes++
	}
}

// keepLocked keeps pid as e, a change.
func (ix *watchIndex) keepLocked(pid int, e entry) {
	ix.forgetLocked(pid)
	ix.named[pid] = e
	ix.parents[e.ppid]++
	ix.changes++
}

// unreadLocked keeps pid as unreadable for why, a change.
func (ix *watchIndex) unreadLocked(pid int, why string) {
	ix.forgetLocked(pid)
	ix.unread[pid] = why
	ix.changes++
}

// examine reads process pid's command line as it is now and, when it
// names a workspace, what the index keeps of it. It takes no lock: its
// reads are bounded (host.MaxCmdline), and so is what it parses.
func (t *ProcTable) examine(pid int) examination {
	cl, err := t.readCmdline(pid, nil)
	if err != nil {
		if !gone(err) {
			return examination{unread: err.Error()}
		}
		return examination{}
	}
	if !host.MayName(cl) {
		return examination{}
	}
	id, ok, err := t.identify(pid)
	switch {
	case !ok:
		return examination{}
	case err != nil:
		return examination{unread: err.Error()}
	}
	names := host.Namings(id.argv, t.opts.Layout)
	if len(names) == 0 {
		return examination{}
	}
	return examination{keep: &entry{start: id.st.Start, ppid: id.st.PPID, pidns: id.pidns, levels: id.levels, uid: id.uid,
		names: names, argv: id.argv, cut: id.cut}}
}

// examineChild reads what the child pid of a fork of parent's process
// runs as: its stat, where it runs and its owner, and its stat again, so
// that all of it belongs to one start time. Its command line is its
// parent's, neither read nor parsed again: a child's cost is the same
// whatever its parent's argv holds (D78).
func (t *ProcTable) examineChild(pid int, parent *entry) examination {
	st, err := t.readStat(pid)
	if gone(err) {
		return examination{}
	} else if err != nil {
		return examination{unread: err.Error()}
	}
	e := *parent
	e.start, e.levels = st.Start, 0
	if e.pidns, err = t.pidNS(pid); err != nil {
		if gone(err) {
			return examination{}
		}
		e.pidns, e.levels = 0, t.nsLevels(pid)
	}
	e.uid = t.owner(pid)
	again, err := t.readStat(pid)
	if gone(err) {
		return examination{}
	} else if err != nil {
		return examination{unread: err.Error()}
	}
	if again.Start != st.Start {
		// The PID was given again while it was read: what runs now is no
		// child of the fork. Read it whole.
		return t.examine(pid)
	}
	e.ppid = again.PPID
	return examination{keep: &e}
}

// rescanLocked rebuilds the index from a full scan of /proc.
func (ix *watchIndex) rescanLocked() error {
	// Drop what is queued: it is older than what the scan will see.
	for {
		_, _, err := unix.Recvfrom(ix.sock, ix.buf, unix.MSG_DONTWAIT)
		if err != nil && err != unix.EINTR && err != unix.ENOBUFS {
			break
		}
	}
	ix.dirty = false
	ix.rescans++
	ix.changes++
	// What drains are reading for events taken before is older than the
	// scan: it is dropped when they apply it.
	for pid := range ix.pending {
		ix.newTicketLocked(pid, false)
	}
	pids, err := ix.t.pids()
	if err != nil {
		ix.dirty = true
		return err
	}
	ix.named = map[int]entry{}
	ix.unread = map[int]string{}
	ix.parents = map[int]int{}
	cands := ix.t.candidates(pids)
	found := make([]examination, len(cands))
	each(len(cands), func(i int) {
		if c := cands[i]; c.err == nil {
			found[i] = ix.t.examine(c.pid)
		}
	})
	for i, c := range cands {
		switch {
		case c.err != nil:
			ix.unreadLocked(c.pid, c.err.Error())
		case found[i].keep != nil:
			ix.keepLocked(c.pid, *found[i].keep)
		case found[i].unread != "":
			ix.unreadLocked(c.pid, found[i].unread)
		}
	}
	return nil
}

// fresh applies every event queued before it was called, and rescans if
// some were lost, again while events are lost during the scan itself: an
// answer never rests on an index that missed an event. A table that
// overflows at every scan is an error, which callers take as "unknown".
// On success it returns with the lock held.
func (ix *watchIndex) fresh() error {
	for scans := 0; ; scans++ {
		if err := ix.drain(true); err != nil {
			return err
		}
		ix.mu.Lock()
		switch {
		case ix.closed:
			ix.mu.Unlock()
			return host.ErrClosed
		case !ix.dirty:
			return nil
		case scans == maxRescans:
			ix.mu.Unlock()
			return fmt.Errorf("the kernel's process events overflowed during each of %d full scans", maxRescans)
		}
		err := ix.rescanLocked()
		ix.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// maxRescans bounds the full scans one answer may make.
const maxRescans = 3

// naming answers for k from the processes of the index that name it: all
// a session of k is made of (its bwrap, bwrap's init, `workspace serve`
// each name it), so they are all the table needs to tell it from a
// look-alike. The index is read under the lock; the rest is done without.
func (ix *watchIndex) naming(k messages.WorkspaceKey) (host.Verdict, error) {
	if err := ix.fresh(); err != nil {
		return host.Verdict{Key: k}, fmt.Errorf("naming %s: %w", k, err)
	}
	var tab host.Table
	for pid, e := range ix.named {
		for _, n := range e.names {
			if n.Key == k {
				tab.Procs = append(tab.Procs, e.process(pid))
				break
			}
		}
	}
	for pid, e := range ix.unread {
		tab.Unreadable = append(tab.Unreadable, host.Unreadable{PID: pid, Err: e})
	}
	ix.mu.Unlock()
	sort.Slice(tab.Procs, func(i, j int) bool { return tab.Procs[i].ID.PID < tab.Procs[j].ID.PID })
	sort.Slice(tab.Unreadable, func(i, j int) bool { return tab.Unreadable[i].PID < tab.Unreadable[j].PID })
	ix.t.separate(&tab)
	return tab.Naming(k), nil
}

// snapshot returns the processes of the index, by PID, each with what its
// exec left, and those it could not read.
func (ix *watchIndex) snapshot() ([]candidate, []host.Unreadable, error) {
	if err := ix.fresh(); err != nil {
		return nil, nil, err
	}
	cands := make([]candidate, 0, len(ix.named))
	for pid, e := range ix.named {
		cands = append(cands, candidate{pid: pid, known: &known{start: e.start, argv: e.argv, cut: e.cut, names: e.names, pidns: e.pidns, levels: e.levels}})
	}
	var un []host.Unreadable
	for pid, e := range ix.unread {
		un = append(un, host.Unreadable{PID: pid, Err: e})
	}
	ix.mu.Unlock()
	sort.Slice(cands, func(i, j int) bool { return cands[i].pid < cands[j].pid })
	sort.Slice(un, func(i, j int) bool { return un[i].PID < un[j].PID })
	return cands, un, nil
}

// Changes reads the queued process events and returns the count of
// changes to the processes a scan reads so far; ok is false when the
// table follows no events (every scan may then differ from the last).
// A scan read after one count is current while the count stays (D70),
// but for what no event says: whether a kept process holds its wake pipe
// (its directory's watch says, DirWatch) and its owner as a
// non-dumpable process shows it, which the table's Naming does not read
// again either.
func (t *ProcTable) Changes() (n uint64, ok bool) {
	if t.ix == nil {
		return 0, false
	}
	if err := t.ix.fresh(); err != nil {
		return 0, false
	}
	defer t.ix.mu.Unlock()
	return t.ix.changes, true
}

// Indexed counts the processes the index keeps (those that name a
// workspace); ok is false when the table follows no events.
func (t *ProcTable) Indexed() (n int, ok bool) {
	if t.ix == nil {
		return 0, false
	}
	t.ix.mu.Lock()
	defer t.ix.mu.Unlock()
	return len(t.ix.named), true
}

// Rescans counts the full scans the index has made (1 after Watch).
func (t *ProcTable) Rescans() int {
	if t.ix == nil {
		return 0
	}
	t.ix.mu.Lock()
	defer t.ix.mu.Unlock()
	return t.ix.rescans
}

// connectorDelivers runs /bin/true and waits, for a few seconds at most, for
// the connector to report its exec.
func connectorDelivers(fd int) error {
	pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{Dir: "/", Env: []string{}})
	if err != nil {
		return fmt.Errorf("unixhost: proc connector: self-test: %w", err)
	}
	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(pid, &ws, 0, nil); err != unix.EINTR {
			break
		}
	}
	buf := make([]byte, 64<<10)
	deadline := time.Now().Add(3 * time.Second)
	for {
		n, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT)
		if err == nil {
			for _, e := range parseProcEvents(buf[:n]) {
				if e.what == procEventExec && int(e.b) == pid {
					return nil
				}
			}
			continue
		}
		if err != unix.EAGAIN && err != unix.EINTR && err != unix.ENOBUFS {
			return fmt.Errorf("unixhost: proc connector: self-test: %w", err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return errors.New("unixhost: proc connector: no event arrived (not in the initial user and PID namespaces?)")
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		unix.Poll(pfd, int(min(left, 100*time.Millisecond)/time.Millisecond)+1)
	}
}
