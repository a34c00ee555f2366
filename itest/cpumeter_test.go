package itest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cpuMeter counts the CPU time of a tree of processes by program, as the
// kernel accounts it: every process forked from the roots (or from their
// descendants) while it runs is followed by the proc connector's fork
// events, each task's user and system time as it exits is read from
// taskstats' exit records (its command name with it), and the roots' own
// time is read from /proc at the start and at the end. An orphan (a
// Fossil backoffice, whose request process exits first) stays counted,
// since it is followed from its fork, not by its parent at its exit.
// Nothing the meter does runs in the processes it measures. It needs
// CAP_NET_ADMIN (taskstats' listeners); a test without it is skipped.
type cpuMeter struct {
	tb        testing.TB
	roots     map[int]time.Duration // the roots' /proc time at the start
	conn, ts  int                   // the proc connector's socket, taskstats'
	mu        sync.Mutex
	tree      map[uint32]bool // the TGIDs forked in the tree
	exits     []taskExit
	lost      int // datagrams the kernel dropped (ENOBUFS)
	done      sync.WaitGroup
	closeOnce sync.Once
	closing   atomic.Bool
}

type taskExit struct {
	tgid       uint32
	comm       string
	user, syst time.Duration
}

// The proc connector's and taskstats' layouts (linux/cn_proc.h,
// linux/taskstats.h: struct taskstats, offsets stable across versions).
const (
	meterNlmsgHdr  = 16
	meterCnMsg     = 20
	tsCommOff      = 80
	tsUtimeOff     = 152
	tsStimeOff     = 160
	tsTgidOff      = 368
	tsMinLen       = tsTgidOff + 4
	procEventForkW = 0x00000001
)

// startCPUMeter begins counting the trees of roots.
func startCPUMeter(tb testing.TB, roots ...int) *cpuMeter {
	tb.Helper()
	m := &cpuMeter{tb: tb, roots: map[int]time.Duration{}, tree: map[uint32]bool{}, conn: -1, ts: -1}
	for _, pid := range roots {
		m.roots[pid] = procCPU(tb, pid)
		m.tree[uint32(pid)] = true
	}
	var err error
	if m.conn, err = openProcConnector(); err != nil {
		tb.Skipf("the proc connector: %v", err)
	}
	if m.ts, err = openTaskstats(); err != nil {
		unix.Close(m.conn)
		tb.Skipf("taskstats: %v", err)
	}
	for _, fd := range []int{m.conn, m.ts} {
		tv := unix.NsecToTimeval(int64(50 * time.Millisecond))
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			tb.Fatal(err)
		}
	}
	m.done.Add(2)
	go m.read(m.conn, m.fork)
	go m.read(m.ts, m.exit)
	tb.Cleanup(m.close)
	return m
}

func (m *cpuMeter) close() {
	m.closeOnce.Do(func() {
		// The readers' recvfrom times out every 50 ms and sees the flag.
		m.closing.Store(true)
		m.done.Wait()
		unix.Close(m.conn)
		unix.Close(m.ts)
	})
}

func (m *cpuMeter) read(fd int, each func([]byte)) {
	defer m.done.Done()
	buf := make([]byte, 256<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.ENOBUFS) {
			m.mu.Lock()
			m.lost++
			m.mu.Unlock()
			continue
		}
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			if m.closing.Load() {
				return
			}
			continue
		}
		if err != nil || n == 0 {
			return
		}
		b := buf[:n]
		for len(b) >= meterNlmsgHdr {
			l := int(binary.LittleEndian.Uint32(b))
			if l < meterNlmsgHdr || l > len(b) {
				break
			}
			each(b[:l])
			b = b[min((l+3)&^3, len(b)):]
		}
	}
}

// fork keeps a child forked in the tree.
func (m *cpuMeter) fork(msg []byte) {
	ev := meterNlmsgHdr + meterCnMsg
	if len(msg) < ev+16+16 || binary.LittleEndian.Uint32(msg[ev:]) != procEventForkW {
		return
	}
	d := msg[ev+16:]
	parent, child := binary.LittleEndian.Uint32(d[4:]), binary.LittleEndian.Uint32(d[12:])
	m.mu.Lock()
	if m.tree[parent] {
		m.tree[child] = true
	}
	m.mu.Unlock()
}

