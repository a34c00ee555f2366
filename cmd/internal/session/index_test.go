package session_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	listenindex "github.com/ocx-go/ocx/host/listening"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// listenNote writes a listen or unlisten note as the agent, where c's record
// r is.
func (w *wsFixture) listenNote(c *fossilio.Client, on bool, where rec, kind messages.ListenKind, names string) {
	w.n.t.Helper()
	l := messages.Listener{Login: w.login, Project: "demo", Kind: kind, Names: names}
	if c.Login != w.login {
		// A note in another workspace's name, as any user who may push could
		// write one.
		l.Login = c.Login
	}
	var n messages.Note = &messages.ListenNote{Listener: l}
	if !on {
		n = &messages.UnlistenNote{Listener: l}
	}
	block, err := n.Encode()
	if err != nil {
		w.n.t.Fatal(err)
	}
	w.post(c, where, string(block))
}

// forgedListenNote pushes, as c (another login who may push), a listen note
// in w's name on thread where, its U card naming w's login too: only the
// node's receipt tells c sent it.
func (w *wsFixture) forgedListenNote(c *fossilio.Client, where rec, kind messages.ListenKind, names string) string {
	w.n.t.Helper()
	block, err := (&messages.ListenNote{Listener: messages.Listener{Login: w.login, Project: "demo", Kind: kind, Names: names}}).Encode()
	if err != nil {
		w.n.t.Fatal(err)
	}
	data, err := fossilio.PostDraft{Date: time.Now(), User: w.login, Root: where.id, InReplyTo: where.id, Text: string(block)}.Bytes()
	if err != nil {
		w.n.t.Fatal(err)
	}
	h, err := c.Push(w.n.ctx, data)
	if err != nil {
		w.n.t.Fatal(err)
	}
	return h
}

// TestListeningIndexFromTheNode: `workspace serve` leaves the listening
// index as it finds it (the daemon rebuilt it from the node's repository
// just before it started the session); `workspace run` on the node's host
// rebuilds it from the node's repository, where a listen note in the agent's
// name that another agent pushed does not count.
func TestListeningIndexFromTheNode(t *testing.T) {
	n := newNode(t)
	w := n.workspace("idx-1")
	mallory := n.workspace("idx-mallory")
	ctx := n.ctx
	thread := func(title string) rec {
		h, err := n.admin.NewThread(ctx, title, "a thread")
		if err != nil {
			t.Fatal(err)
		}
		return rec{kind: messages.ListenThread, id: h, first: h}
	}
	t1, t2, t3 := thread("one"), thread("two"), thread("three")
	_, k1, err := n.admin.NewTicket(ctx, fossilio.Field{Name: "title", Value: "a ticket"}, fossilio.Field{Name: "icomment", Value: "x"})
	if err != nil {
		t.Fatal(err)
	}
	ticket := rec{kind: messages.ListenTicket, id: k1}
	r := w.record(messages.ListenThread, "Listen around.", stays("cat"), "")

	w.listenNote(w.agent, true, t1, messages.ListenThread, t1.id)
	w.listenNote(w.agent, true, ticket, messages.ListenTicket, k1)
	w.listenNote(w.agent, true, t2, messages.ListenThread, t2.id)
	w.listenNote(w.agent, false, t2, messages.ListenThread, t2.id)
	w.listenNote(w.agent, true, r, messages.ListenBranch, "feature/x")
	// Another agent pushes a listen note in this agent's name: the clone
	// cannot tell it from the agent's own, the node can.
	forged := w.forgedListenNote(mallory.agent, t3, messages.ListenThread, t3.id)
	if info, err := n.repo.Info(ctx, forged); err != nil || info.Sender != mallory.login || info.Author != w.login {
		t.Fatalf("the forged note: %+v, %v", info, err)
	}

	// What the index holds before: one file the notes no longer name.
	stale := filepath.Join(w.ws.ListeningDir, strings.Repeat("ab", 20))
	if err := os.MkdirAll(w.ws.ListeningDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte("thread\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := listening(t, w)

	p := w.serve(r.launch, false)
	w.waitLog("event=ready", 1)
	if got := listening(t, w); !slices.Equal(got, before) {
		t.Errorf("serve changed the listening index:\n got %v\nwant %v", got, before)
	}
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}

	// A terminal session on the node's host, on the workspace's record.
	w.homeDefinition(stays("cat"))
	p = w.spawn([]string{filepath.Join(release, "workspace"), "run", w.key.String(), "--root", n.agents}, false, nil)
	w.waitLog("event=ready", 2)
	want := []string{"branch feature/x", "thread " + t1.id, "thread " + w.home, "ticket " + k1}
	slices.Sort(want)
	if got := listening(t, w); !slices.Equal(got, want) {
		t.Errorf("the index run rebuilt from the node:\n got %v\nwant %v", got, want)
	}
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// listening lists the listening index as "KIND NAMES", sorted.
func listening(t *testing.T, w *wsFixture) []string {
	t.Helper()
	entries, err := os.ReadDir(w.ws.ListeningDir)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(w.ws.ListeningDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		le, err := messages.ParseListeningFile(e.Name(), b)
		if err != nil {
			t.Errorf("listening file %s: %v", e.Name(), err)
		}
		keys = append(keys, string(le.Kind)+" "+le.Names)
	}
	slices.Sort(keys)
	return keys
}

// TestListenerAddedWhileRunning (issue 10, item 6): a listener added while
// the session runs (its note on the node, then its file, as `ocx listener
// add` does). The hook decides from the file which posts the session hears
// (those the node received after the listen note), so the session reads no
// listen note and never pulls for a new listener, in the sandbox or out: it
// answers the post it is woken for. It used to pull when the file looked
// newer than its last pull, by modification time, which two posts within
// 50 ms both met.
func TestListenerAddedWhileRunning(t *testing.T) {
	for _, sandboxed := range []bool{false, true} {
		t.Run(fmt.Sprintf("sandboxed=%v", sandboxed), func(t *testing.T) { listenerAddedWhileRunning(t, sandboxed) })
	}
}

func listenerAddedWhileRunning(t *testing.T, sandboxed bool) {
	n := newNode(t)
	w := n.workspace("idx-3")
	root, err := n.admin.NewThread(n.ctx, "Later", "a thread listened to later")
	if err != nil {
		t.Fatal(err)
	}
	later := rec{kind: messages.ListenThread, id: root, first: root}
	r := w.record(messages.ListenThread, "Listen later.", stays(echoCommand...), "")
	p := w.serve(r.launch, sandboxed)
	w.waitLog("event=ready", 1)
	w.listenNote(w.agent, true, later, messages.ListenThread, root)
	ur, err := unixhost.OpenRoot(n.agents)
	if err != nil {
		t.Fatal(err)
	}
	defer ur.Close()
	if err := listenindex.Set(n.ctx, ur, w.ws, messages.ListenThread, root, 1, true); err != nil {
		t.Fatal(err)
	}
	var posts []string
	for i := range 3 {
		posts = append(posts, w.post(n.admin, later, fmt.Sprintf("after the listener %d", i)))
	}
	w.wake(posts...)
	for i, h := range posts {
		if a := w.waitReply(later, h); !strings.Contains(a.text, fmt.Sprintf("said: after the listener %d", i)) || a.sender != w.login {
			t.Errorf("the answer to %s: %+v", h, a)
		}
	}
	if got := strings.Count(w.logText(), "event=pull"); got != 1 {
		t.Errorf("%d pulls, want the start's alone:\n%s", got, w.logText())
	}
	// A stop request reaches the session in or out of the sandbox.
	w.wake(w.post(n.admin, r, "OCX stop"))
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
