package itest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages"
)

// Issue 23 item 3: sessions without the network. A session reads its
// launch, its posts and its record, and writes its answers, its ticket
// comments and its CI tags, through the node's sync socket (D49), never
// by reaching the server itself; so a sandbox whose network is off runs
// every kind of session, and one with the network runs as before.

// sandboxFile writes a workspace sandbox for login's workspace as the
// template makes it (seed 000's read-only list as this host has it, the
// release rel, the workspace's own directory read-write), with the network
// on or off, and returns its path for `workspace add --sandbox`.
func (n *testNode) sandboxFile(login string, network bool, rel string) string {
	n.t.Helper()
	sb := messages.Sandbox{Network: network, ReadWrite: []string{n.workspaceDir(login)}, Homes: []string{}}
	for _, p := range []string{"/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc/ssl", "/etc/resolv.conf",
		"/etc/hosts", "/etc/nsswitch.conf", "/etc/passwd", "/etc/group"} {
		if _, err := os.Lstat(p); err == nil {
			sb.ReadOnly = append(sb.ReadOnly, p)
		}
	}
	sb.ReadOnly = append(sb.ReadOnly, rel)
	sb.Path = []string{rel, "/usr/local/bin", "/usr/bin", "/bin"}
	b, err := json.Marshal(sb)
	if err != nil {
		n.t.Fatal(err)
	}
	p := filepath.Join(n.t.TempDir(), login+"-sandbox.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		n.t.Fatal(err)
	}
	return p
}

// reachScript answers a post as echoScript does, and a post that says
// "reach" with whether the turn reaches the node's server itself (a pull
// of the clone as it remembers the server) and through the node (the same
// pull through $OCX_FOSSIL_PROXY, D49). fossil pull exits 0 and says
// "Pull done" when it could not connect, so its "cannot connect" is read.
const reachScript = `read -r line
if [ "$line" = reach ]; then
  direct=fail; node=fail
  case "$(fossil pull -R "$HOME/clone" 2>&1)" in *"cannot connect"*) ;; *"Pull done"*) direct=ok;; esac
  case "$(fossil pull -R "$HOME/clone" --proxy "$OCX_FOSSIL_PROXY" 2>&1)" in *"cannot connect"*) ;; *"Pull done"*) node=ok;; esac
  printf 'direct: %s, through the node: %s\n' "$direct" "$node"
  exit 0
fi
printf 'echo: %s\n' "$line"`

// TestSessionWithoutTheNetwork: a mechanical `stays` session whose sandbox
// has no network answers a post in its thread and a change on a ticket it
// listens to, as the agent; its turn reaches the node's server only
// through the node. Beside it, the same session in a sandbox with the
// network answers as before, and its turn reaches the server both ways.
func TestSessionWithoutTheNetwork(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	admin := n.srv.AdminLogin
	const offline, online = "offline-1", "online-1"
	records := map[string]string{}
	for _, a := range []struct {
		login   string
		network bool
	}{{offline, false}, {online, true}} {
		n.must("", "login", "add", a.login)
		records[a.login] = n.result(admin, "workspace", "add", "--login", a.login, "--project", "demo", "--branch", "trunk",
			"--sandbox", n.sandboxFile(a.login, a.network, release()))
		n.result(admin, "session", "start", key(a.login), "--hears", person, "--kind", "mechanical", "--lifetime", "stays",
			"--", "/bin/sh", "-c", reachScript)
	}
	n.waitFor("both sessions to listen", func() bool {
		listening := 0
		for _, s := range n.status().Sessions {
			if s.Listening {
				listening++
			}
		}
		return listening == 2
	})

	for login, record := range records {
		hello := n.result(person, "post", "--to", record, "--text", "hello "+login)
		if r := n.awaitReplyBy(login, record, hello); !strings.Contains(r.Text, "echo: hello "+login) {
			t.Errorf("%s's reply to hello: %q", login, r.Text)
		}
	}

	// A ticket it listens to: the answer is a comment on it, by the agent.
	tid := n.result(person, "ticket", "--title", "It crashes", "--text", "On start.")
	n.result("", "listener", "add", key(offline), "--kind", "ticket", "--names", tid)
	n.result(person, "post", "--to", tid, "--text", "ticket ping")
	n.waitFor("the offline session's answer on the ticket", func() bool {
		for _, c := range n.ticket(tid) {
			if c.Sender == offline && strings.Contains(c.Text, "echo: ticket ping") {
				return true
			}
		}
		return false
	})

	// What a turn reaches: the server itself only with the network; the
	// node's server through the node either way.
	want := map[string]string{offline: "direct: fail, through the node: ok", online: "direct: ok, through the node: ok"}
	for login, record := range records {
		reach := n.result(person, "post", "--to", record, "--text", "reach")
		if r := n.awaitReplyBy(login, record, reach); !strings.Contains(r.Text, want[login]) {
			t.Errorf("%s's turn reaches: %q, want %q", login, r.Text, want[login])
		}
	}
	for _, login := range []string{offline, online} {
		n.must(admin, "session", "stop", key(login))
	}
	n.waitFor("both sessions to end", func() bool { return !n.anyServing() })
	for login, record := range records {
		stopped := false
		for _, e := range notesOn[*messages.StoppedNote](n, record) {
			stopped = stopped || e.P.Sender == login
		}
		if !stopped {
			t.Errorf("%s wrote no stopped note on its record", login)
		}
	}
}

