package itest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
)

// A full disk (issue 38, D74): the agents root on a small disk of its own
// that one agent's session fills.

// newNodeOnTmpfs is newNode with its agents root on a tmpfs of size, in a
// mount namespace the test makes (harness.Host sharing the test's
// network): the fossil server, whose hooks write there, and every command
// of the node run in it; the test sees the root through n.seen.
func newNodeOnTmpfs(t testing.TB, size string) *testNode {
	t.Helper()
	return newNodeOnTmpfsOf(t, size, relRoot)
}

// newNodeOnTmpfsOf is newNodeOnTmpfs on the release root root.
func newNodeOnTmpfsOf(t testing.TB, size, root string) *testNode {
	t.Helper()
	agents := filepath.Join(t.TempDir(), "agents")
	if err := os.Mkdir(agents, 0o700); err != nil {
		t.Fatal(err)
	}
	h := harness.NewHostWith(t, harness.HostOptions{SharedNetwork: true, Tmpfs: []harness.Tmpfs{{Dir: agents, Size: size}}})
	users := []harness.User{{Login: person, Password: personPW, Caps: "cghijnorwz234"}}
	srv := harness.StartServer(t, harness.Options{Users: users, Host: h})
	n := &testNode{t: t, ctx: context.Background(), srv: srv, agents: agents, host: h, ownDisk: true,
		pw: map[string]string{srv.AdminLogin: srv.AdminPassword, person: personPW}}
	t.Cleanup(n.shutdown)
	n.must("", "init", "--project", "demo="+srv.Repo+","+srv.URL, "--release", root)
	n.must("", "hook", "install")
	var st unix.Statfs_t
	if err := unix.Statfs(n.seen(agents), &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		t.Fatalf("the agents root is not the host's tmpfs: %v (type %#x)", err, st.Type)
	}
	return n
}

// fillScript fills its workspace's disk and says so.
const fillScript = `read -r line; dd if=/dev/zero of="$HOME/fill" bs=64k 2>/dev/null; printf 'filled\n'`

