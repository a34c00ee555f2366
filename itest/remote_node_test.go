package itest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/runmsg"
	"github.com/ocx-go/ocx/messages/wire"
)

// Nodes on other hosts (issue 25, D72): a node whose record is a clone of
// the server it pulls as its node user, the senders and order of what it
// pulled vouched for by the server's node on its console's receipt page.

// serverNode is the server's node of nodes on other hosts: its fossil
// server serves the console (whose receipt page the remote nodes ask),
// and the hook is installed.
func serverNode(t testing.TB, people ...harness.User) *testNode {
	t.Helper()
	a := consoleNode(t, people...)
	a.must("", "hook", "install")
	return a
}

// remoteOpts say how a remote node is made.
type remoteOpts struct {
	// every is its pull's timer; poke, the address it takes pokes on
	// ("" takes none).
	every, poke string
	// host: the node runs on a host of its own (harness.Host): network
	// and mount namespaces in which the server's directory and the
	// server's node's are empty, reaching the server over HTTP alone.
	host bool
	// url, when set, is the server's URL the node is made with (a TLS
	// front's); ca, a CA file its programs and their fossil trust for it
	// (SSL_CERT_FILE).
	url, ca string
}

// pokePort is where a node on a host of its own takes pokes, in its own
// network namespace.
const pokePort = 18291

