package itest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// The run engine in ocxd (seed 004), end to end: a real fossil server, the
// hook, the daemon and the run's real process.

// nodeUser is the node user node.json names.
func (n *testNode) nodeUser() string {
	n.t.Helper()
	b, err := os.ReadFile(n.seen(filepath.Join(n.agents, "node.json")))
	if err != nil {
		n.t.Fatal(err)
	}
	cfg, err := messages.DecodeNodeConfig(b)
	if err != nil {
		n.t.Fatal(err)
	}
	return cfg.User
}

// runPost is a post of a run's thread with the run engine message it holds
// (nil for a plain post, such as the kept logs).
type runPost struct {
	posted
	Msg runmsg.Message
}

func (n *testNode) runThread(root string) []runPost {
	n.t.Helper()
	var out []runPost
	for _, p := range n.thread(root) {
		m, _ := runmsg.ReadMessage([]byte(p.Text))
		out = append(out, runPost{posted: p, Msg: m})
	}
	return out
}

// nodeAnswer is the first message of type M the node user wrote in the
// run's thread (its started or ended), and the post's hash; nil if none.
func nodeAnswer[M any](n *testNode, root string) (*M, string) {
	user := n.nodeUser()
	for _, p := range n.runThread(root) {
		if m, ok := any(p.Msg).(*M); ok && p.Sender == user {
			return m, p.Hash
		}
	}
	return nil, ""
}

// endedOf is the first ended the node user wrote in the thread, or nil.
func (n *testNode) endedOf(root string) *runmsg.RunEnded {
	e, _ := nodeAnswer[runmsg.RunEnded](n, root)
	return e
}

// startedOf is the first started the node user wrote in the thread, or nil.
func (n *testNode) startedOf(root string) *runmsg.RunStarted {
	s, _ := nodeAnswer[runmsg.RunStarted](n, root)
	return s
}

// heldRun waits for the run's started and its holder in the node's care,
// and returns the holder, killed by PID at the end of the test if alive.
func (n *testNode) heldRun(root string) protocol.ProcID {
	n.t.Helper()
	var id protocol.ProcID
	n.waitFor("the run's holder", func() bool {
		var ok bool
		id, ok = n.runCare(root)
		return ok && n.startedOf(root) != nil
	})
	n.t.Cleanup(func() {
		if procAlive(id) {
			syscall.Kill(id.PID, syscall.SIGKILL)
		}
	})
	return id
}

func block(v string) string { return "```json\n" + v + "\n```\n" }

// runCare is the node's care file of a run, while it has it in its care.
func (n *testNode) runCare(hash string) (protocol.ProcID, bool) {
	b, err := os.ReadFile(filepath.Join(n.agents, "ocxd.runs", hash+".json"))
	if err != nil {
		return protocol.ProcID{}, false
	}
	var c struct {
		Process *protocol.ProcID `json:"process"`
	}
	if err := json.Unmarshal(b, &c); err != nil || c.Process == nil {
		return protocol.ProcID{}, false
	}
	return *c.Process, true
}

func procAlive(id protocol.ProcID) bool {
	st, err := unixhost.ReadStat(id.PID)
	return err == nil && st.Start == id.Start && !st.Zombie()
}

// killAtEnd ends a run's process the test started, by its PID, if it still
// runs when the test ends.
func killAtEnd(t testing.TB, id protocol.ProcID) {
	t.Cleanup(func() {
		if procAlive(id) {
			syscall.Kill(id.PID, syscall.SIGKILL)
		}
	})
}