// TestFullDiskLosesNothingSilently: the agents root on a 64 MB tmpfs;
// agent-1's session fills it with dd. While it is full: agent-2 still
// answers a post; `ocx session start agent-2/demo` (a restart) exits 1
// naming the disk and the file, and does nothing (no launch note, the
// session left running). Once there is room again: the next records of
// ocxd.log and hook.log are preceded by one saying how many were dropped;
// the restart then does everything. Throughout: every line of ocxd.log is
// one whole JSON record, every line of hook.log one whole text record, and
// the hook's mark is never read empty.
func TestFullDiskLosesNothingSilently(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNodeOnTmpfs(t, "64m")
	admin := n.srv.AdminLogin
	startDaemon(t, n, program("ocxd"))

	records := map[string]string{}
	launches := map[string]string{}
	for _, ag := range []struct{ login, script string }{{agent, fillScript}, {"agent-2", echoScript}} {
		login, script := ag.login, ag.script
		n.must("", "login", "add", login)
		records[login] = n.result(admin, "workspace", "add", "--login", login, "--project", "demo", "--branch", "trunk")
		launches[login] = n.result(admin, "session", "start", login+"/demo", "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--", "/bin/sh", "-c", script)
	}
	n.waitFor("both sessions to listen", func() bool {
		st := n.status()
		return len(st.Sessions) == 2 && st.Sessions[0].Listening && st.Sessions[1].Listening
	})
	hello := n.result(person, "post", "--to", records["agent-2"], "--text", "hello")
	n.awaitReplyBy("agent-2", records["agent-2"], hello)

	// The hook's mark, read as `ocx hook status` reads it (no lock), all
	// along: never empty once it holds a mark.
	markPath := n.seen(filepath.Join(n.agents, "hook.mark.demo"))
	marks := watchMark(t, markPath)

	// agent-1 fills the disk.
	n.result(person, "post", "--to", records[agent], "--text", "fill")
	n.waitFor("the disk to be full", func() bool {
		var st unix.Statfs_t
		return unix.Statfs(n.seen(n.agents), &st) == nil && st.Bavail*uint64(st.Bsize) < 64<<10
	})
	logBefore := len(n.logLines())

	// The other agent still answers; posts to it until both logs have
	// dropped records (a record that still fits in a log's last page is
	// written): the count their writers keep in the log's attribute.
	daemonLog, hookLog := n.seen(filepath.Join(n.agents, "ocxd.log")), n.seen(filepath.Join(n.agents, "hook.log"))
	var ping string
	for i := 0; droppedIn(t, daemonLog) == 0 || droppedIn(t, hookLog) == 0; i++ {
		if i == 40 {
			t.Fatalf("40 posts answered on a full disk, and ocxd.log dropped %d records, hook.log %d", droppedIn(t, daemonLog), droppedIn(t, hookLog))
		}
		start := time.Now()
		ping = n.result(person, "post", "--to", records["agent-2"], "--text", fmt.Sprintf("ping %d while full", i))
		if r := n.awaitReplyBy("agent-2", records["agent-2"], ping); !strings.Contains(r.Text, fmt.Sprintf("echo: ping %d while full", i)) {
			t.Errorf("agent-2's reply on a full disk: %q", r.Text)
		}
		t.Logf("agent-2 answered ping %d on a full disk in %s", i, time.Since(start).Round(time.Millisecond))
	}
	droppedDaemon, droppedHook := droppedIn(t, daemonLog), droppedIn(t, hookLog)

	// A restart on the full disk does nothing, and says so. What a turn
	// freed since (its session/turn file) is taken first.
	topUp := n.seen(filepath.Join(n.agents, "top-up"))
	fillUp(t, topUp)
	serving, ok := n.serving(launches["agent-2"])
	if !ok {
		t.Fatal("agent-2's session does not run")
	}
	launchesBefore := len(notesOn[*messages.LaunchNote](n, records["agent-2"]))
	a, r := n.answer(admin, "session", "start", "agent-2/demo", "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--", "/bin/sh", "-c", echoScript)
	if r.code != 1 || a.Stopped == nil || !strings.Contains(*a.Stopped, "no space left on device") || !strings.Contains(*a.Stopped, "listening") || !strings.Contains(*a.Stopped, "nothing was done") {
		t.Errorf("a start on a full disk: want exit 1 naming the disk, the listening index and nothing done:\n%s", r)
	}
	if a.Stopped != nil {
		t.Logf("a start on a full disk: exit %d: %s", r.code, *a.Stopped)
	}
	if got := len(notesOn[*messages.LaunchNote](n, records["agent-2"])); got != launchesBefore {
		t.Errorf("a start refused on a full disk posted a launch note (%d, was %d)", got, launchesBefore)
	}
	if pid, ok := n.serving(launches["agent-2"]); !ok || pid != serving {
		t.Errorf("a start refused on a full disk stopped the session it would restart (pid %d, was %d)", pid, serving)
	}

	// Room again: the next records say what was dropped.
	for _, p := range []string{n.seen(filepath.Join(n.workspaceDir(agent), "fill")), topUp} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	pong := n.result(person, "post", "--to", records["agent-2"], "--text", "ping with room")
	n.awaitReplyBy("agent-2", records["agent-2"], pong)
	// Room comes and goes on a full disk (a turn's file, a temporary file
	// of fossil's, freed), so the drops may be said by several notices:
	// together they say at least what was counted while full.
	var said dropNotices
	n.waitFor("ocxd.log's notices to say what was dropped", func() bool {
		said = dropNotices{}
		for _, l := range n.logLines()[logBefore:] {
			if l.Msg == "log records dropped" {
				said.add(l.Dropped, l.Since, l.Why)
			}
		}
		return said.n >= droppedDaemon
	})
	if !said.full {
		t.Errorf("ocxd.log's notices after the full disk do not say it was full: %s", said)
	}
	var hookSaid dropNotices
	for _, l := range textRecords(t, n.seen(filepath.Join(n.agents, "hook.log"))) {
		if l["msg"] == "log records dropped" {
			d, err := strconv.ParseInt(l["dropped"], 10, 64)
			if err != nil {
				t.Errorf("hook.log's notice of drops: %v", l)
			}
			hookSaid.add(d, l["since"], l["why"])
		}
	}
	if hookSaid.n < droppedHook || !hookSaid.full {
		t.Errorf("hook.log's notices do not say the %d records dropped while the disk was full: %s", droppedHook, hookSaid)
	}
	t.Logf("ocxd.log: %s (%d counted while full); hook.log: %s (%d counted while full)", said, droppedDaemon, hookSaid, droppedHook)
	if droppedIn(t, daemonLog) != 0 || droppedIn(t, hookLog) != 0 {
		t.Errorf("drops still counted after their notices: ocxd.log %d, hook.log %d", droppedIn(t, daemonLog), droppedIn(t, hookLog))
	}

	// With room the restart does everything.
	again := n.result(admin, "session", "start", "agent-2/demo", "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--", "/bin/sh", "-c", echoScript)
	if _, ok := n.serving(again); !ok {
		t.Errorf("the restart with room started no session")
	}

	if bad := marks.stop(); bad != "" {
		t.Errorf("the hook's mark: %s", bad)
	}
	textRecords(t, n.seen(filepath.Join(n.agents, "hook.log")))
	n.logLines()
}

