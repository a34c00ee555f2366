package runhold

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host/keptlog"
	"github.com/ocx-go/ocx/host/unixhost"
)

// bound is how long the tests wait for anything; they assert what
// happens, never how fast.
const bound = 60 * time.Second

// run is one test's holder files.
type run struct {
	dir  string
	opts Options
}

func newRun(t *testing.T, argv ...string) run {
	t.Helper()
	// A socket's path is short: t.TempDir() under /tmp.
	dir, err := os.MkdirTemp("", "rh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return run{dir: dir, opts: Options{
		Socket: filepath.Join(dir, "t.sock"), Status: filepath.Join(dir, "status.json"),
		StdoutLog: filepath.Join(dir, "stdout.log"), StderrLog: filepath.Join(dir, "stderr.log"),
		KeepStdout: defaultKeep, KeepStderr: defaultKeep, Terminal: true, Argv: argv,
	}}
}

// start starts a detached holder (the test binary as `ocx run hold`) and
// ends it by PID at the end of the test if it is still there.
func (r run) start(t *testing.T) *os.Process {
	t.Helper()
	p, err := Start([]string{os.Args[0]}, r.opts, holderEnv(), filepath.Join(r.dir, "holder.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		killReap(p.Pid)
		if t.Failed() || os.Getenv("OCX_RUNHOLD_LOG") != "" {
			b, _ := os.ReadFile(filepath.Join(r.dir, "holder.log"))
			t.Logf("holder log:\n%s", b)
		}
	})
	return p
}

// exitOf waits for a holder, a child of the test's (or an orphan it
// adopted), and returns its exit code.
func exitOf(t *testing.T, pid int) int {
	t.Helper()
	done := make(chan unix.WaitStatus, 1)
	go func() {
		var ws unix.WaitStatus
		for {
			if _, err := unix.Wait4(pid, &ws, 0, nil); err != unix.EINTR {
				break
			}
		}
		done <- ws
	}()
	select {
	case ws := <-done:
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	case <-time.After(bound):
		unix.Kill(pid, unix.SIGKILL)
		<-done
		t.Fatalf("pid %d did not end within %s", pid, bound)
		return -1
	}
}

func killReap(pid int) {
	if unix.Kill(pid, unix.SIGKILL) != nil {
		return
	}
	var ws unix.WaitStatus
	unix.Wait4(pid, &ws, 0, nil)
}

func alive(pid int) bool {
	st, err := unixhost.ReadStat(pid)
	return err == nil && !st.Zombie()
}

// attached is a client attached as `ocx attach` is, its keys from a pipe.
type attached struct {
	keys *io.PipeWriter
	mu   sync.Mutex
	out  bytes.Buffer
	done chan bool // detached
}

func (a *attached) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.out.Write(p)
}

func (a *attached) seen() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.out.String()
}

func attach(t *testing.T, socket string) *attached {
	t.Helper()
	pr, pw := io.Pipe()
	a := &attached{keys: pw, done: make(chan bool, 1)}
	go func() {
		d, err := Attach(socket, pr, a, unixhost.WindowSize{Rows: 40, Cols: 120})
		if err != nil && !d {
			t.Logf("attach: %v", err)
		}
		pr.Close()
		a.done <- d
	}()
	t.Cleanup(func() { pw.Close() })
	return a
}

func (a *attached) waitFor(t *testing.T, s string) {
	t.Helper()
	eventually(t, "the client sees "+strconv.Quote(s), func() bool { return strings.Contains(a.seen(), s) })
}

