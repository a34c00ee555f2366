//go:build linux

package unixhost

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// helperEnv selects a helper program in TestMain; the other HELPER_*
// variables are its parameters.
const helperEnv = "OCX_UNIXHOST_HELPER"

// helperMain is the helper programs the tests run as separate processes.
func helperMain(mode string) int {
	code, _ := strconv.Atoi(os.Getenv("HELPER_CODE"))
	switch mode {
	case "exit":
		fmt.Printf("args %q\n", os.Args)
		return code
	case "serve":
		term := make(chan os.Signal, 1)
		if os.Getenv("HELPER_IGNORE_TERM") == "1" {
			signal.Ignore(syscall.SIGTERM)
		} else {
			signal.Notify(term, syscall.SIGTERM)
		}
		var held []*os.File
		if w := os.Getenv("HELPER_WAKE"); w != "" {
			f, err := os.OpenFile(w, os.O_RDONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				fmt.Println("wake:", err)
				return 3
			}
			held = append(held, f)
		}
		if w := os.Getenv("HELPER_WAKE_WRITE"); w != "" {
			f, err := os.OpenFile(w, os.O_WRONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				fmt.Println("wake for writing:", err)
				return 3
			}
			held = append(held, f)
		}
		ready("serving")
		<-term
		fmt.Println("got TERM")
		for _, f := range held {
			f.Close()
		}
		return code
	case "relisten":
		return relisten()
	case "report":
		return report(code)
	case "lock":
		l, err := AcquireLock(os.Getenv("HELPER_LOCK"))
		if err != nil {
			fmt.Println("lock:", err)
			return 3
		}
		if os.Getenv("HELPER_EXEC") == "1" {
			fd, err := l.KeepOnExec()
			if err != nil {
				fmt.Println("keep:", err)
				return 3
			}
			return reexec("adoptlock", "HELPER_LOCKFD="+strconv.Itoa(fd))
		}
		term := catchTerm()
		ready("locked")
		<-term
		return 0
	case "flock":
		// Holds a flock taken with TryLock on HELPER_LOCK (a file or a
		// directory), shared when HELPER_SHARED is 1.
		f, err := os.Open(os.Getenv("HELPER_LOCK"))
		if err != nil {
			fmt.Println("open:", err)
			return 3
		}
		mode := Exclusive
		if os.Getenv("HELPER_SHARED") == "1" {
			mode = Shared
		}
		if err := TryLock(f, mode); err != nil {
			fmt.Println("lock:", err)
			return 3
		}
		term := catchTerm()
		ready("flocked")
		<-term
		f.Close()
		return 0
	case "devnull":
		// Writes to standard output and error before and after
		// PointAtDevNull(1, 2).
		fmt.Println("before")
		if err := PointAtDevNull(1, 2); err != nil {
			fmt.Println("devnull:", err)
			return 3
		}
		fmt.Println("after")
		fmt.Fprintln(os.Stderr, "after")
		return 0
	case "adoptlock":
		fd, _ := strconv.Atoi(os.Getenv("HELPER_LOCKFD"))
		if _, err := AdoptLock(fd, os.Getenv("HELPER_LOCK")); err != nil {
			fmt.Println("adopt:", err)
			return 3
		}
		term := catchTerm()
		ready("adopted")
		<-term
		return 0
	case "probe":
		n, _ := strconv.Atoi(os.Getenv("HELPER_N"))
		for range n {
			if _, _, err := LockHolder(os.Getenv("HELPER_LOCK")); err != nil {
				fmt.Println("probe:", err)
				return 3
			}
		}
		return 0
	case "parent":
		return parent()
	case "watch":
		l, _ := host.NewLayout("/nonexistent-agents")
		pt, err := NewProcTable(ProcOptions{Layout: l})
		if err != nil {
			fmt.Println("table:", err)
			return 3
		}
		defer pt.Close()
		if err := pt.Watch(); err != nil {
			fmt.Println("watch refused:", err)
			return 0
		}
		fmt.Println("watch accepted")
		return 1
	case "reexec":
		return reexecLauncher()
	case "adopt":
		return adoptLauncher()
	case "pipe":
		root, err := OpenRoot(os.Getenv("HELPER_ROOT"))
		if err != nil {
			fmt.Println(err)
			return 3
		}
		r, err := OpenPipeReader(root, os.Getenv("HELPER_PIPE"))
		if err != nil {
			fmt.Println(err)
			return 3
		}
		rfd, wfd, err := r.KeepOnExec()
		if err != nil {
			fmt.Println(err)
			return 3
		}
		return reexec("adoptpipe", fmt.Sprintf("HELPER_FDS=%d,%d", rfd, wfd))
	case "adoptpipe":
		var rfd, wfd int
		fmt.Sscanf(os.Getenv("HELPER_FDS"), "%d,%d", &rfd, &wfd)
		r, err := AdoptPipeReader(rfd, wfd, os.Getenv("HELPER_PIPE"), nil)
		if err != nil {
			fmt.Println(err)
			return 3
		}
		term := catchTerm()
		ready("adopted")
		go func() {
			<-term
			r.Close()
		}()
		n := 0
		err = r.Run(func(line []byte) {
			n++
			fmt.Printf("%s\n", line)
		})
		fmt.Printf("lines %d err %v\n", n, err)
		return 0
	case "runlimited":
		return runLimitedHelper()
	case "runwatcher":
		return runWatcherHelper()
	case "forker":
		return forker()
	}
	fmt.Println("unknown helper", mode)
	return 2
}

