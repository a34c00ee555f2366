package fossilio_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/itest/harness"
)

// day returns a fixed time, days after the first of January 2025 (well
// before anything the tests write with the real clock), with milliseconds,
// which every time read must keep.
func day(days int) time.Time {
	return time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC).AddDate(0, 0, days).Add(time.Duration(37*days+1) * time.Millisecond)
}

// push pushes drafts (PostDraft, TicketDraft, WikiDraft ...) as login in
// one sync request and returns their hashes.
func (n *node) push(login string, drafts ...interface{ Bytes() ([]byte, error) }) []string {
	n.t.Helper()
	var arts [][]byte
	for _, d := range drafts {
		b, err := d.Bytes()
		if err != nil {
			n.t.Fatal(err)
		}
		arts = append(arts, b)
	}
	hashes, err := n.client(login).PushAll(n.ctx, arts...)
	if err != nil {
		n.t.Fatal(err)
	}
	return hashes
}

// fossilEnv runs the fossil CLI on the node's repository as the admin, with
// extra environment variables (Fossil's FOSSIL_FORCE_*_MODERATION make the
// CLI's own writes await moderation, as a web user's would).
//
// Fossil's commands read, then write, in one transaction; in WAL mode one
// whose snapshot another writer (the server's backoffice after a push)
// moved past meanwhile fails at once with "database is locked", having
// written nothing (fossil-2.21.md section 6): it is run again, as a person
// would, for at most a minute. The stress run (-count=20, two go test at
// once) met it.
func (n *node) fossilEnv(extra []string, args ...string) string {
	n.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(n.ctx, 2*time.Minute)
		cmd := exec.CommandContext(ctx, harness.FossilPath, args...)
		cmd.Dir = n.srv.Dir
		cmd.Env = append(harness.FossilEnv(n.srv.Home, n.srv.AdminLogin), extra...)
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil {
			return string(out)
		}
		if !strings.Contains(string(out), "database is locked") || time.Now().After(deadline) {
			n.t.Fatalf("fossil %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// webReply replies to a post through Fossil's web forum as login, as a
// person does in a browser.
func (n *node) webReply(login, to, text string) {
	n.t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.PostForm(n.srv.URL+"login", url.Values{"u": {login}, "p": {n.pw[login]}, "in": {"Login"}})
	if err != nil {
		n.t.Fatal(err)
	}
	resp.Body.Close()
	form := url.Values{"fpid": {to}, "reply": {"1"}, "content": {text}, "mimetype": {"text/x-markdown"}, "submit": {"Submit"}}
	req, _ := http.NewRequest(http.MethodPost, n.srv.URL+"forume2", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Referer", n.srv.URL+"forume2")
	resp, err = hc.Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || !strings.Contains(resp.Header.Get("Location"), "forumpost/") {
		n.t.Fatalf("web reply as %s: %s %s", login, resp.Status, resp.Header.Get("Location"))
	}
}

// pending counts the artifacts awaiting moderation, by Fossil's own SQL.
func (n *node) pending() string {
	return n.sql("SELECT count(*) FROM private")
}

// checkBounds: a count outside 1 to MaxRecent is refused, naming the count
// and the repository.
func checkBounds(t *testing.T, n *node, name string, list func(int) error) {
	t.Helper()
	for _, bad := range []int{0, -1, fossilio.MaxRecent + 1} {
		err := list(bad)
		if !errors.Is(err, fossilio.ErrBadInput) || !strings.Contains(err.Error(), fmt.Sprintf("n is %d", bad)) || !strings.Contains(err.Error(), n.srv.Repo) {
			t.Errorf("%s(%d): %v, want ErrBadInput naming %d and %s", name, bad, err, bad, n.srv.Repo)
		}
	}
	if err := list(fossilio.MaxRecent); err != nil {
		t.Errorf("%s(%d): %v", name, fossilio.MaxRecent, err)
	}
}

// TestRecentThreads: threads come newest first by their latest post or
// edit, with the root's first hash, its latest title and the count of
// posts; a thread whose root awaits moderation or was deleted is left out
// (even when it is the newest, and when a whole batch of the newest are
// deleted); a reply awaiting moderation counts for nothing. Fossil's own
// /forum page, read as a forum reader who is not a moderator, lists the
// same threads in the same order, less the deleted ones.
func TestRecentThreads(t *testing.T) {
	n := newNode(t)
	ctx := n.ctx
	// Before the first post Fossil has no forumpost table.
	if got, err := n.repo.RecentThreads(ctx, 10); err != nil || len(got) != 0 {
		t.Fatalf("threads of a repository without a post: %v %v", got, err)
	}
	checkBounds(t, n, "RecentThreads", func(k int) error { _, err := n.repo.RecentThreads(ctx, k); return err })

	d := n.push("alice", fossilio.PostDraft{Date: day(0), User: "alice", Title: "Thread D", Text: "oldest"})[0]
	a := n.push("alice", fossilio.PostDraft{Date: day(1), User: "alice", Title: "Thread A", Text: "a"})[0]
	b := n.push("alice", fossilio.PostDraft{Date: day(2), User: "alice", Title: "Thread B", Text: "b"})[0]
	c := n.push("bob", fossilio.PostDraft{Date: day(3), User: "bob", Title: "Thread C", Text: "c"})[0]
	n.push("bob", fossilio.PostDraft{Date: day(4), User: "bob", Root: a, InReplyTo: a, Text: "bob replies"})
	n.push("alice", fossilio.PostDraft{Date: day(5), User: "alice", Root: b, Prev: b, Title: "Thread B, renamed", Text: "b, edited"})
	// Fossil's web delete: no title, no text.
	n.push("bob", fossilio.PostDraft{Date: day(6), User: "bob", Root: c, Prev: c, Text: ""})
	// A whole batch of the newest threads, each deleted.
	var drafts []interface{ Bytes() ([]byte, error) }
	for i := range 12 {
		root := fossilio.PostDraft{Date: day(10 + i), User: "bob", Title: fmt.Sprintf("Gone %d", i), Text: "soon gone"}
		data, err := root.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		h := fossilio.HashOf(data)
		drafts = append(drafts, root, fossilio.PostDraft{Date: day(30 + i), User: "bob", Root: h, Prev: h, Text: ""})
	}
	n.push("bob", drafts...)
	// A thread that awaits moderation, and a reply in D that does, both
	// newer than everything else.
	n.webPost("carol", "Carol asks", "a question from the web")
	n.webReply("carol", d, "carol replies")
	if p := n.pending(); p != "2" {
		t.Fatalf("%s artifacts await moderation, want 2", p)
	}

	want := []fossilio.Thread{
		{Root: b, Title: "Thread B, renamed", LastPost: day(5), Posts: 1},
		{Root: a, Title: "Thread A", LastPost: day(4), Posts: 2},
		{Root: d, Title: "Thread D", LastPost: day(0), Posts: 1},
	}
	got, err := n.repo.RecentThreads(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("recent threads:\n got %v\nwant %v", got, want)
	}
	for k := 1; k <= 3; k++ {
		got, err := n.repo.RecentThreads(ctx, k)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want[:k]) {
			t.Errorf("RecentThreads(%d): %v %v, want %v", k, got, err, want[:k])
		}
	}

	// Fossil's /forum, as dave given forum reading (2) and nothing more.
	if _, err := n.srv.Fossil("user", "capabilities", "dave", "go2", "-R", n.srv.Repo); err != nil {
		t.Fatal(err)
	}
	var titles []string
	for _, title := range fossilForum(t, n, "dave") {
		if title != "(Deleted)" {
			titles = append(titles, title)
		}
	}
	var ours []string
	for _, th := range want {
		ours = append(ours, th.Title)
	}
	if strings.Join(titles, "|") != strings.Join(ours, "|") {
		t.Errorf("Fossil's /forum lists %q (deleted ones left out), RecentThreads %q", titles, ours)
	}
}

// fossilForum returns the titles Fossil's /forum page lists, in its order,
// as login sees them.
func fossilForum(t *testing.T, n *node, login string) []string {
	t.Helper()
	cookie, err := n.srv.LoginCookie(login, n.pw[login])
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, n.srv.URL+"forum?n=100", nil)
	req.Header.Set("Cookie", cookie)
	resp, err := (&http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/forum: %s %v", resp.Status, err)
	}
	rows := regexp.MustCompile(`forumpost/[0-9a-f]+['"][^>]*>\s*([^<]*)</a></td>`).FindAllSubmatch(body, -1)
	if len(rows) == 0 {
		t.Fatalf("/forum lists no thread:\n%s", body)
	}
	var titles []string
	for _, m := range rows {
		titles = append(titles, string(m[1]))
	}
	return titles
}

// TestRecentTickets: tickets come newest first by their latest change,
// with title and status as their changes set and append to them (as
// Fossil's own ticket table has them); a change awaiting moderation counts
// for nothing, and a ticket made by one is left out, though Fossil's
// ticket table counts them.
func TestRecentTickets(t *testing.T) {
	n := newNode(t)
	ctx := n.ctx
	if got, err := n.repo.RecentTickets(ctx, 10); err != nil || len(got) != 0 {
		t.Fatalf("tickets of a repository without one: %v %v", got, err)
	}
	checkBounds(t, n, "RecentTickets", func(k int) error { _, err := n.repo.RecentTickets(ctx, k); return err })

	x, y := fossilio.NewTicketID(), fossilio.NewTicketID()
	n.push("alice", fossilio.TicketDraft{Date: day(1), User: "alice", Ticket: x, Fields: []fossilio.Field{{Name: "title", Value: "Crash when saving"}, {Name: "status", Value: "Open"}}})
	n.push("alice", fossilio.TicketDraft{Date: day(2), User: "alice", Ticket: y, Fields: []fossilio.Field{{Name: "title", Value: "Slow start"}, {Name: "status", Value: "Open"}}})
	n.push("bob", fossilio.TicketDraft{Date: day(3), User: "bob", Ticket: x, Fields: []fossilio.Field{{Name: "+title", Value: " (again)"}, {Name: "status", Value: "Closed"}}})
	// Changes the CLI makes await moderation with this variable set: one
	// to y, and one that creates a ticket; both newer than the others.
	moderated := []string{"FOSSIL_FORCE_TICKET_MODERATION=1"}
	n.fossilEnv(moderated, "ticket", "change", y, "status", "Fixed", "-R", n.srv.Repo)
	out := n.fossilEnv(moderated, "ticket", "add", "title", "Pending ticket", "status", "Open", "-R", n.srv.Repo)
	if p := n.pending(); p != "2" {
		t.Fatalf("%s ticket changes await moderation, want 2 (fossil printed %q)", p, out)
	}

	want := []fossilio.TicketSummary{
		{Ticket: x, Title: "Crash when saving (again)", Status: "Closed", Changed: day(3)},
		{Ticket: y, Title: "Slow start", Status: "Open", Changed: day(2)},
	}
	got, err := n.repo.RecentTickets(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("recent tickets:\n got %v\nwant %v", got, want)
	}
	if got, err := n.repo.RecentTickets(ctx, 1); err != nil || fmt.Sprint(got) != fmt.Sprint(want[:1]) {
		t.Errorf("RecentTickets(1): %v %v, want %v", got, err, want[:1])
	}
	// Fossil's ticket table agrees where no change awaits moderation, and
	// counts the one that does.
	fx, err := n.repo.Ticket(ctx, x)
	if err != nil || fx["title"] != want[0].Title || fx["status"] != want[0].Status {
		t.Errorf("Fossil's ticket table has %s as %q %q (%v), RecentTickets %q %q", x, fx["title"], fx["status"], err, want[0].Title, want[0].Status)
	}
	if fy, err := n.repo.Ticket(ctx, y); err != nil || fy["status"] != "Fixed" {
		t.Errorf("Fossil's ticket table has %s's status %q (%v), want the moderated Fixed", y, fy["status"], err)
	}
	if c := n.sql("SELECT count(*) FROM ticket"); c != "3" {
		t.Errorf("Fossil's ticket table holds %s tickets, want 3", c)
	}
}

// TestBranches: the open branches come newest first, each with its latest
// check-in; a branch closed at its latest check-in is left out, one
// closed at an older check-in or reopened is open, and a private branch
// is not there. Fossil's own `branch list -t` lists the same names in the
// same order, but for the private one.
func TestBranches(t *testing.T) {
	n := newNode(t)
	ctx := n.ctx
	initial := firstCheckin(t, n)
	got, err := n.repo.Branches(ctx)
	if err != nil || len(got) != 1 || got[0].Name != "trunk" || got[0].Tip != initial {
		t.Fatalf("branches of a new repository: %v %v, want trunk at %s", got, err, initial)
	}

	ws := n.workspace("alice", "trunk")
	ws.commit("done.txt", "1\n", "to be closed", "done")
	dev1 := ws.commit("dev.txt", "1\n", "dev 1", "dev")
	dev2 := ws.commit("dev.txt", "2\n", "dev 2", "")
	again := ws.commit("again.txt", "1\n", "closed, then reopened", "again")
	up := *ws.f
	up.Dir = ws.tree
	if _, err := up.Run(ctx, []string{"update", "trunk"}); err != nil {
		t.Fatal(err)
	}
	trunk := ws.commit("trunk.txt", "1\n", "back on trunk", "")
	repo := []string{"-R", n.srv.Repo}
	// Closed at its latest check-in, as `fossil branch close` does.
	n.fossilEnv(nil, append([]string{"branch", "close", "done"}, repo...)...)
	// Closed at an older check-in: the branch stays open.
	n.fossilEnv(nil, append([]string{"tag", "add", "--raw", "closed", dev1}, repo...)...)
	n.fossilEnv(nil, append([]string{"branch", "close", "again"}, repo...)...)
	n.fossilEnv(nil, append([]string{"branch", "reopen", "again"}, repo...)...)
	// A private check-in, in a check-out of the node's own repository.
	f := n.fossil()
	f.User = n.srv.AdminLogin
	f.Dir = t.TempDir()
	if _, err := f.Run(ctx, []string{"open", n.srv.Repo, "--workdir", f.Dir}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.Dir, "secret.txt"), []byte("s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Run(ctx, []string{"add", "secret.txt"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Run(ctx, []string{"commit", "--private", "-m", "secret", "--no-warnings"}); err != nil {
		t.Fatal(err)
	}
	if p := n.pending(); p != "1" && p != "2" {
		t.Fatalf("%s private artifacts, want the check-in (and its file)", p)
	}

	got, err = n.repo.Branches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantTips := []struct{ name, tip string }{{"trunk", trunk}, {"again", again}, {"dev", dev2}}
	var names []string
	for i, b := range got {
		names = append(names, b.Name)
		if i < len(wantTips) && (b.Name != wantTips[i].name || b.Tip != wantTips[i].tip) {
			t.Errorf("branch %d: %s at %s, want %s at %s", i, b.Name, b.Tip, wantTips[i].name, wantTips[i].tip)
		}
		info, err := n.repo.Info(ctx, b.Tip)
		if err != nil || info.Branch != b.Name || !info.Time.Equal(b.TipTime) {
			t.Errorf("branch %s: tip %s at %v, but the tip reads as %+v %v", b.Name, b.Tip, b.TipTime, info, err)
		}
	}
	if len(got) != len(wantTips) {
		t.Fatalf("open branches %v, want trunk, again, dev", names)
	}
	for i := 1; i < len(got); i++ {
		if got[i].TipTime.After(got[i-1].TipTime) {
			t.Errorf("branch %s is newer than %s, which comes first", got[i].Name, got[i-1].Name)
		}
	}

	// Fossil's own list of open branches, recently changed first, less
	// its list of private ones (2.21 marks them with '#' only inside a
	// check-out).
	branchList := func(flags ...string) []string {
		var out []string
		for _, line := range strings.Split(strings.TrimSpace(n.fossilEnv(nil, append(append([]string{"branch", "list"}, flags...), repo...)...)), "\n") {
			out = append(out, strings.TrimSpace(line))
		}
		return out
	}
	private := branchList("-p")
	if strings.Join(private, ",") != "private" {
		t.Fatalf("fossil branch list -p: %q, want the private branch", private)
	}
	var fossils []string
	for _, b := range branchList("-t") {
		if b != "private" {
			fossils = append(fossils, b)
		}
	}
	if strings.Join(fossils, ",") != strings.Join(names, ",") {
		t.Errorf("fossil branch list -t: %q, Branches %q", fossils, names)
	}
}