// newRemoteNode makes a node on another host of a's server: the node user
// listed on a (`ocx node add`, with the poke URL when the node takes
// pokes), then `ocx init --other-host` making its clone. Its commands run
// as n.ocx does, in its own agents root.
func newRemoteNode(t testing.TB, a *testNode, user string, o remoteOpts) *testNode {
	t.Helper()
	b := &testNode{t: t, ctx: a.ctx, srv: a.srv, agents: filepath.Join(t.TempDir(), "agents"), pw: a.pw}
	pokeURL := ""
	if o.host {
		hide := []string{a.srv.Dir, filepath.Dir(a.agents)}
		if a.srv.ExtRoot != "" {
			hide = append(hide, a.srv.ExtRoot)
		}
		b.host = harness.NewHost(t, hide...)
		b.host.Reach(a.srv.Port)
		if o.poke != "" {
			o.poke = fmt.Sprintf("127.0.0.1:%d", pokePort)
			pokeURL = fmt.Sprintf("http://127.0.0.1:%d/", b.host.Expose(pokePort))
		}
	} else if o.poke != "" {
		pokeURL = "http://" + o.poke + "/"
	}
	t.Cleanup(b.shutdown)
	serverURL := a.srv.URL
	if o.url != "" {
		serverURL = o.url
	}
	if o.ca != "" {
		b.env = append(b.env, "SSL_CERT_FILE="+o.ca)
	}
	pwFile := filepath.Join(t.TempDir(), "node-password")
	if err := os.WriteFile(pwFile, []byte(user+"-pw-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	add := []string{"node", "add", user, "--password-file", pwFile}
	secretFile := filepath.Join(t.TempDir(), "poke-secret")
	if err := os.WriteFile(secretFile, []byte(pokeSecret(user)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if pokeURL != "" {
		add = append(add, "--poke", pokeURL, "--poke-secret-file", secretFile)
	}
	a.must("", add...)
	args := []string{"init", "--other-host", "--project", "demo=" + filepath.Join(filepath.Dir(b.agents), "clone", "demo.fossil") + "," + serverURL,
		"--node-user", user, "--password-file", pwFile, "--release", relRoot}
	if o.every != "" {
		args = append(args, "--pull-every", o.every)
	}
	if o.poke != "" {
		args = append(args, "--poke-listen", o.poke, "--poke-secret-file", secretFile)
	}
	b.must("", args...)
	b.pokeURL = pokeURL
	return b
}

// pokeSecret is the secret the pokes of a remote node whose node user is
// user carry in the tests.
func pokeSecret(user string) string {
	return ("secret-of-" + user + "-" + strings.Repeat("x", 40))[:40]
}

// TestRemoteNodeAnswersItsRun: seed 004 section 14's echo posted on the
// server for a node on another host is answered by that node alone: its
// started (listing node), the kept logs holding hello, ended exited 0,
// each sent by its node user; the server's node writes nothing there.
func TestRemoteNodeAnswersItsRun(t *testing.T) {
	needs(t, "ocxd")
	a := serverNode(t)
	startDaemon(t, a, program("ocxd"))
	b := newRemoteNode(t, a, "lab-b", remoteOpts{every: "500ms"})
	startDaemon(t, b, program("ocxd"))
	admin := a.srv.AdminLogin
	echo := block(fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Say hello.",
"process": {"user": "builder", "command": ["echo", "hello"], "env": {"PATH": "/usr/bin:/bin"}, "keep": {"stdout_when": "always"}}}`, "lab-b"))
	run := a.result(admin, "thread", "--title", "For B", "--text", echo)
	a.waitFor("B's run ended", func() bool { return b.endedOf(run) != nil })
	e := b.endedOf(run)
	if e.Outcome != runmsg.RunExited || e.Exit == nil || *e.Exit != 0 {
		t.Errorf("B's run ended %+v, want exited 0", e)
	}
	if s := b.startedOf(run); s == nil || s.Values["node"] != "lab-b" {
		t.Errorf("B's started %+v, want values.node lab-b", s)
	}
	by := threadBy(a, run)
	if by[a.nodeUser()] != 0 || by["lab-b"] != 3 {
		t.Errorf("the run's thread by sender %v: want lab-b's started, kept logs and ended, nothing of the server's node", by)
	}
}

// twoNodes is a server's node, its daemon running, and nodes A and B
// (node-a, node-b) each on a host of its own, poked, pulling every
// every, their daemons started with flags.
func twoNodes(t *testing.T, every string, flags ...string) (a, na, nb *testNode) {
	t.Helper()
	a = serverNode(t)
	startDaemon(t, a, program("ocxd"))
	na = newRemoteNode(t, a, "node-a", remoteOpts{host: true, every: every, poke: "on"})
	nb = newRemoteNode(t, a, "node-b", remoteOpts{host: true, every: every, poke: "on"})
	startDaemon(t, na, program("ocxd"), flags...)
	startDaemon(t, nb, program("ocxd"), flags...)
	return a, na, nb
}

// echoRun is seed 004 section 14's echo for node, as user, saying word.
func echoRun(node, user, word string) string {
	return block(fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Say %s.",
"process": {"user": %q, "command": ["echo", %q], "env": {"PATH": "/usr/bin:/bin"}, "keep": {"stdout_when": "always"}}}`, node, word, user, word))
}

// TestTwoNodesOnHostsOfTheirOwn: a server and two nodes, each on a host
// of its own (network and mount namespaces in which the server's
// repository file does not exist), reaching the server over HTTP alone.
// The echo posted for A and for B: each answers its own alone. A run a
// user without admin or setup sent is refused by the node it names (row
// 1), as the server vouched for its sender; a run user bound to A is
// refused by B, naming A (row 5), each node reading the binding from its
// own clone; a run whose user is A's node user is refused by B (row 4).
func TestTwoNodesOnHostsOfTheirOwn(t *testing.T) {
	needs(t, "ocxd")
	a, na, nb := twoNodes(t, "2s")
	for _, n := range []*testNode{na, nb} {
		if out, err := n.command(nil, "test", "-e", a.srv.Repo).CombinedOutput(); err == nil {
			t.Fatalf("the server's repository %s is there on the node's host: %s", a.srv.Repo, out)
		}
	}
	admin := a.srv.AdminLogin
	runA := a.result(admin, "thread", "--title", "For A", "--text", echoRun("node-a", "builder", "from-a"))
	runB := a.result(admin, "thread", "--title", "For B", "--text", echoRun("node-b", "runner", "from-b"))
	a.waitFor("A's and B's runs ended", func() bool { return na.endedOf(runA) != nil && nb.endedOf(runB) != nil })
	for _, c := range []struct {
		n         *testNode
		run, node string
	}{{na, runA, "node-a"}, {nb, runB, "node-b"}} {
		if e := c.n.endedOf(c.run); e.Outcome != runmsg.RunExited || e.Exit == nil || *e.Exit != 0 {
			t.Errorf("%s's run ended %+v, want exited 0", c.node, e)
		}
		by := threadBy(a, c.run)
		if by[c.node] != 3 || len(by) != 2 {
			t.Errorf("%s's run's thread by sender %v: want the admin's run and %s's started, kept logs and ended alone", c.node, by, c.node)
		}
	}
	// Row 1: alice, who holds neither admin nor setup, sends a run for A.
	fromAlice := a.result(person, "thread", "--title", "alice for A", "--text", echoRun("node-a", "helper", "nope"))
	a.waitFor("A's refusal of alice's run", func() bool { return na.endedOf(fromAlice) != nil })
	if e := na.endedOf(fromAlice); e.Outcome != runmsg.RunRefused || !strings.Contains(e.Note, "admin or setup") {
		t.Errorf("A ended alice's run %+v, want refused naming admin or setup (row 1)", e)
	}
	// Row 5: builder works for A (its first run an admin sent named A).
	bound := a.result(admin, "thread", "--title", "builder for B", "--text", echoRun("node-b", "builder", "nope"))
	a.waitFor("B's refusal of A's user", func() bool { return nb.endedOf(bound) != nil })
	if e := nb.endedOf(bound); e.Outcome != runmsg.RunRefused || !strings.Contains(e.Note, "node-a") {
		t.Errorf("B ended a run of A's user %+v, want refused naming node-a (row 5)", e)
	}
	if by := threadBy(a, bound); by["node-a"] != 0 {
		t.Errorf("A wrote in a run for B: %v", by)
	}
	// Row 4: A's node user as the user of a run for B.
	asNode := a.result(admin, "thread", "--title", "node-a for B", "--text", echoRun("node-b", "node-a", "nope"))
	a.waitFor("B's refusal of a node's user", func() bool { return nb.endedOf(asNode) != nil })
	if e := nb.endedOf(asNode); e.Outcome != runmsg.RunRefused || !strings.Contains(e.Note, "node-a") {
		t.Errorf("B ended a run as A's node user %+v, want refused naming it (row 4)", e)
	}
}

// runsOnServer reads every run engine message on the server's record.
func runsOnServer(t testing.TB, a *testNode) []record.RunMsg {
	t.Helper()
	r := a.repo()
	defer r.Close()
	msgs, err := record.ReadRuns(a.ctx, r, "demo")
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// answers counts, for each run, the started and ended its node wrote,
// and keeps where the first started stands in the server's order.
type answers struct {
	started, ended int
	at             protocol.RunPosition
}

func answersOf(msgs []record.RunMsg) map[string]*answers {
	out := map[string]*answers{}
	for _, m := range msgs {
		if m.Kind() == runmsg.MsgRun {
			out[m.Hash] = &answers{}
		}
	}
	for _, m := range msgs {
		x, ok := out[m.About()]
		if !ok || m.Sender != m.Node() {
			continue
		}
		switch m.Kind() {
		case runmsg.MsgStarted:
			if x.started == 0 {
				x.at = m.At()
			}
			x.started++
		case runmsg.MsgEnded:
			x.ended++
		}
	}
	return out
}

// TestTwoNodesHundredRuns: 100 runs posted on the server at 10 a second,
// for node A and node B in turn, each on a host of its own: each is
// started and ended exactly once, by its own node, and each node started
// its runs in the server's order.
func TestTwoNodesHundredRuns(t *testing.T) {
	needs(t, "ocxd")
	a, na, nb := twoNodes(t, "")
	nodes := map[string]*testNode{"node-a": na, "node-b": nb}
	admin := &fossilio.Client{URL: a.srv.URL, Login: a.srv.AdminLogin, Password: a.srv.AdminPassword, ProjectCode: a.srv.ProjectCode}
	posted := map[string]string{} // run -> its node
	var order []string
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := range 100 {
		<-tick.C
		node := []string{"node-a", "node-b"}[i%2]
		user := map[string]string{"node-a": "builder", "node-b": "runner"}[node]
		h, err := admin.NewThread(a.ctx, fmt.Sprintf("run %d", i), echoRun(node, user, fmt.Sprintf("run-%d", i)))
		if err != nil {
			t.Fatalf("post run %d: %v", i, err)
		}
		posted[h] = node
		order = append(order, h)
	}
	var got map[string]*answers
	a.waitFor("every run ended", func() bool {
		got = answersOf(runsOnServer(t, a))
		for h := range posted {
			if got[h] == nil || got[h].ended == 0 {
				return false
			}
		}
		return true
	})
	// A last look a pull later: nothing is written twice after the end.
	for _, n := range nodes {
		if err := n.command(nil, program("ocx"), "run", "check", "--agents", n.agents).Run(); err != nil {
			t.Errorf("ocx run check: %v", err)
		}
	}
	got = answersOf(runsOnServer(t, a))
	last := map[string]protocol.RunPosition{}
	for _, h := range order {
		x := got[h]
		if x.started != 1 || x.ended != 1 {
			t.Errorf("run %s for %s: %d started, %d ended; want one each", h[:10], posted[h], x.started, x.ended)
		}
		if prev, ok := last[posted[h]]; ok && !prev.Before(x.at) {
			t.Errorf("%s started run %s at %v, before the run posted before it (started at %v): not in the server's order", posted[h], h[:10], x.at, prev)
		}
		last[posted[h]] = x.at
	}
	for _, m := range runsOnServer(t, a) {
		if node, ok := posted[m.About()]; ok && m.Kind() != runmsg.MsgRun && m.Sender != node {
			t.Errorf("%s wrote a %s for %s's run %s", m.Sender, m.Kind(), node, m.About()[:10])
		}
	}
}

// sleepRun is a run for node, as user, that sleeps secs then says done.
func sleepRun(node, user string, secs int) string {
	return block(fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Sleep, then say so.",
"process": {"user": %q, "command": ["sh", "-c", "sleep %d; echo done"], "env": {"PATH": "/usr/bin:/bin"}, "keep": {"stdout_when": "always"}}}`, node, user, secs))
}

// answersOfRun counts the started and ended the run's node wrote for it.
func answersOfRun(t *testing.T, a *testNode, run string) answers {
	t.Helper()
	x := answersOf(runsOnServer(t, a))[run]
	if x == nil {
		t.Fatalf("run %s is not on the record", run)
	}
	return *x
}

// TestRemoteNodeKilledFindsItsRunLost: node A's host killed outright
// (kill -9 of everything on it: the daemon, the run's holder, its
// process) in the middle of a run: when its daemon starts again it finds
// the run lost, once it has pulled the server's record, and says so,
// once: ended lost. Node B's run, on a host of its own, ends as it would
// have.
func TestRemoteNodeKilledFindsItsRunLost(t *testing.T) {
	needs(t, "ocxd")
	a, na, nb := twoNodes(t, "1s")
	admin := a.srv.AdminLogin
	runA := a.result(admin, "thread", "--title", "long on A", "--text", sleepRun("node-a", "builder", 120))
	runB := a.result(admin, "thread", "--title", "short on B", "--text", sleepRun("node-b", "runner", 4))
	na.heldRun(runA)
	nb.waitFor("B's run started", func() bool { return nb.startedOf(runB) != nil })
	na.host.KillAll()
	if _, held := na.runCare(runA); !held {
		t.Fatal("A's run is not in its care after the kill; the test shows nothing")
	}
	startDaemon(t, na, program("ocxd"))
	a.waitFor("A's run ended lost", func() bool { return na.endedOf(runA) != nil })
	if e := na.endedOf(runA); e.Outcome != runmsg.RunLost || e.Note == "" {
		t.Errorf("A's run ended %+v, want lost with a note", e)
	}
	a.waitFor("B's run ended", func() bool { return nb.endedOf(runB) != nil })
	if e := nb.endedOf(runB); e.Outcome != runmsg.RunExited || e.Exit == nil || *e.Exit != 0 {
		t.Errorf("B's run ended %+v, want exited 0: A's crash is not B's", e)
	}
	// A check asked by hand finds nothing more, and nothing is said twice.
	if out, err := na.command(nil, program("ocx"), "run", "check", "--agents", na.agents).CombinedOutput(); err != nil {
		t.Errorf("ocx run check: %v: %s", err, out)
	}
	for _, run := range []string{runA, runB} {
		if x := answersOfRun(t, a, run); x.started != 1 || x.ended != 1 {
			t.Errorf("run %s: %d started, %d ended; want one each", run[:10], x.started, x.ended)
		}
	}
}

// TestServerRestartedMidRun: the server goes down while a run runs on
// each node, and the runs end while it is down: the nodes wait and ask
// again (their pulls and their ended fail meanwhile), and when the server
// is back each run's ended is written, once; a run posted after it comes
// back is answered as ever.
func TestServerRestartedMidRun(t *testing.T) {
	needs(t, "ocxd")
	// A write that fails is tried again 200 ms later: the server stays down
	// past the five tries that end a run whose writes the server refuses.
	a, na, nb := twoNodes(t, "1s", "--retry-after", "200ms")
	admin := a.srv.AdminLogin
	runA := a.result(admin, "thread", "--title", "on A", "--text", sleepRun("node-a", "builder", 2))
	runB := a.result(admin, "thread", "--title", "on B", "--text", sleepRun("node-b", "runner", 2))
	a.waitFor("both runs started", func() bool { return na.startedOf(runA) != nil && nb.startedOf(runB) != nil })
	a.srv.Down()
	// Both runs end while the server is down: each node tries its ended
	// again and again, past the count that ends the tries for a refusal.
	for _, n := range []*testNode{na, nb} {
		// Kept logs come before ended (D77): the node's writes at the end
		// of a run are tried again, the kept logs and then ended.
		n.waitFor("eight failed tries of the node's kept logs and ended", func() bool {
			tries := 0
			for _, l := range n.logLines() {
				if l.Msg == "ended not written; trying again" || l.Msg == "kept logs not written; trying again" {
					tries++
				}
			}
			return tries >= 8
		})
		if log := n.daemonLog(); strings.Contains(log, "giving up") || strings.Contains(log, "given up") {
			t.Errorf("the node gave a write up while the server was down:\n%s", log)
		}
	}
	a.srv.Up()
	a.waitFor("both runs ended", func() bool { return na.endedOf(runA) != nil && nb.endedOf(runB) != nil })
	after := a.result(admin, "thread", "--title", "after", "--text", echoRun("node-b", "runner", "back"))
	a.waitFor("the run posted after the restart ended", func() bool { return nb.endedOf(after) != nil })
	for _, run := range []string{runA, runB, after} {
		if x := answersOfRun(t, a, run); x.started != 1 || x.ended != 1 {
			t.Errorf("run %s: %d started, %d ended; want one each", run[:10], x.started, x.ended)
		}
	}
	if e := na.endedOf(runA); e.Outcome != runmsg.RunExited || e.Exit == nil || *e.Exit != 0 {
		t.Errorf("A's run ended %+v, want exited 0", e)
	}
	// Each node's kept logs reached the server once, before its ended.
	checkRunPosts(t, na, runA, "done")
	checkRunPosts(t, nb, runB, "done")
}

// TestSessionOnARemoteNode: a workspace and its session on node B, a host
// of its own. The agent login is the server's node's (`ocx login add`
// there); B keeps its password. The session is woken by B's own pull and
// answers a post written on the server as its real sender (a reply alice
// pushed with the admin's name in its U card is alice's), which the server
// vouched for; it does not hear bob, whom its definition does not name; a
// stop request from alice is ignored, the admin's stops it, and the end
// note is B's node user's.
func TestSessionOnARemoteNode(t *testing.T) {
	needs(t, "ocxd", "workspace")
	a := serverNode(t, harness.User{Login: stranger, Password: strangerPW, Caps: "cghijnorwz234"})
	startDaemon(t, a, program("ocxd"))
	nb := newRemoteNode(t, a, "node-b", remoteOpts{host: true, poke: "on"})
	startDaemon(t, nb, program("ocxd"))
	admin := a.srv.AdminLogin

	// The server's node makes the agent login; B is given its password.
	a.must("", "login", "add", agent)
	pw, err := os.ReadFile(filepath.Join(a.agents, agent, "password"))
	if err != nil {
		t.Fatal(err)
	}
	pwFile := filepath.Join(t.TempDir(), "agent-password")
	if err := os.WriteFile(pwFile, pw, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := nb.ocx("", "login", "add", agent); r.code == 0 || !strings.Contains(r.stdout+r.stderr, "--password-file") {
		t.Errorf("login add on B without the login's password: %s; want a refusal saying to give it", r)
	}
	nb.must("", "login", "add", agent, "--password-file", pwFile)
	record := nb.result(admin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	launch := nb.result(admin, "session", "start", key(agent), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--",
		"/bin/sh", "-c", `read -r line; printf 'echo: %s from=%s\n' "$line" "${OCX_FROM:-unknown}"`)
	nb.waitFor("the session on B to listen", func() bool {
		st := nb.status()
		return len(st.Sessions) == 1 && st.Sessions[0].Listening && st.Sessions[0].Launch == launch
	})
	if _, err := os.Stat(filepath.Join(a.agents, agent, "projects")); err == nil {
		t.Errorf("the server's node holds a workspace of %s; it is B's", agent)
	}

	// bob is not heard; alice's post after his is answered, as hers.
	fromBob := a.result(stranger, "post", "--to", record, "--text", "let me in")
	fromAlice := a.result(person, "post", "--to", record, "--text", "hello")
	if r := nb.awaitReply(record, fromAlice); !strings.Contains(r.Text, "echo: hello from="+person) {
		t.Errorf("the reply to alice: %q", r.Text)
	}
	if rs := nb.repliesTo(record, fromBob); len(rs) != 0 {
		t.Errorf("the session on B answered bob, whom it does not hear: %+v", rs)
	}
	// alice pushes a reply whose U card names the admin: B, told by the
	// server who sent it, answers it as alice's.
	forged := a.push(person, admin, record, record, "I am the admin")
	if r := nb.awaitReply(record, forged); !strings.Contains(r.Text, "echo: I am the admin from="+person) {
		t.Errorf("the reply to alice's post signed as the admin: %q", r.Text)
	}

	// alice's stop request is ignored; the admin's stops the session.
	aliceStop := a.result(person, "post", "--to", record, "--text", "OCX stop")
	after := a.result(person, "post", "--to", record, "--text", "after the stop")
	if r := nb.awaitReply(record, after); !strings.Contains(r.Text, "echo: after the stop") {
		t.Errorf("the reply after alice's stop: %q", r.Text)
	}
	adminStop := a.result(admin, "post", "--to", record, "--text", "OCX stop")
	nb.waitFor("the stopped and end notes", func() bool {
		var stopped, ended bool
		for _, p := range nb.thread(record) {
			switch note := p.Note.(type) {
			case *messages.StoppedNote:
				stopped = stopped || (p.Sender == agent && note.Cause == messages.StopByRequest && note.Request == adminStop)
			case *messages.EndNote:
				ended = ended || (p.Sender == "node-b" && note.Launch == launch)
			}
		}
		return stopped && ended
	})
	for _, p := range nb.thread(record) {
		if sn, ok := p.Note.(*messages.StoppedNote); ok && sn.Request == aliceStop {
			t.Errorf("alice's stop request stopped the session: %+v", sn)
		}
		if _, ok := p.Note.(*messages.EndNote); ok && p.Sender == a.nodeUser() {
			t.Errorf("the server's node wrote an end note for B's session: %s", p.Hash)
		}
	}
}

// TestReceiptPage: the console's receipt page answers, in JSON, what the
// server's repository says of an artifact (GET /receipt/HASH, rendered by
// the daemon) or of many (a POST of hashes): its sender by receipt, not
// the name inside, its place in the server's order, the sender's
// standing, and the users; to a node user node.json lists alone. Anyone
// else, logged in or not, is refused, naming why; a bad hash is refused;
// a node removed is refused from then on.
func TestReceiptPage(t *testing.T) {
	needs(t, "ocxd", "ocx-console")
	a := serverNode(t)
	startDaemon(t, a, program("ocxd"))
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("lab-x-pw-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.nodeJSONChanged("", "node", "add", "lab-x", "--password-file", pwFile)
	root := a.result(a.srv.AdminLogin, "thread", "--title", "t", "--text", "by the admin")
	signed := a.push(person, a.srv.AdminLogin, root, root, "alice, signed as the admin")
	cookie := func(login, pw string) string {
		c, err := a.srv.LoginCookie(login, pw)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	node := cookie("lab-x", "lab-x-pw-1")
	ask := func(method, path, cookie, body string) (int, string, http.Header) {
		t.Helper()
		req, err := http.NewRequest(method, a.srv.URL+"ext/console/"+path, strings.NewReader(strings.TrimPrefix(body, "untyped:")))
		if err != nil {
			t.Fatal(err)
		}
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		if body != "" && !strings.HasPrefix(body, "untyped:") {
			req.Header.Set("Content-Type", "text/plain")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	code, body, h := ask("GET", "receipt/"+signed, node, "")
	if code != http.StatusOK {
		t.Fatalf("GET receipt: %d %s", code, body)
	}
	if h.Get("X-Ocx-Served-By") != "daemon" {
		t.Errorf("the receipt page was served by %q, want the daemon", h.Get("X-Ocx-Served-By"))
	}
	rs, err := wire.DecodeReceipts([]byte(body))
	if err != nil {
		t.Fatalf("the answer does not read: %v\n%s", err, body)
	}
	r := a.repo()
	info, _ := r.Info(a.ctx, signed)
	r.Close()
	if len(rs.Receipts) != 1 || rs.Receipts[0].Login != person || rs.Receipts[0].Privileged || rs.Receipts[0].Rcvid != uint64(info.Rcvid) || rs.Receipts[0].Via != "sync" || rs.Project != a.srv.ProjectCode {
		t.Errorf("the receipt of alice's post signed as the admin: %+v (project %s)", rs.Receipts, rs.Project)
	}
	// The users its receipts name, each with its standing, and none of
	// the server's others (D81); the viewer is the node user.
	if users, viewer := usersAndViewer(t, body); users != person+":false" || viewer != "lab-x:false" {
		t.Errorf("the users of alice's receipt: %s, viewer %s; want alice alone, not privileged, and lab-x\n%s", users, viewer, body)
	}
	missing := strings.Repeat("0", 64)
	code, body, _ = ask("POST", "receipt", node, root+"\n"+signed+"\n"+missing+"\n")
	if rs, err = wire.DecodeReceipts([]byte(body)); code != http.StatusOK || err != nil || len(rs.Receipts) != 3 {
		t.Fatalf("POST receipts: %d %v %s", code, err, body)
	}
	if r := rs.Receipts; r[0].Login != a.srv.AdminLogin || !r[0].Privileged || r[1].Login != person || r[2].Known {
		t.Errorf("the receipts of three hashes: %+v", r)
	}
	if users, _ := usersAndViewer(t, body); users != a.srv.AdminLogin+":true,"+person+":false" {
		t.Errorf("the users of three receipts: %s; want the admin, privileged, and alice\n%s", users, body)
	}
	// Any login asks of itself alone (GET /receipt, no hash): its own
	// capabilities and standing.
	for _, c := range []struct {
		login, pw string
		priv      bool
	}{{person, personPW, false}, {a.srv.AdminLogin, a.srv.AdminPassword, true}} {
		code, body, _ := ask("GET", "receipt", cookie(c.login, c.pw), "")
		users, viewer := usersAndViewer(t, body)
		if _, err := wire.DecodeReceipts([]byte(body)); code != http.StatusOK || err != nil || users != "" || viewer != fmt.Sprintf("%s:%v", c.login, c.priv) {
			t.Errorf("%s asking of itself: %d %v: users %q, viewer %q\n%s", c.login, code, err, users, viewer, body)
		}
	}
	for _, c := range []struct {
		name, method, path, cookie, body, says string
		code                                   int
	}{
		{"alice, logged in", "GET", "receipt/" + root, cookie(person, personPW), "", `\"alice\" is not one`, http.StatusForbidden},
		{"alice, logged in, a POST", "POST", "receipt", cookie(person, personPW), root + "\n", `\"alice\" is not one`, http.StatusForbidden},
		{"nobody logged in", "GET", "receipt/" + root, "", "", "not logged in", http.StatusForbidden},
		{"a hash prefix", "GET", "receipt/" + root[:12], node, "", "full hash", http.StatusBadRequest},
		{"a line that is no hash", "POST", "receipt", node, "../x\n", "not a full hash", http.StatusBadRequest},
		// Fossil passes no body without a Content-Type: refused at once,
		// never waited for.
		{"a POST of no type", "POST", "receipt", node, "untyped:" + root + "\n", "Content-Type", http.StatusBadRequest},
	} {
		code, body, _ := ask(c.method, c.path, c.cookie, c.body)
		if code != c.code || !strings.Contains(body, c.says) {
			t.Errorf("%s: %d %s; want %d saying %q", c.name, code, body, c.code, c.says)
		}
	}
	a.nodeJSONChanged("", "node", "remove", "lab-x")
	if code, body, _ := ask("GET", "receipt/"+root, node, ""); code != http.StatusForbidden {
		t.Errorf("a removed node asked: %d %s; want refused", code, body)
	}
}

// nodeJSONChanged runs an ocx command that changes node.json while the
// daemon runs, and waits until the daemon has read it again (its re-exec
// in place, D77): a page asked meanwhile is ocx console's, and a TERM
// that meets the re-exec half-way is lost (the new image runs on).
func (n *testNode) nodeJSONChanged(user string, args ...string) {
	n.t.Helper()
	at := len(n.logLines())
	n.must(user, args...)
	n.waitFor("the daemon to read node.json again", func() bool {
		for _, l := range n.logLines()[at:] {
			if l.Msg == "re-exec: running the new image" {
				return true
			}
		}
		return false
	})
}

// usersAndViewer reads a receipts answer's users and viewer as
// LOGIN:PRIVILEGED, the users joined by commas, and fails the test when
// a user says more than that (the server's capabilities, D81).
func usersAndViewer(t *testing.T, body string) (string, string) {
	t.Helper()
	var a struct {
		Users  []map[string]any `json:"users"`
		Viewer map[string]any   `json:"viewer"`
	}
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("the answer does not read: %v\n%s", err, body)
	}
	var users []string
	for _, u := range a.Users {
		for k := range u {
			if k != "login" && k != "privileged" {
				t.Errorf("a user of the answer says %s: %v", k, u)
			}
		}
		users = append(users, fmt.Sprintf("%v:%v", u["login"], u["privileged"] == true))
	}
	viewer := ""
	if a.Viewer != nil {
		viewer = fmt.Sprintf("%v:%v", a.Viewer["login"], a.Viewer["privileged"] == true)
	}
	return strings.Join(users, ","), viewer
}

// cloneRun is a run for node whose password step takes user's password
// and clones the server as user.
func cloneRun(node, user string) string {
	return block(fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Clone.",
"workspace": [
  {"step": "directory", "at": "$$root$$/$$user$$/projects/$$project$$/$$run$$"},
  {"step": "password"},
  {"step": "clone", "into": "$$workspace$$/clone"}
],
"process": {"user": %q, "command": ["test", "-s", "$$clone$$"], "env": {"PATH": "/usr/bin:/bin"}}}`, node, user))
}

// TestOtherHostInitAndPasswords: `ocx init --other-host` refuses, naming
// why and leaving nothing, a node the server does not list, one with no
// password, and a clone where a file is; `ocx node password` keeps a run
// user's password only once the server took it, in a file of its own
// (0600), and a run whose password step takes it clones the server as
// that user; that file owned by another account holds nothing the node
// trusts: the next such run is refused, naming its owner.
func TestOtherHostInitAndPasswords(t *testing.T) {
	needs(t, "ocxd")
	a := serverNode(t, harness.User{Login: "runner", Password: "runner-pw-1", Caps: fossilio.AgentCaps})
	startDaemon(t, a, program("ocxd"))
	pw := func(s string) string {
		f := filepath.Join(t.TempDir(), "pw")
		if err := os.WriteFile(f, []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	agents := filepath.Join(t.TempDir(), "agents")
	clone := filepath.Join(t.TempDir(), "demo.fossil")
	b := &testNode{t: t, ctx: a.ctx, srv: a.srv, agents: agents, pw: a.pw}
	init := func(user string, args ...string) result {
		return b.ocx("", append([]string{"init", "--other-host", "--project", "demo=" + clone + "," + a.srv.URL, "--node-user", user, "--release", relRoot}, args...)...)
	}
	for _, c := range []struct {
		name string
		r    result
		says string
	}{
		{"a node the server does not list", init("lab-q", "--password-file", pw("lab-q-pw")), "ocx node add lab-q"},
		{"no password", init("lab-q"), "--password-file"},
	} {
		if c.r.code == 0 || !strings.Contains(c.r.stdout+c.r.stderr, c.says) {
			t.Errorf("%s: %s; want a refusal saying %q", c.name, c.r, c.says)
		}
		if _, err := os.Stat(clone); err == nil {
			t.Errorf("%s: a clone is left at %s", c.name, clone)
		}
		if _, err := os.Stat(filepath.Join(agents, "node.json")); err == nil {
			t.Errorf("%s: node.json is written", c.name)
		}
	}
	if err := os.WriteFile(clone, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := init("lab-q", "--password-file", pw("lab-q-pw")); r.code == 0 || !strings.Contains(r.stdout, "exists") {
		t.Errorf("a clone where a file is: %s; want refused", r)
	}
	if b, _ := os.ReadFile(clone); string(b) != "mine" {
		t.Errorf("the file where the clone would go was changed")
	}

	nb := newRemoteNode(t, a, "node-b", remoteOpts{every: "500ms"})
	startDaemon(t, nb, program("ocxd"))
	if r := nb.ocx("", "node", "password", "runner", "--password-file", pw("wrong")); r.code == 0 || !strings.Contains(r.stdout, "wrong password") {
		t.Errorf("node password with a wrong password: %s; want refused", r)
	}
	pws := filepath.Join(nb.agents, "run-passwords")
	if _, err := os.Stat(pws); err == nil {
		t.Error("the file of passwords is written after a refused password")
	}
	nb.must("", "node", "password", "runner", "--password-file", pw("runner-pw-1"))
	if st, err := os.Stat(pws); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the file of passwords: %v %v", st, err)
	}
	admin := a.srv.AdminLogin
	ok := a.result(admin, "thread", "--title", "clone on B", "--text", cloneRun("node-b", "runner"))
	a.waitFor("the clone run's ended", func() bool { return nb.endedOf(ok) != nil })
	if e := nb.endedOf(ok); e.Outcome != runmsg.RunExited || e.Exit == nil || *e.Exit != 0 {
		t.Errorf("the run cloning as runner on B ended %+v, want exited 0", e)
	}
	if err := os.Chown(pws, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	refused := a.result(admin, "thread", "--title", "clone again", "--text", cloneRun("node-b", "runner"))
	a.waitFor("the second clone run's ended", func() bool { return nb.endedOf(refused) != nil })
	if e := nb.endedOf(refused); e.Outcome != runmsg.RunRefused || !strings.Contains(e.Note, "owned by uid 1000") || !strings.Contains(e.Note, "runner") {
		t.Errorf("a run taking a password from another account's file ended %+v, want refused naming the owner", e)
	}
}
