//go:build linux

package unixhost

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// startSession starts the test binary as a `workspace` session with os/exec:
// argv names the workspace, env sets the helper up. It waits until the
// session is ready and ends it when the test ends.
func startSession(t *testing.T, dir string, argv []string, env ...string) *exec.Cmd {
	t.Helper()
	readyP, lines := readyPipe(t, t.TempDir())
	cmd := &exec.Cmd{Path: testExe(t), Args: argv, Env: append(append(os.Environ(), helperEnv+"=serve", "HELPER_READY="+readyP), env...)}
	out, _ := os.OpenFile(filepath.Join(dir, "session-out"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	await(t, lines, "session ready")
	return cmd
}

func procByPID(tab host.Table, pid int) (host.Process, bool) {
	for _, p := range tab.Procs {
		if p.ID.PID == pid {
			return p, true
		}
	}
	return host.Process{}, false
}

func TestScan(t *testing.T) {
	k := messages.WorkspaceKey{Login: "alice", Project: "demo"}
	root, l, w := agentsRoot(t, k)
	_ = root
	dir := t.TempDir()
	self := os.Getpid()
	wsArgv := func(verb, key string, rest ...string) []string {
		return append([]string{"/opt/ocx/workspace", verb, key}, rest...)
	}
	// A terminal session that listens, one that only writes to its wake
	// pipe, one under a relative root, one of another root, and one that is
	// not the workspace program at all.
	listening := startSession(t, dir, wsArgv("run", "alice/demo", "--root", l.Root()), "HELPER_WAKE="+w.Wake)
	// The wake pipe needs a reader for a writer to open it.
	holder, err := OpenPipeReader(root, w.Wake)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	writing := startSession(t, dir, wsArgv("start", "alice/demo", "--root="+l.Root()), "HELPER_WAKE_WRITE="+w.Wake)
	relative := startSession(t, dir, wsArgv("run", "bob/demo", "--root", "agents"))
	elsewhere := startSession(t, dir, wsArgv("run", "alice/demo", "--root", "/srv/other-agents"))
	notours := startSession(t, dir, []string{"/opt/ocx/workspaces", "run", "alice/demo", "--root", l.Root()})
	// A session the daemon started (this process plays the daemon here).
	launcher := newLauncher(t, root)
	x := newExits()
	readyP, lines := readyPipe(t, t.TempDir())
	served, err := launcher.Spawn(host.SpawnSpec{Path: testExe(t), Args: wsArgv("serve", "carol/demo", "--root", l.Root(), "--launch", launchHash),
		Env: []string{helperEnv + "=serve", "HELPER_READY=" + readyP}, Dir: "/"}, x.on)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		launcher.Signal(served, host.SIGKILL)
		x.wait(t, served)
	}()
	await(t, lines, "served session")

	// This process is every session's parent; as a daemon it would make
	// every one "daemon", so the daemon is first some other process.
	pt, err := NewProcTable(ProcOptions{Layout: l})
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	tab, err := pt.Scan()
	if err != nil {
		t.Fatal(err)
	}
	p, ok := procByPID(tab, listening.Process.Pid)
	if !ok {
		t.Fatalf("the listening session is not in the table: %+v", tab.Procs)
	}
	st, _ := ReadStat(listening.Process.Pid)
	if p.ID.Start != st.Start || p.PPID != self || p.Listening != host.Yes || p.Origin != messages.OriginTerminal ||
		p.Names[0].Verb != host.VerbRun || p.Release != filepath.Dir(testExe(t)) || p.Exe != testExe(t) || p.Partial != "" {
		t.Errorf("listening session: %+v", p)
	}
	if p, ok := procByPID(tab, writing.Process.Pid); !ok || p.Listening != host.No || p.Names[0].Verb != host.VerbStart {
		t.Errorf("writing session: %+v %v", p, ok)
	}
	if p, ok := procByPID(tab, relative.Process.Pid); !ok || !p.Names[0].Unsure {
		t.Errorf("relative-root session: %+v %v", p, ok)
	}
	for _, c := range []*exec.Cmd{elsewhere, notours} {
		if _, ok := procByPID(tab, c.Process.Pid); ok {
			t.Errorf("pid %d does not name a workspace of this root, but is in the table", c.Process.Pid)
		}
	}
	if p, ok := procByPID(tab, served.PID); !ok || p.Names[0].Launch != launchHash || p.Listening != host.No {
		t.Errorf("served session: %+v %v", p, ok)
	}
	asDaemon, err := NewProcTable(ProcOptions{Layout: l, Daemon: self})
	if err != nil {
		t.Fatal(err)
	}
	defer asDaemon.Close()
	tab2, err := asDaemon.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := procByPID(tab2, served.PID); !ok || p.Origin != messages.OriginDaemon {
		t.Errorf("served session with this process as the daemon: %+v %v", p, ok)
	}
	for key, want := range map[string]host.Evidence{"alice/demo": host.Yes, "carol/demo": host.Yes, "bob/demo": host.Unknown, "dave/demo": host.No} {
		kk, _ := messages.ParseWorkspaceKey(key)
		v, err := pt.Naming(kk)
		if err != nil || v.Named != want {
			t.Errorf("Naming(%s) = %s %v, want %v", key, v, err, want)
		}
	}
	v, _ := pt.Naming(k)
	if !slices.Contains(v.By, protocol.ProcID{PID: writing.Process.Pid, Start: mustStart(t, writing.Process.Pid)}) || len(v.By) != 2 {
		t.Errorf("Naming(alice/demo).By = %v", v.By)
	}
}

func mustStart(t *testing.T, pid int) uint64 {
	t.Helper()
	st, err := ReadStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	return st.Start
}

// A session whose starter exited is an orphan: its parent is a subreaper
// (this test process) or PID 1.
func TestScanOrphan(t *testing.T) {
	_, l, _ := agentsRoot(t, messages.WorkspaceKey{Login: "alice", Project: "demo"})
	dir := t.TempDir()
	readyP, lines := readyPipe(t, dir)
	argv := fmt.Sprintf(`["/opt/workspace","run","alice/demo","--root",%q]`, l.Root())
	par := startHelper(t, "parent", filepath.Join(dir, "out"), "HELPER_CHILD_ARGV="+argv, "HELPER_READY="+readyP, "HELPER_ORPHAN=1")
	pid, _ := strconv.Atoi(strings.Fields(await(t, lines, "grandchild"))[0])
	defer killReap(pid)
	par.Wait()
	self := os.Getpid()
	eventually(t, "the orphan reparented", func() bool {
		st, err := ReadStat(pid)
		return err == nil && st.PPID == self
	})
	pt, err := NewProcTable(ProcOptions{Layout: l, Subreaper: func(p int) bool { return p == self }})
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	tab, err := pt.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := procByPID(tab, pid); !ok || p.Origin != messages.OriginOrphan {
		t.Fatalf("orphan: %+v %v", p, ok)
	}
}

// Once it follows the kernel's events, the table answers from its index: a
// session that has run any of its program is named, one reaped a moment ago
// is not, and an index scan gives what a full scan gives. (The kernel sends
// the exec event just after the exec's point of no return, which is when
// Spawn returns: the answer may lag Spawn by those microseconds, never a
// session that runs.)
func TestWatchIndex(t *testing.T) {
	k := messages.WorkspaceKey{Login: "alice", Project: "demo"}
	root, l, _ := agentsRoot(t, k)
	pt, err := NewProcTable(ProcOptions{Layout: l, Daemon: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	if err := pt.Watch(); err != nil {
		t.Fatal(err)
	}
	if v, err := pt.Naming(k); err != nil || v.Named != host.No {
		t.Fatalf("Naming before = %s %v", v, err)
	}
	unwatched, err := NewProcTable(ProcOptions{Layout: l, Daemon: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	defer unwatched.Close()
	launcher := newLauncher(t, root)
	x := newExits()
	readyP, lines := readyPipe(t, t.TempDir())
	for i := range 6 {
		id, err := launcher.Spawn(host.SpawnSpec{Path: testExe(t), Args: []string{"workspace", "serve", "alice/demo", "--root", l.Root()},
			Env: []string{helperEnv + "=serve", "HELPER_READY=" + readyP}, Dir: "/"}, x.on)
		if err != nil {
			t.Fatal(err)
		}
		await(t, lines, "session ready")
		v, err := pt.Naming(k)
		if err != nil || v.Named != host.Yes || !slices.Contains(v.By, id) {
			t.Fatalf("round %d: Naming right after Spawn = %s %v", i, v, err)
		}
		full, err := unwatched.Scan()
		if err != nil {
			t.Fatal(err)
		}
		indexed, err := pt.Scan()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ids(full), ids(indexed)) {
			t.Fatalf("full scan %v, index scan %v", ids(full), ids(indexed))
		}
		// Each process as a full scan reads it, though the index's scan
		// takes its command line and namespace from what its exec left.
		byPID := func(tab host.Table) []host.Process {
			return slices.SortedFunc(slices.Values(tab.Procs), func(a, b host.Process) int { return a.ID.PID - b.ID.PID })
		}
		if f, ix := byPID(full), byPID(indexed); !reflect.DeepEqual(f, ix) {
			t.Fatalf("round %d: the full scan read\n%+v\nthe index's scan\n%+v", i, f, ix)
		}
		if err := launcher.Signal(id, host.SIGKILL); err != nil {
			t.Fatal(err)
		}
		x.wait(t, id)
		// Its exit was queued before it could be reaped.
		if v, err := pt.Naming(k); err != nil || v.Named != host.No {
			t.Fatalf("round %d: Naming right after the exit = %s %v", i, v, err)
		}
	}
	if n := pt.Rescans(); n != 1 {
		t.Fatalf("%d full scans, want 1", n)
	}
}

func ids(t host.Table) []protocol.ProcID {
	var out []protocol.ProcID
	for _, p := range t.Procs {
		out = append(out, p.ID)
	}
	slices.SortFunc(out, func(a, b protocol.ProcID) int { return a.PID - b.PID })
	return out
}

// When events are lost (the socket overflowed), the index rebuilds itself
// with a full scan before it answers.
func TestWatchIndexOverflow(t *testing.T) {
	k := messages.WorkspaceKey{Login: "alice", Project: "demo"}
	root, l, _ := agentsRoot(t, k)
	pt, err := NewProcTable(ProcOptions{Layout: l})
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	if err := pt.Watch(); err != nil {
		t.Fatal(err)
	}
	// The first answer builds the index with its first full scan.
	if v, err := pt.Naming(k); err != nil || v.Named != host.No || pt.Rescans() != 1 {
		t.Fatalf("the first answer = %s %v after %d full scans, want No after 1", v, err, pt.Rescans())
	}
	if err := unix.SetsockoptInt(pt.ix.sock, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4096); err != nil {
		t.Fatal(err)
	}
	launcher := newLauncher(t, root)
	x := newExits()
	// Hold the index so that nothing drains the socket, and make far more
	// events than a tiny buffer holds; the session comes last.
	pt.ix.mu.Lock()
	for range 40 {
		if err := exec.Command("/bin/true").Run(); err != nil {
			pt.ix.mu.Unlock()
			t.Fatal(err)
		}
	}
	id, err := launcher.Spawn(host.SpawnSpec{Path: testExe(t), Args: []string{"workspace", "serve", "alice/demo", "--root", l.Root()},
		Env: []string{helperEnv + "=serve"}, Dir: "/"}, x.on)
	pt.ix.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		launcher.Signal(id, host.SIGKILL)
		x.wait(t, id)
	}()
	// ForkExec returns once the exec has closed the child's close-on-exec
	// descriptors, a moment before the kernel sets up its command line and
	// reports the exec: an answer in that moment may not see it yet. So the
	// answer is awaited; an index that lost the exec and never rescanned
	// would answer No for good.
	var v host.Verdict
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err = pt.Naming(k)
		if err == nil && v.Named == host.Yes && slices.Contains(v.By, id) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Naming after an overflow = %s %v (%d full scans)", v, err, pt.Rescans())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := pt.Rescans(); n < 2 {
		t.Fatalf("%d full scans: the overflow went unnoticed", n)
	}
}

func TestParseProcEvents(t *testing.T) {
	le := binary.LittleEndian
	msg := func(what uint32, data ...uint32) []byte {
		b := make([]byte, eventData+24)
		le.PutUint32(b, uint32(len(b)))
		le.PutUint32(b[nlmsgHdrLen:], cnIdxProc)
		le.PutUint32(b[nlmsgHdrLen+4:], cnValProc)
		le.PutUint32(b[nlmsgHdrLen+cnMsgLen:], what)
		for i, d := range data {
			le.PutUint32(b[eventData+4*i:], d)
		}
		return b
	}
	// One datagram holding a fork, an exec, an exit and a message of
	// another connector, then a truncated message.
	other := msg(procEventExec, 1, 1)
	le.PutUint32(other[nlmsgHdrLen:], 7)
	b := append(append(append(append(msg(procEventFork, 8123, 8120, 8124, 8124), msg(procEventExec, 8124, 8124)...),
		msg(procEventExit, 8124, 8124, 0, 17, 8123, 8120)...), other...), msg(procEventExec, 5, 5)[:30]...)
	got := parseProcEvents(b)
	want := []procEvent{
		{what: procEventFork, a: 8123, b: 8120, c: 8124, d: 8124},
		{what: procEventExec, a: 8124, b: 8124},
		{what: procEventExit, a: 8124, b: 8124, c: 0, d: 17},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parseProcEvents = %+v", got)
	}
	if parseProcEvents(nil) != nil || parseProcEvents([]byte{1, 2, 3}) != nil {
		t.Fatal("parsed garbage")
	}
}

func TestFdinfoFlags(t *testing.T) {
	for in, want := range map[string]int{
		"pos:\t0\nflags:\t0104000\nmnt_id:\t25\nino:\t1234\n": 0o104000,
		"pos:\t0\nflags:\t02000001\n":                         0o2000001,
	} {
		if got, ok := fdinfoFlags([]byte(in)); !ok || got != want {
			t.Errorf("fdinfoFlags(%q) = %o %v", in, got, ok)
		}
	}
	if _, ok := fdinfoFlags([]byte("pos:\t0\n")); ok {
		t.Error("no flags line, yet ok")
	}
}

// In a PID namespace of its own the kernel's events carry PIDs the process
// does not see (or none at all, on kernels that send nothing outside the
// first namespaces). Watch must notice and refuse, so the table keeps
// scanning /proc.
func TestWatchRefusedWithoutEvents(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatal("unshare (util-linux) is needed for this test")
	}
	cmd := exec.Command(unshare, "--user", "--map-root-user", "--pid", "--fork", "--mount-proc", testExe(t))
	cmd.Env = append(os.Environ(), helperEnv+"=watch")
	out, err := cmd.CombinedOutput()
	// How the kernel refuses depends on the kernel: older ones let the
	// socket bind and send nothing ("no event arrived"); newer ones refuse
	// the bind outside the first user namespace ("bind: operation not
	// permitted", 6.18). Either way Watch refuses.
	refused := strings.Contains(string(out), "watch refused: unixhost: proc connector: no event arrived") ||
		strings.Contains(string(out), "watch refused: unixhost: proc connector: bind: operation not permitted")
	if err != nil || !refused {
		t.Fatalf("in a PID namespace: %v: %s", err, out)
	}
}

// A session whose command line was read, and which ends before the rest of
// it is read, is unknown, never gone: the refusal check cannot say "no".
func TestScanVanishedMidScanIsUnknown(t *testing.T) {
	k := messages.WorkspaceKey{Login: "alice", Project: "demo"}
	_, l, _ := agentsRoot(t, k)
	cmd := startSession(t, t.TempDir(), []string{"workspace", "serve", "alice/demo", "--root", l.Root()})
	pt, err := NewProcTable(ProcOptions{Layout: l})
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	pt.betweenReads = func() {
		cmd.Process.Kill()
		cmd.Wait()
	}
	tab, err := pt.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.Procs) != 0 || len(tab.Unreadable) != 1 || tab.Unreadable[0].PID != cmd.Process.Pid ||
		!strings.Contains(tab.Unreadable[0].Err, "alice/demo") {
		t.Fatalf("table %+v", tab)
	}
	if v := tab.Naming(k); v.Named != host.Unknown {
		t.Fatalf("Naming = %s", v)
	}
	// The next scan sees it gone before reading anything: then it names nothing.
	pt.betweenReads = nil
	if v, err := pt.Naming(k); err != nil || v.Named != host.No {
		t.Fatalf("Naming on the next scan = %s %v", v, err)
	}
}

