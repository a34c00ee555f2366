package itest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/nodesock"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/wire"
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
	ask := func() *wire.Reply {
		t.Helper()
		r, err := nodesock.Ask(context.Background(), layout, wire.NewAsk(wire.AskStatus), 10*time.Second)
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
		live, _ := json.Marshal(replyState(t, r))
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
	if st := replyState(t, ask()); len(st.Listeners) != 1 || !strings.HasPrefix(st.Listeners[0].Login, "agent-2") {
		t.Errorf("the daemon's listeners after a listen: %+v", st.Listeners)
	}

	// The daemon killed mid-answer: stopped, it is asked (the connection
	// and the ask wait in its socket's queue), then killed. The ask ends in
	// an error, not a reply and not a wait, and the command then reads the
	// record itself (its socket's name left behind) as with no name at all,
	// and the session lives on.
	sessions := replyState(t, ask()).Sessions
	pid := n.daemonPID()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// A stop is delivered after kill returns: the queue is counted once
	// every thread of the daemon has stopped, so that no connection it was
	// still closing is counted.
	n.waitFor("the daemon to stop", func() bool { return allStopped(t, pid) })
	queued := queuedOn(t, layout.Socket())
	errc := make(chan error, 1)
	go func() {
		_, err := nodesock.Ask(context.Background(), layout, wire.NewAsk(wire.AskStatus), time.Minute)
		errc <- err
	}()
	n.waitFor("the ask to wait in the stopped daemon's queue", func() bool {
		select {
		case err := <-errc:
			t.Fatalf("the ask of the stopped daemon ended before it was killed: %v", err)
		default:
		}
		return queuedOn(t, layout.Socket()) > queued
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err == nil {
		t.Error("an ask of a daemon killed before it answered gave a reply")
	} else {
		t.Logf("the ask of the killed daemon: %v", err)
	}
	n.waitFor("the daemon to end", func() bool { return n.daemonPID() == 0 })
	if _, err := os.Lstat(layout.Socket()); err != nil {
		t.Fatalf("the killed daemon's socket name is gone (%v); the fallback is not tried", err)
	}
	after := n.status()
	stale, _ := json.Marshal(after)
	read, _ := json.Marshal(fresh())
	if string(stale) != string(read) {
		t.Errorf("ocx status with the killed daemon's socket name differs from its read with none\nname: %s\nnone: %s", stale, read)
	}
	if len(after.Sessions) != 1 || after.Sessions[0].PID != sessions[0].PID || !after.Sessions[0].Listening {
		t.Errorf("the session after the daemon was killed: %+v, before %+v", after.Sessions, sessions)
	}
}

// allStopped says whether every thread of process pid is stopped by a
// signal (state T).
func allStopped(t *testing.T, pid int) bool {
	t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false
		}
		// The state follows the command's closing parenthesis.
		rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
		if f := strings.Fields(rest); len(f) == 0 || f[0] != "T" {
			return false
		}
	}
	return true
}

// queuedOn counts the connections waiting in the queue of the Unix socket
// listening at path (/proc/net/unix: the entries naming it that are not
// the listener itself).
func queuedOn(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		// Num RefCount Protocol Flags Type St Inode Path; __SO_ACCEPTCON
		// (00010000) marks the listener.
		if len(f) == 8 && f[7] == path && f[3] != "00010000" {
			n++
		}
	}
	return n
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

	layout := endDaemonLeavingItsSocket(t, n)
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

// replyState is the state a status reply carries, in its line or in the
// document that follows it (D70).
func replyState(t testing.TB, r *wire.Reply) *messages.NodeState {
	t.Helper()
	if r.State != nil {
		return r.State
	}
	st, err := messages.DecodeState(r.StateDoc)
	if err != nil {
		t.Fatalf("the daemon's state document: %v\n%s", err, r.StateDoc)
	}
	return st
}

// TestConsolePagesFromTheDaemon: with the release's ocx-console as the
// console's CGI, each page read by GET is rendered by the daemon (D71),
// the same page `ocx console` renders by itself but for what is new at
// each request; with the daemon gone, the page is served by `ocx
// console`, which says it read the repository itself. (A form, never
// asked of the daemon, is every console test's.)
func TestConsolePagesFromTheDaemon(t *testing.T) {
	needs(t, "ocx", "ocxd", "workspace", host.ConsoleProgram)
	n := consoleNode(t)
	admin := n.srv.AdminLogin
	n.must("", "login", "add", agent)
	record := n.result(admin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	n.result(admin, "session", "start", key(agent), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript)
	n.waitFor("the session to listen", func() bool {
		st := n.status()
		return len(st.Sessions) == 1 && st.Sessions[0].Listening
	})
	n.waitLogLine("the daemon to serve its socket", func(l logLine) bool { return l.Msg == "serving the daemon's socket" })
	v := n.viewer(admin)
	get := func(path string) (int, string, string) {
		t.Helper()
		resp, err := v.c.Get(v.base + "ext/console/" + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("X-Ocx-Served-By"), string(b)
	}
	// What changes at each request: the nonce of the page's script and
	// the forms' token.
	varies := regexp.MustCompile(`(nonce|value|content)="[0-9a-f]{32,}"|"token": ?"[^"]*"`)
	env := func(path string) []string { return fossilEnvFor(t, n, v, path) }
	for _, c := range []struct{ path, marker string }{
		{"sessions", `data-ocx-session="` + key(agent) + `"`},
		{"workspaces", `data-ocx-workspace="`},
		{"logins", agent},
		{"state", `"ocx": "state"`},
		{"thread/" + record, `"thread": "` + record + `"`},
		{"hook", "demo"},
	} {
		code, by, body := get(c.path)
		if code != 200 || by != "daemon" || !strings.Contains(body, c.marker) || strings.Contains(body, `id="ocx-read-itself"`) {
			t.Fatalf("%s with the daemon up: %d, served by %q\n%s", c.path, code, by, body)
		}
		_, code, _, own := runConsoleCGI(t, program("ocx"), n.agents, n.srv.ExtRoot, env(c.path))
		_, _, _, daemon := runConsoleCGIWith(t, program(host.ConsoleProgram), n.agents, n.srv.ExtRoot, env(c.path))
		if code != 200 || varies.ReplaceAllString(own, "") != varies.ReplaceAllString(daemon, "") {
			t.Errorf("%s: the daemon's page differs from ocx console's own\ndaemon: %s\nconsole: %s", c.path, daemon, own)
		}
	}
	layout := endDaemonLeavingItsSocket(t, n)
	defer os.Remove(layout.Socket())
	code, by, body := get("sessions")
	if code != 200 || by != "console" || !strings.Contains(body, `data-ocx-session="`+key(agent)+`"`) ||
		!strings.Contains(body, `id="ocx-read-itself"`) {
		t.Fatalf("the sessions page with no daemon: %d, served by %q\n%s", code, by, body)
	}
}

// endDaemonLeavingItsSocket ends the node's daemon with TERM and leaves a
// name at its socket that nothing answers on, so that a daemon a page
// starts serves no socket either: every caller then reads the repository
// itself.
func endDaemonLeavingItsSocket(t *testing.T, n *testNode) host.Layout {
	t.Helper()
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
	return layout
}