// TestRunEchoUnconfined is seed 004's section 14, first example, as
// written: the admin posts the run in a new thread; the node writes
// started (values listed), runs echo hello in /, posts a reply holding
// hello in a fenced stdout block with exit 0, then ended exited exit 0.
func TestRunEchoUnconfined(t *testing.T) {
	needs(t, "ocxd")
	n := newNode(t)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	startDaemon(t, n, program("ocxd"))
	run := fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Say hello.",
"process": {"user": "builder", "command": ["echo", "hello"], "env": {"PATH": "/usr/bin:/bin"},
"keep": {"stdout_when": "always"}}}`, node)
	root := n.result(admin, "thread", "--title", "Say hello", "--text", block(run))
	n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })

	posts := n.runThread(root)
	for _, p := range posts {
		t.Logf("%s by %s:\n%s", p.Hash, p.Sender, p.Text)
	}
	if len(posts) != 4 {
		t.Fatalf("the thread holds %d posts, want the run, started, the kept logs and ended", len(posts))
	}
	if _, ok := posts[0].Msg.(*runmsg.Run); !ok || posts[0].Hash != root {
		t.Errorf("the first post is not the run: %+v", posts[0])
	}
	st, ok := posts[1].Msg.(*runmsg.RunStarted)
	if !ok || posts[1].Sender != node || st.Run != root {
		t.Fatalf("the second post is not the node's started: %s by %s", posts[1].Text, posts[1].Sender)
	}
	for k, want := range map[string]string{"run": root, "user": "builder", "node": node, "project": "demo"} {
		if st.Values[k] != want {
			t.Errorf("started's value %s is %q, want %q (values %v)", k, st.Values[k], want, st.Values)
		}
	}
	for _, k := range []string{"root", "server", "release"} {
		if st.Values[k] == "" {
			t.Errorf("started lists no value %s: %v", k, st.Values)
		}
	}
	logs := posts[2]
	if logs.Msg != nil || logs.Sender != node || !strings.Contains(logs.Text, "```stdout\nhello\n```") || !strings.Contains(logs.Text, "exit: 0") {
		t.Errorf("the third post is not the kept logs holding hello, exit 0 (by %s):\n%s", logs.Sender, logs.Text)
	}
	if strings.Contains(logs.Text, "```stderr") {
		t.Errorf("the kept logs hold a stderr block, though echo printed nothing there:\n%s", logs.Text)
	}
	e, ok := posts[3].Msg.(*runmsg.RunEnded)
	if !ok || posts[3].Sender != node || e.Outcome != runmsg.RunExited || e.Exit == nil || *e.Exit != 0 || e.Run != root {
		t.Errorf("the last post is not ended exited exit 0 by the node: %s by %s", posts[3].Text, posts[3].Sender)
	}
	for _, p := range posts[1:] {
		if p.InReplyTo == "" {
			t.Errorf("%s is not a reply in the run's thread", p.Hash)
		}
	}
	// Out of the node's care once ended.
	n.waitFor("the run to leave the node's care", func() bool {
		_, err := os.Stat(filepath.Join(n.agents, "ocxd.runs", root+".json"))
		return os.IsNotExist(err)
	})
}

