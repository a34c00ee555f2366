package wake

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
)

const (
	h1 = "1111111111111111111111111111111111111111111111111111111111111111"
	h2 = "2222222222222222222222222222222222222222222222222222222222222222"
	h3 = "3333333333333333333333333333333333333333333333333333333333333333"
)

var (
	ws1 = messages.WorkspaceKey{Login: "agent-1", Project: "demo"}
	ws2 = messages.WorkspaceKey{Login: "agent-2", Project: "demo"}
)

// TestDecideTable is the hook's table (D8, D27), one row per rule: who sent
// the post, where it stands against the listen note, what it holds, and
// whom the session hears.
func TestDecideTable(t *testing.T) {
	nodeLogins := map[string]bool{"agent-1": true, "agent-2": true, "ocx": true}
	hearsPat := Target{Workspace: ws1, After: 10, Hears: []string{"pat", "agent-2"}}
	own := Target{Workspace: ws1, Hears: []string{"pat"}}
	everyone := Target{Workspace: ws1, After: 10, Hears: []string{"*"}}
	nobody := Target{Workspace: ws1, Hears: []string{}}
	post := func(sender string, rcvid int64, note NoteSeen) Arrival {
		a := Arrival{Hash: h1, Record: h2, Sender: sender, Rcvid: rcvid, Note: note}
		if note == BrokenNote {
			a.NoteErr = errors.New("holds 2 OCX notes")
		}
		return a
	}
	cases := []struct {
		name       string
		a          Arrival
		t          Target
		privileged bool
		wake, note bool
		why        string
		level      slog.Level
	}{
		{"a person it hears, after the listen note", post("pat", 11, NoNote), hearsPat, false, true, true, "", slog.LevelInfo},
		{"a person it hears, before the listen note", post("pat", 9, NoNote), hearsPat, false, false, false, "before the agent's listen note", slog.LevelInfo},
		{"a person it hears, in the listen note's receipt", post("pat", 10, NoNote), hearsPat, false, false, false, "before the agent's listen note", slog.LevelInfo},
		{"on the own record, from the start", post("pat", 1, NoNote), own, false, true, true, "", slog.LevelInfo},
		{"a stranger", post("bob", 11, NoNote), hearsPat, false, false, false, `does not hear "bob" (it hears pat, agent-2)`, slog.LevelInfo},
		{"a stranger holding admin", post("admin", 11, NoNote), hearsPat, true, false, false, `does not hear "admin"`, slog.LevelInfo},
		{"an agent it hears: woken, no unheard note", post("agent-2", 11, NoNote), hearsPat, false, true, false, "", slog.LevelInfo},
		{"the session's own post", post("agent-1", 11, NoNote), everyone, false, false, false, "own post", slog.LevelInfo},
		{"an unknown sender", post("", 11, NoNote), everyone, false, false, false, "does not say who sent it", slog.LevelWarn},
		{"everyone", post("bob", 11, NoNote), everyone, false, true, true, "", slog.LevelInfo},
		{"nobody", post("pat", 11, NoNote), nobody, false, false, false, "it hears nobody", slog.LevelInfo},
		{"a stop from admin, whom it does not hear", post("admin", 11, StopRequest), hearsPat, true, true, true, "", slog.LevelInfo},
		{"a stop from a person it hears, without admin", post("pat", 11, StopRequest), hearsPat, false, false, false, `a stop request from "pat", who holds neither admin nor setup, is ignored`, slog.LevelWarn},
		{"a stop before the listen note", post("admin", 3, StopRequest), hearsPat, true, false, false, "before the agent's listen note", slog.LevelInfo},
		{"another note", post("pat", 11, OtherNote), hearsPat, false, false, false, "holds an OCX note", slog.LevelInfo},
		{"a broken note says why, at warn", post("pat", 11, BrokenNote), hearsPat, false, false, false, "holds 2 OCX notes", slog.LevelWarn},
	}
	for _, c := range cases {
		v := Decide(c.a, []Target{c.t}, nodeLogins, c.privileged)[0]
		if v.Wake != c.wake || v.NoteIfUnheard != c.note || !strings.Contains(v.Why, c.why) || (!v.Wake && v.Level != c.level) {
			t.Errorf("%s: %+v; want wake %v, note %v, why %q at %v", c.name, v, c.wake, c.note, c.why, c.level)
		}
		if v.Wake && (v.Line != pipe.WakeLine{Post: c.a.Hash, From: c.a.Sender} || v.Why != "") {
			t.Errorf("%s: woken with %+v", c.name, v)
		}
		if !v.Wake && v.Why == "" {
			t.Errorf("%s: not woken, and no reason", c.name)
		}
	}
}

