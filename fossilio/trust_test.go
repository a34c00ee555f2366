package fossilio_test

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host/unixhost"
)

// raw is cards with a Z card that holds: an artifact exactly as written.
func raw(cards string) []byte {
	sum := md5.Sum([]byte(cards))
	return []byte(cards + "Z " + hex.EncodeToString(sum[:]) + "\n")
}

// TestStructural (issue 22 item 3): Fossil tries every artifact it
// receives as a structural one, so a file whose bytes are a forum post, a
// tag change, a ticket change or a check-in is one; bytes this parser does
// not read but that end in a Z card that holds are taken for one too;
// plain content, a Z card that does not hold among it, is not.
func TestStructural(t *testing.T) {
	target := strings.Repeat("ab", 32)
	post, err := fossilio.PostDraft{Date: time.Now(), User: "agent", Root: target, InReplyTo: target, Text: "smuggled"}.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	tag, err := fossilio.ControlDraft{Date: time.Now(), User: "agent", Tags: []fossilio.Tag{{Op: fossilio.TagAdd, Name: "audited", Target: target, Value: "pass: x (against y)"}}}.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	ticket, err := fossilio.TicketDraft{Date: time.Now(), User: "agent", Ticket: strings.Repeat("c", 40), Fields: []fossilio.Field{{Name: "+icomment", Value: "x"}}}.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
		want fossilio.Type
		is   bool
	}{
		{"a forum post", post, fossilio.TypeForum, true},
		{"a tag change", tag, fossilio.TypeControl, true},
		{"a ticket change", ticket, fossilio.TypeTicket, true},
		{"a check-in", raw("C x\nD 2024-01-01T00:00:00\nP " + target + "\nU agent\n"), fossilio.TypeManifest, true},
		{"a tag change dated now", raw("D now\nT +x " + target + "\nU agent\n"), fossilio.TypeControl, true},
		{"a card this parser refuses, Z holding", raw("D 2024-01-01\nQ nonsense\nU agent\n"), fossilio.TypeNone, true},
		{"plain text", []byte("hello\n"), fossilio.TypeNone, false},
		{"a Z card that does not hold", []byte("D 2024-01-01\nU agent\nZ " + strings.Repeat("0", 32) + "\n"), fossilio.TypeNone, false},
		{"a Z card mid-line", append([]byte("text "), raw("U a\n")...), fossilio.TypeNone, false},
		{"nothing", nil, fossilio.TypeNone, false},
	} {
		got, is := fossilio.Structural(c.data)
		if got != c.want || is != c.is {
			t.Errorf("%s: Structural = %s, %v; want %s, %v", c.name, got, is, c.want, c.is)
		}
	}
}

