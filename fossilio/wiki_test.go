package fossilio_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
)

// TestWikiDraftParses: a version of a page renders as a wiki artifact that
// Fossil's grammar takes, with the name escaped, an N card only when the
// mimetype is not Fossil's default, and a P card for an edit.
func TestWikiDraftParses(t *testing.T) {
	first, err := fossilio.WikiDraft{Date: date, User: "bob smith", Name: "workspace/alice notes", Text: "# Notes\n"}.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	a, err := fossilio.Parse(first)
	if err != nil || a.Type != fossilio.TypeWiki || a.WikiTitle != "workspace/alice notes" || a.Mimetype != fossilio.MarkdownMimetype ||
		a.User != "bob smith" || string(a.Text) != "# Notes\n" || len(a.Parents) != 0 || !a.Date.Equal(date) {
		t.Fatalf("first version parses as %+v %v", a, err)
	}
	if !strings.Contains(string(first), "\nL workspace/alice\\snotes\n") {
		t.Errorf("the name is not escaped:\n%s", first)
	}
	edit, err := fossilio.WikiDraft{Date: date, User: "alice", Name: "Plain", Prev: fossilio.HashOf(first), Mimetype: "text/x-fossil-wiki"}.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	a, err = fossilio.Parse(edit)
	if err != nil || a.Type != fossilio.TypeWiki || a.Mimetype != "" || len(a.Parents) != 1 || a.Parents[0] != fossilio.HashOf(first) || len(a.Text) != 0 {
		t.Fatalf("edit parses as %+v %v", a, err)
	}
	if strings.Contains(string(edit), "\nN ") {
		t.Errorf("an N card for Fossil's default mimetype:\n%s", edit)
	}
}

