package turn_test

import (
	"crypto/md5"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/actors/turn"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

const (
	own   = "1111111111111111111111111111111111111111111111111111111111111111"
	other = "2222222222222222222222222222222222222222222222222222222222222222"
	ph    = "3333333333333333333333333333333333333333333333333333333333333333"
)

func TestDecide(t *testing.T) {
	post := func(text string) turn.Post {
		return turn.Post{Hash: ph, Kind: messages.ListenThread, Record: own, Author: "pat", Sender: "pat", Text: text}
	}
	cases := []struct {
		name     string
		p        turn.Post
		answered bool
		want     turn.Action
	}{
		{"a plain post", post("hello"), false, turn.Answer},
		{"already answered", post("hello"), true, turn.SkipAnswered},
		{"the agent's own, by the node's receipt", func() turn.Post { p := post("hello"); p.Sender = "agent-1"; return p }(), false, turn.SkipOwn},
		// A U card naming the agent proves nothing (issue 10, item 1): the
		// forged post is answered as its pusher's.
		{"a U card naming the agent, pushed by pat", func() turn.Post { p := post("hello"); p.Author = "agent-1"; return p }(), false, turn.Answer},
		{"a U card naming the agent, sender unknown", func() turn.Post { p := post("hello"); p.Author = "agent-1"; p.Sender = ""; return p }(), false, turn.Answer},
		{"an edit", func() turn.Post { p := post("hello"); p.Edit = true; return p }(), false, turn.SkipEdit},
		{"OCX stop", post("  OCX stop\n"), false, turn.Stop},
		{"a stop note", post("```json\n{\"ocx\": \"stop\"}\n```\n"), false, turn.Stop},
		{"a stop note for this login", post("```json\n{\"ocx\": \"stop\", \"login\": \"agent-1\"}\n```\n"), false, turn.Stop},
		{"a stop note for another login", post("```json\n{\"ocx\": \"stop\", \"login\": \"agent-2\"}\n```\n"), false, turn.SkipStop},
		{"a stop on another record", func() turn.Post { p := post("OCX stop"); p.Record = other; return p }(), false, turn.SkipStop},
		{"a stop from an unknown sender", func() turn.Post { p := post("OCX stop"); p.Sender = ""; return p }(), false, turn.SkipStop},
		{"a stop already obeyed", post("OCX stop"), true, turn.SkipAnswered},
		{"the agent's own stop", func() turn.Post { p := post("OCX stop"); p.Sender = "agent-1"; return p }(), false, turn.SkipOwn},
		{"a stop with the agent's U card, pushed by pat", func() turn.Post { p := post("OCX stop"); p.Author = "agent-1"; return p }(), false, turn.Stop},
		{"a listen note", post("```json\n{\"ocx\": \"listen\", \"login\": \"agent-1\", \"project\": \"demo\", \"kind\": \"branch\", \"names\": \"x\"}\n```\n"), false, turn.SkipNote},
		{"a truncated note", post("```json\n{\"ocx\": \"stop\"\n"), false, turn.SkipNote},
		{"two notes", post("```json\n{\"ocx\": \"stop\"}\n```\n```json\n{\"ocx\": \"stop\"}\n```\n"), false, turn.SkipNote},
		{"a note of an unknown version", post("```json\n{\"ocx\": \"stop\", \"version\": 9}\n```\n"), false, turn.SkipNote},
		{"JSON that is no note", post("see:\n```json\n{\"a\": 1}\n```\n"), false, turn.Answer},
		{"a ticket change", func() turn.Post { p := post("on the ticket"); p.Kind = messages.ListenTicket; return p }(), false, turn.Answer},
		{"a post on a listened record", func() turn.Post { p := post("hello"); p.Record = other; return p }(), false, turn.Answer},
	}
	for _, c := range cases {
		d := turn.Decide("agent-1", own, c.p, c.answered)
		if d.Action != c.want {
			t.Errorf("%s: %v (%s), want %v", c.name, d.Action, d.Why, c.want)
		}
		if d.Why == "" {
			t.Errorf("%s: no reason given", c.name)
		}
	}
}

func TestAnswerText(t *testing.T) {
	cases := []struct {
		name string
		out  turn.Output
		e    turn.Ended
		want string
	}{
		{"output", turn.Output{Tail: []byte("line 1\nline 2\n\n")}, turn.Ended{}, "line 1\nline 2"},
		{"nothing", turn.Output{Tail: []byte(" \n")}, turn.Ended{}, "The command printed nothing."},
		{"nothing, exit 2", turn.Output{}, turn.Ended{Code: 2}, "The command printed nothing.\n\n(command: exit status 2)"},
		{"a signal", turn.Output{Tail: []byte("half")}, turn.Ended{Code: 143, Signal: "SIGTERM"}, "half\n\n(command: ended by SIGTERM)"},
		{"not started", turn.Output{}, turn.Ended{StartErr: errors.New("no such program")}, "The command could not be started: no such program"},
		{"cut", turn.Output{Tail: []byte("the end"), Dropped: 10}, turn.Ended{}, "(the first 10 bytes of the command's output are left out)\n\nthe end"},
		{"bad bytes", turn.Output{Tail: []byte("a\x00b\xffc")}, turn.Ended{}, "ab\uFFFDc"},
	}
	for _, c := range cases {
		if got := turn.AnswerText("command", c.out, c.e); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestReportOf(t *testing.T) {
	report := "Done.\n\n```json\n{\"ocx\": \"report\", \"outcome\": \"failed\", \"summary\": \"no\"}\n```\n\n(command: exit status 1)"
	if r := turn.ReportOf(report); r == nil || r.Outcome != messages.ReportFailed {
		t.Errorf("a report with an exit status after it: %v", r)
	}
	for _, text := range []string{"What should I do?", "```json\n{\"ocx\": \"stop\"}\n```\n",
		"```json\n{\"ocx\": \"report\", \"outcome\": \"done\"}\n```\n```json\n{\"ocx\": \"report\", \"outcome\": \"done\"}\n```\n"} {
		if r := turn.ReportOf(text); r != nil {
			t.Errorf("%q read as a report", text)
		}
	}
}

func TestCIResultOf(t *testing.T) {
	cases := []struct {
		out  string
		e    turn.Ended
		want string
	}{
		{"ok 1\nok all\n\n", turn.Ended{}, "green: ok all"},
		{"FAIL x\n", turn.Ended{Code: 1}, "red: FAIL x"},
		{"", turn.Ended{}, "green"},
		{"", turn.Ended{Code: 1}, "red"},
		{"still going", turn.Ended{Code: 137, Signal: "SIGKILL"}, "red: still going"},
		{"", turn.Ended{StartErr: errors.New(`exec: "make": executable file not found in $PATH`)}, `red: not started: exec: "make": executable file not found in $PATH`},
	}
	for _, c := range cases {
		tag := turn.CIResultOf(turn.Output{Tail: []byte(c.out)}, c.e)
		v, err := tag.Value()
		if err != nil || v != c.want {
			t.Errorf("%q %v: %q %v, want %q", c.out, c.e, v, err, c.want)
		}
	}
}

// TestVerdictOf: a reviewer's run earns pass on exit 0 and fail otherwise,
// its reason the last line (how it ended when it printed none), against its
// own record; every value reads back as a verdict (D42).
func TestVerdictOf(t *testing.T) {
	cases := []struct {
		out  string
		e    turn.Ended
		want string
	}{
		{"looked at it\nlooks right\n\n", turn.Ended{}, "pass: looks right (against " + ph + ")"},
		{"FAIL: no docs for --frob\n", turn.Ended{Code: 1}, "fail: FAIL: no docs for --frob (against " + ph + ")"},
		{"", turn.Ended{}, "pass: exit status 0 (against " + ph + ")"},
		{"  \n", turn.Ended{Code: 2}, "fail: exit status 2 (against " + ph + ")"},
		{"", turn.Ended{Code: 137, Signal: "SIGKILL"}, "fail: ended by SIGKILL (against " + ph + ")"},
	}
	for _, c := range cases {
		v := turn.VerdictOf(turn.Output{Tail: []byte(c.out)}, c.e, ph)
		got := v.TagValue()
		if got != c.want {
			t.Errorf("%q %v: %q, want %q", c.out, c.e, got, c.want)
		}
		back, err := messages.ParseVerdict(got)
		if err != nil || back != v {
			t.Errorf("%q reads back as %+v, %v", got, back, err)
		}
	}
}

func TestTicketReplyRoundTrip(t *testing.T) {
	text := turn.TicketReply(ph, "the answer")
	if !turn.RepliesTo(text, ph) || turn.RepliesTo(text, other) {
		t.Errorf("RepliesTo does not find the change %q answers", text)
	}
	if !strings.HasSuffix(text, "\n\nthe answer") || !strings.Contains(text, "(/info/"+ph+")") {
		t.Errorf("ticket reply %q", text)
	}
	if turn.RepliesTo("the answer", ph) || turn.RepliesTo("", ph) {
		t.Errorf("a comment without the line is taken for a reply")
	}
}

// TestPostOf: a post read from its own cards, as the session fetches it,
// says what reading it from a repository says.
func TestPostOf(t *testing.T) {
	d := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	parse := func(data []byte, err error) (string, *fossilio.Artifact) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		a, err := fossilio.Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		return fossilio.HashOf(data), a
	}
	rh, ra := parse(fossilio.PostDraft{Date: d, User: "pat", Title: "A thread", Text: "opening"}.Bytes())
	xh, xa := parse(fossilio.PostDraft{Date: d, User: "kim", Root: rh, InReplyTo: rh, Text: "a reply"}.Bytes())
	eh, ea := parse(fossilio.PostDraft{Date: d, User: "kim", Root: rh, InReplyTo: rh, Prev: xh, Text: "edited"}.Bytes())
	ticket := strings.Repeat("ab", 20)
	th, ta := parse(fossilio.TicketDraft{Date: d, User: "pat", Ticket: ticket,
		Fields: []fossilio.Field{{Name: "+icomment", Value: "more words"}, {Name: "status", Value: "Open"}}}.Bytes())
	for _, c := range []struct {
		hash string
		a    *fossilio.Artifact
		want turn.Post
	}{
		{rh, ra, turn.Post{Hash: rh, Kind: messages.ListenThread, Record: rh, Author: "pat", Text: "opening", Time: d}},
		{xh, xa, turn.Post{Hash: xh, Kind: messages.ListenThread, Record: rh, Author: "kim", Text: "a reply", Time: d}},
		{eh, ea, turn.Post{Hash: eh, Kind: messages.ListenThread, Record: rh, Author: "kim", Text: "edited", Edit: true, Time: d}},
		{th, ta, turn.Post{Hash: th, Kind: messages.ListenTicket, Record: ticket, Author: "pat", Text: "more words", Time: d}},
	} {
		got, err := turn.PostOf(c.hash, c.a)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Time.Equal(c.want.Time) {
			t.Errorf("%s: time %v, want %v", c.hash, got.Time, c.want.Time)
		}
		got.Time = c.want.Time
		if got != c.want {
			t.Errorf("PostOf(%s):\n got %+v\nwant %+v", c.hash, got, c.want)
		}
	}
	ch, ca := parse(fossilio.ControlDraft{Date: d, User: "pat", Tags: []fossilio.Tag{{Op: fossilio.TagAdd, Name: "ci", Target: rh, Value: "green"}}}.Bytes())
	if _, err := turn.PostOf(ch, ca); err == nil || !strings.Contains(err.Error(), "not a forum post, a ticket change or a check-in") {
		t.Errorf("a tag change as a post: %v", err)
	}
	// A check-in (seed 001 E7): its comment is the text.
	body := "C add\\sa\\sfile\nD 2026-12-01T10:00:00\nU kim\n"
	mh, ma := parse([]byte(fmt.Sprintf("%sZ %x\n", body, md5.Sum([]byte(body)))), nil)
	got, err := turn.PostOf(mh, ma)
	if err != nil || !got.Checkin || got.Text != "add a file" || got.Author != "kim" || got.Hash != mh || got.Record != "" {
		t.Errorf("a check-in as a post: %+v %v", got, err)
	}
	if turn := turn.CheckinTurn(turn.Post{Hash: mh, Sender: "alice", Text: "add a file"}); turn != "Check-in "+mh+" by alice: add a file" {
		t.Errorf("CheckinTurn: %q", turn)
	}
	if r := turn.CheckinReply(mh, "ok"); r != "On check-in ["+mh[:10]+"](/info/"+mh+"):\n\nok" {
		t.Errorf("CheckinReply: %q", r)
	}
}

// TestFailedTurnText: a failed llm turn's answer is one line saying what
// failed and at most the runner's last line, cut; a fence is never quoted;
// a completes session's carries a failed report.
func TestFailedTurnText(t *testing.T) {
	long := strings.Repeat("é", 1000)
	for _, c := range []struct {
		name   string
		out    string
		e      turn.Ended
		report bool
		want   string
	}{
		{"exit", "trace\n  at x\nThe runner failed: no key.\n", turn.Ended{Code: 1}, false,
			"The runner ocx-runner-claude failed: exit 1.\n\n> The runner failed: no key."},
		{"signal, nothing printed", "", turn.Ended{Code: 137, Signal: "SIGKILL"}, false,
			"The runner ocx-runner-claude failed: ended by SIGKILL."},
		{"not started", "", turn.Ended{StartErr: errors.New("exec: \"ocx-runner-claude\": executable file not found in $PATH")}, false,
			"The runner ocx-runner-claude failed: it could not be started: exec: \"ocx-runner-claude\": executable file not found in $PATH."},
		{"a fence is not quoted", "```json\n{}\n```\n", turn.Ended{Code: 2}, false,
			"The runner ocx-runner-claude failed: exit 2."},
	} {
		if got := turn.FailedTurnText("ocx-runner-claude", turn.Output{Tail: []byte(c.out)}, c.e, c.report); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
	got := turn.FailedTurnText("ocx-runner-claude", turn.Output{Tail: []byte("x\n" + long + "\n")}, turn.Ended{Code: 1}, true)
	quote, _, _ := strings.Cut(strings.TrimPrefix(got, "The runner ocx-runner-claude failed: exit 1.\n\n> "), "\n")
	if len(quote) > turn.MaxFailureLine+len("…") || !strings.HasSuffix(quote, "…") {
		t.Errorf("a long line quoted as %d bytes", len(quote))
	}
	r := turn.ReportOf(got)
	if r == nil || r.Outcome != messages.ReportFailed || r.Summary != "The runner ocx-runner-claude failed: exit 1." {
		t.Errorf("the report of a completes session's failed turn: %v\n%s", r, got)
	}
}