// TestBranchFromTheManifest (issue 22 item 3): a check-in's branch is its
// own T card's, or else what its primary parent propagates, as Fossil's
// cross-link gives it; nothing of a repository's tables is read.
func TestBranchFromTheManifest(t *testing.T) {
	parse := func(cards string) *fossilio.Artifact {
		a, err := fossilio.Parse(raw(cards))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	p := strings.Repeat("ab", 32)
	child := parse("C x\nD 2024-01-01\nP " + p + "\nU a\n")
	newBranch := parse("C x\nD 2024-01-01\nP " + p + "\nT *branch * feature\nT *sym-feature *\nT -sym-trunk *\nU a\n")
	once := parse("C x\nD 2024-01-01\nP " + p + "\nT +branch * once\nU a\n")
	cancel := parse("C x\nD 2024-01-01\nP " + p + "\nT -branch *\nU a\n")
	trunk := fossilio.BranchState{Name: "trunk", Propagates: true}
	for _, c := range []struct {
		name   string
		a      *fossilio.Artifact
		parent fossilio.BranchState
		want   fossilio.BranchState
	}{
		{"inherits a propagating branch", child, trunk, trunk},
		{"inherits nothing from a one-off", child, fossilio.BranchState{Name: "x"}, fossilio.BranchState{}},
		{"starts a branch", newBranch, trunk, fossilio.BranchState{Name: "feature", Propagates: true}},
		{"names itself once", once, trunk, fossilio.BranchState{Name: "once"}},
		{"cancels it", cancel, trunk, fossilio.BranchState{}},
		{"no parent", child, fossilio.BranchState{}, fossilio.BranchState{}},
	} {
		if got := c.a.Branch(c.parent); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestOpenCloneFile (issue 22 item 3): a clone is read through the
// descriptor the node opened following no link, never by its name; one
// that becomes a link afterwards is still the file opened; RememberFile
// writes that file, and no other.
func TestOpenCloneFile(t *testing.T) {
	n := newNode(t)
	w := n.workspace("alice", "trunk")
	root, err := unixhost.OpenRoot(filepath.Dir(w.clone))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	f, err := root.OpenRegular(w.clone, os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	// The agent moves its clone away and links the node's repository in.
	if err := os.Rename(w.clone, w.clone+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(n.srv.Repo, w.clone); err != nil {
		t.Fatal(err)
	}
	clone, err := fossilio.OpenCloneFile(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if clone.SendersKnown() {
		t.Errorf("a clone opened by its descriptor knows senders")
	}
	cs, err := clone.Checkins(n.ctx)
	clone.Close()
	if err != nil || len(cs) == 0 || cs[0].Sender != "" {
		t.Fatalf("the clone's check-ins: %+v %v", cs, err)
	}
	if _, err := root.OpenRegular(w.clone, os.O_RDWR); err == nil {
		t.Fatalf("the link in the clone's place was opened")
	} else if r, ok := unixhost.AsRefused(err); !ok || r.Why != "a symbolic link" {
		t.Fatalf("the link in the clone's place: %v", err)
	}
	if err := os.Remove(w.clone); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(w.clone+".moved", w.clone); err != nil {
		t.Fatal(err)
	}
	g, err := root.OpenRegular(w.clone, os.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	rem := fossilio.Remote{URL: n.srv.URL, Login: "alice", Password: "a-new-secret"}
	err = fossilio.RememberFile(n.ctx, g, rem)
	g.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := fossilio.Remembered(n.ctx, w.clone); err != nil || got.Password != "a-new-secret" || got.Login != "alice" {
		t.Errorf("the clone remembers %+v (%v)", got, err)
	}
	if _, ok, _ := n.repo.Config(n.ctx, "last-sync-pw"); ok {
		t.Errorf("the node's repository was written")
	}
	if entries, _ := filepath.Glob(w.clone + "-*"); len(entries) != 0 {
		t.Errorf("a journal was left beside the clone: %v", entries)
	}
}

// TestReadersPassOverWhatDoesNotRead (issue 22 item 5): a tag change, a
// post and a ticket change whose bytes the node cannot read (here their
// stored content no longer matches their names, as a broken delta or a
// card this parser reads more narrowly than Fossil would leave them) cost
// only themselves: a batch holding one classifies, the thread and the
// ticket read without it, the check-in's tags without it, and PassedOver
// is told of each. A tag change dated "now", which Fossil reads, reads
// here too.
func TestReadersPassOverWhatDoesNotRead(t *testing.T) {
	n := newNode(t)
	ci := firstCheckin(t, n)
	root, err := n.client("alice").NewThread(n.ctx, "A thread", "hello")
	if err != nil {
		t.Fatal(err)
	}
	_, ticket, err := n.client("alice").NewTicket(n.ctx, fossilio.Field{Name: "title", Value: "T"}, fossilio.Field{Name: "icomment", Value: "first"})
	if err != nil {
		t.Fatal(err)
	}
	tag, err := n.client("bob").Tag(n.ctx, ci, "broken", "soon")
	if err != nil {
		t.Fatal(err)
	}
	post, err := n.client("bob").Reply(n.ctx, root, root, "soon bad")
	if err != nil {
		t.Fatal(err)
	}
	change, err := n.client("bob").ChangeTicket(n.ctx, ticket, fossilio.Field{Name: "+icomment", Value: "soon bad"})
	if err != nil {
		t.Fatal(err)
	}
	now, err := n.client("bob").PushRaw(n.ctx, raw("D now\nT +sym-late "+ci+"\nU bob\n"))
	if err != nil {
		t.Fatal(err)
	}
	bad := []string{tag, post, change}
	n.sql("UPDATE blob SET content=compress('no longer what its name says') WHERE uuid IN ('" + strings.Join(bad, "','") + "')")
	var mu sync.Mutex
	told := map[string]int{}
	r, err := fossilio.OpenNode(n.srv.Repo, &fossilio.Options{PassedOver: func(h string, err error) {
		if !errors.Is(err, fossilio.ErrMalformed) {
			t.Errorf("told of %s: %v, not ErrMalformed", h, err)
		}
		mu.Lock()
		told[h]++
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	all, _, err := r.Received(n.ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := r.Classify(n.ctx, all...)
	if err != nil {
		t.Fatalf("a batch holding them does not classify: %v", err)
	}
	for _, info := range infos {
		switch info.Hash {
		case tag:
			if info.Kind != fossilio.KindTagChange || info.Unparsed == "" || len(info.Tags) != 0 {
				t.Errorf("the bad tag change: %+v", info)
			}
		case now[0]:
			if info.Kind != fossilio.KindTagChange || info.Unparsed != "" || len(info.Tags) != 1 {
				t.Errorf("the tag change dated now: %+v", info)
			}
		}
	}
	texts, err := r.NoteTexts(n.ctx, infos)
	if err != nil {
		t.Fatalf("their texts: %v", err)
	}
	for i, info := range infos {
		if (info.Hash == post || info.Hash == change) && texts[i] != "" {
			t.Errorf("the text of %s: %q", info.Hash, texts[i])
		}
	}
	// Read at once, each artifact that does not read is its own error and
	// the others read.
	arts, errs, err := r.ArtifactsOf(n.ctx, infos)
	if err != nil {
		t.Fatalf("the artifacts at once: %v", err)
	}
	for i, info := range infos {
		isBad := slices.Contains(bad, info.Hash)
		switch {
		case isBad && !errors.Is(errs[i], fossilio.ErrMalformed):
			t.Errorf("the bad %s read at once: %v, want ErrMalformed", info.Hash, errs[i])
		case !isBad && (errs[i] != nil || arts[i] == nil):
			t.Errorf("%s read at once: %v", info.Hash, errs[i])
		case info.Hash == root && string(arts[i].Text) != "hello":
			t.Errorf("the thread's first post read at once: %q", arts[i].Text)
		}
	}
	posts, err := r.Thread(n.ctx, root)
	if err != nil || len(posts) != 1 {
		t.Errorf("the thread: %d posts, %v; want its first alone", len(posts), err)
	}
	changes, err := r.TicketChanges(n.ctx, ticket)
	if err != nil || len(changes) != 1 {
		t.Errorf("the ticket: %d changes, %v; want its first alone", len(changes), err)
	}
	tags, err := r.CheckinTags(n.ctx, ci)
	if err != nil {
		t.Errorf("the check-in's tags: %v", err)
	}
	for _, c := range tags {
		if c.Name == "broken" {
			t.Errorf("the bad tag change's tag is read: %+v", c)
		}
	}
	if _, ok := fossilio.LatestTag(tags, "sym-late", "bob"); !ok {
		t.Errorf("the tag change dated now is not among the check-in's tags")
	}
	sent, err := r.SentBy(n.ctx, "bob", "")
	if err != nil || len(sent) != 0 {
		t.Errorf("what bob sent: %+v (%v); want nothing that reads", sent, err)
	}
	for _, h := range bad {
		if told[h] == 0 {
			t.Errorf("%s was read past without a word", h)
		}
	}
}

// TestServerOrderNotDates (D47): the check-ins most recently tagged are
// those whose tag the server received last, not those whose D card says
// so; the first posts are listed in the server's order with their senders.
func TestServerOrderNotDates(t *testing.T) {
	n := newNode(t)
	w := n.workspace("alice", "trunk")
	a := w.commit("a.txt", "a\n", "a", "")
	b := w.commit("b.txt", "b\n", "b", "")
	tag := func(ci string, date time.Time) {
		art, err := fossilio.ControlDraft{Date: date, User: "bob", Tags: []fossilio.Tag{{Op: fossilio.TagAdd, Name: "reviewed", Target: ci}}}.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.client("bob").Push(n.ctx, art); err != nil {
			t.Fatal(err)
		}
	}
	tag(a, time.Now().Add(100*24*time.Hour)) // dated far ahead, sent first
	tag(b, time.Now())
	got, err := n.repo.Tagged(n.ctx, "reviewed", 10)
	if err != nil || !slices.Equal(got, []string{b, a}) {
		t.Errorf("Tagged = %v (%v); want %s (received last) then %s", got, err, b, a)
	}
	t1, err := n.client("alice").NewThread(n.ctx, "one", "1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.client("bob").Reply(n.ctx, t1, t1, "a reply"); err != nil {
		t.Fatal(err)
	}
	t2, err := n.client("bob").NewThread(n.ctx, "two", "the second")
	if err != nil {
		t.Fatal(err)
	}
	firsts, err := n.repo.FirstPosts(n.ctx, "")
	if err != nil || len(firsts) != 2 || firsts[0].Hash != t1 || firsts[0].Sender != "alice" || firsts[0].Text != "1" || firsts[1].Hash != t2 || firsts[1].Sender != "bob" {
		t.Errorf("FirstPosts = %+v (%v); want %s by alice, then %s by bob", firsts, err, t1, t2)
	}
	if held, err := n.repo.FirstPosts(n.ctx, "the second"); err != nil || len(held) != 1 || held[0].Hash != t2 {
		t.Errorf("FirstPosts holding \"the second\" = %+v (%v); want %s alone", held, err, t2)
	}
}
