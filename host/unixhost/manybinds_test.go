//go:build linux

package unixhost

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
)

// forkingLookAlike starts issue 39's look-alike in alice's sandbox: bash
// as `bwrap`, forking 20 times a second, its command line binding binds
// made-up workspaces of the agents root (AGENTS/uN/projects/p). It
// returns once the helper is about to exec bash, and a stop that kills
// the sandbox and reaps its bwrap (the cleanup calls it too).
func forkingLookAlike(t testing.TB, s sandboxSetup, binds int) (stop func()) {
	t.Helper()
	readyP, lines := readyPipe(t, t.TempDir())
	l := newLauncher(t, s.root)
	x := newExits()
	spec := s.spec(false, "forker", "HELPER_READY="+readyP, "HELPER_ROOT="+s.layout.Root(), "HELPER_BINDS="+strconv.Itoa(binds))
	spec.Sandbox.Sandbox.ReadWrite = append(spec.Sandbox.Sandbox.ReadWrite, filepath.Dir(readyP))
	id, err := l.Spawn(spec, x.on)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			l.Signal(id, host.SIGKILL)
			x.wait(t, id)
		})
	}
	t.Cleanup(stop)
	await(t, lines, "the look-alike to start")
	return stop
}

// manyBindsLookAlike awaits the look-alike in pt's table: the one whose
// command line was cut, claiming many workspaces.
func manyBindsLookAlike(t testing.TB, pt *ProcTable) host.LookAlike {
	t.Helper()
	var found host.LookAlike
	eventually(t, "the look-alike with many binds in the table", func() bool {
		tab, err := pt.Scan()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range tab.LookAlikes {
			if l.Cut && len(l.Names) > 100 {
				found = l
				return true
			}
		}
		return false
	})
	return found
}

// asks times the refusal check of k every 25 ms for d, and a scan every
// fourth time, each answered from the index.
func asks(t testing.TB, pt *ProcTable, k messages.WorkspaceKey, d time.Duration) (naming, scan []time.Duration) {
	t.Helper()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
		t0 := time.Now()
		v, err := pt.Naming(k)
		naming = append(naming, time.Since(t0))
		if err != nil || v.Named != host.No {
			t.Fatalf("Naming(%s) = %s, %v; want no process", k, v, err)
		}
		if len(naming)%4 == 1 {
			t0 = time.Now()
			if _, err := pt.Scan(); err != nil {
				t.Fatal(err)
			}
			scan = append(scan, time.Since(t0))
		}
	}
	return naming, scan
}

// quantile is the q-th quantile of ds (0.5 the median).
func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// Issue 39: a process in alice's sandbox whose command line names 20,000
// made-up workspaces, forking 20 times a second, stalls nothing. Its
// command line is read to host.MaxCmdline, it is one look-alike claiming
// the workspaces of the part read, each of its forks is read without the
// index's lock (and without its command line), and the refusal check of
// a workspace it claims answers "no process" as fast as without it.
func TestLookAlikeWithManyBinds(t *testing.T) {
	s := newSandboxSetup(t)
	pt, err := NewProcTable(ProcOptions{Layout: s.layout})
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	var forks, lookAlikeForks atomic.Int64
	pt.examined = func(pid int, found examination) {
		if found.keep != nil && found.keep.cut {
			lookAlikeForks.Add(1)
		}
		forks.Add(1)
	}
	if err := pt.Watch(); err != nil {
		t.Skipf("no process events here: %v", err)
	}
	claimed := messages.WorkspaceKey{Login: "u5", Project: "p"}

	// Without it: the same loop in the same sandbox, naming nothing.
	stop := forkingLookAlike(t, s, 0)
	naming0, scan0 := asks(t, pt, claimed, 2*time.Second)
	stop()

	forkingLookAlike(t, s, 20000)
	l := manyBindsLookAlike(t, pt)
	if !l.Claims(claimed) || len(l.Names) > host.MaxCmdline/20 || !strings.Contains(l.Why, "workspaces, and each process of a session names its own alone") {
		t.Errorf("the look-alike claims %d workspaces (%s among them: %v), why %.300q", len(l.Names), claimed, l.Claims(claimed), l.Why)
	}
	if w := l.String(); len(w) > 600 || !strings.Contains(w, "u0/p, u1/p, u2/p, "+strconv.Itoa(len(l.Names)-3)+" more") {
		t.Errorf("its words (%d bytes): %.400s", len(w), w)
	}
	before := lookAlikeForks.Load()
	naming1, scan1 := asks(t, pt, claimed, 2*time.Second)
	if n := lookAlikeForks.Load() - before; n < 10 {
		t.Errorf("the look-alike forked %d times in 2 s; want about 40", n)
	}
	v, err := pt.Naming(claimed)
	if err != nil || v.Named != host.No || len(v.LookAlikes) == 0 || len(v.String()) > 2000 {
		t.Errorf("Naming(%s) beside the look-alike: %.600s (%d bytes), %v", claimed, v, len(v.String()), err)
	}
	if v, err := pt.Naming(s.ws.Key); err != nil || v.Named != host.Yes {
		t.Errorf("Naming(alice) = %s, %v; want her sandbox", v, err)
	}
	t.Logf("%d processes read for events, %d of them the look-alike's forks", forks.Load(), lookAlikeForks.Load())
	t.Logf("the refusal check without the look-alike: median %v, max %v; with it: median %v, max %v",
		quantile(naming0, 0.5), quantile(naming0, 1), quantile(naming1, 0.5), quantile(naming1, 1))
	t.Logf("the scan without it: median %v, max %v; with it: median %v, max %v",
		quantile(scan0, 0.5), quantile(scan0, 1), quantile(scan1, 0.5), quantile(scan1, 1))
	// Without the bound, one read of each fork took seconds under the
	// lock (2.4 s at 20,000 binds), and every answer waited for it. A
	// shared, loaded machine may slow any answer, never by that much.
	for what, ds := range map[string][]time.Duration{"refusal check": naming1, "scan": scan1} {
		if m := quantile(ds, 0.5); m > 100*time.Millisecond {
			t.Errorf("the %s beside the look-alike takes %v (median)", what, m)
		}
		if m := quantile(ds, 1); m > time.Second {
			t.Errorf("a %s beside the look-alike took %v", what, m)
		}
	}

	// A full scan reads its command line to the bound too.
	full, err := NewProcTable(ProcOptions{Layout: s.layout})
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	t0 := time.Now()
	tab, err := full.Scan()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a full scan with it: %v", time.Since(t0))
	if v := tab.Naming(claimed); v.Named != host.No {
		t.Errorf("a full scan: %s", v)
	}
	if i := slices.IndexFunc(tab.LookAlikes, func(l host.LookAlike) bool { return l.Cut }); i < 0 || len(tab.LookAlikes[i].Names) != len(l.Names) {
		t.Errorf("a full scan's look-alikes: %d", len(tab.LookAlikes))
	}
}

