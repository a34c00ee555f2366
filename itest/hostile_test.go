package itest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
)

// bob may post and push as alice may; no session of these tests hears him.
const (
	stranger   = "bob"
	strangerPW = "bob-pw-1"
)

// pusher writes artifacts as user, with whatever its cards say, and runs the
// node's backoffice after each push, as OCX's tools do, so that the hook
// sees it at once.
func (n *testNode) pusher(user string) *fossilio.Client {
	admin := &fossilio.Admin{Repository: n.srv.Repo, Fossil: &fossilio.Fossil{Home: n.agents, User: "ocx", Dir: n.agents}}
	return &fossilio.Client{URL: n.srv.URL, Login: user, Password: n.pw[user], ProjectCode: n.srv.ProjectCode, Backoffice: admin.Backoffice}
}

// push writes a reply in thread root, replying to to, as user, its U card
// naming author.
func (n *testNode) push(user, author, root, to, text string) string {
	n.t.Helper()
	data, err := fossilio.PostDraft{Date: time.Now(), User: author, Root: root, InReplyTo: to, Text: text}.Bytes()
	if err != nil {
		n.t.Fatal(err)
	}
	h, err := n.pusher(user).Push(n.ctx, data)
	if err != nil {
		n.t.Fatal(err)
	}
	return h
}

// hookLog is AGENTS/hook.log.
func (n *testNode) hookLog() string {
	b, _ := os.ReadFile(filepath.Join(n.agents, "hook.log"))
	return string(b)
}

// repliesTo lists the agent's replies to a post in a thread.
func (n *testNode) repliesTo(root, to string) []posted {
	var out []posted
	for _, p := range n.thread(root) {
		if p.InReplyTo == to && p.Sender == agent {
			out = append(out, p)
		}
	}
	return out
}

