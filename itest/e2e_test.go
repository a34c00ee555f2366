package itest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages"
)

const agent = "agent-1"

// echoScript is the mechanical session's command: it answers a post with
// "echo: " and its first line; a post that says "slow" keeps the turn
// running until the file go appears in the workspace (HOME in the sandbox),
// so that a test can see the session working.
const echoScript = `read -r line; if [ "$line" = slow ]; then while [ ! -e "$HOME/go" ]; do sleep 0.05; done; fi; printf 'echo: %s\n' "$line"`

// TestAgentSessionEndToEnd is issue 6's story: provision a login; add a
// workspace; start a `stays` mechanical session; a person posts in the
// thread and the session's reply appears, sent by the agent login; a
// listener on a ticket feeds it too; the status shows it working, then idle
// and listening; a second start restarts it (one end note of the first, the
// new one answering); stop it and find the stopped and end notes; a
// person's post while nothing listens gets the unheard note; a stop when no
// session runs is refused; `session restart -n` lists the stopped session
// and `--only` restarts it.
func TestAgentSessionEndToEnd(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	admin := n.srv.AdminLogin
	key := agent + "/demo"
	ws := filepath.Join(n.agents, agent, "projects", "demo")

	n.must("", "login", "add", agent)
	record := n.result(admin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	launch := n.result(admin, "session", "start", key, "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--", "/bin/sh", "-c", echoScript)
	n.waitFor("the session to listen", func() bool {
		st := n.status()
		return len(st.Sessions) == 1 && st.Sessions[0].Listening
	})
	st := n.status()
	s := st.Sessions[0]
	if s.Login != agent || s.Project != "demo" || s.Record != record || s.Launch != launch || s.StartedBy != messages.OriginDaemon || s.State != messages.SessionIdle || s.Release != "test" || s.Older {
		t.Errorf("the session's status: %v\ndaemon (lock holder) %d; processes:\n%s", s, n.daemonPID(), psForest())
	}

	// A person posts in the thread: the session answers, as the agent.
	hello := n.result(person, "post", "--to", record, "--text", "hello")
	reply := n.awaitReply(record, hello)
	t.Logf("the session answered %s with %s: %q", hello[:10], reply.Hash[:10], reply.Text)
	if reply.Sender != agent || !strings.Contains(reply.Text, "echo: hello") {
		t.Errorf("the reply to %s: sent by %q: %q", hello, reply.Sender, reply.Text)
	}

	// A listener on a ticket feeds it too.
	tid := n.result(person, "ticket", "--title", "It crashes", "--text", "On start.")
	n.result("", "listener", "add", key, "--kind", "ticket", "--names", tid)
	ping := n.result(person, "post", "--to", tid, "--text", "ticket ping")
	n.waitFor("the session's answer on the ticket", func() bool {
		for _, c := range n.ticket(tid) {
			if c.Sender == agent && strings.Contains(c.Text, "echo: ticket ping") {
				return true
			}
		}
		return false
	})
	_ = ping

	// Working while a turn runs, then idle and listening.
	slow := n.result(person, "post", "--to", record, "--text", "slow")
	n.waitFor("the session to be working", func() bool {
		st := n.status()
		return len(st.Sessions) == 1 && st.Sessions[0].State == messages.SessionWorking
	})
	if err := os.WriteFile(filepath.Join(ws, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := n.awaitReply(record, slow); !strings.Contains(r.Text, "echo: slow") {
		t.Errorf("the slow reply: %q", r.Text)
	}
	n.waitFor("the session to be idle and listening", func() bool {
		st := n.status()
		return len(st.Sessions) == 1 && st.Sessions[0].State == messages.SessionIdle && st.Sessions[0].Listening
	})
	st = n.status()
	if len(st.Workspaces) != 1 || st.Workspaces[0].State != messages.WorkspaceActive || st.Workspaces[0].Record != record {
		t.Errorf("workspaces: %v", st.Workspaces)
	}
	if len(st.Listeners) != 1 || st.Listeners[0].Kind != messages.ListenTicket || st.Listeners[0].Names != tid {
		t.Errorf("listeners: %v", st.Listeners)
	}
	if len(st.Hooks) != 1 || !st.Hooks[0].Installed || len(st.Logins) != 1 || st.Logins[0].Login != agent {
		t.Errorf("hooks %v, logins %v", st.Hooks, st.Logins)
	}

	// A second start while it runs restarts it (D33): the first session is
	// stopped and its one end note awaited, then the new one launches.
	first := launch
	launch = n.result(admin, "session", "start", key, "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--", "/bin/sh", "-c", echoScript)
	var firstEnds int
	for _, p := range n.thread(record) {
		if e, ok := p.Note.(*messages.EndNote); ok && e.Launch == first && p.Sender == "ocx" {
			firstEnds++
		}
		if rn, ok := p.Note.(*messages.RefusalNote); ok && rn.Launch == launch {
			t.Errorf("the second start was refused: %s", rn.Reason)
		}
	}
	if firstEnds != 1 {
		t.Errorf("the first launch %s has %d end notes after a second start, want 1", first, firstEnds)
	}
	n.waitFor("the restarted session to listen", func() bool {
		st := n.status()
		return len(st.Sessions) == 1 && st.Sessions[0].Launch == launch && st.Sessions[0].Listening
	})
	again := n.result(person, "post", "--to", record, "--text", "again")
	if r := n.awaitReply(record, again); !strings.Contains(r.Text, "echo: again") {
		t.Errorf("the restarted session's reply: %q", r.Text)
	}

	// While it runs, nothing removes its workspace or its login.
	if r := n.ocx(admin, "workspace", "terminate", key); r.code != 1 || !strings.Contains(r.stdout, "a running process names workspace agent-1/demo") {
		t.Errorf("terminate while a session runs: %s", r)
	}
	if r := n.ocx("", "login", "withdraw", agent); r.code != 1 || !strings.Contains(r.stdout, "a running process names workspace agent-1/demo") {
		t.Errorf("withdraw while a session runs: %s", r)
	}
	if _, err := os.Stat(filepath.Join(ws, "binding.json")); err != nil {
		t.Errorf("the workspace is gone while its session runs: %v", err)
	}

	// Stop it: the stopped note (by the session) and the end note (by the
	// daemon), and no process names the workspace any more.
	n.must("", "session", "stop", key)
	n.waitFor("the stopped and end notes", func() bool {
		var stopped, ended bool
		for _, p := range n.thread(record) {
			switch note := p.Note.(type) {
			case *messages.StoppedNote:
				stopped = stopped || (p.Sender == agent && note.Launch == launch && note.Cause == messages.StopBySignal)
			case *messages.EndNote:
				ended = ended || (p.Sender == "ocx" && note.Launch == launch && p.InReplyTo == launch)
			}
		}
		return stopped && ended
	})
	n.waitFor("no session in the status", func() bool { return len(n.status().Sessions) == 0 })
	if st := n.status(); st.Workspaces[0].State != messages.WorkspaceIdle {
		t.Errorf("after the stop the workspace is %s", st.Workspaces[0].State)
	}

	t.Logf("stopped; the record holds %d posts", len(n.thread(record)))

	// A person posts while nothing listens: the unheard note, as the agent.
	lonely := n.result(person, "post", "--to", record, "--text", "anyone?")
	n.waitFor("the unheard note", func() bool {
		for _, p := range n.thread(record) {
			if u, ok := p.Note.(*messages.UnheardNote); ok && u.Post == lonely && p.Sender == agent && p.InReplyTo == lonely && u.Why == messages.UnheardNoReader {
				return true
			}
		}
		return false
	})

	// A stop for a session that does not exist.
	r := n.ocx("", "session", "stop", key)
	if r.code != 1 || !strings.Contains(r.stdout, "no session runs in workspace agent-1/demo") {
		t.Errorf("a stop with no session: %s", r)
	}

	// Restart the stopped session (D33): -n lists it and writes out the
	// confirming command; --only restarts exactly that list.
	before := len(n.thread(record))
	r = n.ocx(admin, "session", "restart", "--release", "current", "-n")
	pick := key + "@" + launch
	if r.code != 0 || !strings.Contains(r.stdout, "would restart agent-1/demo") || !strings.Contains(r.stdout, "--only "+pick) {
		t.Fatalf("session restart -n: %s", r)
	}
	if got := len(n.thread(record)); got != before {
		t.Errorf("session restart -n wrote %d posts", got-before)
	}
	r = n.ocx(admin, "session", "restart", "--release", "current", "--only", pick)
	if r.code != 0 || !strings.Contains(r.stdout, "restarted agent-1/demo") {
		t.Fatalf("session restart --only: %s", r)
	}
	n.waitFor("the restarted session to listen", func() bool {
		st := n.status()
		return len(st.Sessions) == 1 && st.Sessions[0].Launch != launch && st.Sessions[0].Listening
	})
	n.must("", "session", "stop", key)
	n.waitFor("no session in the status", func() bool { return len(n.status().Sessions) == 0 })
}

// awaitReply waits for the agent's reply to a post in a thread.
func (n *testNode) awaitReply(root, to string) posted {
	n.t.Helper()
	return n.awaitReplyBy(agent, root, to)
}

// awaitReplyBy waits for login's reply to a post in a thread.
func (n *testNode) awaitReplyBy(login, root, to string) posted {
	n.t.Helper()
	var got posted
	n.waitFor(login+"'s reply to "+to, func() bool {
		for _, p := range n.thread(root) {
			if p.InReplyTo == to && p.Sender == login {
				got = p
				return true
			}
		}
		return false
	})
	return got
}

// TestBadInputsLeaveNothingHalfMade is the list of bad inputs not
// covered above: a login named ../x, a definition with an unknown sandbox
// key. Each gets a clear message and leaves nothing on the record or the
// host.
func TestBadInputsLeaveNothingHalfMade(t *testing.T) {
	n := newNode(t)
	admin := n.srv.AdminLogin
	before := n.records()

	r := n.ocx("", "login", "add", "../x")
	if r.code != 1 || !strings.Contains(r.stdout, `login: "../x" is not a login`) {
		t.Errorf("login ../x: %s", r)
	}
	if _, err := os.Stat(filepath.Join(n.agents, "..", "x")); err == nil {
		t.Errorf("login ../x made a directory")
	}

	n.must("", "login", "add", agent)
	sb := filepath.Join(t.TempDir(), "sandbox.json")
	if err := os.WriteFile(sb, []byte(`{"network": true, "read_only": ["/usr"], "read_write": [], "homes": [], "path": ["/usr/bin"], "memory": "4G"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r = n.ocx(admin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk", "--sandbox", sb)
	if r.code != 1 || !strings.Contains(r.stdout, "sandbox.memory") || !strings.Contains(r.stdout, "may be a limit") {
		t.Errorf("unknown sandbox key: %s", r)
	}
	if _, err := os.Stat(filepath.Join(n.agents, agent, "projects")); err == nil {
		t.Errorf("a refused workspace left a directory")
	}
	if after := n.records(); after != before {
		t.Errorf("refusals wrote %d artifacts on the record", after-before)
	}
	// A start into a workspace that does not exist makes it (D57), but
	// not for a login that is no agent login of the node; and usage errors.
	r = n.ocx(admin, "session", "start", key("nobody-1"), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--", "cat")
	if r.code != 1 || !strings.Contains(r.stdout, "does not exist on the host") || !strings.Contains(r.stdout, "refused to make it") {
		t.Errorf("start without a workspace for a login that is none: %s", r)
	}
	if after := n.records(); after != before {
		t.Errorf("a refused start wrote %d artifacts on the record", after-before)
	}
	r = n.ocx("", "workspace", "frobnicate")
	if r.code != 2 || !strings.Contains(r.stderr, `"frobnicate" is not an action of ocx workspace`) {
		t.Errorf("unknown action: %s", r)
	}
	if r := n.ocx("", "session", "start", "--help"); r.code != 0 || !strings.Contains(r.stderr, "--lifetime") || !strings.Contains(r.stderr, "-hears") {
		t.Errorf("--help: %s", r)
	}
}

func key(login string) string { return login + "/demo" }

// records counts the posts and ticket changes of the node's repository.
func (n *testNode) records() int {
	n.t.Helper()
	r := n.repo()
	defer r.Close()
	hashes, _, err := r.Received(n.ctx, 0)
	if err != nil {
		n.t.Fatal(err)
	}
	return len(hashes)
}