// ready tells the test the helper is set up, through the named pipe it gave.
func ready(what string) {
	p := os.Getenv("HELPER_READY")
	if p == "" {
		return
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		fmt.Println("ready:", err)
		os.Exit(3)
	}
	fmt.Fprintf(f, "%s %d\n", what, os.Getpid())
	f.Close()
}

// relisten holds HELPER_WAKE open for reading, and on each USR1 changes
// how: first the same descriptor number becomes the pipe opened for
// writing, then the pipe is opened for reading again on another number;
// it says each step on HELPER_READY.
func relisten() int {
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	term := catchTerm()
	w := os.Getenv("HELPER_WAKE")
	rfd, err := syscall.Open(w, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		fmt.Println("wake:", err)
		return 3
	}
	ready(fmt.Sprintf("reading on %d", rfd))
	<-usr1
	wfd, err := syscall.Open(w, syscall.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		fmt.Println("wake for writing:", err)
		return 3
	}
	if err := syscall.Dup3(wfd, rfd, 0); err != nil {
		fmt.Println("dup3:", err)
		return 3
	}
	syscall.Close(wfd)
	ready(fmt.Sprintf("writing on %d", rfd))
	<-usr1
	again, err := syscall.Open(w, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		fmt.Println("wake:", err)
		return 3
	}
	ready(fmt.Sprintf("reading on %d", again))
	<-term
	return 0
}

// catchTerm catches TERM from now on: a helper calls it before it says
// it is ready, so that a TERM sent on its word never meets the default
// action, which would end it before its last line.
func catchTerm() <-chan os.Signal {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM)
	return c
}

// reexec execs the test binary again, in place, as another helper.
func reexec(mode string, env ...string) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Println(err)
		return 3
	}
	var keep []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, helperEnv+"=") {
			keep = append(keep, kv)
		}
	}
	env = append(append(keep, helperEnv+"="+mode), env...)
	err = syscall.Exec(exe, os.Args, env)
	fmt.Println("exec:", err)
	return 3
}