// TestDecideProperties: whatever the arrival and the targets, a session is
// woken only for a known sender other than itself, after its listen note,
// for a post it hears or a stop from a user holding admin or setup; the
// wake line names the receipt's sender; one verdict per target, in order.
func TestDecideProperties(t *testing.T) {
	users := []string{"", "pat", "bob", "admin", "agent-1", "agent-2", "ocx"}
	rapid.Check(t, func(t *rapid.T) {
		a := Arrival{Hash: h1, Record: h2, Sender: rapid.SampledFrom(users).Draw(t, "sender"),
			Rcvid: rapid.Int64Range(1, 20).Draw(t, "rcvid"), Note: NoteSeen(rapid.IntRange(0, 3).Draw(t, "note"))}
		var targets []Target
		for i := range rapid.IntRange(0, 4).Draw(t, "targets") {
			ws := ws1
			if i%2 == 1 {
				ws = ws2
			}
			hears := rapid.SliceOfDistinct(rapid.SampledFrom(users[1:]), func(s string) string { return s }).Draw(t, "hears")
			if rapid.Bool().Draw(t, "everyone") {
				hears = []string{"*"}
			}
			targets = append(targets, Target{Workspace: ws, After: rapid.Int64Range(0, 20).Draw(t, "after"), Hears: hears})
		}
		privileged := a.Sender == "admin"
		nodeLogins := map[string]bool{"agent-1": true, "agent-2": true, "ocx": true}
		vs := Decide(a, targets, nodeLogins, privileged)
		if len(vs) != len(targets) {
			t.Fatalf("%d verdicts for %d targets", len(vs), len(targets))
		}
		for i, v := range vs {
			tg := targets[i]
			if v.Target.Workspace != tg.Workspace {
				t.Fatalf("verdict %d is for %v, not %v", i, v.Target.Workspace, tg.Workspace)
			}
			want := a.Sender != "" && a.Sender != tg.Workspace.Login && a.Rcvid > tg.After &&
				(a.Note == NoNote && messages.Hears(tg.Hears, a.Sender) || a.Note == StopRequest && privileged)
			if v.Wake != want {
				t.Fatalf("%+v to %+v: wake %v, want %v (%s)", a, tg, v.Wake, want, v.Why)
			}
			if v.Wake && (v.Line.From != a.Sender || v.Line.Post != a.Hash || v.NoteIfUnheard == nodeLogins[a.Sender]) {
				t.Fatalf("woken as %+v", v)
			}
		}
	})
}

