package nodesock

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages/wire"
)

// helperEnv makes the test binary a client of the socket it names, run by
// TestRefusesAnotherUser as another user.
const helperEnv = "NODESOCK_TEST_ASK"

func TestMain(m *testing.M) {
	if p := os.Getenv(helperEnv); p != "" {
		os.Exit(askAs(p))
	}
	goleak.VerifyTestMain(m)
}

// askAs asks for the status on the socket at p and exits 0 when a reply
// came, 3 when the connection ended without one, 4 when it could not
// connect.
func askAs(p string) int {
	c, err := net.Dial("unix", p)
	if err != nil {
		return 4
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, `{"ocx":"ask","v":1,"ask":"status"}`+"\n")
	b, _ := io.ReadAll(c)
	if len(b) == 0 {
		return 3
	}
	return 0
}

// node is a served socket in an agents root of its own.
type node struct {
	layout host.Layout
	asks   chan *wire.Ask
	stop   func()
}

func serve(t *testing.T, handle handler, accept func(net.Conn) error) *node {
	t.Helper()
	dir, err := os.MkdirTemp("", "nodesock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	layout, err := host.NewLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := unixhost.ListenSocketAt(layout.Socket())
	if err != nil {
		t.Fatal(err)
	}
	n := &node{layout: layout, asks: make(chan *wire.Ask, 16)}
	if handle == nil {
		handle = func(ctx context.Context, a *wire.Ask) *wire.Reply {
			n.asks <- a
			r := wire.NewReply()
			r.Receipts = map[string]wire.Receipt{"demo": {Rcvid: 7}}
			if a.Kind == wire.AskHook {
				r.Hook = &wire.HookDone{Artifacts: len(a.Hashes), Mark: 7}
			}
			return r
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	s := New(ln, handle, accept, slog.New(slog.NewTextHandler(io.Discard, nil)))
	go func() { done <- s.Serve(ctx) }()
	n.stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(n.stop)
	return n
}

func TestAskAndReply(t *testing.T) {
	n := serve(t, nil, nil)
	a := wire.NewAsk(wire.AskHook)
	a.Repo = "/srv/demo.fossil"
	a.Hashes = []string{strings.Repeat("ab", 20)}
	r, err := Ask(context.Background(), n.layout, a, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Hook == nil || r.Hook.Artifacts != 1 || r.Receipts["demo"].Rcvid != 7 {
		t.Fatalf("reply %+v", r)
	}
	got := <-n.asks
	if got.Repo != a.Repo || got.Hashes[0] != a.Hashes[0] {
		t.Fatalf("the daemon was asked %+v, want %+v", got, a)
	}
}

// TestNoDaemon: with nothing on the socket the caller knows at once.
func TestNoDaemon(t *testing.T) {
	dir := t.TempDir()
	layout, err := host.NewLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Ask(context.Background(), layout, wire.NewAsk(wire.AskStatus), time.Second)
	if !errors.Is(err, ErrNoDaemon) {
		t.Fatalf("no socket: %v, want ErrNoDaemon", err)
	}
	// A socket left by a daemon that is gone: refused at once too.
	ln, err := net.Listen("unix", layout.Socket())
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if _, err := Ask(context.Background(), layout, wire.NewAsk(wire.AskStatus), time.Second); !errors.Is(err, ErrNoDaemon) {
		t.Fatalf("a stale socket: %v, want ErrNoDaemon", err)
	}
}

// TestBadAskNamesWhatIsWrong: an ask that does not read is answered with
// a refusal naming its fault, and the handler never sees it.
func TestBadAskNamesWhatIsWrong(t *testing.T) {
	n := serve(t, nil, nil)
	c, err := net.Dial("unix", n.layout.Socket())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, `{"ocx":"ask","v":1,"ask":"hook","repo":"relative"}`+"\n")
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	r, err := wire.DecodeReply([]byte(strings.TrimSpace(string(b))))
	if err != nil {
		t.Fatalf("the refusal does not read: %v: %s", err, b)
	}
	if !strings.Contains(r.Error, "repo") || !strings.Contains(r.Error, "absolute") {
		t.Fatalf("refusal %q does not name the repository's fault", r.Error)
	}
	select {
	case a := <-n.asks:
		t.Fatalf("the handler was given a bad ask: %+v", a)
	default:
	}
}

// TestRefusalReachesTheCaller: a handler's refusal is ErrRefused with its
// words.
func TestRefusalReachesTheCaller(t *testing.T) {
	n := serve(t, func(ctx context.Context, a *wire.Ask) *wire.Reply {
		return Refusal("%s is not a repository of this node", "/x")
	}, nil)
	a := wire.NewAsk(wire.AskHook)
	a.Repo = "/x"
	_, err := Ask(context.Background(), n.layout, a, time.Second)
	if !errors.Is(err, errRefused) || !strings.Contains(err.Error(), "/x is not a repository") {
		t.Fatalf("refusal: %v", err)
	}
}

// TestGarbageAndSilence: a daemon that answers garbage, or dies without an
// answer, or stalls, is an error to the caller, never a reply.
func TestGarbageAndSilence(t *testing.T) {
	dir := t.TempDir()
	layout, err := host.NewLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, answer string
		hang         bool
		want         string
	}{
		{"garbage", "HTTP/1.1 200 OK\n", false, "reply"},
		{"another kind", `{"ocx":"state","v":1}` + "\n", false, `"reply"`},
		{"killed mid-answer", `{"ocx":"reply","v":1,"hook":`, false, "before its newline"},
		{"silent", "", true, "timeout"},
		{"a state document cut short", `{"ocx":"reply","v":1,"doc":100}` + "\n{\n  \"ocx\": \"state\",", false, "state document (100 bytes)"},
		{"a document of another kind", `{"ocx":"reply","v":1,"doc":12}` + "\nHTTP/1.1 200", false, "does not begin as a state document"},
		{"a document with no end", `{"ocx":"reply","v":1,"doc":20}` + "\n{\n  \"ocx\": \"state\",\n", false, "cut short"},
		{"a page cut short", `{"ocx":"reply","v":1,"page":100}` + "\nStatus: 200 OK\r\n", false, "page (100 bytes)"},
		{"a page that is no CGI reply", `{"ocx":"reply","v":1,"page":12}` + "\nHTTP/1.1 200", false, "no CGI reply"},
		{"a document too long", `{"ocx":"reply","v":1,"doc":99999999999}` + "\n", false, "a state document is 1 to"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ln, err := unixhost.ListenSocketAt(layout.Socket())
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				wire.ReadLine(bufio.NewReader(conn), wire.MaxAskLen) // the ask
				io.WriteString(conn, c.answer)
				if c.hang {
					io.Copy(io.Discard, conn) // until the caller hangs up
				}
				conn.Close()
			}()
			_, err = Ask(context.Background(), layout, wire.NewAsk(wire.AskStatus), 300*time.Millisecond)
			ln.Close()
			<-done
			if err == nil || errors.Is(err, ErrNoDaemon) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%s: %v, want an error naming %q", c.name, err, c.want)
			}
			os.Remove(layout.Socket())
		})
	}
}

