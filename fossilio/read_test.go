package fossilio_test

import (
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	_ "modernc.org/sqlite"
)

// webPost posts a new thread through Fossil's web forum as login, as a
// person does in a browser: log in, then submit the form.
func (n *node) webPost(login, title, text string) {
	n.t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.PostForm(n.srv.URL+"login", url.Values{"u": {login}, "p": {n.pw[login]}, "in": {"Login"}})
	if err != nil {
		n.t.Fatal(err)
	}
	resp.Body.Close()
	form := url.Values{"title": {title}, "content": {text}, "mimetype": {"text/x-markdown"}, "submit": {"Submit"}}
	req, _ := http.NewRequest(http.MethodPost, n.srv.URL+"forume1", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Referer", n.srv.URL+"forume1")
	resp, err = hc.Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || !strings.Contains(resp.Header.Get("Location"), "forumpost/") {
		n.t.Fatalf("web post as %s: %s %s", login, resp.Status, resp.Header.Get("Location"))
	}
}

func TestClassifyEveryKind(t *testing.T) {
	n := newNode(t)
	alice, bob := n.client("alice"), n.client("bob")
	ctx := n.ctx

	root, err := alice.NewThread(ctx, "A thread", "first post")
	if err != nil {
		t.Fatal(err)
	}
	reply, err := bob.Reply(ctx, root, root, "bob replies")
	if err != nil {
		t.Fatal(err)
	}
	replyPost, err := n.repo.Post(ctx, reply)
	if err != nil {
		t.Fatal(err)
	}
	edit, err := alice.Edit(ctx, replyPost, "alice edits bob's reply")
	if err != nil {
		t.Fatal(err)
	}
	tktChange, ticket, err := alice.NewTicket(ctx, fossilio.Field{Name: "title", Value: "A bug"}, fossilio.Field{Name: "icomment", Value: "it breaks"})
	if err != nil {
		t.Fatal(err)
	}
	ws := n.workspace("alice", "trunk")
	checkin := ws.commit("a.txt", "one\n", "first change", "feature x")
	tag, err := bob.Tag(ctx, checkin, "ci", "green: ok")
	if err != nil {
		t.Fatal(err)
	}
	n.webPost("carol", "Carol asks", "a question from the web")
	hashes, _, err := n.repo.Received(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var pending, file string
	for _, h := range hashes {
		if strings.Contains(n.sql("SELECT count(*) FROM private p JOIN blob b ON b.rid=p.rid WHERE b.uuid='"+h+"'"), "1") {
			pending = h
		}
		if strings.Contains(n.sql("SELECT count(*) FROM mlink m JOIN blob b ON b.rid=m.fid WHERE b.uuid='"+h+"'"), "1") {
			file = h
		}
	}
	if pending == "" || file == "" {
		t.Fatalf("no pending post (%q) or file content (%q) among %v", pending, file, hashes)
	}

	infos, err := n.repo.Classify(ctx, root, reply, edit, tktChange, checkin, tag, pending, file)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		kind           fossilio.Kind
		sender         string
		root, irt      string
		edit, pending  bool
		branch, ticket string
	}
	wants := []want{
		{kind: fossilio.KindPost, sender: "alice", root: root},
		{kind: fossilio.KindPost, sender: "bob", root: root, irt: root},
		{kind: fossilio.KindPost, sender: "alice", root: root, irt: root, edit: true},
		{kind: fossilio.KindTicketChange, sender: "alice", ticket: ticket},
		{kind: fossilio.KindCheckin, sender: "alice", branch: "feature x"},
		{kind: fossilio.KindTagChange, sender: "bob"},
		{kind: fossilio.KindPost, sender: "carol", root: pending, pending: true},
		{kind: fossilio.KindOther, sender: "alice"},
	}
	for i, w := range wants {
		got := infos[i]
		if got.Kind != w.kind || got.Sender != w.sender || got.Root != w.root || got.InReplyTo != w.irt ||
			got.Edit != w.edit || got.Pending != w.pending || got.Branch != w.branch || got.Ticket != w.ticket {
			t.Errorf("artifact %d (%s): got %+v, want %+v", i, got.Hash, got, w)
		}
		// The sender fossilio reads is the one the fossil CLI reads.
		if s := n.senderByFossil(got.Hash); s != got.Sender {
			t.Errorf("artifact %d: sender %q, fossil sql says %q", i, got.Sender, s)
		}
	}
	if infos[4].Comment != "first change" {
		t.Errorf("check-in comment %q", infos[4].Comment)
	}
	if tg := infos[5]; len(tg.Targets) != 1 || tg.Targets[0] != checkin || len(tg.Tags) != 1 || tg.Tags[0].Name != "ci" || tg.Tags[0].Value != "green: ok" {
		t.Errorf("tag change: %+v", tg)
	}
	if infos[6].Via != fossilio.ViaWeb || infos[0].Via != fossilio.ViaSync {
		t.Errorf("via: web post %v, sync post %v", infos[6].Via, infos[0].Via)
	}

	// Arrived reads in one transaction what Received, Classify, NoteTexts
	// and Users read in four: the same, the first most classified.
	_, last, err := n.repo.Received(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	most := len(hashes) - 2
	a, err := n.repo.Arrived(ctx, 0, most, func(fossilio.Arrival) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	first, err := n.repo.Classify(ctx, hashes[:most]...)
	if err != nil {
		t.Fatal(err)
	}
	texts, err := n.repo.NoteTexts(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	users, err := n.repo.Users(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, fossilio.Arrival{Last: last, Hashes: hashes, Infos: first, Texts: texts, Users: users}) {
		t.Errorf("Arrived: %+v\nwant the four reads': %v %v %+v %q %v", a, last, hashes, first, texts, users)
	}
	if a, err := n.repo.Arrived(ctx, 0, most, nil); err != nil || a.Users != nil || len(a.Infos) != most {
		t.Errorf("Arrived without the users: %d infos, users %v, %v", len(a.Infos), a.Users, err)
	}
}

func TestSenderIsTheReceiptNotTheName(t *testing.T) {
	n := newNode(t)
	// alice writes "bob" inside the artifact; the node knows alice sent it.
	forged, err := fossilio.PostDraft{Date: time.Now(), User: "bob", Title: "I am bob", Text: "really"}.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	h, err := n.client("alice").Push(n.ctx, forged)
	if err != nil {
		t.Fatal(err)
	}
	info, err := n.repo.Info(n.ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	if info.Sender != "alice" || info.Author != "bob" {
		t.Fatalf("sender %q author %q, want alice and bob", info.Sender, info.Author)
	}
	if s := n.senderByFossil(h); s != "alice" {
		t.Fatalf("fossil sql says the sender is %q", s)
	}
}

func TestCloneKnowsNoSender(t *testing.T) {
	n := newNode(t)
	h, err := n.client("bob").NewThread(n.ctx, "Hello", "from bob")
	if err != nil {
		t.Fatal(err)
	}
	ws := n.workspace("alice", "trunk")
	clone, err := fossilio.OpenClone(ws.clone, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer clone.Close()
	if clone.SendersKnown() {
		t.Fatal("a clone says it knows senders")
	}
	p, err := clone.Post(n.ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	if p.Sender != "" || p.Author != "bob" || p.Text != "from bob" {
		t.Fatalf("post read from the clone: sender %q author %q text %q", p.Sender, p.Author, p.Text)
	}
	code, err := clone.ProjectCode(n.ctx)
	if err != nil || code != n.srv.ProjectCode {
		t.Fatalf("clone's project code %q %v, want %q", code, err, n.srv.ProjectCode)
	}
}

func TestThreadInServerOrder(t *testing.T) {
	n := newNode(t)
	ctx := n.ctx
	alice, bob := n.client("alice"), n.client("bob")
	root, err := alice.NewThread(ctx, "Order", "post 0 ```json\n")
	if err != nil {
		t.Fatal(err)
	}
	r1, _ := bob.Reply(ctx, root, root, "post 1\n```json\n{\"ocx\": \"listen\"}\n```\n")
	r2, _ := alice.Reply(ctx, root, r1, "post 2")
	r3, err := bob.Reply(ctx, root, root, "post 3")
	if err != nil {
		t.Fatal(err)
	}
	p1, err := n.repo.Post(ctx, r1)
	if err != nil {
		t.Fatal(err)
	}
	e1, err := bob.Edit(ctx, p1, "post 1, edited")
	if err != nil {
		t.Fatal(err)
	}
	p3, _ := n.repo.Post(ctx, r3)
	d3, err := bob.Edit(ctx, p3, "")
	if err != nil {
		t.Fatal(err)
	}
	rootPost, _ := n.repo.Post(ctx, root)
	e0, err := alice.Edit(ctx, rootPost, "post 0, edited")
	if err != nil {
		t.Fatal(err)
	}
	n.webPost("carol", "unrelated pending thread", "x")

	// Any post names the thread.
	posts, err := n.repo.Thread(ctx, r2[:12])
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ hash, first, text string }
	var got []row
	for _, p := range posts {
		got = append(got, row{p.Hash, p.First, p.Text})
	}
	want := []row{{e0, root, "post 0, edited"}, {e1, r1, "post 1, edited"}, {r2, r2, "post 2"}, {d3, r3, ""}}
	if len(got) != len(want) {
		t.Fatalf("thread: %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("post %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if !posts[3].Deleted || posts[2].Deleted || posts[0].Title != "Order" {
		t.Errorf("deleted flags %v %v, title %q", posts[3].Deleted, posts[2].Deleted, posts[0].Title)
	}
	if posts[2].InReplyTo != r1 || posts[1].Sender != "bob" || posts[0].Sender != "alice" {
		t.Errorf("reply-to %s, senders %q %q", posts[2].InReplyTo, posts[1].Sender, posts[0].Sender)
	}
	first, err := n.repo.Post(ctx, r1)
	if err != nil {
		t.Fatal(err)
	}
	if blocks := fossilio.FencedJSON(first.Text); len(blocks) != 1 || blocks[0] != "{\"ocx\": \"listen\"}\n" {
		t.Errorf("fenced JSON of the first version: %q", blocks)
	}
	if _, err := n.repo.Thread(ctx, firstCheckin(t, n)); !errors.Is(err, fossilio.ErrWrongKind) {
		t.Errorf("Thread of a check-in: %v, want ErrWrongKind", err)
	}
}

func firstCheckin(t *testing.T, n *node) string {
	t.Helper()
	return strings.Trim(n.sql("SELECT uuid FROM blob WHERE rid=(SELECT min(objid) FROM event WHERE type='ci')"), "'")
}

func TestTicketChanges(t *testing.T) {
	n := newNode(t)
	ctx := n.ctx
	c1, id, err := n.client("alice").NewTicket(ctx, fossilio.Field{Name: "title", Value: "Crash when saving"}, fossilio.Field{Name: "status", Value: "Open"}, fossilio.Field{Name: "icomment", Value: "first comment"})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := n.client("bob").ChangeTicket(ctx, id, fossilio.Field{Name: "+icomment", Value: "\n\n```json\n{\"ocx\": \"listen\"}\n```\n"})
	if err != nil {
		t.Fatal(err)
	}
	changes, err := n.repo.TicketChanges(ctx, id[:12])
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 2 || changes[0].Hash != c1 || changes[1].Hash != c2 {
		t.Fatalf("changes: %+v", changes)
	}
	if changes[0].Sender != "alice" || changes[1].Sender != "bob" || changes[0].Comment != "first comment" || changes[1].Ticket != id {
		t.Fatalf("changes: %+v", changes)
	}
	if b := fossilio.FencedJSON(changes[1].Comment); len(b) != 1 {
		t.Fatalf("no note in the appended comment %q", changes[1].Comment)
	}
	fields, err := n.repo.Ticket(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if fields["title"] != "Crash when saving" || fields["status"] != "Open" {
		t.Fatalf("ticket fields: %v", fields)
	}
	if _, err := n.repo.TicketChanges(ctx, "0123456789"); !errors.Is(err, fossilio.ErrNotFound) {
		t.Fatalf("unknown ticket: %v", err)
	}
}

func TestCheckinTagsAndBranch(t *testing.T) {
	n := newNode(t)
	ctx := n.ctx
	listen, err := n.client("alice").NewThread(ctx, "CI", "listen to dev")
	if err != nil {
		t.Fatal(err)
	}
	ws := n.workspace("alice", "trunk")
	c1 := ws.commit("a.txt", "1\n", "on dev", "dev")
	c2 := ws.commit("a.txt", "2\n", "still on dev", "")
	ws.commit("b.txt", "x\n", "elsewhere", "other")
	bob, admin := n.client("bob"), n.client(n.srv.AdminLogin)
	if _, err := bob.Tag(ctx, c2, "ci", "red: 1 failed"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Tag(ctx, c2, "ci", "green: by the admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Tag(ctx, c2, "ci", "green: 3 passed"); err != nil {
		t.Fatal(err)
	}
	changes, err := n.repo.CheckinTags(ctx, c2)
	if err != nil {
		t.Fatal(err)
	}
	var ci []string
	for _, c := range changes {
		if c.Name == "ci" {
			ci = append(ci, c.Sender+"="+c.Value)
		}
	}
	if strings.Join(ci, ",") != "bob=red: 1 failed,admin=green: by the admin,bob=green: 3 passed" {
		t.Fatalf("ci history: %v", ci)
	}
	if l, ok := fossilio.LatestTag(changes, "ci", "bob"); !ok || l.Value != "green: 3 passed" || l.Op != fossilio.TagAdd {
		t.Fatalf("latest ci by bob: %+v %v", l, ok)
	}
	if _, ok := fossilio.LatestTag(changes, "ci", "alice"); ok {
		t.Fatal("alice never tagged, yet LatestTag found one")
	}
	// Fossil's own table keeps only the latest value.
	if v := n.sql("SELECT value FROM tagxref JOIN tag USING(tagid) WHERE tagname='ci'"); v != "'green: 3 passed'" {
		t.Fatalf("tagxref keeps %s", v)
	}
	own, err := n.repo.CheckinTags(ctx, c1)
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := fossilio.LatestTag(own, "branch", ""); !ok || l.Value != "dev" || l.Hash != c1 || l.Sender != "alice" {
		t.Fatalf("c1's own branch tag: %+v %v", l, ok)
	}

	on, err := n.repo.CheckinsOnBranch(ctx, "dev", listen)
	if err != nil {
		t.Fatal(err)
	}
	if len(on) != 2 || on[0].Hash != c1 || on[1].Hash != c2 || on[1].Branch != "dev" || on[1].Sender != "alice" {
		t.Fatalf("check-ins on dev after the listen note: %+v", on)
	}
	on, err = n.repo.CheckinsOnBranch(ctx, "dev", c1)
	if err != nil || len(on) != 1 || on[0].Hash != c2 {
		t.Fatalf("check-ins on dev after c1: %+v %v", on, err)
	}
	if _, err := n.repo.CheckinTags(ctx, listen); !errors.Is(err, fossilio.ErrWrongKind) {
		t.Fatalf("tags of a post: %v", err)
	}
}

func TestResolve(t *testing.T) {
	n := newNode(t)
	ctx := n.ctx
	// Two posts whose hashes share their first 10 digits (found by search:
	// the birthday bound for 40 bits is about a million drafts).
	c := n.client("alice")
	c.Now = at("2026-01-02T03:04:05Z")
	var hashes []string
	for _, text := range []string{"n472794", "n1489879"} {
		b, err := fossilio.PostDraft{Date: c.Now(), User: "alice", Title: "collide", Text: text}.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		h, err := c.Push(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h)
	}
	if hashes[0][:10] != hashes[1][:10] || hashes[0] == hashes[1] {
		t.Fatalf("the drafts no longer collide on 10 digits: %v", hashes)
	}
	for _, h := range hashes {
		if got, err := n.repo.Resolve(ctx, h); err != nil || got != h {
			t.Errorf("Resolve(full) = %q, %v", got, err)
		}
		if got, err := n.repo.Resolve(ctx, strings.ToUpper(h[:11])); err != nil || got != h {
			t.Errorf("Resolve(11 digits, upper case) = %q, %v", got, err)
		}
	}
	_, err := n.repo.Resolve(ctx, hashes[0][:10])
	var he *fossilio.HashError
	if !errors.Is(err, fossilio.ErrAmbiguous) || !errors.As(err, &he) || len(he.Matches) != 2 || !strings.Contains(err.Error(), "ambiguous") {
		t.Fatalf("ambiguous prefix: %v", err)
	}
	for _, bad := range []string{"abc", "", "zzzzzzzzzzzz", hashes[0] + "0"} {
		if _, err := n.repo.Resolve(ctx, bad); !errors.Is(err, fossilio.ErrBadHash) {
			t.Errorf("Resolve(%q): %v, want ErrBadHash", bad, err)
		}
	}
	if _, err := n.repo.Resolve(ctx, "0000000000"); !errors.Is(err, fossilio.ErrNotFound) {
		t.Errorf("unknown prefix: %v", err)
	}
	if _, err := n.repo.Info(ctx, strings.Repeat("0", 64)); !errors.Is(err, fossilio.ErrNotFound) {
		t.Errorf("unknown hash: %v", err)
	}
	if _, err := n.repo.Classify(ctx, strings.Repeat("1", 64)); !errors.Is(err, fossilio.ErrNotFound) {
		t.Errorf("classify of an unknown hash: %v", err)
	}
}

func TestBadRepositories(t *testing.T) {
	dir := t.TempDir()
	if _, err := fossilio.OpenNode(filepath.Join(dir, "missing.fossil"), nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := fossilio.OpenNode(dir, nil); !errors.Is(err, fossilio.ErrNotRepository) {
		t.Errorf("a directory: %v", err)
	}
	text := filepath.Join(dir, "text.fossil")
	os.WriteFile(text, []byte(strings.Repeat("not a database\n", 100)), 0o600)
	if _, err := fossilio.OpenNode(text, nil); !errors.Is(err, fossilio.ErrNotRepository) {
		t.Errorf("a text file: %v", err)
	}
	other := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE blob(x)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := fossilio.OpenClone(other, nil); !errors.Is(err, fossilio.ErrNotRepository) {
		t.Errorf("another SQLite database: %v", err)
	}
}

func TestBusyRepository(t *testing.T) {
	n := newNode(t)
	// Opened before the push: the server's backoffice may write for a
	// moment after it, longer than this reader's 50 ms.
	repo, err := fossilio.OpenNode(n.srv.Repo, &fossilio.Options{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	h, err := n.client("alice").NewThread(n.ctx, "t", "x")
	if err != nil {
		t.Fatal(err)
	}
	// A writer holding an exclusive lock (in rollback-journal mode, as a
	// new repository is) keeps every reader out until the busy timeout.
	w, err := sql.Open("sqlite", "file://"+n.srv.Repo+"?_txlock=exclusive&_busy_timeout=15000")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tx, err := w.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Info(n.ctx, h); !errors.Is(err, fossilio.ErrBusy) {
		t.Errorf("read under an exclusive lock: %v, want ErrBusy", err)
	}
	tx.Rollback()
	// The server's backoffice may write for a moment after the push; the
	// default busy timeout waits it out.
	if info, err := n.repo.Info(n.ctx, h); err != nil || info.Kind != fossilio.KindPost {
		t.Errorf("read after the lock: %+v %v", info, err)
	}
}

func TestMalformedArtifactInRepository(t *testing.T) {
	n := newNode(t)
	ci := firstCheckin(t, n)
	before, last, err := n.repo.Received(n.ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	// fossil tag add --raw with an all-hex name exits 0 and stores a blob
	// that does not parse (reference 1.6).
	if _, err := n.srv.Fossil("tag", "add", "--raw", "cafe", ci, "-R", n.srv.Repo); err != nil {
		t.Fatal(err)
	}
	after, _, err := n.repo.Received(n.ctx, last)
	if err != nil || len(after) != 1 {
		t.Fatalf("received after %d: %v %v (before: %v)", last, after, err, before)
	}
	_, _, err = n.repo.Artifact(n.ctx, after[0])
	var pe *fossilio.ParseError
	if !errors.As(err, &pe) || pe.Hash != after[0] || !errors.Is(err, fossilio.ErrMalformed) {
		t.Fatalf("Artifact of a malformed blob: %v", err)
	}
	info, err := n.repo.Info(n.ctx, after[0])
	if err != nil || info.Kind != fossilio.KindOther || info.Via != fossilio.ViaLocal {
		t.Fatalf("classified as %+v %v, want other, local", info, err)
	}
	if _, err := n.repo.Post(n.ctx, after[0]); !errors.Is(err, fossilio.ErrWrongKind) {
		t.Fatalf("Post of a malformed blob: %v", err)
	}
}

func TestContentThroughDeltas(t *testing.T) {
	n := newNode(t)
	ws := n.workspace("alice", "trunk")
	var content []string
	for i := range 4 {
		content = append(content, strings.Repeat("line of text that stays the same\n", 50)+"version "+string(rune('0'+i))+"\n")
	}
	for _, c := range content {
		ws.commit("big.txt", c, "version", "")
	}
	if d := n.sql("SELECT count(*) FROM delta"); d == "0" {
		t.Fatal("the repository stores no delta; the test proves nothing")
	}
	rows := n.sql("SELECT b.uuid FROM delta d JOIN blob b ON b.rid=d.rid")
	checked := 0
	for _, line := range strings.Split(rows, "\n") {
		h := strings.Trim(line, "'")
		got, err := n.repo.Content(n.ctx, h)
		if err != nil {
			t.Fatalf("Content(%s): %v", h, err)
		}
		want, err := n.srv.Fossil("artifact", h, "-R", n.srv.Repo)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Fatalf("Content(%s) differs from fossil artifact", h)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no delta-stored artifact checked")
	}
}

func TestUsersAndProject(t *testing.T) {
	n := newNode(t)
	users, err := n.repo.Users(n.ctx)
	if err != nil {
		t.Fatal(err)
	}
	caps := map[string]string{}
	for _, u := range users {
		caps[u.Login] = u.Caps
	}
	if caps["alice"] != "gio" || caps["carol"] != "3" || caps["nobody"] != "gjorz" || caps["anonymous"] != "hmnc" {
		t.Fatalf("caps: %v", caps)
	}
	eff, err := n.repo.EffectiveCaps(n.ctx, "carol")
	if err != nil || eff != "3cghjmnorz" {
		t.Fatalf("carol's effective caps %q %v (reference: cghjmnorz3)", eff, err)
	}
	if _, err := n.repo.User(n.ctx, "zed"); !errors.Is(err, fossilio.ErrNoSuchUser) {
		t.Fatalf("unknown user: %v", err)
	}
	// PrivilegedUsers, one read, says what Privileged says of each user.
	priv, err := n.repo.PrivilegedUsers(n.ctx)
	if err != nil {
		t.Fatal(err)
	}
	inList := map[string]bool{}
	for _, u := range priv {
		inList[u] = true
	}
	if !inList[n.srv.AdminLogin] {
		t.Errorf("PrivilegedUsers %v leaves out the admin %s", priv, n.srv.AdminLogin)
	}
	for _, u := range users {
		ok, err := n.repo.Privileged(n.ctx, u.Login)
		if err != nil || ok != inList[u.Login] {
			t.Errorf("%s: Privileged %v %v, in PrivilegedUsers %v", u.Login, ok, err, inList[u.Login])
		}
	}
	code, err := n.repo.ProjectCode(n.ctx)
	if err != nil || code != n.srv.ProjectCode || n.repo.ProjectName() != "demo" {
		t.Fatalf("project %q %q %v", code, n.repo.ProjectName(), err)
	}
}

// TestReceivedStopsBeforeAnUnfinishedWebReceipt: a web form stores its
// artifact and cross-links it in two transactions (wiki_put); in between, a
// receipt made by a web page holds an artifact with no event row. Received
// and HookLook stop before it, so that a reader's mark never passes a post
// that is no post yet; once it is cross-linked they go on. A receipt older
// than UnfinishedFor counts as finished whatever it holds, and one made on
// the host (a malformed tag, TestMalformedArtifactInRepository) never waits.
func TestReceivedStopsBeforeAnUnfinishedWebReceipt(t *testing.T) {
	n := newNode(t)
	before, last, err := n.repo.Received(n.ctx, 0)
	if err != nil || len(before) == 0 {
		t.Fatalf("received: %v %v", before, err)
	}
	// What content_put_ex has committed of a web post, before
	// manifest_crosslink: its receipt and its blob.
	hash := strings.Repeat("ab", 32)
	n.sql(`INSERT INTO rcvfrom(uid, mtime, nonce, ipaddr) VALUES(1, julianday('now'), NULL, '127.0.0.1');
		INSERT INTO blob(rcvid, size, uuid, content) VALUES((SELECT max(rcvid) FROM rcvfrom), 3, '` + hash + `', x'00000003');`)
	got, newest, err := n.repo.Received(n.ctx, last)
	if err != nil || len(got) != 0 || newest != last {
		t.Fatalf("received after %d with a web receipt unfinished: %v, newest %d, %v; want nothing, %d", last, got, newest, err, last)
	}
	if l, err := n.repo.HookLook(n.ctx, last); err != nil || l.Newest != last || l.ByPage || !l.PageWriting {
		t.Fatalf("HookLook(%d) with a web receipt unfinished: %+v %v; want newest %d, nothing by a page, a page writing", last, l, err, last)
	}
	// The cross-link.
	n.sql(`INSERT INTO event(type, mtime, objid, user, comment) VALUES('f', julianday('now'), (SELECT rid FROM blob WHERE uuid='` + hash + `'), 'carol', 'Post: x')`)
	got, newest, err = n.repo.Received(n.ctx, last)
	if err != nil || len(got) != 1 || got[0] != hash || newest != last+1 {
		t.Fatalf("received after the cross-link: %v, newest %d, %v; want %s, %d", got, newest, err, hash, last+1)
	}
	if l, err := n.repo.HookLook(n.ctx, last); err != nil || l.Newest != last+1 || !l.ByPage || l.PageWriting {
		t.Fatalf("HookLook(%d) after the cross-link: %+v %v; want newest %d, by a page", last, l, err, last+1)
	}
	// Receipts before it were made on the host and by sync: not all a
	// page's, so a backoffice may be on its way (the watch waits).
	if l, err := n.repo.HookLook(n.ctx, 0); err != nil || l.ByPage {
		t.Fatalf("HookLook(0): %+v %v; want not by a page", l, err)
	}
	// A web receipt older than UnfinishedFor is finished, cross-linked or
	// not.
	old := strings.Repeat("cd", 32)
	n.sql(fmt.Sprintf(`INSERT INTO rcvfrom(uid, mtime, nonce, ipaddr) VALUES(1, julianday('now')-%f, NULL, '127.0.0.1');
		INSERT INTO blob(rcvid, size, uuid, content) VALUES((SELECT max(rcvid) FROM rcvfrom), 3, '`+old+`', x'00000003');`,
		(fossilio.UnfinishedFor+time.Second).Hours()/24))
	if got, newest, err := n.repo.Received(n.ctx, last+1); err != nil || len(got) != 1 || got[0] != old || newest != last+2 {
		t.Fatalf("received after %d with an old web receipt: %v, newest %d, %v; want %s, %d", last+1, got, newest, err, old, last+2)
	}
}