func TestUnheard(t *testing.T) {
	missed := []Missed{
		{Workspace: ws1, Kind: messages.ListenThread, Record: h2, Post: h1, Why: messages.UnheardNoReader},
		{Workspace: ws2, Kind: messages.ListenThread, Record: h2, Post: h1, Why: messages.UnheardNoPipe},
		{Workspace: ws1, Kind: messages.ListenThread, Record: h2, Post: h3, Why: messages.UnheardNoReader},
		{Workspace: ws1, Kind: messages.ListenThread, Record: h2, Post: h1, Why: messages.UnheardNoReader}, // named twice
		{Workspace: ws1, Kind: messages.ListenTicket, Record: h3[:40], Post: h2, Why: messages.UnheardNoReader},
	}
	got := Unheard(missed)
	var lines []string
	for _, u := range got {
		if err := u.Note.Validate(); err != nil {
			t.Errorf("%v: %v", u.Note, err)
		}
		lines = append(lines, fmt.Sprintf("%s %s %s", u.Kind, u.Record[:4], u.Note.String()))
	}
	want := []string{
		"thread 2222 unheard agent-1/demo post=" + h1 + " posts=[" + h1 + " " + h3 + "] why=no-reader",
		"thread 2222 unheard agent-2/demo post=" + h1 + " why=no-pipe",
		"ticket 3333 unheard agent-1/demo post=" + h2 + " why=no-reader",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("notes:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if txt := got[0].Text([]byte("BLOCK")); !strings.HasPrefix(txt, "These 2 posts reached the session of workspace `agent-1/demo`") || !strings.HasSuffix(txt, "nobody heard them.\n\nBLOCK") {
		t.Errorf("text: %q", txt)
	}
	if txt := got[1].Text([]byte("BLOCK")); !strings.HasPrefix(txt, "This post reached") || !strings.Contains(txt, "nobody heard it.") {
		t.Errorf("text: %q", txt)
	}
}

// TestUnheardBurst: a burst of posts gets one note per maxUnheardPosts, each
// post named exactly once, in order, each note small enough to be read.
func TestUnheardBurst(t *testing.T) {
	var missed []Missed
	var hashes []string
	for i := range 2*maxUnheardPosts + 7 {
		h := fmt.Sprintf("%064x", i+1)
		hashes = append(hashes, h)
		missed = append(missed, Missed{Workspace: ws1, Kind: messages.ListenThread, Record: h2, Post: h, Why: messages.UnheardNoReader})
	}
	notes := Unheard(missed)
	if len(notes) != 3 {
		t.Fatalf("%d notes for %d posts", len(notes), len(hashes))
	}
	var named []string
	for _, n := range notes {
		block, err := n.Note.Encode()
		if err != nil {
			t.Fatal(err)
		}
		back, err := messages.ReadPost([]byte(n.Text(block)))
		if err != nil {
			t.Fatalf("a note of %d posts does not read back: %v", len(n.Note.All()), err)
		}
		named = append(named, back.(*messages.UnheardNote).All()...)
	}
	if strings.Join(named, ",") != strings.Join(hashes, ",") {
		t.Errorf("the notes name %d posts, not the %d in order", len(named), len(hashes))
	}
}

func TestDecideCheckin(t *testing.T) {
	a := messages.WorkspaceKey{Login: "agent-a", Project: "p"}
	b := messages.WorkspaceKey{Login: "agent-b", Project: "p"}
	targets := []CheckinTarget{{Workspace: a, Branches: []string{"trunk"}}, {Workspace: b, Branches: []string{"feature x", "trunk"}}}
	const h = "0123456789abcdef0123456789abcdef01234567"
	for _, c := range []struct {
		branch, sender string
		want           []string // the logins woken, in order
		told           []string // the logins told why not
	}{
		{"trunk", "alice", []string{"agent-a", "agent-b"}, nil},
		{"feature x", "alice", []string{"agent-b"}, nil},
		{"other", "alice", nil, nil},
		{"trunk", "agent-a", []string{"agent-b"}, []string{"agent-a"}},
		{"trunk", "", []string{"agent-a", "agent-b"}, nil},
	} {
		var woke, told []string
		for _, v := range DecideCheckin(h, c.branch, c.sender, targets) {
			if v.Wake {
				if v.Line != (pipe.WakeLine{Post: h, From: c.sender}) {
					t.Errorf("%s by %q: line %v", c.branch, c.sender, v.Line)
				}
				woke = append(woke, v.Target.Workspace.Login)
			} else {
				told = append(told, v.Target.Workspace.Login)
			}
		}
		if strings.Join(woke, ",") != strings.Join(c.want, ",") || strings.Join(told, ",") != strings.Join(c.told, ",") {
			t.Errorf("%s by %q: woke %q, told %q; want %q, %q", c.branch, c.sender, woke, told, c.want, c.told)
		}
	}
}