func (a *attached) ended(t *testing.T) bool {
	t.Helper()
	select {
	case d := <-a.done:
		return d
	case <-time.After(bound):
		t.Fatalf("attach did not return within %s; saw %q", bound, a.seen())
		return false
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %s", what, bound)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func clients(t *testing.T, socket string, n int) {
	t.Helper()
	eventually(t, strconv.Itoa(n)+" clients attached", func() bool {
		i, err := Query(socket)
		return err == nil && i.Clients == n
	})
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The seed's terminal run: the first line reaches the command on its
// terminal, a delivery typed through the socket too; an attached client
// sees what it prints on the terminal and on standard error; the holder
// exits as the command did, the status file says so, and the kept logs
// hold the ends (standard error apart, and not in stdout.log); the socket
// is gone.
func TestHolderRunsTheCommandOnATerminal(t *testing.T) {
	r := newRun(t, "/bin/sh", "-c", `test -t 0 && test -t 1 && ! test -t 2 && echo tty:yes
read l; echo got:$l; read m; echo got2:$m; echo err >&2; exit 3`)
	r.opts.FirstLine = `{"run":"f00d","objective":"say hi"}`
	p := r.start(t)
	a := attach(t, r.opts.Socket)
	a.waitFor(t, `got:{"run":"f00d","objective":"say hi"}`)
	a.waitFor(t, "tty:yes")
	if err := Type(r.opts.Socket, `{"post":"abc","from":"alice","text":"hello"}`); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, p.Pid); code != 3 {
		t.Errorf("the holder exited %d, not 3", code)
	}
	if d := a.ended(t); d {
		t.Error("attach says detached; the run ended")
	}
	seen := a.seen()
	for _, want := range []string{`got2:{"post":"abc","from":"alice","text":"hello"}`, "err\r\n"} {
		if !strings.Contains(seen, want) {
			t.Errorf("the client saw %q, not %q", seen, want)
		}
	}
	st, err := ReadStatus(r.opts.Status)
	b := readFile(t, r.opts.StdoutLog)
	if err != nil || st != (Status{Exit: 3, StdoutBytes: int64(len(b)), StderrBytes: 4}) {
		t.Errorf("status %+v, %v; stdout.log holds %d bytes", st, err, len(b))
	}
	if !strings.Contains(b, "got:{") || !strings.Contains(b, "got2:{") || strings.Contains(b, "err") {
		t.Errorf("stdout.log %q", b)
	}
	if b := readFile(t, r.opts.StderrLog); b != "err\n" {
		t.Errorf("stderr.log %q", b)
	}
	if _, err := os.Lstat(r.opts.Socket); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the socket is still there: %v", err)
	}
}

// Two clients attached at once both see the output; what one types
// reaches the command; one detaches with Ctrl-] and the run goes on, the
// other still attached, until the command ends.
func TestTwoClientsTypeAndDetach(t *testing.T) {
	r := newRun(t, "/bin/sh", "-c", `read l; echo got:$l; read m; echo got2:$m`)
	p := r.start(t)
	a, b := attach(t, r.opts.Socket), attach(t, r.opts.Socket)
	clients(t, r.opts.Socket, 2)
	if _, err := io.WriteString(a.keys, "hello\r"); err != nil {
		t.Fatal(err)
	}
	a.waitFor(t, "got:hello")
	b.waitFor(t, "got:hello")
	if _, err := b.keys.Write([]byte{'x', detachKey}); err != nil {
		t.Fatal(err)
	}
	if d := b.ended(t); !d {
		t.Fatal("Ctrl-] did not detach")
	}
	clients(t, r.opts.Socket, 1)
	info, err := Query(r.opts.Socket)
	if err != nil || !alive(info.PID) || !alive(p.Pid) {
		t.Fatalf("the run did not go on after a detach: %+v, %v", info, err)
	}
	if _, err := io.WriteString(a.keys, "bye\n"); err != nil {
		t.Fatal(err)
	}
	a.waitFor(t, "got2:xbye") // the detaching client's x came first
	if code := exitOf(t, p.Pid); code != 0 {
		t.Errorf("exit %d", code)
	}
	if d := a.ended(t); d {
		t.Error("detached, not ended")
	}
	if strings.Contains(b.seen(), "got2") {
		t.Errorf("the detached client saw output after it left: %q", b.seen())
	}
}