// dropNotices sums the notices of a log's dropped records.
type dropNotices struct {
	n, notices int64
	since      []string
	// full: a notice says the disk was full.
	full bool
}

func (d *dropNotices) add(n int64, since, why string) {
	d.n += n
	d.notices++
	d.since = append(d.since, since)
	d.full = d.full || strings.Contains(why, "no space left on device")
}

func (d dropNotices) String() string {
	return fmt.Sprintf("%d dropped in %d notices since %v", d.n, d.notices, d.since)
}

// fillUp writes zeros to the file p until its disk is full.
func fillUp(t testing.TB, p string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, unix.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// droppedIn is the count of records the log at p dropped and no record
// has said yet: its user.ocx.dropped attribute (unixhost.LogFile).
func droppedIn(t testing.TB, p string) int64 {
	t.Helper()
	buf := make([]byte, 512)
	m, err := unix.Getxattr(p, "user.ocx.dropped", buf)
	if errors.Is(err, unix.ENODATA) {
		return 0
	}
	if err != nil {
		t.Fatalf("read the drops of %s: %v", p, err)
	}
	n, _, _ := strings.Cut(string(buf[:m]), " ")
	v, err := strconv.ParseInt(n, 10, 64)
	if err != nil {
		t.Fatalf("the drops of %s: %q", p, buf[:m])
	}
	return v
}

// markWatch reads the hook's mark in a loop until stopped.
type markWatch struct {
	stopc chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	bad   string
	reads int
}

// watchMark reads the mark at p every millisecond or so, noting a read
// that finds it empty (or not a mark) after it first held one.
func watchMark(t testing.TB, p string) *markWatch {
	w := &markWatch{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		seen := false
		for {
			select {
			case <-w.stopc:
				return
			case <-time.After(time.Millisecond):
			}
			b, err := os.ReadFile(p)
			if errors.Is(err, os.ErrNotExist) && !seen {
				continue
			}
			w.mu.Lock()
			w.reads++
			if _, ok := host.ParseHookMark(b); ok {
				seen = true
			} else if seen && w.bad == "" {
				w.bad = fmt.Sprintf("read as %q (%v)", b, err)
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

// stop ends the watch and says what it found wrong ("" for nothing).
func (w *markWatch) stop() string {
	select {
	case <-w.stopc:
	default:
		close(w.stopc)
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.reads == 0 {
		return "never read"
	}
	return w.bad
}

// textRecords reads a log of slog's text records (hook.log), failing the
// test on a line that is not one whole record: keys and values as slog
// writes them (a value holding a space, '=' or '"' quoted), time first,
// then level and msg.
func textRecords(t testing.TB, p string) []map[string]string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Fatalf("%s ends inside a record: %q", p, b[max(0, len(b)-200):])
	}
	var out []map[string]string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		rec, err := parseTextRecord(sc.Text())
		if err != nil {
			t.Fatalf("%s holds a line that is not one whole record: %v: %q", p, err, sc.Text())
		}
		out = append(out, rec)
	}
	return out
}

// parseTextRecord reads one line of slog's TextHandler.
func parseTextRecord(line string) (map[string]string, error) {
	rec := map[string]string{}
	var keys []string
	for s := line; s != ""; {
		k, rest, ok := strings.Cut(s, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \"") {
			return nil, fmt.Errorf("no key=value at %q", s)
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return nil, fmt.Errorf("key %s: %v", k, err)
			}
			v, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			v, rest, _ = strings.Cut(rest, " ")
			rest = " " + rest
			if strings.ContainsAny(v, `="`) {
				return nil, fmt.Errorf("key %s: an unquoted value holding = or \": %q", k, v)
			}
		}
		if rest != "" && rest != " " && !strings.HasPrefix(rest, " ") {
			return nil, fmt.Errorf("key %s: no space after its value", k)
		}
		s = strings.TrimPrefix(rest, " ")
		if _, dup := rec[k]; dup {
			return nil, fmt.Errorf("key %s twice", k)
		}
		rec[k] = v
		keys = append(keys, k)
	}
	if len(keys) < 3 || keys[0] != "time" || keys[1] != "level" || keys[2] != "msg" {
		return nil, fmt.Errorf("keys %v: not time, level, msg first", keys)
	}
	if _, err := time.Parse(time.RFC3339Nano, rec["time"]); err != nil {
		return nil, fmt.Errorf("time: %v", err)
	}
	return rec, nil
}
