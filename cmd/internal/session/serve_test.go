package session_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// echoCommand answers a post with what it read and the facts it was given,
// prints nothing for "quiet", and exits 3 after answering "fail".
var echoCommand = []string{"sh", "-c", `read -r x || true
[ "$x" = quiet ] && exit 0
echo "said: $x"
echo "post=$OCX_POST record=$OCX_RECORD from=${OCX_FROM:-unknown}"
[ "$x" = fail ] && exit 3
exit 0`}

func stays(command ...string) *messages.SessionDefinition {
	return &messages.SessionDefinition{Kind: messages.Mechanical, Command: command, Lifetime: messages.Stays}
}

func TestMechanicalAnswersPostsOnceAndStopsOnRequest(t *testing.T) {
	n := newNode(t)
	w := n.workspace("mech-1")
	r := w.record(messages.ListenThread, "Answer what is said here.", stays(echoCommand...), "")
	p := w.serve(r.launch, false)
	w.waitLog("event=ready", 1)

	hello := w.post(n.admin, r, "hello")
	w.wake(hello)
	a := w.waitReply(r, hello)
	if a.sender != w.login {
		t.Fatalf("the reply was sent by %q, want the agent login %q", a.sender, w.login)
	}
	for _, want := range []string{"said: hello", "post=" + hello, "record=" + r.id, "from=" + n.srv.AdminLogin} {
		if !strings.Contains(a.text, want) {
			t.Errorf("the reply lacks %q:\n%s", want, a.text)
		}
	}
	if strings.Contains(a.text, "exit status") {
		t.Errorf("a command that exited 0 is said to have failed:\n%s", a.text)
	}
	w.turnFileGone()

	// A hash written twice is answered once; so is one already answered.
	quiet := w.post(n.admin, r, "quiet")
	fail := w.post(n.admin, r, "fail")
	w.wake(quiet, quiet, hello, fail)
	if a := w.waitReply(r, fail); !strings.Contains(a.text, "said: fail") || !strings.Contains(a.text, "(command: exit status 3)") {
		t.Errorf("the answer to a command that exited 3:\n%s", a.text)
	}
	if rs := w.replies(r, quiet); len(rs) != 1 || !strings.Contains(rs[0].text, "The command printed nothing.") {
		t.Errorf("replies to a post whose command printed nothing: %+v", rs)
	}
	if rs := w.replies(r, hello); len(rs) != 1 {
		t.Errorf("%d replies to a post woken for twice, want 1", len(rs))
	}

	// The agent's own post is not answered; a stop request ends the session.
	own := w.post(w.agent, r, "a note to self")
	stop := w.post(n.admin, r, "OCX stop")
	w.wake(own, stop)
	if code := p.wait(); code != 0 {
		t.Fatalf("the session exited %d after a stop request, want 0:\n%s", code, w.logText())
	}
	if rs := w.replies(r, own); len(rs) != 0 {
		t.Errorf("the agent answered its own post: %+v", rs)
	}
	sn := w.stoppedNote(r)
	if sn.Cause != messages.StopByRequest || sn.Request != stop || sn.Launch != r.launch || sn.Login != w.login {
		t.Errorf("stopped note %s", sn)
	}
	if rs := w.replies(r, stop); len(rs) != 1 {
		t.Errorf("the stopped note does not reply to the stop request: %d replies", len(rs))
	}
}

func TestTicketPostGetsATicketChangeReply(t *testing.T) {
	n := newNode(t)
	w := n.workspace("mech-2")
	r := w.record(messages.ListenTicket, "Answer on this ticket.", stays(echoCommand...), "")
	p := w.serve(r.launch, false)
	w.waitLog("event=ready", 1)
	change := w.post(n.admin, r, "about the ticket")
	w.wake(change)
	a := w.waitReply(r, change)
	if !strings.Contains(a.text, "said: about the ticket") || !strings.Contains(a.text, "record="+r.id) {
		t.Errorf("the ticket reply:\n%s", a.text)
	}
	info, err := n.repo.Info(n.ctx, a.hash)
	if err != nil {
		t.Fatal(err)
	}
	if info.Ticket != r.id || info.Sender != w.login {
		t.Errorf("the reply is %+v, want a change to ticket %s sent by %s", info, r.id, w.login)
	}
	// TERM while idle: a stopped note naming the signal, exit 0.
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d after TERM, want 0", code)
	}
	sn := w.stoppedNote(r)
	if sn.Cause != messages.StopBySignal || sn.Signal != "SIGTERM" || sn.Launch != r.launch {
		t.Errorf("stopped note %s", sn)
	}
}