// TestRunRefusedFromANonAdmin: a run sent by a user holding neither admin
// nor setup is answered ended, refused, its note naming that (table 3,
// row 1; section 11, row 1); nothing is started.
func TestRunRefusedFromANonAdmin(t *testing.T) {
	needs(t, "ocxd")
	n := newNode(t)
	node := n.nodeUser()
	startDaemon(t, n, program("ocxd"))
	run := fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Say hello.",
"process": {"user": "builder", "command": ["echo", "hello"]}}`, node)
	root := n.result(person, "thread", "--title", "A run from alice", "--text", block(run))
	n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })
	e := n.endedOf(root)
	if e.Outcome != runmsg.RunRefused || !strings.Contains(e.Note, "admin or setup") || e.Exit != nil {
		t.Errorf("ended %+v, want refused naming admin or setup", e)
	}
	if s := n.startedOf(root); s != nil {
		t.Errorf("a refused run was started: %+v", s)
	}
	if posts := n.runThread(root); len(posts) != 2 {
		t.Errorf("the thread holds %d posts, want the run and ended", len(posts))
	}
}

// TestRunStopAndAForgedEnded: a long-running run; an ended written by
// someone other than the node user is ignored (table 3, rows 2 and 4: the
// process runs on); then a stop by the admin ends its process (checked by
// PID) and the run ends stopped (table 10: started, a stop).
func TestRunStopAndAForgedEnded(t *testing.T) {
	needs(t, "ocxd")
	n := newNode(t)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	startDaemon(t, n, program("ocxd"), "--grace", "2s")
	run := fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Wait.",
"process": {"user": "builder", "command": ["sleep", "600"], "env": {"PATH": "/usr/bin:/bin"}}}`, node)
	root := n.result(admin, "thread", "--title", "Wait", "--text", block(run))
	id := n.heldRun(root)
	if !procAlive(id) {
		t.Fatalf("the run's process %s is not alive", id)
	}

	forged := fmt.Sprintf(`{"ocx": 1, "kind": "ended", "node": %q, "run": %q, "outcome": "exited", "exit": 0}`, node, root)
	n.result(admin, "post", "--to", root, "--text", block(forged))
	// The forged ended is on the record and handed to the daemon, which
	// logs it ignored; the process runs on and the node writes nothing.
	n.waitLogLine("the forged ended ignored", func(l logLine) bool {
		return strings.Contains(l.Msg, "does not act on") && strings.Contains(l.Msg, "ended ignored")
	})
	if !procAlive(id) {
		t.Fatalf("the forged ended ended the run's process")
	}
	if e := n.endedOf(root); e != nil {
		t.Fatalf("the node wrote ended after a forged one: %+v", e)
	}

	stop := fmt.Sprintf(`{"ocx": 1, "kind": "stop", "node": %q, "run": %q}`, node, root)
	n.result(admin, "post", "--to", root, "--text", block(stop))
	n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })
	e := n.endedOf(root)
	if e.Outcome != runmsg.RunStopped || e.Exit != nil || e.Note != "" {
		t.Errorf("ended %+v, want stopped", e)
	}
	n.waitFor("the run's process gone", func() bool { return !procAlive(id) })
}

// TestRunLostAfterTheDaemonDies: the daemon is killed (SIGKILL) while a
// run's process runs; the process is then killed; the daemon started again
// finds the run started, not ended, in its care with its process gone, and
// ends it lost (section 10's last paragraph; table 12, lost).
func TestRunLostAfterTheDaemonDies(t *testing.T) {
	needs(t, "ocxd")
	n := newNode(t)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	d := startDaemon(t, n, program("ocxd"))
	run := fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Wait.",
"process": {"user": "builder", "command": ["sleep", "600"], "env": {"PATH": "/usr/bin:/bin"}}}`, node)
	root := n.result(admin, "thread", "--title", "Wait", "--text", block(run))
	id := n.heldRun(root)
	d.kill9()
	if !procAlive(id) {
		t.Fatalf("the run's process %s did not outlive the daemon", id)
	}
	syscall.Kill(id.PID, syscall.SIGKILL)
	n.waitFor("the run's process gone", func() bool { return !procAlive(id) })
	if e := n.endedOf(root); e != nil {
		t.Fatalf("ended before the daemon started again: %+v", e)
	}

	startDaemon(t, n, program("ocxd"))
	n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })
	e := n.endedOf(root)
	if e.Outcome != runmsg.RunLost || e.Note == "" || e.Exit != nil {
		t.Errorf("ended %+v, want lost with a note", e)
	}
	// Once: a check asked again finds nothing more to end.
	// The check asked again: its lost runs are routed to their actors
	// before it is logged, and the ended a second finding would write is
	// awaited by a second check, which the daemon acts on after the first.
	n.barrier()
	n.barrier()
	count := 0
	for _, p := range n.runThread(root) {
		if _, ok := p.Msg.(*runmsg.RunEnded); ok {
			count++
		}
	}
	if count != 1 {
		t.Errorf("%d ended in the thread, want 1", count)
	}
}

// posAt is where an artifact stands in the server's order.
func (n *testNode) posAt(hash string) protocol.RunPosition {
	n.t.Helper()
	r := n.repo()
	defer r.Close()
	info, err := r.Info(n.ctx, hash)
	if err != nil {
		n.t.Fatal(err)
	}
	return protocol.RunPosition{Receipt: info.Rcvid, Row: info.Rid}
}

// runGiven is the place of the last artifact the run's care file says its
// session was given.
func (n *testNode) runGiven(hash string) protocol.RunPosition {
	b, err := os.ReadFile(filepath.Join(n.agents, "ocxd.runs", hash+".json"))
	if err != nil {
		return protocol.RunPosition{}
	}
	var c struct {
		Given protocol.RunPosition `json:"given"`
	}
	json.Unmarshal(b, &c)
	return c.Given
}

// postLine is table 9's line of a post, as the session is given it.
func (n *testNode) postLine(hash, from, text string) string {
	return protocol.RunLine(protocol.RunArrival{Kind: protocol.RunPost, Hash: hash, From: from, Text: text})
}

// keptStdouts are the STDOUT blocks of the kept logs the node wrote in the
// thread, in order.
func (n *testNode) keptStdouts(root string) []string {
	node := n.nodeUser()
	var out []string
	for _, p := range n.runThread(root) {
		if p.Msg != nil || p.Sender != node {
			continue
		}
		_, after, ok := strings.Cut(p.Text, "```stdout\n")
		if !ok {
			continue
		}
		block, _, _ := strings.Cut(after, "```")
		out = append(out, block)
	}
	return out
}