// The holder outlives the process that started it: the starter is
// killed outright, the run goes on, a client still attaches and types, and
// the status appears at the exit for whoever reads it.
func TestHolderOutlivesItsStarter(t *testing.T) {
	r := newRun(t, "/bin/sh", "-c", `read l; echo got:$l; exit 3`)
	opts, _ := json.Marshal(r.opts)
	starter := exec.Command(os.Args[0])
	starter.Env = append(holderEnv(), helperEnv+"=starter", helperOptsEnv+"="+string(opts))
	out, err := starter.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := starter.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killReap(starter.Process.Pid) })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the starter said %q: %v", line, err)
	}
	holder, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killReap(holder) })
	starter.Process.Kill()
	starter.Wait()
	// Orphaned, the holder is this process's (a subreaper's) to reap.
	eventually(t, "the holder adopted", func() bool {
		st, err := unixhost.ReadStat(holder)
		return err == nil && st.PPID == os.Getpid()
	})
	info, err := Query(r.opts.Socket)
	if err != nil || !alive(info.PID) {
		t.Fatalf("the run did not go on: %+v, %v", info, err)
	}
	a := attach(t, r.opts.Socket)
	clients(t, r.opts.Socket, 1)
	io.WriteString(a.keys, "still here\n")
	a.waitFor(t, "got:still here")
	if code := exitOf(t, holder); code != 3 {
		t.Errorf("exit %d", code)
	}
	a.ended(t)
	if st, err := ReadStatus(r.opts.Status); err != nil || st.Exit != 3 {
		t.Errorf("status %+v, %v", st, err)
	}
}

// A holder killed outright hangs up its own run's session, and nothing
// else: another holder's run goes on, and no status is written for the
// killed one. A TERM to a holder reaches its command's session, and the
// status names the signal.
func TestAKilledHolderHangsUpOnlyItsRun(t *testing.T) {
	script := `trap 'echo hup > "$0.hup"; exit 9' HUP; echo ready; while :; do sleep 0.05; done`
	ra, rb := newRun(t), newRun(t)
	ra.opts.Argv = []string{"/bin/sh", "-c", script, filepath.Join(ra.dir, "cmd")}
	rb.opts.Argv = []string{"/bin/sh", "-c", script, filepath.Join(rb.dir, "cmd")}
	pa, pb := ra.start(t), rb.start(t)
	ia, err := Query(ra.opts.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killReap(ia.PID) })
	ib, err := Query(rb.opts.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killReap(ib.PID) })
	attach(t, ra.opts.Socket).waitFor(t, "ready")
	attach(t, rb.opts.Socket).waitFor(t, "ready")

	killReap(pa.Pid)
	// A's command, orphaned to this process, is hung up.
	if code := exitOf(t, ia.PID); code != 9 {
		t.Errorf("A's command exited %d, not its HUP trap's 9", code)
	}
	if got := readFile(t, filepath.Join(ra.dir, "cmd.hup")); got != "hup\n" {
		t.Errorf("A's trap wrote %q", got)
	}
	if _, err := os.Stat(ra.opts.Status); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a status for a holder killed outright: %v", err)
	}
	time.Sleep(200 * time.Millisecond) // a HUP to B's session would have landed
	if !alive(ib.PID) || !alive(pb.Pid) {
		t.Fatal("B's run ended with A's holder")
	}
	if _, err := os.Stat(filepath.Join(rb.dir, "cmd.hup")); err == nil {
		t.Error("B's command was hung up")
	}
	if _, err := Query(rb.opts.Socket); err != nil {
		t.Fatal(err)
	}

	unix.Kill(pb.Pid, unix.SIGTERM)
	if code := exitOf(t, pb.Pid); code != 143 {
		t.Errorf("B's holder exited %d, not 143", code)
	}
	if st, err := ReadStatus(rb.opts.Status); err != nil || st != (Status{Exit: 143, Signal: "SIGTERM", StdoutBytes: int64(len("ready\r\n"))}) {
		t.Errorf("status %+v, %v", st, err)
	}
}

