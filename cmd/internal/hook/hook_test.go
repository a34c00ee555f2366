package hook_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/hook"
	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/node/setup"
	"github.com/ocx-go/ocx/cmd/internal/workspaces"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
	"golang.org/x/sys/unix"
)

const (
	person   = "alice"
	personPW = "alice-pw-1"
	// stranger may post too, but no session here hears him.
	stranger   = "bob"
	strangerPW = "bob-pw-1"
	agent      = "agent-1"
	agent2     = "agent-2"
)

// fix is a node with two agents' workspaces on a real fossil server, and
// the test reading the daemon's pipe (holding its lock) as the daemon would.
type fix struct {
	t       testing.TB
	ctx     context.Context
	srv     *harness.Server
	agents  string
	n       *node.Node
	daemon  *lines
	logBuf  *syncBuffer
	release string
}

// lines collects what a reader of a named pipe reads.
type lines struct {
	mu   sync.Mutex
	got  []string
	r    *unixhost.PipeReader
	done chan struct{}
}

func readPipe(t testing.TB, root *unixhost.Root, path string) *lines {
	t.Helper()
	r, err := unixhost.OpenPipeReader(root, path)
	if err != nil {
		t.Fatal(err)
	}
	l := &lines{r: r, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		_ = r.Run(func(b []byte) {
			l.mu.Lock()
			l.got = append(l.got, string(b))
			l.mu.Unlock()
		})
	}()
	t.Cleanup(l.close)
	return l
}

func (l *lines) close() {
	if l.r != nil {
		l.r.Close()
		<-l.done
		l.r = nil
	}
}

// all returns what was read so far, waiting until it holds want lines or a
// few seconds passed.
func (l *lines) all(want int) []string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		l.mu.Lock()
		got := append([]string(nil), l.got...)
		l.mu.Unlock()
		if len(got) >= want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newFix(t testing.TB) *fix {
	t.Helper()
	srv := harness.StartServer(t, harness.Options{Users: []harness.User{
		{Login: person, Password: personPW, Caps: "cghijnorwz234"},
		{Login: stranger, Password: strangerPW, Caps: "cghijnorwz234"},
	}})
	f := &fix{t: t, ctx: context.Background(), srv: srv, agents: filepath.Join(t.TempDir(), "agents"), release: t.TempDir(), logBuf: &syncBuffer{}}
	must(t, setup.Init(f.ctx, f.agents, setup.InitInput{Projects: []setup.InitProject{{Name: "demo", Repository: srv.Repo, URL: srv.URL}}}, node.Options{Release: f.release}))
	n, err := node.Open(f.agents, node.Options{Caller: node.Caller{Login: srv.AdminLogin, Password: srv.AdminPassword}, Release: f.release})
	if err != nil {
		t.Fatal(err)
	}
	f.n = n
	for _, l := range []string{agent, agent2} {
		must(t, n.LoginAdd(f.ctx, l, false))
		must(t, workspaces.Of(n).WorkspaceAdd(f.ctx, workspaces.WorkspaceAddInput{Login: l, Project: "demo", Branch: "trunk"}))
	}
	must(t, n.HookInstall(f.ctx, false))
	// The test is the daemon: it holds the lock and reads the pipe.
	lock, err := unixhost.AcquireLock(n.Layout.Lock())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Release() })
	root, err := unixhost.OpenRoot(f.agents)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	if err := root.Mkfifo(n.Layout.Pipe(), 0o600); err != nil {
		t.Fatal(err)
	}
	f.daemon = readPipe(t, root, n.Layout.Pipe())
	return f
}

func must(t testing.TB, a *node.Answer) *node.Answer {
	t.Helper()
	if !a.OK() {
		t.Fatalf("%s stopped: %s\n%s", a.Tool, *a.Stopped, strings.Join(a.Log, "\n"))
	}
	return a
}

// listen opens a workspace's wake pipe for reading, as its session does.
func (f *fix) listen(login string) *lines {
	root, err := unixhost.OpenRoot(f.agents)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { root.Close() })
	return readPipe(f.t, root, f.wake(login))
}

func (f *fix) wake(login string) string {
	return filepath.Join(f.agents, login, "projects", "demo", "session", "wake")
}

// hears writes whom a workspace's session hears, as the daemon does when it
// starts one (AGENTS/LOGIN/held/PROJECT/hears).
func (f *fix) hears(login string, users ...string) {
	f.t.Helper()
	data, err := messages.HearsFileContent(users)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(f.agents, login, "held", "demo"), 0o700); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.agents, login, "held", "demo", "hears"), data, 0o600); err != nil {
		f.t.Fatal(err)
	}
}

// upTo writes a marker into a workspace's wake pipe, after whatever a run of
// the hook that has returned wrote there, and returns what the session read
// before it: what the hook woke it for, with no wait for lines that may
// never come.
func (f *fix) upTo(w *lines, login string) []string {
	f.t.Helper()
	root, err := unixhost.OpenRoot(f.agents)
	if err != nil {
		f.t.Fatal(err)
	}
	defer root.Close()
	lw, err := unixhost.OpenLineWriter(root, f.wake(login))
	if err != nil {
		f.t.Fatal(err)
	}
	defer lw.Close()
	marker := strings.Repeat("e", 64)
	if err := lw.WriteLine([]byte(marker)); err != nil {
		f.t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		w.mu.Lock()
		got := append([]string(nil), w.got...)
		w.mu.Unlock()
		for i, l := range got {
			if l == marker {
				w.mu.Lock()
				w.got = append(w.got[:i:i], w.got[i+1:]...)
				w.mu.Unlock()
				return got[:i]
			}
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("the marker never came through the wake pipe of %s: %q", login, got)
		}
		time.Sleep(time.Millisecond)
	}
}

