package record_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
)

// The sync client and the harness start goroutines; none may outlive the
// tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fix is a real fossil server with an admin, a person without admin (alice),
// an agent login and the node user, each writing as itself.
type fix struct {
	t                          testing.TB
	ctx                        context.Context
	srv                        *harness.Server
	repo                       *fossilio.Repo
	admin, alice, agent, nodeU *fossilio.Client
}

func newFix(t testing.TB) *fix {
	srv := harness.StartServer(t, harness.Options{Users: []harness.User{
		{Login: "alice", Password: "alice-pw", Caps: "cghijnorwz234"},
		{Login: "agent-1", Password: "agent-pw", Caps: fossilio.AgentCaps},
		{Login: "ocx", Password: "ocx-pw", Caps: fossilio.AgentCaps},
	}})
	r, err := fossilio.OpenNode(srv.Repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	c := func(login, pw string) *fossilio.Client {
		return &fossilio.Client{URL: srv.URL, Login: login, Password: pw, ProjectCode: srv.ProjectCode}
	}
	return &fix{t: t, ctx: context.Background(), srv: srv, repo: r,
		admin: c(srv.AdminLogin, srv.AdminPassword), alice: c("alice", "alice-pw"), agent: c("agent-1", "agent-pw"), nodeU: c("ocx", "ocx-pw")}
}

func (f *fix) block(n messages.Note) string {
	f.t.Helper()
	b, err := n.Encode()
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

// thread opens a thread as c, its U card naming author.
func (f *fix) thread(c *fossilio.Client, author, text string) string {
	f.t.Helper()
	d, err := fossilio.PostDraft{Date: time.Now(), User: author, Title: "t", Text: text}.Bytes()
	if err != nil {
		f.t.Fatal(err)
	}
	h, err := c.Push(f.ctx, d)
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}

// reply replies in thread root as c, its U card naming author.
func (f *fix) reply(c *fossilio.Client, author, root, text string) string {
	f.t.Helper()
	d, err := fossilio.PostDraft{Date: time.Now(), User: author, Root: root, InReplyTo: root, Text: text}.Bytes()
	if err != nil {
		f.t.Fatal(err)
	}
	h, err := c.Push(f.ctx, d)
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}

var sandbox = messages.Sandbox{Network: true, ReadOnly: []string{"/usr"}, ReadWrite: []string{}, Homes: []string{}, Path: []string{"/usr/bin"}}

func wsDef(login string) *messages.WorkspaceDefinition {
	return &messages.WorkspaceDefinition{Login: login, Project: "demo", Branch: "trunk", Sandbox: sandbox}
}

// TestWorkspacesCountOnlyWhatAnAdminWrote: a workspace is its newest
// definition an admin sent as the first post of a thread; a definition
// alice pushed with the admin's U card, or one in a reply, does not count;
// a terminated note counts from an admin, on the definition's record,
// after it.
func TestWorkspacesCountOnlyWhatAnAdminWrote(t *testing.T) {
	f := newFix(t)
	home := f.thread(f.admin, f.srv.AdminLogin, f.block(wsDef("agent-1")))
	f.thread(f.alice, f.srv.AdminLogin, f.block(wsDef("agent-1")))                                                                                         // alice's, forged U card
	f.reply(f.admin, f.srv.AdminLogin, home, f.block(&messages.WorkspaceDefinition{Login: "agent-2", Project: "demo", Branch: "trunk", Sandbox: sandbox})) // in a reply
	f.reply(f.alice, f.srv.AdminLogin, home, f.block(&messages.TerminatedNote{Login: "agent-1", Project: "demo"}))                                         // alice's termination
	idx := record.NewIndex(f.repo, "ocx")
	ws, err := idx.Workspaces(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := ws[messages.WorkspaceKey{Login: "agent-1", Project: "demo"}]
	if len(ws) != 1 || w == nil || w.Entry.Hash != home || w.Entry.Record != home || w.Terminated != "" {
		t.Fatalf("workspaces: %+v (%d)", w, len(ws))
	}
	term := f.reply(f.admin, f.srv.AdminLogin, home, f.block(&messages.TerminatedNote{Login: "agent-1", Project: "demo"}))
	ws, err = idx.Workspaces(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := ws[w.Key].Terminated; got != term {
		t.Errorf("terminated %q, want the admin's %s", got, term)
	}
}

// TestListenersAreTheAgents: a listener is its latest note in the server's
// order that its agent login sent; a note in its name anyone else pushed
// does not count.
func TestListenersAreTheAgents(t *testing.T) {
	f := newFix(t)
	th := f.thread(f.alice, "alice", "a thread")
	l := messages.Listener{Login: "agent-1", Project: "demo", Kind: messages.ListenThread, Names: th}
	listen := f.reply(f.agent, "agent-1", th, f.block(&messages.ListenNote{Listener: l}))
	f.reply(f.alice, "agent-1", th, f.block(&messages.UnlistenNote{Listener: l})) // forged
	idx := record.NewIndex(f.repo, "ocx")
	ls, err := idx.Listeners(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || !ls[0].On || ls[0].Entry.Hash != listen || ls[0].Listener != l {
		t.Fatalf("listeners: %+v", ls)
	}
	f.reply(f.agent, "agent-1", th, f.block(&messages.UnlistenNote{Listener: l}))
	if ls, err = idx.Listeners(f.ctx); err != nil || len(ls) != 1 || ls[0].On {
		t.Errorf("after the agent's unlisten note: %+v, %v", ls, err)
	}
}

// TestLaunchVerdicts: the record's word on each launch note (D7).
func TestLaunchVerdicts(t *testing.T) {
	f := newFix(t)
	home := f.thread(f.admin, f.srv.AdminLogin, f.block(wsDef("agent-1")))
	def := f.block(&messages.SessionDefinition{Kind: messages.Mechanical, Command: []string{"cat"}, Lifetime: messages.Stays})
	adminDef := f.reply(f.admin, f.srv.AdminLogin, home, def)
	aliceDef := f.reply(f.alice, f.srv.AdminLogin, home, def)
	launch := func(session string) string {
		return f.block(&messages.LaunchNote{Login: "agent-1", Project: "demo", Workspace: home, Session: session, Release: messages.ReleaseCurrent})
	}
	idx := record.NewIndex(f.repo, "ocx")
	verdict := func(hash string) record.Verdict {
		t.Helper()
		e, err := record.At(f.ctx, f.repo, hash)
		if err != nil && !strings.Contains(err.Error(), "does not read") {
			t.Fatal(err)
		}
		if err != nil {
			info, _ := f.repo.Info(f.ctx, hash)
			e, _, _ = record.Read(f.ctx, f.repo, info)
		}
		v, err := idx.LaunchVerdict(f.ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	good := f.reply(f.admin, f.srv.AdminLogin, home, launch(adminDef))
	if v := verdict(good); v.Spec == nil || v.Spec.Workspace.Login != "agent-1" || v.Spec.Record != home || v.Spec.Kind != messages.Mechanical {
		t.Errorf("the admin's launch: %+v", v)
	}
	if v := verdict(f.reply(f.nodeU, "ocx", home, launch(adminDef))); v.Spec == nil {
		t.Errorf("the node user's launch: %+v", v)
	}
	for _, c := range []struct {
		name, hash, ignore, refuse string
	}{
		{"alice's launch", f.reply(f.alice, f.srv.AdminLogin, home, launch(adminDef)), `sent by "alice", who holds neither admin nor setup`, ""},
		{"alice's broken launch", f.reply(f.alice, "alice", home, launch(adminDef)+launch(adminDef)), `and would be refused anyway`, ""},
		{"two launches", f.reply(f.admin, f.srv.AdminLogin, home, launch(adminDef)+launch(adminDef)), "", "holds 2 OCX notes"},
		{"alice's definition", f.reply(f.admin, f.srv.AdminLogin, home, launch(aliceDef)), "", `session definition ` + aliceDef[:10] + ` was sent by "alice"`},
		{"no definition", f.reply(f.admin, f.srv.AdminLogin, home, launch(good)), "", "holds a launch note, not a session definition"},
	} {
		v := verdict(c.hash)
		switch {
		case c.ignore != "" && (v.Ignore == "" || !strings.Contains(v.Ignore, c.ignore)):
			t.Errorf("%s: %+v, want ignored: %q", c.name, v, c.ignore)
		case c.refuse != "" && (v.Refuse == nil || !strings.Contains(v.Refuse.Reason, c.refuse) || v.Refuse.Workspace.Project != "demo"):
			t.Errorf("%s: %+v, want refused: %q", c.name, v, c.refuse)
		}
	}
	if v := verdict(adminDef); v.Nothing == "" || v.Spec != nil {
		t.Errorf("a session definition: %+v", v)
	}
}

// TestArtifactAsAtReadsIt: what the index hands a classification (the
// artifact a refresh just read, or read afresh) and the definitions it
// looks up by hash are what record.At and the repository read; a hash it
// never saw is read from the repository, and one the repository lacks is
// an error naming it.
func TestArtifactAsAtReadsIt(t *testing.T) {
	f := newFix(t)
	home := f.thread(f.admin, f.srv.AdminLogin, f.block(wsDef("agent-1")))
	def := f.reply(f.admin, f.srv.AdminLogin, home, f.block(&messages.SessionDefinition{Kind: messages.Mechanical, Command: []string{"cat"}, Lifetime: messages.Stays}))
	plain := f.reply(f.alice, "alice", home, "no note here")
	idx := record.NewIndex(f.repo, "ocx")
	for _, h := range []string{home, def, plain} {
		info, e, ok, err := idx.Artifact(f.ctx, h)
		if err != nil {
			t.Fatalf("%s: %v", h, err)
		}
		want, err := f.repo.Info(f.ctx, h)
		if err != nil || !reflect.DeepEqual(info, want) {
			t.Errorf("%s: info %+v, the repository's %+v %v", h, info, want, err)
		}
		if h == plain {
			if ok || e.Note != nil {
				t.Errorf("a post without a note: ok %v, note %v", ok, e.Note)
			}
			continue
		}
		at, err := record.At(f.ctx, f.repo, h)
		if err != nil || !ok || e.Hash != at.Hash || e.Sender != at.Sender || e.Record != at.Record || e.Note.String() != at.Note.String() {
			t.Errorf("%s: the index's %+v (ok %v), At's %+v %v", h, e, ok, at, err)
		}
	}
	// Posted after the index's last refresh: the next call reads it.
	later := f.reply(f.admin, f.srv.AdminLogin, home, f.block(&messages.SessionDefinition{Kind: messages.Mechanical, Command: []string{"true"}, Lifetime: messages.Completes}))
	if _, e, ok, err := idx.Artifact(f.ctx, later); err != nil || !ok || e.Hash != later {
		t.Errorf("a post received after the last refresh: %+v %v %v", e, ok, err)
	}
	missing := strings.Repeat("0", 64)
	if _, _, _, err := idx.Artifact(f.ctx, missing); err == nil || !strings.Contains(err.Error(), missing[:10]) {
		t.Errorf("a hash the repository lacks: %v, want an error naming it", err)
	}
}

// TestReplies: the node user's end and refusal notes, by the launch they
// answer, read after the launch's receipt alone.
func TestReplies(t *testing.T) {
	f := newFix(t)
	th := f.thread(f.admin, f.srv.AdminLogin, "a record")
	launch := f.reply(f.admin, f.srv.AdminLogin, th, "stands for a launch note")
	code := 0
	end := &messages.EndNote{Launch: launch, Login: "agent-1", Project: "demo", PID: 7, StartTime: 9, Status: messages.EndExited, ExitCode: &code,
		Seen: time.Unix(1_700_000_000, 0).UTC(), Note: "exited 0", Release: "test"}
	f.reply(f.alice, "ocx", th, f.block(end)) // forged
	mine := f.reply(f.nodeU, "ocx", th, f.block(end))
	info, err := f.repo.Info(f.ctx, launch)
	if err != nil {
		t.Fatal(err)
	}
	idx := record.NewIndexAfter(f.repo, "ocx", info.Receipt-1)
	rs, err := idx.Replies(f.ctx, launch)
	if err != nil || len(rs) != 1 || rs[0].Hash != mine {
		t.Fatalf("replies %+v, %v; want the node user's %s alone", rs, err, mine)
	}
	if ok, err := idx.Ended(f.ctx, launch, 7, 9); err != nil || !ok {
		t.Errorf("ended %v, %v", ok, err)
	}
	if ok, _ := idx.Ended(f.ctx, launch, 7, 10); ok {
		t.Error("another start time counts as ended")
	}
}

// TestLatestEndAndReport: the newest end note the node user wrote for a
// workspace is its last session's end (one alice pushed in the node user's
// name does not count), and a session's report is the newest its agent
// sent on the record after its launch.
func TestLatestEndAndReport(t *testing.T) {
	f := newFix(t)
	th := f.thread(f.admin, f.srv.AdminLogin, "a record")
	launch := f.reply(f.admin, f.srv.AdminLogin, th, "stands for a launch note")
	key := messages.WorkspaceKey{Login: "agent-1", Project: "demo"}
	idx := record.NewIndex(f.repo, "ocx")
	if _, ok, err := idx.LatestEnd(f.ctx, key); err != nil || ok {
		t.Fatalf("an end before any: %v %v", ok, err)
	}
	code := 0
	end := func(pid int) *messages.EndNote {
		return &messages.EndNote{Launch: launch, Login: "agent-1", Project: "demo", PID: pid, StartTime: 9, Status: messages.EndExited, ExitCode: &code,
			Seen: time.Unix(1_700_000_000, 0).UTC(), Note: "exited 0", Release: "test"}
	}
	f.reply(f.nodeU, "ocx", th, f.block(end(7)))
	second := f.reply(f.nodeU, "ocx", th, f.block(end(8)))
	f.reply(f.alice, "ocx", th, f.block(end(9))) // forged: not the node user's
	e, ok, err := idx.LatestEnd(f.ctx, key)
	if err != nil || !ok || e.Hash != second {
		t.Fatalf("latest end %s %v %v, want %s", e.Hash, ok, err, second)
	}
	at, err := record.At(f.ctx, f.repo, launch)
	if err != nil {
		info, _ := f.repo.Info(f.ctx, launch)
		at = record.Entry{Hash: launch, Rcvid: info.Rcvid, Rid: info.Rid}
	}
	done := f.block(&messages.ReportNote{Outcome: messages.ReportDone, Summary: "all done"})
	f.reply(f.alice, "agent-1", th, done) // a U card proves nothing
	mine := f.reply(f.agent, "agent-1", th, done)
	r, ok, err := idx.Report(f.ctx, th, "agent-1", at)
	if err != nil || !ok || r.Hash != mine {
		t.Fatalf("report %s %v %v, want the agent's %s", r.Hash, ok, err, mine)
	}
	if _, ok, _ := idx.Report(f.ctx, th, "agent-1", r); ok {
		t.Error("a report after the newest one")
	}
}

// TestLatestIsTheServersOrder: whatever the entries and their order, each
// listener's latest counting note in the server's order is what Latest
// gives, in the order first stated.
func TestLatestIsTheServersOrder(t *testing.T) {
	names := []string{strings.Repeat("1", 64), strings.Repeat("2", 64)}
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 20).Draw(t, "n")
		var es []record.Entry
		want := map[messages.Listener]record.Entry{}
		for i := range n {
			l := messages.Listener{Login: "agent-1", Project: "demo", Kind: messages.ListenThread, Names: rapid.SampledFrom(names).Draw(t, "names")}
			var note messages.Note = &messages.ListenNote{Listener: l}
			if rapid.Bool().Draw(t, "off") {
				note = &messages.UnlistenNote{Listener: l}
			}
			sender := rapid.SampledFrom([]string{"agent-1", "agent-1", "bob"}).Draw(t, "sender")
			e := record.Entry{Hash: strings.Repeat("a", 63) + string(rune('a'+i%6)), Sender: sender, Rcvid: int64(rapid.IntRange(1, 50).Draw(t, "rcvid")), Rid: int64(i), Note: note}
			es = append(es, e)
			if w, ok := want[l]; sender == "agent-1" && (!ok || e.After(w)) {
				want[l] = e
			}
		}
		got := record.Latest(es)
		if len(got) != len(want) {
			t.Fatalf("%d listeners, want %d", len(got), len(want))
		}
		for _, l := range got {
			w := want[l.Listener]
			if l.Entry.Rcvid != w.Rcvid || l.Entry.Rid != w.Rid {
				t.Fatalf("%v: latest %+v, want %+v", l.Listener, l.Entry, w)
			}
			_, isListen := w.Note.(*messages.ListenNote)
			if l.On != isListen {
				t.Fatalf("%v: on %v", l.Listener, l.On)
			}
		}
	})
}

// TestLatestStartAndWouldLaunch: a workspace's latest start is its newest
// launch note that counts (an admin's or the node user's, never one alice
// pushed in the admin's name) and that the node user did not refuse; a
// launch not yet written gets the verdict the daemon would give it.
func TestLatestStartAndWouldLaunch(t *testing.T) {
	f := newFix(t)
	home := f.thread(f.admin, f.srv.AdminLogin, f.block(wsDef("agent-1")))
	stays := f.reply(f.admin, f.srv.AdminLogin, home, f.block(&messages.SessionDefinition{Kind: messages.Mechanical, Command: []string{"cat"}, Lifetime: messages.Stays}))
	completes := f.reply(f.admin, f.srv.AdminLogin, home, f.block(&messages.SessionDefinition{Kind: messages.Mechanical, Command: []string{"true"}, Lifetime: messages.Completes}))
	note := func(session string) *messages.LaunchNote {
		return &messages.LaunchNote{Login: "agent-1", Project: "demo", Workspace: home, Session: session, Release: messages.ReleaseCurrent}
	}
	key := messages.WorkspaceKey{Login: "agent-1", Project: "demo"}
	idx := record.NewIndex(f.repo, "ocx")
	if _, ok, err := idx.LatestStart(f.ctx, key); err != nil || ok {
		t.Fatalf("a start before any launch: %v %v", ok, err)
	}
	first := f.reply(f.admin, f.srv.AdminLogin, home, f.block(note(stays)))
	f.reply(f.alice, f.srv.AdminLogin, home, f.block(note(stays))) // forged: alice's
	if e, ok, err := idx.LatestStart(f.ctx, key); err != nil || !ok || e.Hash != first {
		t.Fatalf("latest start %s %v %v, want the admin's %s", e.Hash, ok, err, first)
	}
	refused := f.reply(f.admin, f.srv.AdminLogin, home, f.block(note(stays)))
	f.reply(f.alice, "ocx", home, f.block(&messages.RefusalNote{Launch: refused, Login: "agent-1", Project: "demo", Reason: "forged"}))
	if e, _, _ := idx.LatestStart(f.ctx, key); e.Hash != refused {
		t.Fatalf("a refusal alice forged counts: latest start %s, want %s", e.Hash, refused)
	}
	f.reply(f.nodeU, "ocx", home, f.block(&messages.RefusalNote{Launch: refused, Login: "agent-1", Project: "demo", Reason: "a session runs"}))
	if e, _, _ := idx.LatestStart(f.ctx, key); e.Hash != first {
		t.Fatalf("latest start %s, want %s: a refused launch started nothing", e.Hash, first)
	}
	ci := f.reply(f.nodeU, "ocx", home, f.block(note(completes)))
	start, _, _ := idx.LatestStart(f.ctx, key)
	if start.Hash != ci {
		t.Fatalf("latest start %s, want the node user's %s", start.Hash, ci)
	}

	// What a launch repeating it would be: as the admin, its lifetime read;
	// as alice, ignored; on a record without the definition, refused.
	v, err := idx.WouldLaunch(f.ctx, f.srv.AdminLogin, start, note(completes))
	if err != nil || v.Spec == nil || v.Spec.Lifetime != messages.Completes || v.Spec.Record != home {
		t.Fatalf("would launch: %+v %v", v, err)
	}
	if v, _ := idx.WouldLaunch(f.ctx, "alice", start, note(stays)); v.Ignore == "" {
		t.Errorf("alice's launch would count: %+v", v)
	}
	other := f.thread(f.admin, f.srv.AdminLogin, "another record")
	at, err := record.At(f.ctx, f.repo, first)
	if err != nil {
		t.Fatal(err)
	}
	at.Record = other
	if v, _ := idx.WouldLaunch(f.ctx, f.srv.AdminLogin, at, note(stays)); v.Refuse == nil || !strings.Contains(v.Refuse.Reason, "is not on the launch's record") {
		t.Errorf("a launch on another record: %+v", v)
	}
}

// TestEndsSeen: the node user's end notes by the UTC day they were seen
// to end, those of the days asked alone, by day and in the server's
// order within one; an end alice pushed in the node user's name is none.
func TestEndsSeen(t *testing.T) {
	f := newFix(t)
	th := f.thread(f.admin, f.srv.AdminLogin, "a record")
	launch := f.reply(f.admin, f.srv.AdminLogin, th, "stands for a launch note")
	code := 0
	day := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	end := func(pid int, seen time.Time) *messages.EndNote {
		return &messages.EndNote{Launch: launch, Login: "agent-1", Project: "demo", PID: pid, StartTime: 9, Status: messages.EndExited, ExitCode: &code,
			Seen: seen, Note: "exited 0", Release: "test"}
	}
	// Pushed out of the days' order: a later day first.
	later := f.reply(f.nodeU, "ocx", th, f.block(end(1, day.AddDate(0, 0, 2).Add(time.Hour))))
	before := f.reply(f.nodeU, "ocx", th, f.block(end(2, day.Add(-time.Second))))
	firstOn := f.reply(f.nodeU, "ocx", th, f.block(end(3, day.Add(23*time.Hour))))
	secondOn := f.reply(f.nodeU, "ocx", th, f.block(end(4, day)))
	f.reply(f.alice, "ocx", th, f.block(end(5, day))) // forged
	idx := record.NewIndex(f.repo, "ocx")
	hashes := func(first, last time.Time) []string {
		t.Helper()
		es, err := idx.EndsSeen(f.ctx, first, last)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range es {
			out = append(out, e.Hash)
		}
		return out
	}
	// Any time of a day names the whole day; a zone is read as UTC.
	if got, want := hashes(day.Add(12*time.Hour), day.AddDate(0, 0, 2).In(time.FixedZone("east", 5*3600))), []string{firstOn, secondOn, later}; !slices.Equal(got, want) {
		t.Errorf("ends of three days: %v, want %v", got, want)
	}
	if got, want := hashes(day.AddDate(0, 0, -1), day.AddDate(0, 0, -1)), []string{before}; !slices.Equal(got, want) {
		t.Errorf("ends of the day before: %v, want %v", got, want)
	}
	if got := hashes(day.AddDate(0, 0, 1), day.AddDate(0, 0, 1)); len(got) != 0 {
		t.Errorf("a day with no end: %v", got)
	}
	if got := hashes(day.AddDate(0, 0, 2), day); len(got) != 0 {
		t.Errorf("last before first: %v", got)
	}
}