// TestLLMSessionWithoutTheNetwork: an llm session on ocx-runner-native in
// a sandbox with no network answers a post: its model through model.sock,
// its reads and its answer through the node's sync socket.
func TestLLMSessionWithoutTheNetwork(t *testing.T) {
	needs(t, "ocxd", "workspace", "llm ocx-runner-native")
	n := newNodeOn(t, llmRoot)
	admin := n.srv.AdminLogin
	model := &chatModel{t: t, replies: []string{chatText("native answer, offline")}}
	srv := httptest.NewServer(model)
	t.Cleanup(srv.Close)
	if err := os.WriteFile(filepath.Join(n.agents, "model.json"), []byte(`{"api": "openai", "base_url": "`+srv.URL+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	const login = "native-off"
	n.must("", "login", "add", login)
	record := n.result(admin, "workspace", "add", "--login", login, "--project", "demo", "--branch", "trunk",
		"--sandbox", n.sandboxFile(login, false, filepath.Join(llmRoot, "releases", "llm")))
	n.result(admin, "session", "start", key(login), "--kind", "llm", "--runner", "native",
		"--model", "stand-in", "--lifetime", "stays", "--hears", person)
	n.waitFor("the session to listen", func() bool {
		for _, s := range n.status().Sessions {
			if s.Login == login && s.Listening {
				return true
			}
		}
		return false
	})
	hello := n.result(person, "post", "--to", record, "--text", "hello, offline")
	if r := n.awaitReplyBy(login, record, hello); strings.TrimSpace(r.Text) != "native answer, offline" {
		t.Errorf("the answer: %+v", r)
	}
	if reqs := model.requests(); len(reqs) != 1 || !strings.Contains(string(reqs[0].Messages[len(reqs[0].Messages)-1]), "hello, offline") {
		t.Errorf("the model saw %d requests, the last not holding the post", len(reqs))
	}
	n.must(admin, "session", "stop", key(login))
	n.waitFor("the session to end", func() bool { return !n.anyServing() })
}

// TestCIWithoutTheNetwork: a CI session (a `completes` branch listener)
// in a sandbox with no network puts its tree on a check-in its clone
// lacks (pulled through the node) and tags it green, as its login.
func TestCIWithoutTheNetwork(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	admin := n.srv.AdminLogin
	startDaemon(t, n, program("ocxd"), "--grace", "1s")
	const ci = "ci-offline"
	n.must("", "login", "add", ci)
	record := n.result(admin, "workspace", "add", "--login", ci, "--project", "demo", "--branch", "trunk",
		"--sandbox", n.sandboxFile(ci, false, release()))
	// The command reads the check-in's own file: the tree is on it.
	def := &messages.SessionDefinition{Kind: messages.Mechanical, Lifetime: messages.Completes,
		Command: []string{"/bin/sh", "-c", `cat one.txt && echo all tests pass`}}
	block, err := def.Encode()
	if err != nil {
		t.Fatal(err)
	}
	n.result(admin, "post", "--to", record, "--text", "The CI session.\n\n"+string(block))
	n.result("", "listener", "add", ci+"/demo", "--kind", "branch", "--names", "trunk")
	c := newCommitter(t, n)
	c1 := c.commit("one.txt")
	var tag string
	n.waitFor("the check-in tagged by the offline CI", func() bool {
		var ok bool
		tag, ok = n.ciTag(c1, ci)
		return ok
	})
	if tag != "green: all tests pass" {
		t.Errorf("the ci tag on %s: %q\nsession log:\n%s", c1, tag, readLog(n, ci))
	}
	n.waitFor("the CI run to end", func() bool { return !n.anyServing() })
}

// readLog is a workspace's session log, for a failure's message.
func readLog(n *testNode, login string) string {
	b, _ := os.ReadFile(filepath.Join(n.workspaceDir(login), "session", "log"))
	return string(b)
}

// TestAdoptedSessionWithoutTheNetworkStops: a session without the network
// outlives its daemon (a kill -9), answers under the daemon started after
// it, outlives that one too (its TERM: sessions keep running), and on a
// stop through a third daemon, which found it at its start and signals
// each of its processes, bwrap first, writes its stopped note through the
// node's sync socket: the socket's server lives as long as the session's
// sandbox does, not only its bwrap.
func TestAdoptedSessionWithoutTheNetworkStops(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	admin := n.srv.AdminLogin
	d := startDaemon(t, n, program("ocxd"), "--grace", "1s")
	const login = "offline-2"
	n.must("", "login", "add", login)
	record := n.result(admin, "workspace", "add", "--login", login, "--project", "demo", "--branch", "trunk",
		"--sandbox", n.sandboxFile(login, false, release()))
	launch := n.result(admin, "session", "start", key(login), "--hears", person, "--kind", "mechanical", "--lifetime", "stays",
		"--", "/bin/sh", "-c", reachScript)
	n.waitFor("the session to listen", func() bool {
		for _, s := range n.status().Sessions {
			if s.Login == login && s.Listening {
				return true
			}
		}
		return false
	})
	first := n.result(person, "post", "--to", record, "--text", "before")
	if r := n.awaitReplyBy(login, record, first); !strings.Contains(r.Text, "echo: before") {
		t.Errorf("the answer before the kill: %q", r.Text)
	}
	d.kill9()
	d2 := startDaemon(t, n, program("ocxd"), "--grace", "1s")
	n.waitLogLine("the new daemon's start", func(l logLine) bool { return l.Msg == "started" && l.OCXD == d2.pid() })
	after := n.result(person, "post", "--to", record, "--text", "after")
	if r := n.awaitReplyBy(login, record, after); !strings.Contains(r.Text, "echo: after") {
		t.Errorf("the answer under the new daemon: %q", r.Text)
	}
	d2.stop()
	n.must(admin, "session", "stop", key(login))
	n.waitFor("the agent's stopped note", func() bool {
		for _, e := range notesOn[*messages.StoppedNote](n, record) {
			if e.P.Sender == login && e.Note.Launch == launch {
				return true
			}
		}
		return false
	})
	n.waitFor("the session to end", func() bool { return !n.anyServing() })
}

// TestSyncSocketTakesTheAgentsLoginAlone (issue 39 item 7, D81): a
// session's sync socket forwards a request only when its payload opens
// with a login card as the workspace's own login. Sent raw on the socket,
// a request with no login card (which a server trusting its loopback
// would answer as setup) and one logging in as the admin are refused by
// the socket, naming what it forwards, and reach no server; the session's
// own requests, through the same socket, still answer its posts.
func TestSyncSocketTakesTheAgentsLoginAlone(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	admin := n.srv.AdminLogin
	const login = "offline-2"
	n.must("", "login", "add", login)
	record := n.result(admin, "workspace", "add", "--login", login, "--project", "demo", "--branch", "trunk",
		"--sandbox", n.sandboxFile(login, false, release()))
	n.result(admin, "session", "start", key(login), "--hears", person, "--kind", "mechanical", "--lifetime", "stays",
		"--", "/bin/sh", "-c", reachScript)
	n.waitFor("the session to listen", func() bool {
		st := n.status()
		return len(st.Sessions) == 1 && st.Sessions[0].Listening
	})
	// The session is spawned before `ocx mcp start` binds its sockets
	// (the server watches the session's PID), so it may listen first.
	sock := filepath.Join(n.agents, login, "mcp", "demo", "sync.sock")
	n.waitFor("the session's sync socket", func() bool {
		_, err := os.Stat(n.seen(sock))
		return err == nil
	})
	send := func(body string) (int, string, string) {
		t.Helper()
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST / HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/x-fossil-uncompressed\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("X-Ocx-Sync"), string(b)
	}
	pull := "pull " + strings.Repeat("0", 40) + " " + n.srv.ProjectCode + "\n"
	for _, c := range []struct{ name, body, says string }{
		{"no login card", pull, `first card is "pull"`},
		{"the admin's login card", "login " + admin + " " + strings.Repeat("a", 40) + " " + strings.Repeat("b", 40) + "\n" + pull, `logs in as "` + admin + `"`},
	} {
		code, by, body := send(c.body)
		if code != http.StatusForbidden || by != "refused" || !strings.Contains(body, c.says) || !strings.Contains(body, "sync requests of "+login) {
			t.Errorf("%s: %d (X-Ocx-Sync %q) %q; want refused by the socket, saying %q", c.name, code, by, body, c.says)
		}
	}
	hello := n.result(person, "post", "--to", record, "--text", "hello")
	if r := n.awaitReplyBy(login, record, hello); !strings.Contains(r.Text, "echo: hello") {
		t.Errorf("the session's reply through its socket: %q", r.Text)
	}
	n.must(admin, "session", "stop", key(login))
	n.waitFor("the session to end", func() bool { return !n.anyServing() })
}