func TestServerGoneIsLoggedNeverFatal(t *testing.T) {
	n := newNode(t)
	w := n.workspace("gone-1")
	r := w.record(messages.ListenThread, "Answer while you can.", stays(echoCommand...), "")
	p := w.serve(r.launch, false)
	w.waitLog("event=ready", 1)
	// A post the server does not hold is not tried again: no retry would
	// bring it.
	missing := strings.Repeat("cd", 32)
	w.wakeLines(missing + " " + n.srv.AdminLogin)
	w.waitLog("event=not-answered post="+missing, 1)
	if got := strings.Count(w.logText(), "event=retry op=\"read post "+missing+"\""); got != 0 {
		t.Errorf("%d retries of a post the server lacks, want none", got)
	}
	h := w.post(n.admin, r, "before the server goes")
	n.srv.Stop()
	w.wakeLines(h+" "+n.srv.AdminLogin, "not a hash")
	// The fetch is tried a bounded number of times, then the line is logged
	// as not answered, and the session goes on listening.
	w.waitLog("event=not-answered post="+h, 1)
	w.waitLog(`event=refused line="not a hash"`, 1)
	if !p.running() {
		t.Fatalf("the session died when the server went away:\n%s", w.logText())
	}
	if got := strings.Count(w.logText(), "event=retry op=\"read post "+h+"\""); got != 4 {
		t.Errorf("%d retries of the read logged, want 4 (5 attempts)", got)
	}
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d after TERM with the server gone", code)
	}
	if !strings.Contains(w.logText(), "stopped note not written") {
		t.Errorf("the stopped note that could not be written is not logged")
	}
}

// TestAnsweredOnceAcrossSessions: a post woken again after the session that
// answered it ended (two backoffice runs overlapping, D11) is not answered
// again, and a stop request woken again does not stop the next session:
// WS/session/answered remembers what the workspace's sessions answered.
func TestAnsweredOnceAcrossSessions(t *testing.T) {
	n := newNode(t)
	w := n.workspace("twice-1")
	r := w.record(messages.ListenThread, "Answer once.", stays(echoCommand...), "")
	p := w.serve(r.launch, false)
	w.waitLog("event=ready", 1)
	hello := w.post(n.admin, r, "hello")
	w.wake(hello)
	w.waitReply(r, hello)
	stop := w.post(n.admin, r, "OCX stop")
	w.wake(stop)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d after a stop request", code)
	}
	data, err := os.ReadFile(filepath.Join(w.ws.Session, "answered"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(data)); !slices.Equal(got, []string{hello, stop}) {
		t.Errorf("WS/session/answered holds %q, want hello then the stop request", got)
	}

	// The next session of the workspace is woken for both again, then for
	// a new post.
	r2 := w.record(messages.ListenThread, "Answer once more.", stays(echoCommand...), "")
	p = w.serve(r2.launch, false)
	w.waitLog("event=ready", 2)
	again := w.post(n.admin, r, "a new post on the first record")
	w.wake(hello, stop, again)
	// The first record is not this session's own and holds no listen note:
	// woken, it is heard.
	if a := w.waitReply(r, again); !strings.Contains(a.text, "said: a new post") {
		t.Errorf("the answer to the new post:\n%s", a.text)
	}
	w.waitLog("event=skip-answered post="+hello, 1)
	w.waitLog("event=skip-answered post="+stop, 1)
	if !p.running() {
		t.Fatalf("a stop request answered by the session before stopped the next one:\n%s", w.logText())
	}
	if rs := w.replies(r, hello); len(rs) != 1 {
		t.Errorf("%d replies to a post woken in two sessions, want 1", len(rs))
	}
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d after TERM", code)
	}
}

