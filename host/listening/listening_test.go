package listening

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
	"golang.org/x/sys/unix"
)

// node is a real fossil server on 127.0.0.1 with two agent logins, ann (the
// workspace's) and bea (another agent's, who may push anything), an agents
// root, and ann's workspace of project demo.
type node struct {
	t     *testing.T
	ctx   context.Context
	srv   *harness.Server
	repo  *fossilio.Repo
	admin *fossilio.Client
	ann   *fossilio.Client
	bea   *fossilio.Client
	root  *unixhost.Root
	ws    host.Workspace
	key   messages.WorkspaceKey
}

func newNode(t *testing.T) *node {
	t.Helper()
	srv := harness.StartServer(t, harness.Options{Users: []harness.User{
		{Login: "ann", Password: "ann-pw", Caps: fossilio.AgentCaps},
		{Login: "bea", Password: "bea-pw", Caps: fossilio.AgentCaps},
	}})
	repo, err := fossilio.OpenNode(srv.Repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	agents := filepath.Join(t.TempDir(), "agents")
	if err := os.MkdirAll(agents, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := host.NewLayout(agents)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := l.Workspace(messages.WorkspaceKey{Login: "ann", Project: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(ws.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	root, err := unixhost.OpenRoot(agents)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	client := func(login, pw string) *fossilio.Client {
		return &fossilio.Client{URL: srv.URL, Login: login, Password: pw, ProjectCode: srv.ProjectCode}
	}
	return &node{t: t, ctx: context.Background(), srv: srv, repo: repo, root: root, ws: ws,
		key:   messages.WorkspaceKey{Login: "ann", Project: "demo"},
		admin: client(srv.AdminLogin, srv.AdminPassword), ann: client("ann", "ann-pw"), bea: client("bea", "bea-pw")}
}

func (n *node) thread(title string) string {
	n.t.Helper()
	h, err := n.admin.NewThread(n.ctx, title, "a thread")
	if err != nil {
		n.t.Fatal(err)
	}
	return h
}

// note writes a listen (on) or unlisten note for ann's workspace as c, where
// the tools write it: on the thread or ticket listened to, or on the thread
// at for a branch.
func (n *node) note(c *fossilio.Client, on bool, kind messages.ListenKind, names, at string) string {
	n.t.Helper()
	l := messages.Listener{Login: "ann", Project: "demo", Kind: kind, Names: names}
	var note messages.Note = &messages.ListenNote{Listener: l}
	if !on {
		note = &messages.UnlistenNote{Listener: l}
	}
	block, err := note.Encode()
	if err != nil {
		n.t.Fatal(err)
	}
	var h string
	switch kind {
	case messages.ListenTicket:
		h, err = c.ChangeTicket(n.ctx, names, fossilio.Field{Name: "+icomment", Value: "Listening.\n\n" + string(block)})
	case messages.ListenThread:
		h, err = c.Reply(n.ctx, names, names, "Listening.\n\n"+string(block))
	default:
		h, err = c.Reply(n.ctx, at, at, "Listening.\n\n"+string(block))
	}
	if err != nil {
		n.t.Fatal(err)
	}
	return h
}

// index reads the listening index as "KIND NAMES", sorted, checking each
// file as the hook reads it.
func (n *node) index() []string {
	n.t.Helper()
	entries, err := os.ReadDir(n.ws.ListeningDir)
	if err != nil {
		n.t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(n.ws.ListeningDir, e.Name()))
		if err != nil {
			n.t.Fatal(err)
		}
		le, err := messages.ParseListeningFile(e.Name(), b)
		if err != nil {
			n.t.Errorf("listening file %s: %v", e.Name(), err)
		}
		out = append(out, string(le.Kind)+" "+le.Names)
	}
	slices.Sort(out)
	return out
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}

func TestRebuildFromWhatTheAgentSent(t *testing.T) {
	n := newNode(t)
	ctx := n.ctx
	t1, t2, t3, t4, own := n.thread("one"), n.thread("two"), n.thread("three"), n.thread("four"), n.thread("own")
	_, k1, err := n.admin.NewTicket(ctx, fossilio.Field{Name: "title", Value: "a ticket"}, fossilio.Field{Name: "icomment", Value: "x"})
	if err != nil {
		t.Fatal(err)
	}
	l1 := n.note(n.ann, true, messages.ListenThread, t1, "")
	lk := n.note(n.ann, true, messages.ListenTicket, k1, "")
	n.note(n.ann, true, messages.ListenThread, t2, "")
	n.note(n.ann, false, messages.ListenThread, t2, "")
	n.note(n.ann, true, messages.ListenBranch, "feature/x", own)
	// bea, who may push as any agent may, writes a listen note in ann's
	// name: the node knows bea sent it, and it is not ann's.
	forged := n.note(n.bea, true, messages.ListenThread, t3, "")
	if info, err := n.repo.Info(ctx, forged); err != nil || info.Sender != "bea" {
		t.Fatalf("the forged note's sender: %+v, %v", info, err)
	}
	// An edit never makes a note: only a post's first version counts.
	plain, err := n.ann.Reply(ctx, t4, t4, "just words")
	if err != nil {
		t.Fatal(err)
	}
	p, err := n.repo.Post(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	block, err := (&messages.ListenNote{Listener: messages.Listener{Login: "ann", Project: "demo", Kind: messages.ListenThread, Names: t4}}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.ann.Edit(ctx, p, string(block)); err != nil {
		t.Fatal(err)
	}

	// What was there before: a stale file, and a staging directory a
	// rebuild that died midway left.
	if err := os.MkdirAll(n.ws.ListeningDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.ws.ListeningDir, strings.Repeat("ab", 20)), []byte("thread\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(n.ws.Held, ".listening.dead", "x"), 0o700); err != nil {
		t.Fatal(err)
	}

	res, err := Rebuild(ctx, n.root, n.ws, n.repo, Own{Kind: messages.ListenThread, ID: own}, []string{"pat", "Pat Q. Public"})
	if err != nil {
		t.Fatal(err)
	}
	want := sorted("branch feature/x", "thread "+own, "thread "+t1, "ticket "+k1)
	if got := n.index(); !slices.Equal(got, want) {
		t.Errorf("listening index:\n got %q\nwant %q", got, want)
	}
	// Each listener is heard after its listen note's receipt on the node;
	// the own record from the start.
	for file, note := range map[string]string{t1: l1, k1: lk, own: ""} {
		b, err := os.ReadFile(filepath.Join(n.ws.ListeningDir, file))
		if err != nil {
			t.Fatal(err)
		}
		le, err := messages.ParseListeningFile(file, b)
		if err != nil {
			t.Fatal(err)
		}
		var after int64
		if note != "" {
			info, err := n.repo.Info(ctx, note)
			if err != nil {
				t.Fatal(err)
			}
			after = info.Rcvid
		}
		if le.After != after || (note != "" && after == 0) {
			t.Errorf("%s is heard after receipt %d, want %d (its listen note %s)", file, le.After, after, note)
		}
	}
	if h, ok, err := ReadHears(n.root, n.ws); err != nil || !ok || !slices.Equal(h, []string{"pat", "Pat Q. Public"}) || !slices.Equal(res.Hears, h) {
		t.Errorf("the hears file: %q %v %v (result %q)", h, ok, err, res.Hears)
	}
	if res.Notes != 5 || len(res.Files) != 4 || !slices.Contains(res.Files, "branch-feature%2Fx") {
		t.Errorf("result %+v", res)
	}
	entries, err := os.ReadDir(n.ws.Held)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".listening") {
			t.Errorf("%s left in the held directory", e.Name())
		}
	}

	// The notes change; the next rebuild follows them.
	n.note(n.ann, false, messages.ListenThread, t1, "")
	n.note(n.ann, true, messages.ListenThread, t3, "")
	if _, err := rebuildFor(ctx, n.root, n.ws, n.srv.Repo, k1, nil); err != nil {
		t.Fatal(err)
	}
	want = sorted("branch feature/x", "thread "+t3, "ticket "+k1)
	if got := n.index(); !slices.Equal(got, want) {
		t.Errorf("listening index after the second rebuild:\n got %q\nwant %q", got, want)
	}
	// A definition that names nobody to hear: every user holding admin or
	// setup now, here the repository's admin alone.
	if h, _, err := ReadHears(n.root, n.ws); err != nil || !slices.Equal(h, []string{n.srv.AdminLogin}) {
		t.Errorf("the default hears file: %q, %v; want the admin %q alone", h, err, n.srv.AdminLogin)
	}
}

// A link planted where the index or the session directory should be is
// never followed: the index is made in its place, below the workspace.
func TestRebuildFollowsNoLink(t *testing.T) {
	n := newNode(t)
	own := n.thread("own")
	outside := t.TempDir()
	if err := os.MkdirAll(n.ws.Held, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, n.ws.ListeningDir); err != nil {
		t.Fatal(err)
	}
	if _, err := Rebuild(n.ctx, n.root, n.ws, n.repo, Own{Kind: messages.ListenThread, ID: own}, nil); err != nil {
		t.Fatal(err)
	}
	if got := n.index(); !slices.Equal(got, []string{"thread " + own}) {
		t.Errorf("listening index %q", got)
	}
	if st, err := os.Lstat(n.ws.ListeningDir); err != nil || !st.IsDir() {
		t.Errorf("the index is not a directory: %v, %v", st, err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("written through the link: %v", entries)
	}

	// The held directory itself a link: refused, nothing written there.
	if err := os.RemoveAll(n.ws.Held); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, n.ws.Held); err != nil {
		t.Fatal(err)
	}
	if _, err := Rebuild(n.ctx, n.root, n.ws, n.repo, Own{Kind: messages.ListenThread, ID: own}, nil); err == nil {
		t.Error("a rebuild through a linked held directory succeeded")
	}
	if err := Set(n.ctx, n.root, n.ws, messages.ListenThread, own, 0, true); err == nil {
		t.Error("a listener written through a linked held directory")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("written through the link: %v", entries)
	}
}

// A tool's change (its note on the node, then Set) meeting a rebuild that
// read the node just before that note: the rebuild holds the lock until it
// has written, so the tool's change comes after and stands. Without the lock
// the tool would write into the index the rebuild is about to replace.
func TestSetDuringARebuildStands(t *testing.T) {
	n := newNode(t)
	own := Own{Kind: messages.ListenThread, ID: n.thread("own")}
	want := []string{"thread " + own.ID}
	t1 := n.thread("listened")
	for _, on := range []bool{true, false} {
		other, err := unixhost.OpenRoot(n.root.Path())
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		afterRead = func() {
			// The tool: its note reaches the node after the rebuild read
			// it, then it changes the index.
			h := n.note(n.ann, on, messages.ListenThread, t1, "")
			after := n.rcvid(h)
			go func() { done <- Set(n.ctx, other, n.ws, messages.ListenThread, t1, after, on) }()
		}
		res, err := Rebuild(n.ctx, n.root, n.ws, n.repo, own, nil)
		afterRead = nil
		if err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		other.Close()
		if slices.Contains(res.Files, t1) == on {
			t.Fatalf("the rebuild read the tool's note (listen %v): %+v", on, res)
		}
		want = []string{"thread " + own.ID}
		if on {
			want = sorted(want[0], "thread "+t1)
		}
		if got := n.index(); !slices.Equal(got, want) {
			t.Errorf("after a rebuild and a tool's change (listen %v):\n got %q\nwant %q", on, got, want)
		}
		if on && n.after(t1) == 0 {
			t.Errorf("the tool's file for %s names no receipt", t1)
		}
	}
}

// rcvid is the receipt on the node of an artifact.
func (n *node) rcvid(hash string) int64 {
	n.t.Helper()
	info, err := n.repo.Info(n.ctx, hash)
	if err != nil {
		n.t.Fatal(err)
	}
	return info.Rcvid
}

// after is the receipt a listening file hears after.
func (n *node) after(file string) int64 {
	n.t.Helper()
	b, err := os.ReadFile(filepath.Join(n.ws.ListeningDir, file))
	if err != nil {
		n.t.Fatal(err)
	}
	le, err := messages.ParseListeningFile(file, b)
	if err != nil {
		n.t.Fatal(err)
	}
	return le.After
}

// Tools and rebuilds at once, many times: whatever the order, the index
// ends as the notes on the node say.
func TestConcurrentSetsAndRebuildsEndAsTheNotesSay(t *testing.T) {
	n := newNode(t)
	own := Own{Kind: messages.ListenThread, ID: n.thread("own")}
	threads := []string{n.thread("a"), n.thread("b"), n.thread("c")}
	var tools, rebuilds sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 100)
	for _, th := range threads {
		tools.Add(1)
		go func() {
			defer tools.Done()
			r, err := unixhost.OpenRoot(n.root.Path())
			if err != nil {
				errs <- err
				return
			}
			defer r.Close()
			r2, err := fossilio.OpenNode(n.srv.Repo, nil)
			if err != nil {
				errs <- err
				return
			}
			defer r2.Close()
			for i := range 6 {
				on := i%2 == 0
				h, err := n.noteErr(on, th)
				if err != nil {
					errs <- err
					return
				}
				info, err := r2.Info(n.ctx, h)
				if err != nil {
					errs <- err
					return
				}
				if err := Set(n.ctx, r, n.ws, messages.ListenThread, th, info.Rcvid, on); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range 2 {
		rebuilds.Add(1)
		go func() {
			defer rebuilds.Done()
			repo, err := fossilio.OpenNode(n.srv.Repo, nil)
			if err != nil {
				errs <- err
				return
			}
			defer repo.Close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := Rebuild(n.ctx, n.root, n.ws, repo, own, nil); err != nil {
					errs <- err
					return
				}
				// A pause between rebuilds lets the tools in: a lock
				// taken by polling favours whoever takes it again at
				// once, and no daemon rebuilds in a loop.
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	tools.Wait()
	close(stop)
	rebuilds.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	events, err := Events(n.ctx, n.repo, n.key)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Want(n.key, own, events)
	if err != nil {
		t.Fatal(err)
	}
	var wantKeys []string
	for name, e := range want {
		wantKeys = append(wantKeys, string(e.Kind)+" "+name)
	}
	slices.Sort(wantKeys)
	// Each thread's last note was an unlisten note.
	if !slices.Equal(wantKeys, []string{"thread " + own.ID}) {
		t.Fatalf("the notes say %q", wantKeys)
	}
	if got := n.index(); !slices.Equal(got, wantKeys) {
		t.Errorf("the index after the race:\n got %q\nwant %q", got, wantKeys)
	}
}

// noteErr is note for goroutines: an error instead of a fatal.
func (n *node) noteErr(on bool, thread string) (string, error) {
	l := messages.Listener{Login: "ann", Project: "demo", Kind: messages.ListenThread, Names: thread}
	var note messages.Note = &messages.ListenNote{Listener: l}
	if !on {
		note = &messages.UnlistenNote{Listener: l}
	}
	block, err := note.Encode()
	if err != nil {
		return "", err
	}
	return n.ann.Reply(n.ctx, thread, thread, string(block))
}

func TestOwnRecord(t *testing.T) {
	n := newNode(t)
	ctx := n.ctx
	root := n.thread("own")
	reply, err := n.admin.Reply(ctx, root, root, "a reply")
	if err != nil {
		t.Fatal(err)
	}
	if o, err := ownRecord(ctx, n.repo, reply); err != nil || o != (Own{messages.ListenThread, root}) {
		t.Errorf("a reply's record: %+v, %v", o, err)
	}
	_, k, err := n.admin.NewTicket(ctx, fossilio.Field{Name: "title", Value: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if o, err := ownRecord(ctx, n.repo, k); err != nil || o != (Own{messages.ListenTicket, k}) {
		t.Errorf("a ticket: %+v, %v", o, err)
	}
	checkin := strings.Trim(mustSQL(t, n, "SELECT uuid FROM blob WHERE rid=(SELECT min(objid) FROM event WHERE type='ci')"), "'")
	if _, err := ownRecord(ctx, n.repo, checkin); err == nil || !strings.Contains(err.Error(), "check-in") {
		t.Errorf("a check-in as a record: %v", err)
	}
	if _, err := ownRecord(ctx, n.repo, strings.Repeat("ab", 20)); err == nil {
		t.Error("an unknown record: no error")
	}
	if _, err := rebuildFor(ctx, n.root, n.ws, filepath.Join(t.TempDir(), "none.fossil"), root, nil); err == nil {
		t.Error("a repository that does not exist: no error")
	}
	// Senders are unknown in a clone: a rebuild from one is refused.
	clone, err := fossilio.OpenClone(n.srv.Repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer clone.Close()
	if _, err := Rebuild(ctx, n.root, n.ws, clone, Own{messages.ListenThread, root}, nil); err == nil || !strings.Contains(err.Error(), "senders are known") {
		t.Errorf("a rebuild from a clone: %v", err)
	}
}

func mustSQL(t *testing.T, n *node, q string) string {
	t.Helper()
	out, err := n.srv.Fossil("sql", "-R", n.srv.Repo, q)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// A lock held elsewhere makes a change wait, and a change whose context ends
// while it waits says so and writes nothing.
func TestSetWaitsForTheLock(t *testing.T) {
	n := newNode(t)
	th := n.thread("t")
	held := make(chan struct{})
	release := make(chan struct{})
	go func() {
		_ = locked(n.ctx, n.root, n.ws, func(*unixhost.Dir) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	ctx, cancel := context.WithTimeout(n.ctx, 200*time.Millisecond)
	err := Set(ctx, n.root, n.ws, messages.ListenThread, th, 0, true)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a change while the lock is held: %v", err)
	}
	if _, err := os.Stat(filepath.Join(n.ws.ListeningDir, th)); !os.IsNotExist(err) {
		t.Errorf("the file was written without the lock: %v", err)
	}
	close(release)
	if err := Set(n.ctx, n.root, n.ws, messages.ListenThread, th, 0, true); err != nil {
		t.Fatal(err)
	}
	if got := n.index(); !slices.Equal(got, []string{"thread " + th}) {
		t.Errorf("index %q", got)
	}
	if err := Set(n.ctx, n.root, n.ws, messages.ListenThread, "not-a-hash", 0, true); err == nil {
		t.Error("a thread that is not a hash: no error")
	}
}

// A rebuild that finds the index already as the notes make it writes
// nothing (the daemon rebuilds it before every launch); one that finds it
// differing in any way (a kind, a file too many, a FIFO planted in its
// place) writes it again.
func TestRebuildLeavesAnUnchangedIndexAlone(t *testing.T) {
	n := newNode(t)
	t1, own := n.thread("one"), n.thread("own")
	n.note(n.ann, true, messages.ListenThread, t1, "")
	rebuild := func() {
		t.Helper()
		if _, err := Rebuild(n.ctx, n.root, n.ws, n.repo, Own{Kind: messages.ListenThread, ID: own}, nil); err != nil {
			t.Fatal(err)
		}
	}
	want := sorted("thread "+own, "thread "+t1)
	inode := func(p string) uint64 {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	rebuild()
	file := filepath.Join(n.ws.ListeningDir, t1)
	dirIno, fileIno := inode(n.ws.ListeningDir), inode(file)
	rebuild()
	if got := n.index(); !slices.Equal(got, want) {
		t.Fatalf("listening index:\n got %q\nwant %q", got, want)
	}
	if inode(n.ws.ListeningDir) != dirIno || inode(file) != fileIno {
		t.Errorf("an unchanged index was written again")
	}

	for _, tamper := range []struct {
		name string
		do   func() error
	}{
		{"another kind", func() error { return os.WriteFile(file, []byte("ticket\n"), 0o600) }},
		{"a file too many", func() error {
			return os.WriteFile(filepath.Join(n.ws.ListeningDir, strings.Repeat("cd", 20)), []byte("thread\n"), 0o600)
		}},
		{"a FIFO in a file's place", func() error {
			if err := os.Remove(file); err != nil {
				return err
			}
			return unix.Mkfifo(file, 0o600)
		}},
	} {
		if err := tamper.do(); err != nil {
			t.Fatal(err)
		}
		rebuild()
		if got := n.index(); !slices.Equal(got, want) {
			t.Errorf("after %s the index is %q, want %q", tamper.name, got, want)
		}
		if inode(n.ws.ListeningDir) == dirIno {
			t.Errorf("after %s the index was not written again", tamper.name)
		}
		dirIno = inode(n.ws.ListeningDir)
		file = filepath.Join(n.ws.ListeningDir, t1)
	}
}