// report prints what the helper sees, for the sandbox tests.
func report(code int) int {
	wd, _ := os.Getwd()
	r := map[string]any{
		"pid": os.Getpid(), "home": os.Getenv("HOME"), "path": os.Getenv("PATH"), "wd": wd,
		"env": os.Environ(),
	}
	seen := map[string]bool{}
	for _, p := range strings.Split(os.Getenv("HELPER_PROBE"), ":") {
		if p == "" {
			continue
		}
		_, err := os.Lstat(p)
		seen[p] = err == nil
	}
	r["seen"] = seen
	tmp, _ := os.ReadDir("/tmp")
	r["tmp"] = len(tmp)
	procs := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			procs++
		}
	}
	r["procs"] = procs
	netdev, _ := os.ReadFile("/proc/net/dev")
	r["ifaces"] = strings.Count(string(netdev), ":")
	werr := os.WriteFile(filepath.Join(os.Getenv("HOME"), "written-inside"), []byte("hello\n"), 0o644)
	r["wrote"] = werr == nil
	b, _ := json.Marshal(r)
	fmt.Printf("REPORT %s\n", b)
	return code
}

// parent starts a `workspace` grandchild with os/exec and either waits for
// TERM (the grandchild's parent is then not the test) or exits at once (the
// grandchild becomes an orphan).
func parent() int {
	var argv []string
	json.Unmarshal([]byte(os.Getenv("HELPER_CHILD_ARGV")), &argv)
	exe, _ := os.Executable()
	cmd := &exec.Cmd{Path: exe, Args: argv, Env: append(os.Environ(), helperEnv+"=serve", "HELPER_READY=")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Println(err)
		return 3
	}
	term := catchTerm()
	ready(strconv.Itoa(cmd.Process.Pid))
	if os.Getenv("HELPER_ORPHAN") == "1" {
		return 0
	}
	<-term
	cmd.Process.Kill()
	cmd.Wait()
	return 0
}

// reexecLauncher spawns a child that exits at once, waits until it is a
// zombie, detaches and execs itself as "adopt", which must reap it.
func reexecLauncher() int {
	l, err := NewLauncher(LauncherOptions{})
	if err != nil {
		fmt.Println(err)
		return 3
	}
	// The child waits on a fifo until the launcher has detached: had it
	// exited before, the launcher would have reaped and reported it.
	fifo := filepath.Join(os.TempDir(), fmt.Sprintf("reexec-%d.fifo", os.Getpid()))
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		fmt.Println(err)
		return 3
	}
	defer os.Remove(fifo)
	id, err := l.Spawn(host.SpawnSpec{Path: "/bin/sh", Args: []string{"sh", "-c", "read x < \"$1\"; exit 5", "sh", fifo}, Dir: "/"}, func(e host.Exit) {
		fmt.Println("reported before the exec:", e)
	})
	if err != nil {
		fmt.Println(err)
		return 3
	}
	h, err := l.Detach()
	if err != nil {
		fmt.Println(err)
		return 3
	}
	// Now let the child end and become a zombie while nobody follows it.
	if err := os.WriteFile(fifo, []byte("go\n"), 0o600); err != nil {
		fmt.Println(err)
		return 3
	}
	// The child holds it open: its name goes before the exec, which runs
	// no deferred call.
	os.Remove(fifo)
	for range 1000 {
		st, err := ReadStat(id.PID)
		if err == nil && st.Zombie() {
			break
		}
		time.Sleep(time.Millisecond)
	}
	st, _ := ReadStat(id.PID)
	fmt.Printf("before exec: %s state %c\n", id, st.State)
	b, _ := json.Marshal(h)
	return reexec("adopt", "HELPER_HANDOFF="+string(b))
}

func adoptLauncher() int {
	var hs []ChildHandoff
	if err := json.Unmarshal([]byte(os.Getenv("HELPER_HANDOFF")), &hs); err != nil {
		fmt.Println(err)
		return 3
	}
	l, err := NewLauncher(LauncherOptions{})
	if err != nil {
		fmt.Println(err)
		return 3
	}
	defer l.Close()
	var wg sync.WaitGroup
	for _, h := range hs {
		wg.Add(1)
		if err := l.Adopt(h, func(e host.Exit) {
			out, status := e.Outcome()
			fmt.Printf("ADOPTED %s %s %d\n", e.ID, out, status)
			wg.Done()
		}); err != nil {
			fmt.Println(err)
			return 3
		}
	}
	wg.Wait()
	st, err := ReadStat(hs[0].ID.PID)
	fmt.Printf("after reaping: stat err %v state %c\n", err, st.State)
	return 0
}