// exit keeps a task's exit record (TASKSTATS_TYPE_AGGR_PID: one task's
// own times; the thread group's sum, AGGR_TGID, would count them twice).
func (m *cpuMeter) exit(msg []byte) {
	attrs := msg[meterNlmsgHdr+unix.GENL_HDRLEN:]
	for len(attrs) >= unix.SizeofNlAttr {
		l := int(binary.LittleEndian.Uint16(attrs))
		typ := binary.LittleEndian.Uint16(attrs[2:]) & 0x3fff
		if l < unix.SizeofNlAttr || l > len(attrs) {
			return
		}
		if typ == unix.TASKSTATS_TYPE_AGGR_PID {
			inner := attrs[unix.SizeofNlAttr:l]
			for len(inner) >= unix.SizeofNlAttr {
				il := int(binary.LittleEndian.Uint16(inner))
				if il < unix.SizeofNlAttr || il > len(inner) {
					return
				}
				if binary.LittleEndian.Uint16(inner[2:])&0x3fff == unix.TASKSTATS_TYPE_STATS && il-unix.SizeofNlAttr >= tsMinLen {
					s := inner[unix.SizeofNlAttr:il]
					comm := s[tsCommOff : tsCommOff+32]
					if i := bytes.IndexByte(comm, 0); i >= 0 {
						comm = comm[:i]
					}
					e := taskExit{
						tgid: binary.LittleEndian.Uint32(s[tsTgidOff:]),
						comm: string(comm),
						user: time.Duration(binary.LittleEndian.Uint64(s[tsUtimeOff:])) * time.Microsecond,
						syst: time.Duration(binary.LittleEndian.Uint64(s[tsStimeOff:])) * time.Microsecond,
					}
					m.mu.Lock()
					m.exits = append(m.exits, e)
					m.mu.Unlock()
				}
				inner = inner[min((il+3)&^3, len(inner)):]
			}
		}
		attrs = attrs[min((l+3)&^3, len(attrs)):]
	}
}

// cpuCount is what a tree spent, by program.
type cpuCount map[string]time.Duration

func (c cpuCount) total() time.Duration {
	var t time.Duration
	for _, d := range c {
		t += d
	}
	return t
}

// String lists the programs, the costliest first, each per n.
func (c cpuCount) per(n int) string {
	names := make([]string, 0, len(c))
	for k := range c {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return c[names[i]] > c[names[j]] })
	var out []string
	for _, k := range names {
		out = append(out, fmt.Sprintf("%s %.2f", k, float64(c[k].Microseconds())/1000/float64(n)))
	}
	return strings.Join(out, ", ")
}

// stop ends the count and says what the trees spent since the start, by
// program: the roots by their /proc times (their exited threads in them),
// every other process of the tree by its tasks' exit records. A process
// of the tree still running at the stop is not counted.
func (m *cpuMeter) stop() cpuCount {
	m.tb.Helper()
	out := cpuCount{}
	for pid, at := range m.roots {
		out[procComm(m.tb, pid)] += procCPU(m.tb, pid) - at
	}
	// Records of the last exits arrive after them: give the kernel's
	// queues a moment to be read.
	time.Sleep(50 * time.Millisecond)
	m.close()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lost > 0 {
		m.tb.Fatalf("the CPU meter lost %d datagrams: its count is short", m.lost)
	}
	for _, e := range m.exits {
		if _, root := m.roots[int(e.tgid)]; root || !m.tree[e.tgid] {
			continue
		}
		out[e.comm] += e.user + e.syst
	}
	return out
}

// procCPU is a process's user and system time so far (/proc/PID/stat,
// its own threads, living and exited; not its children's).
func procCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	ut, _ := strconv.ParseUint(f[11], 10, 64)       // field 14, utime
	st, _ := strconv.ParseUint(f[12], 10, 64)       // field 15, stime
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

