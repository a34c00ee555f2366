package itest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// TestForgedListenNoteWakesNobody: another agent pushes a listen note in
// this agent's name (its U card too) on a thread; the daemon rebuilds the
// listening index from the node's repository just before it starts the
// session, so the thread is not in the index, and a person's post there wakes
// nobody, while a post on the session's own record is answered. A stale file
// in the index before the start is gone after it.
func TestForgedListenNoteWakesNobody(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	admin := n.srv.AdminLogin
	const mallory = "agent-9"
	n.must("", "login", "add", agent)
	n.must("", "login", "add", mallory)
	record := n.result(admin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	elsewhere := n.result(person, "thread", "--title", "Elsewhere", "--text", "another thread")

	pw, err := fossilio.ReadPasswordFile(filepath.Join(n.agents, mallory, "password"))
	if err != nil {
		t.Fatal(err)
	}
	block, err := (&messages.ListenNote{Listener: messages.Listener{Login: agent, Project: "demo", Kind: messages.ListenThread, Names: elsewhere}}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	data, err := fossilio.PostDraft{Date: time.Now(), User: agent, Root: elsewhere, InReplyTo: elsewhere, Text: string(block)}.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	c := &fossilio.Client{URL: n.srv.URL, Login: mallory, Password: pw, ProjectCode: n.srv.ProjectCode}
	forged, err := c.Push(n.ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	// A file for the thread, as a session that trusted its clone would
	// have written it.
	idx := filepath.Join(n.workspaceDir(agent), "session", "listening")
	if err := os.MkdirAll(idx, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(idx, elsewhere), []byte("thread\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	n.result(admin, "session", "start", agent+"/demo", "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--", "/bin/sh", "-c", echoScript)
	n.waitFor("the session to listen", func() bool {
		st := n.status()
		return len(st.Sessions) == 1 && st.Sessions[0].Listening
	})
	// The index the hook reads is the node's, out of the agent's reach
	// (D44); the file planted where seed 000 put it is never read.
	entries, err := os.ReadDir(filepath.Join(n.agents, agent, "held", "demo", "listening"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
	}
	if !slices.Equal(files, []string{record}) {
		t.Errorf("the listening index after the daemon's rebuild: %v, want only the own record %s (the forged note is %s)", files, record, forged)
	}
	if log := n.daemonLog(); !strings.Contains(log, `"msg":"listening index rebuilt"`) || !strings.Contains(log, `"files":"`+record+`"`) {
		t.Errorf("the daemon's log says no rebuild of the index:\n%s", log)
	}

	// A person's post on the forged thread, then one on the own record: the
	// hook handles receipts in order, so once the second is answered the
	// first was handled too, and woke nobody.
	ignored := n.result(person, "post", "--to", elsewhere, "--text", "on the forged thread")
	hello := n.result(person, "post", "--to", record, "--text", "hello")
	if r := n.awaitReply(record, hello); r.Sender != agent || !strings.Contains(r.Text, "echo: hello") {
		t.Errorf("the reply on the own record: %+v", r)
	}
	sessionLog, err := os.ReadFile(filepath.Join(n.workspaceDir(agent), "session", "log"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sessionLog), ignored) {
		t.Errorf("the session was woken for a post on the thread the forged note names:\n%s", sessionLog)
	}
	for _, p := range n.thread(elsewhere) {
		if p.Sender == agent {
			t.Errorf("the agent wrote on the forged thread: %+v", p)
		}
	}
	n.must("", "session", "stop", agent+"/demo")
	n.waitFor("no session in the status", func() bool { return len(n.status().Sessions) == 0 })
}
