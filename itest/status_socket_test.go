package itest

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/nodesock"
	"github.com/ocx-go/ocx/messages"
)

// TestStatusFromTheDaemonIsAFreshRead: the status the daemon answers on
// its socket from its live record (D66) is the document `ocx status
// --json` derives from the repository itself, on a node with workspaces, a
// session and a listener; after a post and a listen the daemon's answer
// follows the record; and with the socket's name gone the command reads
// the record itself and prints the same.
func TestStatusFromTheDaemonIsAFreshRead(t *testing.T) {
	needs(t, "ocx", "ocxd", "workspace")
	n := newNode(t)
	admin := n.srv.AdminLogin
	records := map[string]string{}
	for _, l := range []string{agent, "agent-2"} {
		n.must("", "login", "add", l)
		records[l] = n.result(admin, "workspace", "add", "--login", l, "--project", "demo", "--branch", "trunk")
	}
	n.result(admin, "session", "start", key(agent), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript)
	// The session listens before it is ready, and begins its account of
	// its turns (usage) once it is: the two reads compared below must not
	// fall on either side of that.
	n.waitFor("the session to listen and begin its account", func() bool {
		st := n.status()
		return len(st.Sessions) == 1 && st.Sessions[0].Listening && st.Sessions[0].Usage != nil
	})
	n.waitLogLine("the daemon to serve its socket", func(l logLine) bool { return l.Msg == "serving the daemon's socket" })
	layout, err := host.NewLayout(n.agents)
	if err != nil {
		t.Fatal(err)
	}
	ask := func() *messages.Reply {
		t.Helper()
		r, err := nodesock.Ask(context.Background(), layout, messages.NewAsk(messages.AskStatus), 10*time.Second)
		if err != nil {
			t.Fatalf("the daemon's status: %v\nocxd.log:\n%s", err, n.daemonLog())
		}
		return r
	}
	// fresh is the status the command derives with the daemon's socket out
	// of its sight.
	fresh := func() *messages.NodeState {
		t.Helper()
		aside := layout.Socket() + ".aside"
		if err := os.Rename(layout.Socket(), aside); err != nil {
			t.Fatal(err)
		}
		defer os.Rename(aside, layout.Socket())
		return n.status()
	}
	same := func(what string) {
		t.Helper()
		r := ask()
		live, _ := json.Marshal(r.State)
		read, _ := json.Marshal(fresh())
		if string(live) != string(read) {
			t.Fatalf("%s: the daemon's status differs from a fresh read\ndaemon: %s\nfresh:  %s", what, live, read)
		}
		if r.Receipts["demo"].Rcvid == 0 {
			t.Errorf("%s: the answer names no receipt it is current to: %+v", what, r.Receipts)
		}
	}
	same("after the start")
	before := ask().Receipts["demo"].Rcvid

	n.result("", "listener", "add", key("agent-2"), "--kind", "thread", "--names", records[agent])
	same("after a listener")
	if after := ask().Receipts["demo"].Rcvid; after <= before {
		t.Errorf("the receipt did not move with the record: %d, then %d", before, after)
	}
	if st := ask().State; len(st.Listeners) != 1 || !strings.HasPrefix(st.Listeners[0].Login, "agent-2") {
		t.Errorf("the daemon's listeners after a listen: %+v", st.Listeners)
	}
}

// TestConsoleSaysWhereItsStatusCameFrom: a console page renders from the
// daemon's status when it answers, and says so on the page when it read
// the repository itself (here a plain file holds the socket's name, so no
// daemon can serve it).
func TestConsoleSaysWhereItsStatusCameFrom(t *testing.T) {
	needs(t, "ocx", "ocxd", "workspace")
	n := consoleNode(t)
	admin := n.srv.AdminLogin
	n.must("", "login", "add", agent)
	n.result(admin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	n.result(admin, "session", "start", key(agent), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript)
	n.waitLogLine("the daemon to serve its socket", func(l logLine) bool { return l.Msg == "serving the daemon's socket" })
	v := n.viewer(admin)
	code, body := v.get("sessions")
	if code != 200 || !strings.Contains(body, `data-ocx-session="`+key(agent)+`"`) || strings.Contains(body, `id="ocx-read-itself"`) {
		t.Fatalf("the sessions page with the daemon up: %d\n%s", code, body)
	}

	pid := n.daemonPID()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	n.waitFor("the daemon to end", func() bool { return n.daemonPID() == 0 })
	layout, err := host.NewLayout(n.agents)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(layout.Socket(), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	code, body = v.get("sessions")
	if code != 200 || !strings.Contains(body, `data-ocx-session="`+key(agent)+`"`) ||
		!strings.Contains(body, `id="ocx-read-itself"`) || !strings.Contains(body, "no daemon answers on its socket") {
		t.Fatalf("the sessions page with no daemon's socket: %d\n%s", code, body)
	}
	// The daemon the page started says why it serves no socket.
	n.waitLogLine("the daemon to say it serves no socket", func(l logLine) bool {
		return strings.HasPrefix(l.Msg, "the daemon's socket is not served")
	})
	os.Remove(layout.Socket())
}