// TestStrangersNeitherPromptNorStop is issue 10's items 1 and 9 through the
// real hook, daemon and sandboxed session: a session hears whom its
// definition names (alice); a stranger's post (bob's) wakes nothing and gets
// no unheard note; a reply alice pushes with the agent's name in its U card
// is answered as alice's; a forged unlisten note in the agent's name does
// not silence a listener; a stop request from anyone without admin or setup
// is ignored, the admin's stops it.
func TestStrangersNeitherPromptNorStop(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNodeWith(t, harness.User{Login: stranger, Password: strangerPW, Caps: "cghijnorwz234"})
	admin := n.srv.AdminLogin
	n.must("", "login", "add", agent)
	record := n.result(admin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	elsewhere := n.result(person, "thread", "--title", "Elsewhere", "--text", "a thread the session listens to")
	n.result("", "listener", "add", key(agent), "--kind", "thread", "--names", elsewhere)
	launch := n.result(admin, "session", "start", key(agent), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--",
		"/bin/sh", "-c", `read -r line; printf 'echo: %s from=%s\n' "$line" "${OCX_FROM:-unknown}"`)
	n.waitFor("the session to listen", func() bool {
		st := n.status()
		return len(st.Sessions) == 1 && st.Sessions[0].Listening
	})
	if st := n.status(); strings.Join(st.Sessions[0].Hears, ",") != person {
		t.Errorf("the status says the session hears %q, want %q", st.Sessions[0].Hears, person)
	}

	// bob is not heard: his post wakes nothing. alice's after it is
	// answered; the session answers in the order it is woken, so bob's
	// would have been answered first.
	fromBob := n.result(stranger, "post", "--to", record, "--text", "let me in")
	fromAlice := n.result(person, "post", "--to", record, "--text", "hello")
	if r := n.awaitReply(record, fromAlice); !strings.Contains(r.Text, "echo: hello from="+person) {
		t.Errorf("the reply to alice: %q", r.Text)
	}
	if rs := n.repliesTo(record, fromBob); len(rs) != 0 {
		t.Errorf("the session answered bob, whom it does not hear: %+v", rs)
	}
	if !strings.Contains(n.hookLog(), `not woken: the session does not hear \"bob\"`) {
		t.Errorf("the hook's log does not say why bob's post woke nothing:\n%s", n.hookLog())
	}

	// A reply alice pushes whose U card says the agent wrote it: the node
	// knows alice sent it, and so does the session in its sandbox.
	forged := n.push(person, agent, record, record, "I am the agent")
	if r := n.awaitReply(record, forged); !strings.Contains(r.Text, "echo: I am the agent from="+person) {
		t.Errorf("the reply to the forged post: %q", r.Text)
	}

	// bob pushes an unlisten note in the agent's name on the listened
	// thread: it is not the agent's, and the listener stands.
	block, err := (&messages.UnlistenNote{Listener: messages.Listener{Login: agent, Project: "demo", Kind: messages.ListenThread, Names: elsewhere}}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	n.push(stranger, agent, elsewhere, elsewhere, string(block))
	there := n.result(person, "post", "--to", elsewhere, "--text", "still listening?")
	if r := n.awaitReply(elsewhere, there); !strings.Contains(r.Text, "echo: still listening?") {
		t.Errorf("the reply on the listened thread: %q", r.Text)
	}

	// Stop requests from bob and from alice (heard, but without admin or
	// setup) are ignored; the session answers on.
	bobStop := n.result(stranger, "post", "--to", record, "--text", "OCX stop")
	aliceStop := n.result(person, "post", "--to", record, "--text", "OCX stop")
	after := n.result(person, "post", "--to", record, "--text", "after the stops")
	if r := n.awaitReply(record, after); !strings.Contains(r.Text, "echo: after the stops") {
		t.Errorf("the reply after the stops: %q", r.Text)
	}
	log := n.hookLog()
	for _, s := range []string{bobStop, aliceStop} {
		if !strings.Contains(log, "level=WARN") || !strings.Contains(log, "post="+s) {
			t.Errorf("the ignored stop request %s is not in the hook's log", s)
		}
	}
	for _, who := range []string{stranger, person} {
		if !strings.Contains(log, `a stop request from \"`+who+`\", who holds neither admin nor setup, is ignored`) {
			t.Errorf("the hook's log does not say %s's stop request is ignored:\n%s", who, log)
		}
	}

	// The admin's stop request stops it, though it does not hear the admin.
	adminStop := n.result(admin, "post", "--to", record, "--text", "OCX stop")
	n.waitFor("the stopped and end notes", func() bool {
		var stopped, ended bool
		for _, p := range n.thread(record) {
			switch note := p.Note.(type) {
			case *messages.StoppedNote:
				stopped = stopped || (p.Sender == agent && note.Cause == messages.StopByRequest && note.Request == adminStop)
			case *messages.EndNote:
				ended = ended || (p.Sender == "ocx" && note.Launch == launch)
			}
		}
		return stopped && ended
	})
	for _, s := range []string{bobStop, aliceStop} {
		for _, p := range n.thread(record) {
			if sn, ok := p.Note.(*messages.StoppedNote); ok && sn.Request == s {
				t.Errorf("a stop request without admin or setup stopped the session: %+v", sn)
			}
		}
	}

	// Nobody listens now: alice's post gets an unheard note, bob's none.
	lonelyBob := n.result(stranger, "post", "--to", record, "--text", "anyone?")
	lonely := n.result(person, "post", "--to", record, "--text", "anyone at all?")
	n.waitFor("the unheard note for alice's post", func() bool {
		for _, p := range n.thread(record) {
			if u, ok := p.Note.(*messages.UnheardNote); ok && u.Post == lonely && p.Sender == agent {
				return true
			}
		}
		return false
	})
	for _, p := range n.thread(record) {
		if u, ok := p.Note.(*messages.UnheardNote); ok && strings.Contains(strings.Join(u.All(), " "), lonelyBob) {
			t.Errorf("bob's post, which the session does not hear, got an unheard note: %+v", u)
		}
	}
}

// TestLaunchNotesThatDoNotCount is issue 10's items 3 and 8 through the real
// hook and daemon: a launch note sent by a user without admin or setup is
// ignored, logged at warn with why, and gets no note (D7); an admin's launch
// note that cannot be launched gets a refusal note naming the fault: one
// whose post holds two launch notes, one naming a workspace definition whose
// sandbox holds memory_max, one naming a session definition and one a
// workspace definition a non-admin sent. Nothing is launched.
func TestLaunchNotesThatDoNotCount(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	admin := n.srv.AdminLogin
	n.must("", "login", "add", agent)
	record := n.result(admin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	b, err := readBindingOf(n, agent)
	if err != nil {
		t.Fatal(err)
	}
	def := func(d *messages.SessionDefinition) string {
		block, err := d.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return string(block)
	}
	launchBlock := func(ws, session string) string {
		block, err := (&messages.LaunchNote{Login: agent, Project: "demo", Workspace: ws, Session: session, Release: messages.ReleaseCurrent}).Encode()
		if err != nil {
			t.Fatal(err)
		}
		return string(block)
	}
	cat := &messages.SessionDefinition{Kind: messages.Mechanical, Command: []string{"cat"}, Lifetime: messages.Stays, Hears: []string{person}}
	adminDef := n.push(admin, admin, record, record, def(cat))

	// 1. alice, without admin, writes a launch note naming the admin's
	// definitions: ignored, with a warning that says why; no note.
	byAlice := n.push(person, person, record, record, launchBlock(b.Workspace, adminDef))
	n.waitLogLine("the daemon's warning about alice's launch note", func(l logLine) bool {
		return l.Level == "WARN" && l.Launch == byAlice && strings.Contains(l.Msg, `was sent by "alice", who holds neither admin nor setup`)
	})

	// 2. The admin's post holding two launch notes.
	two := n.push(admin, admin, record, record, "Two at once.\n\n"+launchBlock(b.Workspace, adminDef)+"\n"+launchBlock(b.Workspace, adminDef))

	// 3. The admin's launch naming a session definition alice wrote.
	aliceDef := n.push(person, person, record, record, def(cat))
	namesAlices := n.push(admin, admin, record, record, launchBlock(b.Workspace, aliceDef))

	// 4. The admin's launch naming a workspace definition whose sandbox
	// holds memory_max, written by hand as the first post of a thread.
	wsText := "```json\n{\"ocx\": \"workspace\", \"login\": \"" + agent + "\", \"project\": \"demo\", \"branch\": \"trunk\", " +
		"\"sandbox\": {\"network\": true, \"read_only\": [\"/usr\"], \"read_write\": [], \"homes\": [], \"path\": [\"/usr/bin\"], \"memory_max\": \"1G\"}}\n```\n"
	c := n.pusher(admin)
	badWS, err := c.NewThread(n.ctx, "A workspace with a limit", wsText)
	if err != nil {
		t.Fatal(err)
	}
	namesBadWS := n.push(admin, admin, record, record, launchBlock(badWS, adminDef))

	// 5. The admin's launch naming a workspace definition alice wrote (she
	// may push, so she can write one, with the admin's name in its U card).
	goodWS := strings.ReplaceAll(wsText, `, "memory_max": "1G"`, "")
	data, err := fossilio.PostDraft{Date: time.Now(), User: admin, Title: "A workspace alice defined", Text: goodWS}.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	alicesWS, err := n.pusher(person).Push(n.ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	namesAlicesWS := n.push(admin, admin, record, record, launchBlock(alicesWS, adminDef))

	refusal := func(launch string) *messages.RefusalNote {
		var got *messages.RefusalNote
		n.waitFor("the refusal note of "+launch, func() bool {
			for _, p := range n.thread(record) {
				if r, ok := p.Note.(*messages.RefusalNote); ok && r.Launch == launch && p.Sender == "ocx" && p.InReplyTo == launch {
					got = r
					return true
				}
			}
			return false
		})
		return got
	}
	for _, c := range []struct {
		launch string
		want   []string
	}{
		{two, []string{"does not read as one launch note", "holds 2 OCX notes"}},
		{namesAlices, []string{"session definition", `sent by "alice"`, "neither admin nor setup"}},
		{namesBadWS, []string{"workspace definition", "memory_max"}},
		{namesAlicesWS, []string{"workspace definition", `sent by "alice"`, "neither admin nor setup"}},
	} {
		r := refusal(c.launch)
		for _, w := range c.want {
			if !strings.Contains(r.Reason, w) {
				t.Errorf("the refusal of %s says %q, which does not say %q", c.launch, r.Reason, w)
			}
		}
		if r.Project != "demo" {
			t.Errorf("the refusal of %s names project %q", c.launch, r.Project)
		}
	}
	for _, p := range n.thread(record) {
		if r, ok := p.Note.(*messages.RefusalNote); ok && r.Launch == byAlice {
			t.Errorf("alice's launch note got a refusal note: %+v", r)
		}
	}
	if st := n.status(); len(st.Sessions) != 0 {
		t.Errorf("a session runs: %v", st.Sessions)
	}
}

// readBindingOf reads a workspace's binding.json.
func readBindingOf(n *testNode, login string) (*messages.Binding, error) {
	// It is the agent's file: a pipe there must not hang the test.
	data, err := unixhost.Below(n.agents).ReadFile(filepath.Join(n.workspaceDir(login), "binding.json"), unixhost.SmallFile)
	if err != nil {
		return nil, err
	}
	return messages.DecodeBinding(data)
}