// TestForgedUCardIsAnsweredAsThePushers (issue 10, item 1): a user who may
// push (dev) pushes a reply whose U card names the session's agent login. In
// its sandbox the session cannot read the node, and used to take the name in
// the U card for the sender: it skipped the post as its own. The wake line
// names the receipt's user, so the session answers the post as dev's; a stop
// request on a line naming no sender is not obeyed.
func TestForgedUCardIsAnsweredAsThePushers(t *testing.T) {
	n := newNode(t)
	w := n.workspace("forged-1")
	cmd := []string{"sh", "-c", `read -r x || true; echo "said: $x from=${OCX_FROM:-unknown}"`}
	r := w.record(messages.ListenThread, "Answer whoever speaks.", stays(cmd...), "")
	p := w.serve(r.launch, true)
	w.waitLog("event=ready", 1)
	data, err := fossilio.PostDraft{Date: time.Now(), User: w.login, Root: r.id, InReplyTo: r.id, Text: "I am the agent"}.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	forged, err := n.dev.Push(n.ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := n.repo.Info(n.ctx, forged); err != nil || info.Sender != "dev" || info.Author != w.login {
		t.Fatalf("the forged post: %+v, %v", info, err)
	}
	w.wake(forged)
	a := w.waitReply(r, forged)
	if !strings.Contains(a.text, "said: I am the agent from=dev") || a.sender != w.login {
		t.Errorf("the answer to the forged post: %+v", a)
	}
	if strings.Contains(w.logText(), "event=skip-own") {
		t.Errorf("the forged post was taken for the agent's own:\n%s", w.logText())
	}
	// A line with no sender is a post from an unknown sender: its stop
	// request is not obeyed (the hook never writes such a line).
	stop := w.post(n.admin, r, "OCX stop")
	w.wakeLines(stop)
	w.waitLog("event=skip-stop post="+stop, 1)
	w.wake(stop)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if sn := w.stoppedNote(r); sn.Cause != messages.StopByRequest || sn.Request != stop {
		t.Errorf("stopped note %s", sn)
	}
}

// TestServeThroughTheNodeWithoutTheNetwork (D49): `workspace serve` in a
// sandbox with no network, its environment naming the node's sync socket
// as the daemon's does, reads its launch and the posts it is woken for and
// writes its answers through that socket: a reply in its thread, a comment
// on its ticket, and, for a CI run, the tree put on a check-in its clone
// lacks (pulled through the relay) and the ci tag; each as the agent.
func TestServeThroughTheNodeWithoutTheNetwork(t *testing.T) {
	n := newNode(t)
	w := n.workspace("offline-1")
	w.throughNode()

	r := w.record(messages.ListenThread, "Answer without the network.", stays(echoCommand...), "")
	p := w.serve(r.launch, true)
	w.waitLog("event=ready", 1)
	if !strings.Contains(w.logText(), "event=sync") {
		t.Errorf("the session does not say it reaches the server through the node:\n%s", w.logText())
	}
	h := w.post(n.admin, r, "hello offline")
	w.wake(h)
	if a := w.waitReply(r, h); !strings.Contains(a.text, "said: hello offline") || a.sender != w.login {
		t.Errorf("the reply: %+v", a)
	}
	w.wake(w.post(n.admin, r, "OCX stop"))
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, w.logText())
	}

	tr := w.record(messages.ListenTicket, "Answer on this ticket, offline.", stays(echoCommand...), "")
	p = w.serve(tr.launch, true)
	w.waitLog("event=ready", 2)
	change := w.post(n.admin, tr, "about the ticket")
	w.wake(change)
	if a := w.waitReply(tr, change); !strings.Contains(a.text, "said: about the ticket") || a.sender != w.login {
		t.Errorf("the ticket reply: %+v", a)
	}
	w.wake(w.post(n.admin, tr, "OCX stop"))
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d after a stop request:\n%s", code, w.logText())
	}
	if sn := w.stoppedNote(tr); sn.Cause != messages.StopByRequest {
		t.Errorf("stopped note on the ticket: %s", sn)
	}

	// A check-in made after the clone: the CI run pulls it through the
	// node, tests it, and tags it.
	d := n.devTree()
	good := d.commit("pass: offline")
	w.runCI(good, true)
	if v, ok := n.ciTag(good, w.login); !ok || v != "green: pass: offline" {
		t.Errorf("ci tag: %q %v\n%s", v, ok, w.logText())
	}
	if w.forwarded.Load() == 0 {
		t.Errorf("nothing went through the node's sync socket")
	}
}