// A run under real bwrap, without --new-session, on the holder's
// terminal: standard input and output are a terminal inside.
func TestHolderRunsBwrapOnTheTerminal(t *testing.T) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatalf("bwrap is not on PATH (make deps installs it): %v", err)
	}
	r := newRun(t, bwrap, "--unshare-all", "--ro-bind", "/", "/", "--",
		"/bin/sh", "-c", `test -t 0 && test -t 1 && echo tty:yes; read l; echo got:$l; exit 4`)
	r.opts.FirstLine = `{"run":"beef","objective":"x"}`
	p := r.start(t)
	a := attach(t, r.opts.Socket)
	if code := exitOf(t, p.Pid); code != 4 {
		t.Errorf("exit %d; holder log: %s", code, readFile(t, filepath.Join(r.dir, "holder.log")))
	}
	a.ended(t)
	if b := readFile(t, r.opts.StdoutLog); !strings.Contains(b, "tty:yes") || !strings.Contains(b, `got:{"run":"beef","objective":"x"}`) {
		t.Errorf("stdout.log %q", b)
	}
	if st, _ := ReadStatus(r.opts.Status); st.Exit != 4 {
		t.Errorf("status %+v", st)
	}
}

// A USR1 binds a removed socket again (abduco's); a line the terminal
// would act on, or one too long for its canonical mode, is refused.
func TestSocketAgainAndRefusedLines(t *testing.T) {
	r := newRun(t, "/bin/sh", "-c", `read l; echo got:$l`)
	p := r.start(t)
	if err := Type(r.opts.Socket, "a\x03b"); err == nil || !strings.Contains(err.Error(), "control character") {
		t.Errorf("a ^C typed: %v", err)
	}
	if err := Type(r.opts.Socket, strings.Repeat("x", unixhost.MaxCanonicalLine)); err == nil || !strings.Contains(err.Error(), "canonical") {
		t.Errorf("a long line typed: %v", err)
	}
	if err := os.Remove(r.opts.Socket); err != nil {
		t.Fatal(err)
	}
	if _, err := Query(r.opts.Socket); err == nil {
		t.Fatal("answered with its socket removed")
	}
	unix.Kill(p.Pid, unix.SIGUSR1)
	eventually(t, "the socket bound again", func() bool { _, err := Query(r.opts.Socket); return err == nil })
	if err := Type(r.opts.Socket, "again"); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, p.Pid); code != 0 {
		t.Errorf("exit %d", code)
	}
	if b := readFile(t, r.opts.StdoutLog); !strings.Contains(b, "got:again") {
		t.Errorf("stdout.log %q", b)
	}
	if _, err := os.Stat(r.opts.StderrLog); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a stderr.log for a command that printed nothing there: %v", err)
	}
}

// A command that cannot start: the status says why, exit 127, and the
// holder ends.
func TestCommandThatCannotStart(t *testing.T) {
	r := newRun(t, "/nonexistent/ocx-cmd")
	p := r.start(t)
	if code := exitOf(t, p.Pid); code != 127 {
		t.Errorf("exit %d", code)
	}
	st, err := ReadStatus(r.opts.Status)
	if err != nil || st.Exit != 127 || !strings.Contains(st.Error, "/nonexistent/ocx-cmd") {
		t.Errorf("status %+v, %v", st, err)
	}
}

// On a terminal, the kept STDOUT is the terminal's output filtered (D98):
// its lines end in \r\n, matched without it.
func TestHolderFiltersATerminalsKeptLog(t *testing.T) {
	r := newRun(t)
	r.opts.Spec = filepath.Join(r.dir, "spec.json")
	const secret = "pw-on-the-tty"
	spec := Spec{Command: []string{"/bin/sh", "-c", `echo "key=` + secret + `"; echo "ERROR ` + secret + ` seen"; echo "ERROR again" >&2`},
		Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/", Keep: &keptlog.Spec{Mask: []string{secret}, Match: `seen$|again$`}}
	if err := WriteSpec(r.opts.Spec, spec); err != nil {
		t.Fatal(err)
	}
	p := r.start(t)
	if code := exitOf(t, p.Pid); code != 0 {
		t.Fatalf("the holder exited %d", code)
	}
	if got := readFile(t, r.opts.StdoutLog); got != "ERROR *** seen\r\n" {
		t.Errorf("stdout.log %q", got)
	}
	if got := readFile(t, r.opts.StderrLog); got != "ERROR again\n" {
		t.Errorf("stderr.log %q", got)
	}
}