func procComm(tb testing.TB, pid int) string {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		tb.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

func openProcConnector() (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_CONNECTOR)
	if err != nil {
		return -1, err
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20) != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 32<<20)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	msg := make([]byte, meterNlmsgHdr+meterCnMsg+4)
	le := binary.LittleEndian
	le.PutUint32(msg[0:], uint32(len(msg)))
	le.PutUint16(msg[4:], unix.NLMSG_DONE)
	le.PutUint32(msg[16:], 1) // CN_IDX_PROC
	le.PutUint32(msg[20:], 1) // CN_VAL_PROC
	le.PutUint16(msg[32:], 4)
	le.PutUint32(msg[36:], 1) // PROC_CN_MCAST_LISTEN
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// openTaskstats registers a listener of every CPU's task exits.
func openTaskstats() (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err != nil {
		return -1, err
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20) != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 32<<20)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	family, err := genlFamily(fd, unix.TASKSTATS_GENL_NAME)
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	cpus := fmt.Sprintf("0-%d", runtime.NumCPU()-1)
	if _, err := genlAsk(fd, family, unix.TASKSTATS_CMD_GET, unix.TASKSTATS_CMD_ATTR_REGISTER_CPUMASK, append([]byte(cpus), 0)); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func genlFamily(fd int, name string) (uint16, error) {
	reply, err := genlAsk(fd, unix.GENL_ID_CTRL, unix.CTRL_CMD_GETFAMILY, unix.CTRL_ATTR_FAMILY_NAME, append([]byte(name), 0))
	if err != nil {
		return 0, err
	}
	attrs := reply[meterNlmsgHdr+unix.GENL_HDRLEN:]
	for len(attrs) >= unix.SizeofNlAttr {
		l := int(binary.LittleEndian.Uint16(attrs))
		if l < unix.SizeofNlAttr || l > len(attrs) {
			break
		}
		if binary.LittleEndian.Uint16(attrs[2:]) == unix.CTRL_ATTR_FAMILY_ID && l >= unix.SizeofNlAttr+2 {
			return binary.LittleEndian.Uint16(attrs[unix.SizeofNlAttr:]), nil
		}
		attrs = attrs[min((l+3)&^3, len(attrs)):]
	}
	return 0, fmt.Errorf("no family id for %s", name)
}

// genlAsk sends one generic netlink request of one attribute, asking for
// an acknowledgement, and returns the first reply that is not an error.
func genlAsk(fd int, family uint16, cmd uint8, attr uint16, value []byte) ([]byte, error) {
	alen := unix.SizeofNlAttr + len(value)
	msg := make([]byte, meterNlmsgHdr+unix.GENL_HDRLEN+(alen+3)&^3)
	le := binary.LittleEndian
	le.PutUint32(msg[0:], uint32(len(msg)))
	le.PutUint16(msg[4:], family)
	le.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	le.PutUint32(msg[8:], 1)
	msg[meterNlmsgHdr] = cmd
	msg[meterNlmsgHdr+1] = 1
	a := msg[meterNlmsgHdr+unix.GENL_HDRLEN:]
	le.PutUint16(a[0:], uint16(alen))
	le.PutUint16(a[2:], attr)
	copy(a[unix.SizeofNlAttr:], value)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	buf := make([]byte, 64<<10)
	var reply []byte
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, err
		}
		b := buf[:n]
		for len(b) >= meterNlmsgHdr {
			l := int(le.Uint32(b))
			if l < meterNlmsgHdr || l > len(b) {
				return nil, errors.New("a short netlink reply")
			}
			if le.Uint16(b[4:]) == unix.NLMSG_ERROR {
				if code := int32(le.Uint32(b[meterNlmsgHdr:])); code != 0 {
					return nil, unix.Errno(-code)
				}
				return reply, nil // the acknowledgement ends the answer
			}
			if reply == nil {
				reply = append([]byte(nil), b[:l]...)
			}
			b = b[min((l+3)&^3, len(b)):]
		}
	}
}