// The index reads a process for an event without its lock, and a read
// that a later event about the same PID overtook is dropped, never
// applied over it: a session read while it ran, and ended before the
// read was applied, is not kept as running (D78).
func TestIndexReadsOutsideItsLock(t *testing.T) {
	l, err := host.NewLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	k := messages.WorkspaceKey{Login: "alice", Project: "demo"}
	pt, err := NewProcTable(ProcOptions{Layout: l})
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	reached, release := make(chan int, 1), make(chan struct{})
	pt.examined = func(pid int, found examination) {
		if found.keep != nil && found.keep.names[0].Key == k {
			reached <- pid
			<-release
		}
	}
	if err := pt.Watch(); err != nil {
		t.Skipf("no process events here: %v", err)
	}
	if v, err := pt.Naming(k); err != nil || v.Named != host.No {
		t.Fatalf("Naming = %s, %v", v, err)
	}
	null, err := syscall.Open("/dev/null", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(null)
	pid, err := syscall.ForkExec(testExe(t), []string{"workspace", "serve", k.String(), "--root", l.Root()},
		&syscall.ProcAttr{Dir: "/", Env: []string{helperEnv + "=serve"}, Files: []uintptr{uintptr(null), uintptr(null), uintptr(null)}})
	if err != nil {
		t.Fatal(err)
	}
	ended := false
	defer func() {
		if !ended {
			killReap(pid)
		}
	}()
	// The index's watcher read the session as it runs, and waits to
	// apply it: its lock is free meanwhile.
	if got := <-reached; got != pid {
		t.Fatalf("read %d, want %d", got, pid)
	}
	rescans := make(chan int)
	go func() { rescans <- pt.Rescans() }()
	select {
	case <-rescans:
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("the index's lock is held while a process is read")
	}
	// The session ends; an answer takes its exit and waits for the read
	// taken before it.
	killReap(pid)
	ended = true
	answer := make(chan host.Verdict, 1)
	go func() {
		v, err := pt.Naming(k)
		if err != nil {
			t.Error(err)
		}
		answer <- v
	}()
	var read uint64
	pt.ix.mu.Lock()
	for _, b := range pt.ix.open {
		for _, r := range b.reads {
			if r.pid == pid {
				read = r.ticket
			}
		}
	}
	pt.ix.mu.Unlock()
	eventually(t, "the answer to take the session's exit", func() bool {
		pt.ix.mu.Lock()
		defer pt.ix.mu.Unlock()
		p := pt.ix.pending[pid]
		return p != nil && p.ticket != read
	})
	close(release)
	if v := <-answer; v.Named != host.No {
		t.Errorf("after the session ended: %s; want no process (the read it overtook dropped)", v)
	}
	pt.ix.mu.Lock()
	_, kept := pt.ix.named[pid]
	left := len(pt.ix.pending)
	pt.ix.mu.Unlock()
	if kept || left != 0 {
		t.Errorf("the index keeps %d: %v; %d reads pending", pid, kept, left)
	}
}