// TestRefusesAnotherUser: a process of another uid that reaches the socket
// (here its mode is opened for the test) gets no reply and no ask of its
// reaches the handler: the peer's uid is checked (SO_PEERCRED) before
// anything is read.
func TestRefusesAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the test runs a client as another user, which needs root (make test runs as root)")
	}
	n := serve(t, nil, nil)
	if err := os.Chmod(n.layout.Socket(), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(n.layout.Root(), 0o755); err != nil {
		t.Fatal(err)
	}
	exeDir, err := os.MkdirTemp("", "nodesock-exe-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(exeDir)
	os.Chmod(exeDir, 0o755)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(exeDir, "nodesock.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(uid uint32) int {
		cmd := exec.Command(exe)
		cmd.Env = []string{helperEnv + "=" + n.layout.Socket()}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	}
	if code := run(65534); code != 3 {
		t.Fatalf("a client as nobody: exit %d, want 3 (connected, no reply)", code)
	}
	select {
	case a := <-n.asks:
		t.Fatalf("another user's ask reached the handler: %+v", a)
	default:
	}
	// The same client as this user is answered: the refusal is the uid's.
	if code := run(0); code != 0 {
		t.Fatalf("a client as root: exit %d, want 0", code)
	}
	<-n.asks
}

// TestBigReplyHandsMemoryBack: once a reply of bigReply bytes or more is
// written, the server hands the memory its answer took back to the system;
// after a small one it does not.
func TestBigReplyHandsMemoryBack(t *testing.T) {
	var calls atomic.Int32
	was := returnMemory
	returnMemory = func() { calls.Add(1) }
	defer func() { returnMemory = was }()
	for _, c := range []struct {
		passed int
		want   int32
	}{{passed: 1, want: 0}, {passed: bigReply / 50, want: 1}} {
		calls.Store(0)
		n := serve(t, func(ctx context.Context, a *wire.Ask) *wire.Reply {
			r := wire.NewReply()
			for i := range c.passed {
				r.Passed = append(r.Passed, wire.PassedOver{What: fmt.Sprintf("artifact %040d", i), Why: "passed over"})
			}
			return r
		}, nil)
		r, err := Ask(context.Background(), n.layout, wire.NewAsk(wire.AskStatus), 10*time.Second)
		if err != nil || len(r.Passed) != c.passed {
			t.Fatalf("a reply passing over %d: %d, %v", c.passed, len(r.Passed), err)
		}
		n.stop() // every connection is done
		if got := calls.Load(); got != c.want {
			t.Errorf("a reply passing over %d handed memory back %d times, want %d", c.passed, got, c.want)
		}
	}
}

// TestStateDocFollowsTheLine: a reply written as its Line, a status's
// document after the line (D70), reaches the caller whole as StateDoc; a
// kept reply, however big, hands no memory back, since it stays.
func TestStateDocFollowsTheLine(t *testing.T) {
	var calls atomic.Int32
	was := returnMemory
	returnMemory = func() { calls.Add(1) }
	defer func() { returnMemory = was }()
	doc := []byte("{\n  \"ocx\": \"state\",\n  \"pad\": \"" + strings.Repeat("x", bigReply) + "\"\n}\n")
	for _, kept := range []bool{true, false} {
		calls.Store(0)
		n := serve(t, func(ctx context.Context, a *wire.Ask) *wire.Reply {
			r := wire.NewReply()
			r.Doc = len(doc)
			line, err := json.Marshal(r)
			if err != nil {
				t.Error(err)
			}
			r.Line = append(append(line, '\n'), doc...)
			r.KeepMemory = kept
			return r
		}, nil)
		r, err := Ask(context.Background(), n.layout, wire.NewAsk(wire.AskStatus), 10*time.Second)
		if err != nil || !bytes.Equal(r.StateDoc, doc) || r.State != nil {
			t.Fatalf("kept %v: the document read is %d bytes (want %d), %v", kept, len(r.StateDoc), len(doc), err)
		}
		n.stop()
		if got, want := calls.Load(), map[bool]int32{true: 0, false: 1}[kept]; got != want {
			t.Errorf("a reply kept %v handed memory back %d times, want %d", kept, got, want)
		}
	}
}

// lockedLog is a log's text, written by the server's goroutines and read
// by the test.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestAStoppedDaemonIsNotWaitedFor (D75): a daemon that does not take
// its ask (stopped: the kernel takes the connection and the ask, and
// nobody reads them) is given AnswerWait, not the caller's whole wait;
// the caller gets ErrNotTaken and does the work itself. When the daemon
// goes on and reads the ask, it finds the caller gone and does none of
// its work.
func TestAStoppedDaemonIsNotWaitedFor(t *testing.T) {
	dir := t.TempDir()
	layout, err := host.NewLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := unixhost.ListenSocketAt(layout.Socket())
	if err != nil {
		t.Fatal(err)
	}
	a := wire.NewAsk(wire.AskHook)
	a.Repo = "/srv/demo.fossil"
	a.Hashes = []string{strings.Repeat("ab", 20)}
	const wait = 10 * time.Second
	start := time.Now()
	_, err = Ask(context.Background(), layout, a, wait)
	took := time.Since(start)
	if !errors.Is(err, ErrNotTaken) || !strings.Contains(err.Error(), "stopped") {
		t.Fatalf("a daemon that takes no ask: %v, want ErrNotTaken", err)
	}
	if took < AnswerWait || took >= wait/2 {
		t.Fatalf("a daemon that takes no ask held its caller %v; want AnswerWait (%v), not the caller's wait (%v)", took, AnswerWait, wait)
	}

	// The daemon goes on: it reads the ask the kernel kept, and finds its
	// caller gone.
	var handled atomic.Int32
	var log lockedLog
	s := New(ln, func(ctx context.Context, a *wire.Ask) *wire.Reply {
		handled.Add(1)
		return wire.NewReply()
	}, nil, slog.New(slog.NewTextHandler(&log, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(log.String(), GaveUp) {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("the server never found the ask's caller gone; its log:\n%s", log.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := handled.Load(); n != 0 {
		t.Fatalf("the server did the work of an ask whose caller gave up (%d times)", n)
	}
	if !strings.Contains(log.String(), "ask=hook") {
		t.Errorf("the server's log does not name the ask given up:\n%s", log.String())
	}
}

// TestTakenAskIsWaitedFor: once the daemon has taken an ask (the reply's
// first byte, written before the work), its work may take longer than
// AnswerWait, up to the caller's wait.
func TestTakenAskIsWaitedFor(t *testing.T) {
	release := make(chan struct{})
	n := serve(t, func(ctx context.Context, a *wire.Ask) *wire.Reply {
		<-release
		r := wire.NewReply()
		r.Hook = &wire.HookDone{Artifacts: len(a.Hashes), Mark: 7}
		return r
	}, nil)
	a := wire.NewAsk(wire.AskHook)
	a.Repo = "/srv/demo.fossil"
	a.Hashes = []string{strings.Repeat("ab", 20)}
	// Work that outlasts AnswerWait three times, counted from before the
	// timer is armed: the work cannot end sooner than that after start,
	// however slow the machine.
	start := time.Now()
	slow := time.AfterFunc(3*AnswerWait, func() { close(release) })
	defer slow.Stop()
	r, err := Ask(context.Background(), n.layout, a, 10*time.Second)
	if err != nil || r.Hook == nil || r.Hook.Mark != 7 {
		t.Fatalf("work taken and done after %v: %+v, %v", time.Since(start), r, err)
	}
	if took := time.Since(start); took < 3*AnswerWait {
		t.Fatalf("the reply came after %v, before the work was done", took)
	}
}