// line is the wake line the hook writes for a post and its sender.
func line(hash, sender string) string { return hash + " " + sender }

func (f *fix) client(login, password string) *fossilio.Client {
	return &fossilio.Client{URL: f.srv.URL, Login: login, Password: password, ProjectCode: f.srv.ProjectCode}
}

func (f *fix) agentClient(login string) *fossilio.Client {
	pw, err := fossilio.ReadPasswordFile(filepath.Join(f.agents, login, "password"))
	if err != nil {
		f.t.Fatal(err)
	}
	return f.client(login, pw)
}

// hook runs the hook as Fossil would, with stdin listing hashes.
func (f *fix) hook(stdin ...string) {
	f.t.Helper()
	var in strings.Builder
	for _, h := range stdin {
		in.WriteString(h + " forum-post " + h[:14] + "\n")
	}
	err := hook.Run(f.ctx, hook.Options{
		Agents: f.agents, Repo: f.srv.Repo, Stdin: strings.NewReader(in.String()),
		Log: slog.New(slog.NewTextHandler(f.logBuf, nil)), Release: f.release,
	})
	if err != nil {
		f.t.Fatalf("hook: %v\n%s", err, f.logBuf)
	}
}

// notes returns the notes of kind T in a thread, with their senders.
func notesIn[T messages.Note](f *fix, root string) (out []T, senders []string) {
	r, err := fossilio.OpenNode(f.srv.Repo, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	defer r.Close()
	posts, err := r.Thread(f.ctx, root)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, p := range posts {
		if n, err := messages.ReadPost([]byte(p.Text)); err == nil {
			if t, ok := n.(T); ok {
				out, senders = append(out, t), append(senders, p.Sender)
			}
		}
	}
	return out, senders
}

func TestHookWakesListenersAndHandsPostsToTheDaemon(t *testing.T) {
	f := newFix(t)
	person := f.client(person, personPW)
	th, err := person.NewThread(f.ctx, "A question", "Hello?")
	if err != nil {
		t.Fatal(err)
	}
	f.hook(th) // the thread arrives: nobody listens yet
	must(t, workspaces.Of(f.n).ListenerAdd(f.ctx, workspaces.ListenerInput{Workspace: agent + "/demo", Kind: "thread", Names: th}))
	f.hears(agent, person.Login)
	w1 := f.listen(agent)
	listenNote := lastArtifact(f)
	f.hook(listenNote) // the listen note arrives: a note wakes nobody

	p1, err := person.Reply(f.ctx, th, th, "What does it do?")
	if err != nil {
		t.Fatal(err)
	}
	f.hook(p1)
	if got := w1.all(1); len(got) != 1 || got[0] != line(p1, person.Login) {
		t.Fatalf("the session read %q, want [%s]\n%s", got, p1, f.logBuf)
	}
	daemon := f.daemon.all(3)
	want := []string{"post " + f.srv.Repo + " " + th, "post " + f.srv.Repo + " " + listenNote, "post " + f.srv.Repo + " " + p1}
	if strings.Join(daemon, "\n") != strings.Join(want, "\n") {
		t.Errorf("the daemon read:\n%s\nwant:\n%s", strings.Join(daemon, "\n"), strings.Join(want, "\n"))
	}

	// The session's own post and a post holding an OCX note wake nobody; a
	// stop request from a person without admin or setup is ignored; the
	// admin's stop request wakes it, though it does not hear the admin.
	own, err := f.agentClient(agent).Reply(f.ctx, th, p1, "It answers.")
	if err != nil {
		t.Fatal(err)
	}
	note, _ := (&messages.ReportNote{Outcome: messages.ReportDone}).Encode()
	withNote, err := person.Reply(f.ctx, th, th, string(note))
	if err != nil {
		t.Fatal(err)
	}
	personsStop, err := person.Reply(f.ctx, th, th, "OCX stop")
	if err != nil {
		t.Fatal(err)
	}
	adminsStop, err := f.client(f.srv.AdminLogin, f.srv.AdminPassword).Reply(f.ctx, th, th, "OCX stop")
	if err != nil {
		t.Fatal(err)
	}
	f.hook(own, withNote, personsStop, adminsStop)
	if got := w1.all(2); len(got) != 2 || got[1] != line(adminsStop, f.srv.AdminLogin) {
		t.Errorf("after its own post, a note and two stop requests, the session read %q; want the admin's stop %s last", got, adminsStop)
	}
	if log := f.logBuf.String(); !strings.Contains(log, `a stop request from \"alice\", who holds neither admin nor setup, is ignored`) || !strings.Contains(log, "level=WARN") {
		t.Errorf("the ignored stop request is not logged at warn:\n%s", log)
	}
	if got := f.daemon.all(7); len(got) != 7 {
		t.Errorf("the daemon read %d lines, want every post handed: %q", len(got), got)
	}
}

func TestHookKeepsItsOwnMark(t *testing.T) {
	f := newFix(t)
	person, th := f.heardThread()
	w1 := f.listen(agent)
	f.hook()
	p1, err := person.Reply(f.ctx, th, th, "one")
	if err != nil {
		t.Fatal(err)
	}
	// Fossil's list may miss a receipt (after a quiet day): the hook finds
	// it by its own mark, with nothing on stdin.
	f.hook()
	if got := w1.all(1); len(got) != 1 || got[0] != line(p1, person.Login) {
		t.Fatalf("with an empty list the session read %q, want %s\n%s", got, p1, f.logBuf)
	}
	// Two backoffice runs may list the same receipts (D11): handled once.
	f.hook(p1)
	if got := f.upTo(w1, agent); len(got) != 1 {
		t.Errorf("a receipt listed twice woke the session %d times", len(got))
	}
	mark, _ := os.ReadFile(filepath.Join(f.agents, "hook.mark.demo"))
	r, _ := fossilio.OpenNode(f.srv.Repo, nil)
	info, _ := r.Info(f.ctx, p1)
	r.Close()
	if strings.TrimSpace(string(mark)) != itoa(info.Rcvid) {
		t.Errorf("the mark is %q, want the receipt of the last post %d", mark, info.Rcvid)
	}
}

func TestHookNotesAPersonsUnheardPost(t *testing.T) {
	f := newFix(t)
	person := f.client(person, personPW)
	ticketChange, ticket, err := person.NewTicket(f.ctx, fossilio.Field{Name: "title", Value: "Crash"}, fossilio.Field{Name: "icomment", Value: "It crashes."})
	if err != nil {
		t.Fatal(err)
	}
	th, err := person.NewThread(f.ctx, "A question", "Hello?")
	if err != nil {
		t.Fatal(err)
	}
	f.hook(ticketChange, th) // they arrive before anyone listens
	// agent-1 listens to the thread and agent-2 to the ticket; neither
	// session reads its pipe; agent-2's pipe is gone.
	must(t, workspaces.Of(f.n).ListenerAdd(f.ctx, workspaces.ListenerInput{Workspace: agent + "/demo", Kind: "thread", Names: th}))
	must(t, workspaces.Of(f.n).ListenerAdd(f.ctx, workspaces.ListenerInput{Workspace: agent2 + "/demo", Kind: "ticket", Names: ticket}))
	f.hears(agent, person.Login)
	f.hears(agent2, person.Login, agent)
	if err := os.Remove(f.wake(agent2)); err != nil {
		t.Fatal(err)
	}
	f.hook()
	p1, err := person.Reply(f.ctx, th, th, "Anyone?")
	if err != nil {
		t.Fatal(err)
	}
	c1, err := person.ChangeTicket(f.ctx, ticket, fossilio.Field{Name: "+icomment", Value: "Still crashing."})
	if err != nil {
		t.Fatal(err)
	}
	byAgent, err := f.agentClient(agent2).Reply(f.ctx, th, th, "An agent's post")
	if err != nil {
		t.Fatal(err)
	}
	f.hook(p1, c1, byAgent)

	unheard, senders := notesIn[*messages.UnheardNote](f, th)
	if len(unheard) != 1 || unheard[0].Post != p1 || unheard[0].Login != agent || unheard[0].Why != messages.UnheardNoReader || senders[0] != agent {
		t.Errorf("unheard notes in the thread: %v by %v; want one for %s, no-reader, by %s (none for the agent's post)\n%s", unheard, senders, p1, agent, f.logBuf)
	}
	r, _ := fossilio.OpenNode(f.srv.Repo, nil)
	defer r.Close()
	changes, err := r.TicketChanges(f.ctx, ticket)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, c := range changes {
		if n, err := messages.ReadPost([]byte(c.Comment)); err == nil {
			if u, ok := n.(*messages.UnheardNote); ok && c.Sender == agent2 && u.Post == c1 && u.Why == messages.UnheardNoPipe {
				found = append(found, c.Hash)
			}
		}
	}
	if len(found) != 1 {
		t.Errorf("unheard notes on the ticket: %d, want one, no-pipe, by %s\n%s", len(found), agent2, f.logBuf)
	}
	// The unheard notes themselves wake no one and are noted by no one.
	f.hook()
	if again, _ := notesIn[*messages.UnheardNote](f, th); len(again) != 1 {
		t.Errorf("after another run, %d unheard notes", len(again))
	}
}

func TestHookExportsToGitOnACheckin(t *testing.T) {
	f := newFix(t)
	mirror := filepath.Join(t.TempDir(), "mirror")
	if out, err := f.srv.Fossil("git", "export", mirror, "-R", f.srv.Repo); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	before := gitCommits(t, mirror)
	// A check-in by the agent from its tree, pushed over sync.
	tree := filepath.Join(f.agents, agent, "projects", "demo", "tree")
	ws := &fossilio.Fossil{Home: filepath.Join(f.agents, agent, "projects", "demo"), User: agent, Dir: tree}
	if err := os.WriteFile(filepath.Join(tree, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "a.txt"}, {"commit", "-m", "a file", "--nosync"}} {
		if out, err := ws.Run(f.ctx, args); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	if err := ws.Push(f.ctx, filepath.Join(f.agents, agent, "projects", "demo", "clone")); err != nil {
		t.Fatal(err)
	}
	f.hook()
	if after := gitCommits(t, mirror); after != before+1 {
		t.Errorf("the mirror has %d commits after a check-in, had %d\n%s", after, before, f.logBuf)
	}
	if got := f.daemon.all(1); len(got) != 1 || !strings.HasPrefix(got[0], "post "+f.srv.Repo+" ") {
		t.Errorf("the check-in was not handed to the daemon: %q", got)
	}
}

func gitCommits(t *testing.T, dir string) int {
	t.Helper()
	out, err := exec.Command("git", "-C", dir, "rev-list", "--all", "--count").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	n := 0
	for _, c := range strings.TrimSpace(string(out)) {
		n = n*10 + int(c-'0')
	}
	return n
}

func lastArtifact(f *fix) string {
	r, err := fossilio.OpenNode(f.srv.Repo, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	defer r.Close()
	hashes, _, err := r.Received(f.ctx, 0)
	if err != nil || len(hashes) == 0 {
		f.t.Fatal(err)
	}
	return hashes[len(hashes)-1]
}

func itoa(v int64) string {
	var b []byte
	for v > 0 || len(b) == 0 {
		b = append([]byte{byte('0' + v%10)}, b...)
		v /= 10
	}
	return string(b)
}

func TestHookFindsItsRepositoryThroughALinkAndRefusesAStranger(t *testing.T) {
	f := newFix(t)
	person, th := f.heardThread()
	w1 := f.listen(agent)
	f.hook()
	p1, err := person.Reply(f.ctx, th, th, "through a link")
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "other-name.fossil")
	if err := os.Symlink(f.srv.Repo, link); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(f.logBuf, nil))
	if err := hook.Run(f.ctx, hook.Options{Agents: f.agents, Repo: link, Log: log, Release: f.release}); err != nil {
		t.Fatalf("through a link: %v", err)
	}
	if got := w1.all(1); len(got) != 1 || got[0] != line(p1, person.Login) {
		t.Errorf("through a link the session read %q", got)
	}
	if got := f.daemon.all(3); got[len(got)-1] != "post "+f.srv.Repo+" "+p1 {
		t.Errorf("the daemon's line names the repository as node.json does: %q", got)
	}
	stranger := filepath.Join(t.TempDir(), "demo.fossil")
	if err := os.WriteFile(stranger, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := hook.Run(f.ctx, hook.Options{Agents: f.agents, Repo: stranger, Log: log, Release: f.release}); err == nil || !strings.Contains(err.Error(), "not a repository of this node") {
		t.Errorf("a repository not of the node: %v", err)
	}
}

// TestHookGivesUpOnAFullWakePipe: a session that holds its wake pipe but
// reads nothing (stuck, or far behind) fills it. The hook waits for room once
// per run (wakeWait), then passes over that session's posts in the run, each
// logged; the other actions go on: the daemon gets every post, and another
// session listening to the same thread is woken for each.
func TestHookGivesUpOnAFullWakePipe(t *testing.T) {
	f := newFix(t)
	person := f.client(person, personPW)
	th, err := person.NewThread(f.ctx, "A question", "Hello?")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{agent, agent2} {
		must(t, workspaces.Of(f.n).ListenerAdd(f.ctx, workspaces.ListenerInput{Workspace: l + "/demo", Kind: "thread", Names: th}))
		f.hears(l, person.Login)
	}
	f.hook(th, lastArtifact(f)) // the thread came before the listen notes, which are notes: nobody is woken
	// agent's session: holds its pipe, reads nothing; the pipe is filled.
	stuck, err := unix.Open(f.wake(agent), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(stuck)
	fill, err := unix.Open(f.wake(agent), unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	filler := []byte(strings.Repeat("f", 64) + "\n")
	for {
		if _, err := unix.Write(fill, filler); err == unix.EAGAIN {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	unix.Close(fill)
	w2 := f.listen(agent2)

	var posts []string
	for i := range 3 {
		p, err := person.Reply(f.ctx, th, th, "ping "+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		posts = append(posts, p)
	}
	f.hook(posts...)
	log := f.logBuf.String()
	if waited, earlier := strings.Count(log, "wake pipe stayed full"), strings.Count(log, "wake pipe was full earlier in this run"); waited != 1 || earlier != 2 {
		t.Errorf("posts passed over for the full pipe: %d after a wait, %d without; want 1 and 2:\n%s", waited, earlier, log)
	}
	var lines []string
	for _, p := range posts {
		lines = append(lines, line(p, person.Login))
	}
	if got := w2.all(3); strings.Join(got, "|") != strings.Join(lines, "|") {
		t.Errorf("the other session read %q, want %q", got, lines)
	}
	var want []string
	for _, p := range posts {
		want = append(want, "post "+f.srv.Repo+" "+p)
	}
	got := f.daemon.all(6) // the thread, two listen notes, the posts
	if len(got) < 3 || strings.Join(got[len(got)-3:], "\n") != strings.Join(want, "\n") {
		t.Errorf("the daemon read %q, want the three posts last: %q", got, want)
	}
	if n, _ := unix.Read(stuck, make([]byte, 1)); n != 1 {
		t.Errorf("the stuck session's pipe holds nothing")
	}
}

// TestHookHearsOnlyWhomTheSessionHears (issue 10, items 1 and 9): a session
// hears the users its hears file names. A post from anyone else wakes
// nothing and, with nobody listening, gets no unheard note; a post whose U
// card names the agent is woken as its pusher's, the receipt's user, never
// as the agent's own.
func TestHookHearsOnlyWhomTheSessionHears(t *testing.T) {
	f := newFix(t)
	alice := f.client(person, personPW)
	bob := f.client(stranger, strangerPW)
	th, err := alice.NewThread(f.ctx, "A question", "Hello?")
	if err != nil {
		t.Fatal(err)
	}
	f.hook(th)
	must(t, workspaces.Of(f.n).ListenerAdd(f.ctx, workspaces.ListenerInput{Workspace: agent + "/demo", Kind: "thread", Names: th}))
	f.hears(agent, person)
	f.hook()
	w1 := f.listen(agent)

	fromBob, err := bob.Reply(f.ctx, th, th, "Let me in")
	if err != nil {
		t.Fatal(err)
	}
	// alice pushes a reply whose U card says agent-1 wrote it.
	data, err := fossilio.PostDraft{Date: time.Now(), User: agent, Root: th, InReplyTo: th, Text: "I am the agent, honest"}.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	forged, err := alice.Push(f.ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	f.hook(fromBob, forged)
	if got := f.upTo(w1, agent); len(got) != 1 || got[0] != line(forged, person) {
		t.Fatalf("the session read %q; want only the forged post, as alice's: %q\n%s", got, line(forged, person), f.logBuf)
	}
	if log := f.logBuf.String(); !strings.Contains(log, `not woken: the session does not hear \"bob\"`) {
		t.Errorf("the stranger's post is not logged as not heard:\n%s", log)
	}

	// Nobody reads the pipe now: alice's post gets an unheard note, bob's
	// none.
	w1.close()
	fromAlice, err := alice.Reply(f.ctx, th, th, "Anyone?")
	if err != nil {
		t.Fatal(err)
	}
	again, err := bob.Reply(f.ctx, th, th, "Anyone at all?")
	if err != nil {
		t.Fatal(err)
	}
	f.hook(fromAlice, again)
	unheard, senders := notesIn[*messages.UnheardNote](f, th)
	if len(unheard) != 1 || unheard[0].Post != fromAlice || len(unheard[0].Posts) != 0 || senders[0] != agent {
		t.Errorf("unheard notes: %v by %v; want one for alice's post %s alone, by %s\n%s", unheard, senders, fromAlice, agent, f.logBuf)
	}
}

// TestHookWakesOnlyAfterTheListenNote (issue 10, item 6): a listener hears
// what the node received after its listen note, in the server's order, as
// its file in the index says (the note's receipt); a post from before it is
// not woken even when the hook sees it only after the file is there.
func TestHookWakesOnlyAfterTheListenNote(t *testing.T) {
	f := newFix(t)
	alice := f.client(person, personPW)
	th, err := alice.NewThread(f.ctx, "Later", "a thread listened to later")
	if err != nil {
		t.Fatal(err)
	}
	early, err := alice.Reply(f.ctx, th, th, "before the listener")
	if err != nil {
		t.Fatal(err)
	}
	must(t, workspaces.Of(f.n).ListenerAdd(f.ctx, workspaces.ListenerInput{Workspace: agent + "/demo", Kind: "thread", Names: th}))
	listenNote := lastArtifact(f)
	f.hears(agent, person)
	w1 := f.listen(agent)
	late, err := alice.Reply(f.ctx, th, th, "after the listener")
	if err != nil {
		t.Fatal(err)
	}
	// One run sees them all, the early post last on Fossil's list.
	f.hook(th, listenNote, late, early)
	if got := f.upTo(w1, agent); len(got) != 1 || got[0] != line(late, person) {
		t.Fatalf("the session read %q, want only the post after the listen note %s\n%s", got, late, f.logBuf)
	}
	if log := f.logBuf.String(); !strings.Contains(log, "before the agent's listen note on its record") || !strings.Contains(log, early) {
		t.Errorf("the early post is not logged as before the listen note:\n%s", log)
	}
	// An unlisten note removes the file: nothing more is woken.
	must(t, workspaces.Of(f.n).ListenerRemove(f.ctx, workspaces.ListenerInput{Workspace: agent + "/demo", Kind: "thread", Names: th}))
	gone, err := alice.Reply(f.ctx, th, th, "after the unlisten note")
	if err != nil {
		t.Fatal(err)
	}
	f.hook(gone)
	if got := f.upTo(w1, agent); len(got) != 1 {
		t.Errorf("after the unlisten note the session read %q", got)
	}
}

// TestHookNotesABurstOnce (issue 10, item 4): 999 replies pushed in one
// sync into a thread a session listens to while nothing reads its pipe.
// One run of the hook notes them in one unheard note naming every post, in
// the server's order, written in one request (one receipt of the agent's);
// every post is still handed to the daemon.
func TestHookNotesABurstOnce(t *testing.T) {
	f := newFix(t)
	alice := f.client(person, personPW)
	th, err := alice.NewThread(f.ctx, "A busy thread", "Hello?")
	if err != nil {
		t.Fatal(err)
	}
	must(t, workspaces.Of(f.n).ListenerAdd(f.ctx, workspaces.ListenerInput{Workspace: agent + "/demo", Kind: "thread", Names: th}))
	f.hears(agent, person)
	f.hook(th, lastArtifact(f))
	const burst = 999
	var drafts [][]byte
	for i := range burst {
		d, err := fossilio.PostDraft{Date: time.Now(), User: person, Root: th, InReplyTo: th, Text: "reply " + strconv.Itoa(i)}.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		drafts = append(drafts, d)
	}
	posts, err := alice.PushAll(f.ctx, drafts...)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	f.hook(posts...)
	t.Logf("the hook handled %d replies in %s", burst, time.Since(start))

	unheard, senders := notesIn[*messages.UnheardNote](f, th)
	if len(unheard) != 1 || senders[0] != agent || unheard[0].Why != messages.UnheardNoReader {
		t.Fatalf("%d unheard notes (%v), want one by %s\n%s", len(unheard), senders, agent, f.logBuf)
	}
	r, err := fossilio.OpenNode(f.srv.Repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	thread, err := r.Thread(f.ctx, th)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, p := range thread {
		if p.Sender == person && p.Hash != th {
			order = append(order, p.Hash)
		}
	}
	if got := unheard[0].All(); len(got) != burst || strings.Join(got, ",") != strings.Join(order, ",") {
		t.Errorf("the note names %d posts; want all %d in the server's order", len(got), burst)
	}
	if got := f.daemon.all(burst + 2); len(got) != burst+2 {
		t.Errorf("the daemon read %d lines, want %d", len(got), burst+2)
	}
}

// checkins writes the branches whose check-ins a workspace's session is
// given, as the daemon does when it starts one (AGENTS/LOGIN/held/PROJECT/checkins).
func (f *fix) checkins(login string, branches ...string) {
	f.t.Helper()
	data, err := messages.CheckinsFileContent(branches)
	if err != nil {
		f.t.Fatal(err)
	}
	dir := filepath.Join(f.agents, login, "held", "demo")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "checkins"), data, 0o600); err != nil {
		f.t.Fatal(err)
	}
}

// checkIn commits a file from login's tree (on a new branch when branch is
// not ""), pushes it as login, and returns the check-in's hash.
func (f *fix) checkIn(login, file, branch string) string {
	f.t.Helper()
	dir := filepath.Join(f.agents, login, "projects", "demo")
	ws := &fossilio.Fossil{Home: dir, User: login, Dir: filepath.Join(dir, "tree")}
	if err := os.WriteFile(filepath.Join(dir, "tree", file), []byte(file+"\n"), 0o644); err != nil {
		f.t.Fatal(err)
	}
	commit := []string{"commit", "-m", "add " + file, "--nosync"}
	if branch != "" {
		commit = append(commit, "--branch", branch)
	}
	for _, args := range [][]string{{"add", file}, commit} {
		if out, err := ws.Run(f.ctx, args); err != nil {
			f.t.Fatalf("%v: %s", err, out)
		}
	}
	if err := ws.Push(f.ctx, filepath.Join(dir, "clone")); err != nil {
		f.t.Fatal(err)
	}
	return lastArtifactOf(f, fossilio.KindCheckin)
}

// lastArtifactOf is the hash of the newest artifact of kind the node received.
func lastArtifactOf(f *fix, kind fossilio.Kind) string {
	f.t.Helper()
	r, err := fossilio.OpenNode(f.srv.Repo, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	defer r.Close()
	hashes, _, err := r.Received(f.ctx, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	for i := len(hashes) - 1; i >= 0; i-- {
		if info, err := r.Info(f.ctx, hashes[i]); err == nil && info.Kind == kind {
			return hashes[i]
		}
	}
	f.t.Fatalf("the node received no %s", kind)
	return ""
}

// given is what the hook gave a session since the last call: upTo, and the
// lines forgotten after.
func (f *fix) given(w *lines, login string) []string {
	got := f.upTo(w, login)
	w.mu.Lock()
	w.got = w.got[len(got):]
	w.mu.Unlock()
	return got
}

// Seed 001 E7: a check-in is given to each running agent whose checkins
// has its branch, unless that agent's user sent it; with its sender, as
// the receipt says.
func TestHookGivesCheckinsToTheAgentsOfTheirBranch(t *testing.T) {
	f := newFix(t)
	f.checkins(agent, "elsewhere")
	f.checkins(agent2, "trunk", "feature")
	w1, w2 := f.listen(agent), f.listen(agent2)

	onTrunk := f.checkIn(agent, "a.txt", "")
	f.hook()
	if got := f.given(w2, agent2); len(got) != 1 || got[0] != line(onTrunk, agent) {
		t.Errorf("agent2 (trunk, feature) was given %q for a trunk check-in by %s, want %q\n%s", got, agent, line(onTrunk, agent), f.logBuf)
	}
	if got := f.given(w1, agent); len(got) != 0 {
		t.Errorf("agent (elsewhere) was given %q for a trunk check-in", got)
	}

	own := f.checkIn(agent2, "b.txt", "feature")
	f.hook()
	if got := f.given(w2, agent2); len(got) != 0 {
		t.Errorf("agent2 was given its own check-in %s: %q", own[:10], got)
	}
	if !strings.Contains(f.logBuf.String(), "not given: the session's own login sent the check-in") {
		t.Errorf("the log does not say why agent2 was not given its own check-in:\n%s", f.logBuf)
	}
	f.checkins(agent2)
	onTrunk2 := f.checkIn(agent, "c.txt", "")
	f.hook()
	if got := f.given(w2, agent2); len(got) != 0 {
		t.Errorf("agent2, given no branch any more, was given %q for %s", got, onTrunk2[:10])
	}
}

// TestHookInTheDaemonClassifiesOnce: the hook's work done in the daemon,
// given its live index (Options.Index), takes what the index has read
// from it and classifies nothing again; the session is woken as before.
func TestHookInTheDaemonClassifiesOnce(t *testing.T) {
	f := newFix(t)
	person, th := f.heardThread()
	w := f.listen(agent)
	f.hook(lastArtifact(f))

	var mu sync.Mutex
	var ops []string
	r, err := fossilio.OpenNode(f.srv.Repo, &fossilio.Options{ReadBegun: func(op string) {
		mu.Lock()
		defer mu.Unlock()
		ops = append(ops, op)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	x := record.NewIndex(r, "ocx")
	p, err := person.Reply(f.ctx, th, th, "What does it do?")
	if err != nil {
		t.Fatal(err)
	}
	err = hook.Run(f.ctx, hook.Options{
		Agents: f.agents, Repo: f.srv.Repo, Hashes: []string{p}, Release: f.release,
		Log:   slog.New(slog.NewTextHandler(f.logBuf, nil)),
		Open:  func(string) (*fossilio.Repo, error) { return r, nil },
		Index: func(string) (*record.Index, error) { return x, nil },
	})
	if err != nil {
		t.Fatalf("hook: %v\n%s", err, f.logBuf)
	}
	if got := w.all(1); len(got) != 1 || got[0] != line(p, person.Login) {
		t.Fatalf("the session read %q, want [%s]\n%s", got, p, f.logBuf)
	}
	mu.Lock()
	defer mu.Unlock()
	if slices.Contains(ops, "classify") || !slices.Contains(ops, "read what arrived") {
		t.Errorf("the hook's reads with the daemon's index: %v; want what arrived read once by the index, nothing classified again", ops)
	}
}

// heardThread is a person's thread, its first post handled by the hook,
// to which the agent's session listens and whose person it hears.
func (f *fix) heardThread() (*fossilio.Client, string) {
	f.t.Helper()
	person := f.client(person, personPW)
	th, err := person.NewThread(f.ctx, "A question", "Hello?")
	if err != nil {
		f.t.Fatal(err)
	}
	f.hook(th)
	must(f.t, workspaces.Of(f.n).ListenerAdd(f.ctx, workspaces.ListenerInput{Workspace: agent + "/demo", Kind: "thread", Names: th}))
	f.hears(agent, person.Login)
	return person, th
}

// TestHookByTheDaemonAndBesideItDoEachOnce (D75): when the daemon took a
// hook's ask just as the hook gave up on it, the daemon's run (its open
// reader and live index, in its process) and the hook's own run do the
// same arrivals at once; under the mark's lock whichever comes second
// finds the mark past them. Each post wakes the session that hears it
// once, is noted unheard once for the session nobody hears, and is handed
// to the daemon's pipe once.
func TestHookByTheDaemonAndBesideItDoEachOnce(t *testing.T) {
	f := newFix(t)
	person, th := f.heardThread()
	w := f.listen(agent)
	// agent-2 listens too, and hears the person, but nobody reads its pipe.
	must(t, workspaces.Of(f.n).ListenerAdd(f.ctx, workspaces.ListenerInput{Workspace: agent2 + "/demo", Kind: "thread", Names: th}))
	f.hears(agent2, person.Login)
	f.hook()
	r, err := fossilio.OpenNode(f.srv.Repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	x := record.NewIndex(r, "ocx")
	log := slog.New(slog.NewTextHandler(f.logBuf, nil))
	const rounds = 6
	var posts []string
	for i := range rounds {
		p, err := person.Reply(f.ctx, th, th, "round "+itoa(int64(i)))
		if err != nil {
			t.Fatal(err)
		}
		posts = append(posts, p)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		wg.Go(func() {
			_, errs[0] = hook.Done(f.ctx, hook.Options{Agents: f.agents, Repo: f.srv.Repo, Hashes: []string{p}, ByDaemon: true, Log: log,
				Open:  func(string) (*fossilio.Repo, error) { return r, nil },
				Index: func(string) (*record.Index, error) { return x, nil }})
		})
		wg.Go(func() {
			errs[1] = hook.Run(f.ctx, hook.Options{Agents: f.agents, Repo: f.srv.Repo, Release: f.release, Log: log,
				Stdin: strings.NewReader(p + " forum-post " + p[:14] + "\n")})
		})
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v\n%s", i, err, f.logBuf)
			}
		}
	}
	var want []string
	for _, p := range posts {
		want = append(want, line(p, person.Login))
	}
	if got := f.upTo(w, agent); !slices.Equal(got, want) {
		t.Errorf("the session read %q, want each post once %q\n%s", got, want, f.logBuf)
	}
	unheard, _ := notesIn[*messages.UnheardNote](f, th)
	noted := map[string]int{}
	for _, u := range unheard {
		noted[u.Post]++
	}
	for _, p := range posts {
		if noted[p] != 1 {
			t.Errorf("post %s is noted unheard %d times, want once (notes %v)", p, noted[p], noted)
		}
	}
	// Every post's line, and the unheard notes' after them, once each.
	handed := map[string]int{}
	for _, l := range f.daemon.all(2 * rounds) {
		handed[l]++
	}
	for _, p := range posts {
		if c := handed["post "+f.srv.Repo+" "+p]; c != 1 {
			t.Errorf("post %s was handed to the daemon %d times, want once: %v", p, c, handed)
		}
	}
}

// TestHookRunAfterADeadOneNotesOnce: a run of the hook that died in its
// work (the daemon killed outright after it noted a post unheard, before
// it moved its mark) leaves the mark saying which receipts it was at; the
// next run handles them again, and writes no second unheard note for a
// post already noted, while it notes a new one (issue 38: TestChaos found
// a post noted unheard twice).
func TestHookRunAfterADeadOneNotesOnce(t *testing.T) {
	f := newFix(t)
	person := f.client(person, personPW)
	th, err := person.NewThread(f.ctx, "A question", "Hello?")
	if err != nil {
		t.Fatal(err)
	}
	f.hook(th)
	must(t, workspaces.Of(f.n).ListenerAdd(f.ctx, workspaces.ListenerInput{Workspace: agent + "/demo", Kind: "thread", Names: th}))
	f.hears(agent, person.Login)
	f.hook()
	markPath := filepath.Join(f.agents, "hook.mark.demo")
	before, err := os.ReadFile(markPath)
	if err != nil {
		t.Fatal(err)
	}
	was, ok := host.ParseHookMark(before)
	if !ok {
		t.Fatalf("the mark %q does not read", before)
	}
	p1, err := person.Reply(f.ctx, th, th, "one")
	if err != nil {
		t.Fatal(err)
	}
	f.hook(p1) // nobody reads the pipe: p1 noted unheard
	r, err := fossilio.OpenNode(f.srv.Repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	info, err := r.Info(f.ctx, p1)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The mark the run would have left had it died after its note.
	if err := os.WriteFile(markPath, host.HookMarkWorkingContent(was, info.Rcvid), 0o600); err != nil {
		t.Fatal(err)
	}
	p2, err := person.Reply(f.ctx, th, th, "two")
	if err != nil {
		t.Fatal(err)
	}
	f.hook(p2)
	named := map[string]int{}
	unheard, _ := notesIn[*messages.UnheardNote](f, th)
	for _, u := range unheard {
		for _, h := range u.All() {
			named[h]++
		}
	}
	if named[p1] != 1 || named[p2] != 1 {
		t.Errorf("unheard notes name p1 %d times and p2 %d times; want once each\n%s", named[p1], named[p2], f.logBuf)
	}
	after, _ := os.ReadFile(markPath)
	if m, w, ok := host.ParseHookMarkWorking(after); !ok || w != 0 || m < info.Rcvid {
		t.Errorf("after the run the mark is %q; want a plain mark past %d", after, info.Rcvid)
	}
}

// TestHookKeepsThePostsASessionWasWokenFor (D77): each person's post a
// session is woken for goes into its ledger (Held/woken), and out again
// once the hook sees its agent login's reply to it; a post the session
// has not answered stays, for the daemon to check at the session's end.
func TestHookKeepsThePostsASessionWasWokenFor(t *testing.T) {
	f := newFix(t)
	person, th := f.heardThread()
	w := f.listen(agent)
	f.hook()
	ledger := func() []host.WokenPost {
		b, _ := os.ReadFile(filepath.Join(f.agents, agent, "held", "demo", "woken"))
		posts, bad := host.ParseWoken(b)
		if bad > 0 {
			t.Fatalf("the ledger has %d lines that do not read:\n%s", bad, b)
		}
		return posts
	}
	p1, err := person.Reply(f.ctx, th, th, "one")
	if err != nil {
		t.Fatal(err)
	}
	p2, err := person.Reply(f.ctx, th, th, "two")
	if err != nil {
		t.Fatal(err)
	}
	f.hook(p1, p2)
	w.all(2)
	if got := ledger(); len(got) != 2 || got[0].Post != p1 || got[1].Post != p2 || got[0].Record != th || got[0].Kind != messages.ListenThread {
		t.Fatalf("the ledger after two wakes: %+v\n%s", got, f.logBuf)
	}
	answer, err := f.agentClient(agent).Reply(f.ctx, th, p1, "echo: one")
	if err != nil {
		t.Fatal(err)
	}
	f.hook(answer)
	if got := ledger(); len(got) != 1 || got[0].Post != p2 {
		t.Fatalf("after the agent answered p1 the ledger holds %+v, want p2 alone\n%s", got, f.logBuf)
	}
}

// TestHookUnheardNoteWaitsForTheServer: an unheard note the server is not
// there to take is not lost: the run leaves the mark where it was, saying
// what it worked on, and the next run, the server back, writes it, once
// (TestChaos met a post noted by no one when the server was bounced).
func TestHookUnheardNoteWaitsForTheServer(t *testing.T) {
	f := newFix(t)
	person := f.client(person, personPW)
	th, err := person.NewThread(f.ctx, "A question", "Hello?")
	if err != nil {
		t.Fatal(err)
	}
	f.hook(th)
	must(t, workspaces.Of(f.n).ListenerAdd(f.ctx, workspaces.ListenerInput{Workspace: agent + "/demo", Kind: "thread", Names: th}))
	f.hears(agent, person.Login)
	f.hook()
	p1, err := person.Reply(f.ctx, th, th, "anyone?")
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Down()
	f.hook(p1) // nobody reads the pipe, and the note cannot be written
	markPath := filepath.Join(f.agents, "hook.mark.demo")
	b, _ := os.ReadFile(markPath)
	if _, w, ok := host.ParseHookMarkWorking(b); !ok || w == 0 {
		t.Fatalf("with the note not written the mark is %q; want it held back, saying what the run worked on\n%s", b, f.logBuf)
	}
	f.srv.Up()
	f.hook()
	named := 0
	unheard, _ := notesIn[*messages.UnheardNote](f, th)
	for _, u := range unheard {
		for _, h := range u.All() {
			if h == p1 {
				named++
			}
		}
	}
	if named != 1 {
		t.Errorf("after the server came back p1 is noted %d times, want once\n%s", named, f.logBuf)
	}
	f.hook()
	if again, _ := notesIn[*messages.UnheardNote](f, th); len(again) != len(unheard) {
		t.Errorf("another run wrote %d more notes", len(again)-len(unheard))
	}
}