// TestWikiNames: the names Fossil takes and refuses (src/wiki.c
// wiki_name_is_wellformed), and, stricter, DEL and bytes not UTF-8. The
// artifact parser refuses two spaces in a row in an L card, as Fossil's
// does.
func TestWikiNames(t *testing.T) {
	for _, ok := range []string{"a", "workspace/alice", "Two words", "ünïcödé", strings.Repeat("x", 100), "a-b_c.d (e)"} {
		if err := fossilio.CheckWikiName(ok); err != nil {
			t.Errorf("CheckWikiName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", " lead", "trail ", "two  spaces", "tab\tin", "new\nline", "del\x7f", "nul\x00", "\xff\xfe", strings.Repeat("x", 101)} {
		err := fossilio.CheckWikiName(bad)
		if !errors.Is(err, fossilio.ErrBadInput) {
			t.Errorf("CheckWikiName(%q): %v, want ErrBadInput", bad, err)
		}
		if _, err := (fossilio.WikiDraft{Date: date, User: "alice", Name: bad, Text: "x"}).Bytes(); !errors.Is(err, fossilio.ErrBadInput) {
			t.Errorf("WikiDraft named %q: %v, want ErrBadInput", bad, err)
		}
	}
	two := []byte("D 2026-01-02T03:04:05.000\nL a\\s\\sb\nU alice\nW 1\nx\n")
	two = append(two, "Z "+md5hex(two)+"\n"...)
	if _, err := fossilio.Parse(two); !errors.Is(err, fossilio.ErrMalformed) {
		t.Errorf("an L card with two spaces in a row: %v, want ErrMalformed", err)
	}
}

// TestWikiDraftRefusesBadInput: each field is checked before anything is
// built.
func TestWikiDraftRefusesBadInput(t *testing.T) {
	for name, d := range map[string]fossilio.WikiDraft{
		"no user":          {Date: date, Name: "p", Text: "x"},
		"user with a tab":  {Date: date, User: "a\tb", Name: "p", Text: "x"},
		"no date":          {User: "alice", Name: "p", Text: "x"},
		"short prev":       {Date: date, User: "alice", Name: "p", Prev: "abcdef0123", Text: "x"},
		"text not UTF-8":   {Date: date, User: "alice", Name: "p", Text: "\xff"},
		"mimetype newline": {Date: date, User: "alice", Name: "p", Mimetype: "text/x\nmarkdown", Text: "x"},
	} {
		if _, err := d.Bytes(); !errors.Is(err, fossilio.ErrBadInput) {
			t.Errorf("%s: %v, want ErrBadInput", name, err)
		}
	}
}

// TestWikiPages: WikiPage reads a page's latest version (by the time
// written in it, as Fossil's /wiki and `fossil wiki export` choose), with
// the sender its receipt names (never the name written inside; "" in a
// clone); a version awaiting moderation is not read; a deleted page reads
// as Deleted; a page never written, or only awaiting moderation, is
// ErrNoSuchPage. WikiPages lists the names under a prefix, sorted, less
// deleted and pending pages, as `fossil wiki list` does but for the
// pending ones. Bad names and prefixes are refused, naming the repository.
func TestWikiPages(t *testing.T) {
	n := newNode(t)
	ctx := n.ctx
	repo := []string{"-R", n.srv.Repo}
	if got, err := n.repo.WikiPages(ctx, ""); err != nil || len(got) != 0 {
		t.Fatalf("pages of a new repository: %v %v", got, err)
	}

	// alice's page: three versions pushed, the third dated before the
	// second, so the second is the latest. alice writes "bob" inside.
	v1 := n.push("alice", fossilio.WikiDraft{Date: day(1), User: "bob", Name: "workspace/alice", Text: "version 1\n"})[0]
	v2 := n.push("alice", fossilio.WikiDraft{Date: day(3), User: "bob", Name: "workspace/alice", Prev: v1, Text: "version 2\n"})[0]
	n.push("alice", fossilio.WikiDraft{Date: day(2), User: "alice", Name: "workspace/alice", Prev: v1, Text: "backdated\n"})
	// bob's page, made with Fossil's own command on the host.
	file := filepath.Join(t.TempDir(), "page.md")
	if err := os.WriteFile(file, []byte("made by the CLI\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n.fossilEnv(nil, append([]string{"wiki", "create", "workspace/bob", file, "--mimetype", "text/x-markdown"}, repo...)...)
	// A page deleted (its text emptied), others outside the prefix.
	gone := n.push("bob", fossilio.WikiDraft{Date: day(1), User: "bob", Name: "workspace/gone", Text: "here for now"})[0]
	deleted := n.push("bob", fossilio.WikiDraft{Date: day(2), User: "bob", Name: "workspace/gone", Prev: gone, Text: "\n\n"})[0]
	n.push("bob", fossilio.WikiDraft{Date: day(1), User: "bob", Name: "Other page", Mimetype: "text/x-fossil-wiki", Text: "<b>other</b>"})
	n.push("bob", fossilio.WikiDraft{Date: day(1), User: "bob", Name: "workspaceX", Text: "x"})

	page, err := n.repo.WikiPage(ctx, "workspace/alice")
	if err != nil {
		t.Fatal(err)
	}
	want := fossilio.WikiPage{Name: "workspace/alice", Hash: v2, Mimetype: fossilio.MarkdownMimetype, Text: "version 2\n", Sender: "alice", Author: "bob", Time: day(3)}
	if page != want {
		t.Fatalf("alice's page:\n got %+v\nwant %+v", page, want)
	}
	bob, err := n.repo.WikiPage(ctx, "workspace/bob")
	if err != nil || bob.Sender != n.srv.AdminLogin || bob.Text != "made by the CLI\n" || bob.Mimetype != "text/x-markdown" || bob.Deleted {
		t.Fatalf("bob's page, made on the host: %+v %v", bob, err)
	}
	if other, err := n.repo.WikiPage(ctx, "Other page"); err != nil || other.Mimetype != "text/x-fossil-wiki" || other.Text != "<b>other</b>" {
		t.Fatalf("a page without an N card: %+v %v", other, err)
	}
	g, err := n.repo.WikiPage(ctx, "workspace/gone")
	if err != nil || !g.Deleted || g.Hash != deleted || g.Sender != "bob" {
		t.Fatalf("the deleted page: %+v %v", g, err)
	}
	// Fossil's own command reads the same latest version.
	for _, p := range []fossilio.WikiPage{page, bob} {
		out := n.fossilEnv(nil, append([]string{"wiki", "export", p.Name}, repo...)...)
		if strings.TrimSpace(out) != strings.TrimSpace(p.Text) {
			t.Errorf("fossil wiki export %s: %q, WikiPage %q", p.Name, out, p.Text)
		}
	}

	// Versions that await moderation: a new page, and a newer version
	// of alice's.
	moderated := []string{"FOSSIL_FORCE_WIKI_MODERATION=1"}
	n.fossilEnv(moderated, append([]string{"wiki", "create", "workspace/pending", file}, repo...)...)
	n.fossilEnv(moderated, append([]string{"wiki", "commit", "workspace/alice", file}, repo...)...)
	if p := n.pending(); p != "2" {
		t.Fatalf("%s wiki versions await moderation, want 2", p)
	}

	// The CLI, a moderator, now reads the pending version; WikiPage still
	// reads the second.
	if out := n.fossilEnv(nil, append([]string{"wiki", "export", "workspace/alice"}, repo...)...); strings.TrimSpace(out) != "made by the CLI" {
		t.Errorf("fossil wiki export reads %q, not the pending version", out)
	}
	if again, err := n.repo.WikiPage(ctx, "workspace/alice"); err != nil || again != want {
		t.Errorf("alice's page with a version pending: %+v %v, want %+v", again, err, want)
	}

	for _, missing := range []string{"workspace/pending", "no such page"} {
		_, err := n.repo.WikiPage(ctx, missing)
		if !errors.Is(err, fossilio.ErrNoSuchPage) || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), n.srv.Repo) {
			t.Errorf("WikiPage(%q): %v, want ErrNoSuchPage naming the page and %s", missing, err, n.srv.Repo)
		}
	}

	for prefix, want := range map[string]string{
		"workspace/": "workspace/alice,workspace/bob",
		"workspace":  "workspace/alice,workspace/bob,workspaceX",
		"":           "Other page,workspace/alice,workspace/bob,workspaceX",
		"Other":      "Other page",
		"nothing/":   "",
	} {
		got, err := n.repo.WikiPages(ctx, prefix)
		if err != nil || strings.Join(got, ",") != want {
			t.Errorf("WikiPages(%q): %q %v, want %q", prefix, got, err, want)
		}
	}
	// Fossil's own list: the same pages but the one awaiting moderation,
	// which the CLI, a moderator, sees.
	var fossils []string
	for _, line := range strings.Split(strings.TrimSpace(n.fossilEnv(nil, append([]string{"wiki", "list"}, repo...)...)), "\n") {
		if line != "workspace/pending" {
			fossils = append(fossils, line)
		}
	}
	if all, _ := n.repo.WikiPages(ctx, ""); strings.Join(fossils, ",") != strings.Join(all, ",") {
		t.Errorf("fossil wiki list (less the pending page): %q, WikiPages %q", fossils, all)
	}

	for _, bad := range []string{"", " x", "a\nb", strings.Repeat("x", 101)} {
		_, err := n.repo.WikiPage(ctx, bad)
		if !errors.Is(err, fossilio.ErrBadInput) || !strings.Contains(err.Error(), n.srv.Repo) {
			t.Errorf("WikiPage(%q): %v, want ErrBadInput naming %s", bad, err, n.srv.Repo)
		}
	}
	for _, bad := range []string{"a\x01", "\xff", strings.Repeat("x", 101)} {
		_, err := n.repo.WikiPages(ctx, bad)
		if !errors.Is(err, fossilio.ErrBadInput) || !strings.Contains(err.Error(), n.srv.Repo) {
			t.Errorf("WikiPages(%q): %v, want ErrBadInput naming %s", bad, err, n.srv.Repo)
		}
	}

	// A clone holds the page but knows no sender.
	ws := n.workspace("alice", "trunk")
	clone, err := fossilio.OpenClone(ws.clone, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer clone.Close()
	cp, err := clone.WikiPage(ctx, "workspace/alice")
	if err != nil || cp.Hash != v2 || cp.Sender != "" || cp.Author != "bob" {
		t.Fatalf("alice's page read from a clone: %+v %v", cp, err)
	}
}

// TestPrivilegedWikiPage (D81): PrivilegedWikiPage reads the version of
// a page that a user holding admin or setup sent last in the server's
// order, whatever date anyone wrote in any version; what alice (who may
// check in, not administer) pushed counts for nothing, even dated 2099
// and naming the admin inside; once alice is given setup her version
// counts, in the order it came; a page the admin deleted last is
// Deleted; a page no such user wrote is ErrNoSuchPage. PrivilegedWikiPages
// lists the pages whose such version is not a deletion.
func TestPrivilegedWikiPage(t *testing.T) {
	n := newNode(t)
	ctx := n.ctx
	admin := n.srv.AdminLogin
	v1 := n.push(admin, fossilio.WikiDraft{Date: day(1), User: admin, Name: "workspace/small", Text: "admin's\n"})[0]
	v2 := n.push("alice", fossilio.WikiDraft{Date: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), User: admin, Name: "workspace/small", Prev: v1, Text: "alice's\n"})[0]
	n.push("alice", fossilio.WikiDraft{Date: day(1), User: "alice", Name: "workspace/alices", Text: "hers alone\n"})
	gone := n.push(admin, fossilio.WikiDraft{Date: day(1), User: admin, Name: "workspace/gone", Text: "here for now\n"})[0]
	n.push(admin, fossilio.WikiDraft{Date: day(2), User: admin, Name: "workspace/gone", Prev: gone, Text: "\n"})
	n.push("alice", fossilio.WikiDraft{Date: day(3), User: "alice", Name: "workspace/gone", Prev: gone, Text: "back, by alice\n"})

	if p, err := n.repo.WikiPage(ctx, "workspace/small"); err != nil || p.Hash != v2 {
		t.Fatalf("the latest version by date is alice's (the test shows something only then): %+v %v", p, err)
	}
	p, err := n.repo.PrivilegedWikiPage(ctx, "workspace/small")
	if err != nil || p.Hash != v1 || p.Text != "admin's\n" || p.Sender != admin {
		t.Errorf("the admin's version: %+v %v; want %s", p, err, v1)
	}
	if _, err := n.repo.PrivilegedWikiPage(ctx, "workspace/alices"); !errors.Is(err, fossilio.ErrNoSuchPage) || !strings.Contains(err.Error(), "admin or setup") {
		t.Errorf("a page alice alone wrote: %v, want ErrNoSuchPage saying why", err)
	}
	if g, err := n.repo.PrivilegedWikiPage(ctx, "workspace/gone"); err != nil || !g.Deleted {
		t.Errorf("a page the admin deleted last: %+v %v, want Deleted", g, err)
	}
	if got, err := n.repo.PrivilegedWikiPages(ctx, "workspace/"); err != nil || strings.Join(got, ",") != "workspace/small" {
		t.Errorf("PrivilegedWikiPages: %q %v, want workspace/small alone", got, err)
	}
	// alice given setup: her version, received after the admin's, counts.
	if _, err := n.srv.Fossil("user", "capabilities", "alice", "gios", "-R", n.srv.Repo); err != nil {
		t.Fatal(err)
	}
	if p, err := n.repo.PrivilegedWikiPage(ctx, "workspace/small"); err != nil || p.Hash != v2 {
		t.Errorf("with alice holding setup: %+v %v, want her version %s", p, err, v2)
	}
	if got, err := n.repo.PrivilegedWikiPages(ctx, "workspace/"); err != nil || strings.Join(got, ",") != "workspace/alices,workspace/gone,workspace/small" {
		t.Errorf("PrivilegedWikiPages with alice holding setup: %q %v", got, err)
	}
}