// TestRunSessionFeedsWhatItHears: a session whose deliveries is feed
// (table 10, row 6) is given, on its STDIN, table 9's line of each post in
// its thread that passes the filters, once each and in the server's order:
// alice's (heard) posts; not carol's (not heard, filter 7), not its own
// user's (bob, filter 5), not one holding an OCX message (filter 4), not
// one before its started (filter 2). A stop ends it stopped, and its kept
// STDOUT holds exactly the lines it got.
func TestRunSessionFeedsWhatItHears(t *testing.T) {
	needs(t, "ocxd")
	n := newNodeWith(t, harness.User{Login: stranger, Password: strangerPW, Caps: "cghijnorwz234"},
		harness.User{Login: "carol", Password: "carol-pw-1", Caps: "cghijnorwz234"})
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	startDaemon(t, n, program("ocxd"), "--grace", "2s")
	run := fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Echo what you hear.",
"process": {"user": %q, "command": ["sh", "-c", "while read l; do echo \"got $l\"; done"], "env": {"PATH": "/usr/bin:/bin"},
"session": true, "hears": ["alice", %q], "deliveries": "feed", "keep": {"stdout_when": "always"}}}`, node, stranger, stranger)
	root := n.result(admin, "thread", "--title", "Echo", "--text", block(run))
	early := n.result(person, "post", "--to", root, "--text", "early")
	id := n.heldRun(root)

	var want []string
	var startedHash string
	for _, p := range n.runThread(root) {
		if _, ok := p.Msg.(*runmsg.RunStarted); ok && p.Sender == node {
			startedHash = p.Hash
		}
	}
	if n.posAt(startedHash).Before(n.posAt(early)) {
		t.Logf("alice's early post came after started: it is given")
		want = append(want, n.postLine(early, person, "early"))
	} else {
		t.Logf("alice's early post came before started: it is not given")
	}
	a1 := n.result(person, "post", "--to", root, "--text", "hello from alice")
	want = append(want, n.postLine(a1, person, "hello from alice"))
	n.result("carol", "post", "--to", root, "--text", "carol is not heard")
	n.result(stranger, "post", "--to", root, "--text", "bob is the run's own user")
	n.result(person, "post", "--to", root, "--text", block(`{"ocx": "workspace", "kind": "wake"}`))
	a2 := n.result(person, "post", "--to", root, "--text", "alice again")
	want = append(want, n.postLine(a2, person, "alice again"))
	n.result(person, "thread", "--title", "Elsewhere", "--text", "not the run's thread")
	a3 := n.result(person, "post", "--to", root, "--text", "and a third")
	want = append(want, n.postLine(a3, person, "and a third"))
	last := n.posAt(a3)
	n.waitFor("the session given alice's last post", func() bool { return n.runGiven(root) == last })

	stop := fmt.Sprintf(`{"ocx": 1, "kind": "stop", "node": %q, "run": %q}`, node, root)
	n.result(admin, "post", "--to", root, "--text", block(stop))
	n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })
	if e := n.endedOf(root); e.Outcome != runmsg.RunStopped {
		t.Errorf("ended %+v, want stopped", e)
	}
	n.waitFor("the run's process gone", func() bool { return !procAlive(id) })
	n.expectFed(root, want)
}

// expectFed checks the one kept STDOUT of a feeding session that echoes
// each line it reads as "got LINE": the first line, then exactly want, in
// order, each once.
func (n *testNode) expectFed(root string, want []string) {
	t := n.t
	t.Helper()
	outs := n.keptStdouts(root)
	if len(outs) != 1 {
		t.Fatalf("%d kept STDOUT blocks, want 1: %q", len(outs), outs)
	}
	lines := strings.Split(strings.TrimSuffix(outs[0], "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], `got {"run"`) {
		for _, p := range n.runThread(root) {
			t.Logf("%s: %s", p.Sender, p.Text)
		}
		t.Fatalf("the kept STDOUT does not begin with the first line: %q", outs[0])
	}
	var got []string
	for _, l := range lines[1:] {
		got = append(got, strings.TrimPrefix(l, "got "))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the session got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRunSessionStartsOneProcessEach: a session whose deliveries is start
// (table 10, rows 7 and 10; section 8.1): each delivery starts a process of
// its own, one at a time, in the server's order, which reads the first line
// and then the delivery's; each process's kept STDOUT holds its line. A
// stop between deliveries ends the run stopped.
func TestRunSessionStartsOneProcessEach(t *testing.T) {
	needs(t, "ocxd")
	n := newNode(t)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	startDaemon(t, n, program("ocxd"), "--grace", "2s")
	run := fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "One each.",
"process": {"user": "builder", "command": ["sh", "-c", "read first; read d; echo \"$d\""], "env": {"PATH": "/usr/bin:/bin"},
"session": true, "hears": ["alice"], "deliveries": "start", "keep": {"stdout_when": "always"}}}`, node)
	root := n.result(admin, "thread", "--title", "One each", "--text", block(run))
	n.waitFor("the run's started", func() bool { return n.startedOf(root) != nil })
	var want []string
	var last protocol.RunPosition
	for _, text := range []string{"one", "two", "three"} {
		h := n.result(person, "post", "--to", root, "--text", text)
		want = append(want, n.postLine(h, person, text)+"\n")
		last = n.posAt(h)
	}
	n.waitFor("three kept logs", func() bool { return len(n.keptStdouts(root)) == 3 })
	if g := n.runGiven(root); g != last {
		t.Errorf("the care file says %s given, want %s", g, last)
	}
	if got := n.keptStdouts(root); strings.Join(got, "") != strings.Join(want, "") {
		t.Errorf("the processes printed\n%q\nwant\n%q", got, want)
	}
	if id, ok := n.runCare(root); ok {
		killAtEnd(t, id)
	}
	stop := fmt.Sprintf(`{"ocx": 1, "kind": "stop", "node": %q, "run": %q}`, node, root)
	n.result(admin, "post", "--to", root, "--text", block(stop))
	n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })
	if e := n.endedOf(root); e.Outcome != runmsg.RunStopped {
		t.Errorf("ended %+v, want stopped", e)
	}
}