// --- helpers for the tests themselves ---

// testExe is the test binary, which runs the helpers.
func testExe(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// readyPipe makes a named pipe the helpers announce themselves on, and
// returns its path and the lines read from it.
func readyPipe(t testing.TB, dir string) (string, <-chan string) {
	t.Helper()
	root, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	p := filepath.Join(dir, "ready")
	if err := root.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := OpenPipeReader(root, p)
	if err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(func(l []byte) { lines <- string(l) })
	}()
	t.Cleanup(func() {
		r.Close()
		<-done
	})
	return p, lines
}

// await returns the next line, failing the test after a generous bound.
func await(t testing.TB, lines <-chan string, what string) string {
	t.Helper()
	select {
	case l := <-lines:
		return l
	case <-time.After(60 * time.Second):
		t.Fatalf("no %s after 60s", what)
		return ""
	}
}

// eventually polls cond until it holds, failing the test after a generous
// bound; it asserts what happens, never how fast.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within 60s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// exits collects the exits a launcher reports.
type exits struct {
	mu sync.Mutex
	m  map[protocol.ProcID][]host.Exit
	c  chan host.Exit
}

func newExits() *exits {
	return &exits{m: map[protocol.ProcID][]host.Exit{}, c: make(chan host.Exit, 1)}
}

func (x *exits) on(e host.Exit) {
	x.mu.Lock()
	x.m[e.ID] = append(x.m[e.ID], e)
	x.mu.Unlock()
	select {
	case x.c <- e:
	default:
	}
}

// count returns how many exits were reported for id.
func (x *exits) count(id protocol.ProcID) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.m[id])
}

// wait returns the exit of id.
func (x *exits) wait(t testing.TB, id protocol.ProcID) host.Exit {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		x.mu.Lock()
		got := x.m[id]
		x.mu.Unlock()
		if len(got) > 0 {
			return got[0]
		}
		select {
		case <-x.c:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("no exit for %s within 30s", id)
		}
	}
}

// newLauncher makes a launcher closed at the end of the test.
func newLauncher(t testing.TB, root *Root) *Launcher {
	t.Helper()
	l, err := NewLauncher(LauncherOptions{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// killReap ends a child of the test by PID and reaps it.
func killReap(pid int) {
	unix.Kill(pid, unix.SIGKILL)
	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(pid, &ws, 0, nil); err != unix.EINTR {
			return
		}
	}
}

// readFile reads a file, failing the test if it cannot.
func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// agentsRoot makes an agents root with one workspace and its wake pipe, and
// returns the root, its layout and the workspace.
func agentsRoot(t testing.TB, k messages.WorkspaceKey) (*Root, host.Layout, host.Workspace) {
	t.Helper()
	dir := t.TempDir()
	root, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	l, err := host.NewLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.Workspace(k)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{w.ListeningDir, w.Session} {
		if err := root.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := root.Mkfifo(w.Wake, 0o600); err != nil {
		t.Fatal(err)
	}
	return root, l, w
}

// forker is issue 39's look-alike: it says it is ready, then execs bash
// as `bwrap` running a loop that forks 20 times a second, with
// HELPER_BINDS --bind pairs each naming a made-up workspace of the agents
// root HELPER_ROOT (AGENTS/uN/projects/p).
func forker() int {
	n, _ := strconv.Atoi(os.Getenv("HELPER_BINDS"))
	root := os.Getenv("HELPER_ROOT")
	argv := []string{"bwrap", "-c", "while :; do sleep 0.05 & wait; done", "x"}
	for i := range n {
		argv = append(argv, "--bind", root+"/u"+strconv.Itoa(i)+"/projects/p", "/x")
	}
	ready("forking")
	err := syscall.Exec("/bin/bash", argv, []string{"PATH=/usr/bin:/bin"})
	fmt.Println("exec bash:", err)
	return 3
}