// TestExecutable: the table reads which program a process runs and which
// release that is: the directory under releases/ for a program there, the
// program's directory otherwise.
func TestExecutable(t *testing.T) {
	l, err := host.NewLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	self, _ = filepath.EvalSymlinks(self)
	relRoot := filepath.Dir(filepath.Dir(filepath.Dir(self)))
	pt, err := NewProcTable(ProcOptions{Layout: l, ReleaseRoot: relRoot})
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	exe, rel, err := pt.Executable(os.Getpid())
	if err != nil || exe != self || rel != filepath.Dir(self) {
		t.Fatalf("Executable(self) = %q, %q, %v; want %q in %q", exe, rel, err, self, filepath.Dir(self))
	}
	if _, _, err := pt.Executable(0); err == nil {
		t.Fatal("pid 0 has an executable")
	}
}

// TestScanReadsTheWakeDescriptorAgain: a scan looks first at the
// descriptor through which a session held its wake pipe open for reading
// the scan before, and says what it reads now: the same number reopened
// for writing is not listening, and a new one for reading is found
// wherever it is.
func TestScanReadsTheWakeDescriptorAgain(t *testing.T) {
	dir := t.TempDir()
	l, _ := host.NewLayout(dir)
	root, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	w, err := l.Workspace(messages.WorkspaceKey{Login: "alice", Project: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	if err := root.MkdirAll(filepath.Dir(w.Wake), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := root.Mkfifo(w.Wake, 0o600); err != nil {
		t.Fatal(err)
	}
	// A reader of its own, so that the session can open the pipe for
	// writing.
	holder, err := OpenPipeReader(root, w.Wake)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	readyP, lines := readyPipe(t, t.TempDir())
	cmd := &exec.Cmd{Path: testExe(t), Args: []string{"/opt/ocx/workspace", "run", "alice/demo", "--root", l.Root()},
		Env: append(os.Environ(), helperEnv+"=relisten", "HELPER_READY="+readyP, "HELPER_WAKE="+w.Wake)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	pt, err := NewProcTable(ProcOptions{Layout: l})
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	listening := func() host.Evidence {
		t.Helper()
		tab, err := pt.Scan()
		if err != nil {
			t.Fatal(err)
		}
		p, ok := procByPID(tab, cmd.Process.Pid)
		if !ok {
			t.Fatalf("the session is not in the table: %+v", tab.Procs)
		}
		return p.Listening
	}
	first := await(t, lines, "the session reading its wake pipe")
	for range 2 { // the second scan starts from the first one's descriptor
		if got := listening(); got != host.Yes {
			t.Fatalf("%s: listening %v, want yes", first, got)
		}
	}
	cmd.Process.Signal(syscall.SIGUSR1)
	second := await(t, lines, "the session writing to its wake pipe")
	if got := listening(); got != host.No {
		t.Fatalf("after %q (was %q): listening %v, want no", second, first, got)
	}
	cmd.Process.Signal(syscall.SIGUSR1)
	third := await(t, lines, "the session reading its wake pipe again")
	if third == first {
		t.Fatalf("the session reads on the same descriptor again (%q): the test would not move it", third)
	}
	if got := listening(); got != host.Yes {
		t.Fatalf("after %q: listening %v, want yes", third, got)
	}
}
