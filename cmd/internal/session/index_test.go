package session_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/ocx-go/ocx/fossilio"
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

func TestListeningIndexIsRebuiltFromTheNotes(t *testing.T) {
	n := newNode(t)
	w := n.workspace("idx-1")
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
	// Another login's listen note is not this workspace's.
	w.listenNote(n.dev, true, t3, messages.ListenThread, t3.id)

	// A file the notes no longer name, left from an earlier session.
	stale := filepath.Join(w.ws.ListeningDir, strings.Repeat("ab", 20))
	if err := os.MkdirAll(w.ws.ListeningDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte("thread\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	p := w.serve(r.launch, false)
	w.waitLog("event=ready", 1)
	entries, err := os.ReadDir(w.ws.ListeningDir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(w.ws.ListeningDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		kind, names, err := messages.ParseListeningFile(e.Name(), b)
		if err != nil {
			t.Errorf("listening file %s: %v", e.Name(), err)
		}
		got[string(kind)+" "+names] = e.Name()
	}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"branch feature/x", "thread " + r.id, "thread " + t1.id, "ticket " + k1}
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Errorf("listening index:\n got %v\nwant %v", keys, want)
	}
	if got["branch feature/x"] != "branch-feature%2Fx" {
		t.Errorf("the branch listener's file is %q", got["branch feature/x"])
	}
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}

	// The next session reads only what arrived since the last scan, and
	// finds the notes written meanwhile.
	w.listenNote(w.agent, false, t1, messages.ListenThread, t1.id)
	w.listenNote(w.agent, true, t3, messages.ListenThread, t3.id)
	r2 := w.record(messages.ListenThread, "Listen again.", stays("cat"), "")
	p = w.serve(r2.launch, false)
	w.waitLog("event=ready", 2)
	keys = listening(t, w)
	want = []string{"branch feature/x", "thread " + r2.id, "thread " + t3.id, "ticket " + k1}
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Errorf("listening index of the second session:\n got %v\nwant %v", keys, want)
	}
	if n := strings.Count(w.logText(), "event=scan from=0 "); n != 1 {
		t.Errorf("%d sessions read the whole clone, want only the first:\n%s", n, w.logText())
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
		kind, names, err := messages.ParseListeningFile(e.Name(), b)
		if err != nil {
			t.Errorf("listening file %s: %v", e.Name(), err)
		}
		keys = append(keys, string(kind)+" "+names)
	}
	slices.Sort(keys)
	return keys
}

// TestAnsweringStartsAtTheListenNote: on a record it listens to, a session
// answers only what was written after the agent's listen note there, and
// nothing after its unlisten note (seed 000: "the listen note is where the
// session starts answering").
func TestAnsweringStartsAtTheListenNote(t *testing.T) {
	n := newNode(t)
	w := n.workspace("idx-2")
	root, err := n.admin.NewThread(n.ctx, "Elsewhere", "another thread")
	if err != nil {
		t.Fatal(err)
	}
	other := rec{kind: messages.ListenThread, id: root, first: root}
	early := w.post(n.admin, other, "written before the listen note")
	w.listenNote(w.agent, true, other, messages.ListenThread, root)
	r := w.record(messages.ListenThread, "Listen elsewhere.", stays(echoCommand...), "")
	p := w.serve(r.launch, false)
	w.waitLog("event=ready", 1)
	late := w.post(n.admin, other, "after the listen note")
	w.wake(early, late)
	if a := w.waitReply(other, late); !strings.Contains(a.text, "said: after the listen note") {
		t.Errorf("the answer on the listened thread:\n%s", a.text)
	}
	w.waitLog("event=skip-unheard post="+early, 1)
	w.listenNote(w.agent, false, other, messages.ListenThread, root)
	gone := w.post(n.admin, other, "after the unlisten note")
	w.wake(gone)
	w.waitLog("event=skip-unheard post="+gone, 1)
	for _, h := range []string{early, gone} {
		if rs := w.replies(other, h); len(rs) != 0 {
			t.Errorf("post %s not heard, yet answered: %+v", h, rs)
		}
	}
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
