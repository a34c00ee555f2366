package session_test

import (
	"crypto/md5"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/runner"
	"github.com/ocx-go/ocx/cmd/internal/session"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

const (
	own   = "1111111111111111111111111111111111111111111111111111111111111111"
	other = "2222222222222222222222222222222222222222222222222222222222222222"
	ph    = "3333333333333333333333333333333333333333333333333333333333333333"
)

func TestDecide(t *testing.T) {
	post := func(text string) session.Post {
		return session.Post{Hash: ph, Kind: messages.ListenThread, Record: own, Author: "pat", Sender: "pat", Text: text}
	}
	cases := []struct {
		name     string
		p        session.Post
		answered bool
		want     session.Action
	}{
		{"a plain post", post("hello"), false, session.Answer},
		{"already answered", post("hello"), true, session.SkipAnswered},
		{"the agent's own, by the node's receipt", func() session.Post { p := post("hello"); p.Sender = "agent-1"; return p }(), false, session.SkipOwn},
		// A U card naming the agent proves nothing (issue 10, item 1): the
		// forged post is answered as its pusher's.
		{"a U card naming the agent, pushed by pat", func() session.Post { p := post("hello"); p.Author = "agent-1"; return p }(), false, session.Answer},
		{"a U card naming the agent, sender unknown", func() session.Post { p := post("hello"); p.Author = "agent-1"; p.Sender = ""; return p }(), false, session.Answer},
		{"an edit", func() session.Post { p := post("hello"); p.Edit = true; return p }(), false, session.SkipEdit},
		{"OCX stop", post("  OCX stop\n"), false, session.Stop},
		{"a stop note", post("```json\n{\"ocx\": \"stop\"}\n```\n"), false, session.Stop},
		{"a stop note for this login", post("```json\n{\"ocx\": \"stop\", \"login\": \"agent-1\"}\n```\n"), false, session.Stop},
		{"a stop note for another login", post("```json\n{\"ocx\": \"stop\", \"login\": \"agent-2\"}\n```\n"), false, session.SkipStop},
		{"a stop on another record", func() session.Post { p := post("OCX stop"); p.Record = other; return p }(), false, session.SkipStop},
		{"a stop from an unknown sender", func() session.Post { p := post("OCX stop"); p.Sender = ""; return p }(), false, session.SkipStop},
		{"a stop already obeyed", post("OCX stop"), true, session.SkipAnswered},
		{"the agent's own stop", func() session.Post { p := post("OCX stop"); p.Sender = "agent-1"; return p }(), false, session.SkipOwn},
		{"a stop with the agent's U card, pushed by pat", func() session.Post { p := post("OCX stop"); p.Author = "agent-1"; return p }(), false, session.Stop},
		{"a listen note", post("```json\n{\"ocx\": \"listen\", \"login\": \"agent-1\", \"project\": \"demo\", \"kind\": \"branch\", \"names\": \"x\"}\n```\n"), false, session.SkipNote},
		{"a truncated note", post("```json\n{\"ocx\": \"stop\"\n"), false, session.SkipNote},
		{"two notes", post("```json\n{\"ocx\": \"stop\"}\n```\n```json\n{\"ocx\": \"stop\"}\n```\n"), false, session.SkipNote},
		{"a note of an unknown version", post("```json\n{\"ocx\": \"stop\", \"version\": 9}\n```\n"), false, session.SkipNote},
		{"JSON that is no note", post("see:\n```json\n{\"a\": 1}\n```\n"), false, session.Answer},
		{"a ticket change", func() session.Post { p := post("on the ticket"); p.Kind = messages.ListenTicket; return p }(), false, session.Answer},
		{"a post on a listened record", func() session.Post { p := post("hello"); p.Record = other; return p }(), false, session.Answer},
	}
	for _, c := range cases {
		d := session.Decide("agent-1", own, c.p, c.answered)
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
		out  session.Output
		e    session.Ended
		want string
	}{
		{"output", session.Output{Tail: []byte("line 1\nline 2\n\n")}, session.Ended{}, "line 1\nline 2"},
		{"nothing", session.Output{Tail: []byte(" \n")}, session.Ended{}, "The command printed nothing."},
		{"nothing, exit 2", session.Output{}, session.Ended{Code: 2}, "The command printed nothing.\n\n(command: exit status 2)"},
		{"a signal", session.Output{Tail: []byte("half")}, session.Ended{Code: 143, Signal: "SIGTERM"}, "half\n\n(command: ended by SIGTERM)"},
		{"not started", session.Output{}, session.Ended{StartErr: errors.New("no such program")}, "The command could not be started: no such program"},
		{"cut", session.Output{Tail: []byte("the end"), Dropped: 10}, session.Ended{}, "(the first 10 bytes of the command's output are left out)\n\nthe end"},
		{"bad bytes", session.Output{Tail: []byte("a\x00b\xffc")}, session.Ended{}, "ab\uFFFDc"},
	}
	for _, c := range cases {
		if got := session.AnswerText("command", c.out, c.e); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestReportOf(t *testing.T) {
	report := "Done.\n\n```json\n{\"ocx\": \"report\", \"outcome\": \"failed\", \"summary\": \"no\"}\n```\n\n(command: exit status 1)"
	if r := session.ReportOf(report); r == nil || r.Outcome != messages.ReportFailed {
		t.Errorf("a report with an exit status after it: %v", r)
	}
	for _, text := range []string{"What should I do?", "```json\n{\"ocx\": \"stop\"}\n```\n",
		"```json\n{\"ocx\": \"report\", \"outcome\": \"done\"}\n```\n```json\n{\"ocx\": \"report\", \"outcome\": \"done\"}\n```\n"} {
		if r := session.ReportOf(text); r != nil {
			t.Errorf("%q read as a report", text)
		}
	}
}

func TestCIResultOf(t *testing.T) {
	cases := []struct {
		out  string
		e    session.Ended
		want string
	}{
		{"ok 1\nok all\n\n", session.Ended{}, "green: ok all"},
		{"FAIL x\n", session.Ended{Code: 1}, "red: FAIL x"},
		{"", session.Ended{}, "green"},
		{"", session.Ended{Code: 1}, "red"},
		{"still going", session.Ended{Code: 137, Signal: "SIGKILL"}, "red: still going"},
		{"", session.Ended{StartErr: errors.New(`exec: "make": executable file not found in $PATH`)}, `red: not started: exec: "make": executable file not found in $PATH`},
	}
	for _, c := range cases {
		tag := session.CIResultOf(session.Output{Tail: []byte(c.out)}, c.e)
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
		e    session.Ended
		want string
	}{
		{"looked at it\nlooks right\n\n", session.Ended{}, "pass: looks right (against " + ph + ")"},
		{"FAIL: no docs for --frob\n", session.Ended{Code: 1}, "fail: FAIL: no docs for --frob (against " + ph + ")"},
		{"", session.Ended{}, "pass: exit status 0 (against " + ph + ")"},
		{"  \n", session.Ended{Code: 2}, "fail: exit status 2 (against " + ph + ")"},
		{"", session.Ended{Code: 137, Signal: "SIGKILL"}, "fail: ended by SIGKILL (against " + ph + ")"},
	}
	for _, c := range cases {
		v := session.VerdictOf(session.Output{Tail: []byte(c.out)}, c.e, ph)
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
	text := session.TicketReply(ph, "the answer")
	if !session.RepliesTo(text, ph) || session.RepliesTo(text, other) {
		t.Errorf("RepliesTo does not find the change %q answers", text)
	}
	if !strings.HasSuffix(text, "\n\nthe answer") || !strings.Contains(text, "(/info/"+ph+")") {
		t.Errorf("ticket reply %q", text)
	}
	if session.RepliesTo("the answer", ph) || session.RepliesTo("", ph) {
		t.Errorf("a comment without the line is taken for a reply")
	}
}

func TestRunnerInputIsOneLine(t *testing.T) {
	in := runner.Input{Post: ph, Text: "two\nlines <b>&", Record: own, Objective: "o"}
	line := string(in.Line())
	if strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") {
		t.Fatalf("not one line: %q", line)
	}
	if strings.Contains(line, `"from"`) {
		t.Errorf("an unknown sender is written: %q", line)
	}
	if !strings.Contains(line, `"text":"two\nlines <b>&"`) {
		t.Errorf("the text is not kept as written: %q", line)
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
		want session.Post
	}{
		{rh, ra, session.Post{Hash: rh, Kind: messages.ListenThread, Record: rh, Author: "pat", Text: "opening", Time: d}},
		{xh, xa, session.Post{Hash: xh, Kind: messages.ListenThread, Record: rh, Author: "kim", Text: "a reply", Time: d}},
		{eh, ea, session.Post{Hash: eh, Kind: messages.ListenThread, Record: rh, Author: "kim", Text: "edited", Edit: true, Time: d}},
		{th, ta, session.Post{Hash: th, Kind: messages.ListenTicket, Record: ticket, Author: "pat", Text: "more words", Time: d}},
	} {
		got, err := session.PostOf(c.hash, c.a)
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
	if _, err := session.PostOf(ch, ca); err == nil || !strings.Contains(err.Error(), "not a forum post, a ticket change or a check-in") {
		t.Errorf("a tag change as a post: %v", err)
	}
	// A check-in (seed 001 E7): its comment is the text.
	body := "C add\\sa\\sfile\nD 2026-12-01T10:00:00\nU kim\n"
	mh, ma := parse([]byte(fmt.Sprintf("%sZ %x\n", body, md5.Sum([]byte(body)))), nil)
	got, err := session.PostOf(mh, ma)
	if err != nil || !got.Checkin || got.Text != "add a file" || got.Author != "kim" || got.Hash != mh || got.Record != "" {
		t.Errorf("a check-in as a post: %+v %v", got, err)
	}
	if turn := session.CheckinTurn(session.Post{Hash: mh, Sender: "alice", Text: "add a file"}); turn != "Check-in "+mh+" by alice: add a file" {
		t.Errorf("CheckinTurn: %q", turn)
	}
	if r := session.CheckinReply(mh, "ok"); r != "On check-in ["+mh[:10]+"](/info/"+mh+"):\n\nok" {
		t.Errorf("CheckinReply: %q", r)
	}
}

func TestParseArgs(t *testing.T) {
	h := strings.Repeat("ab", 32)
	o, err := session.ParseArgs([]string{"serve", "--root", "/srv/agents", "claude-1/demo", "--launch=" + h})
	if err != nil {
		t.Fatal(err)
	}
	if o.Verb != "serve" || o.Key.String() != "claude-1/demo" || o.Root != "/srv/agents" || o.Launch != h {
		t.Errorf("parsed %+v", o)
	}
	o, err = session.ParseArgs([]string{"run", "claude-1/demo", "--root", "/srv/agents"})
	if err != nil || o.Session != "" || o.Launch != "" {
		t.Errorf("run: %+v %v", o, err)
	}
	var out, errOut strings.Builder
	if code := session.Main([]string{"--version"}, &out, &errOut); code != session.ExitOK || out.String() != "workspace version dev checkin dev\n" {
		t.Errorf("workspace --version: exit %d, %q %q", code, out.String(), errOut.String())
	}
	if code := session.Main([]string{"--version", "x"}, &out, &errOut); code != session.ExitUsage {
		t.Errorf("workspace --version x: exit %d", code)
	}
	var ue *session.UsageError
	for _, args := range [][]string{
		{"serve", "claude-1/demo", "--root", "/srv/agents"},
		{"run", "claude-1/demo", "--root", "/srv/agents", "--launch", h},
		{"serve", "claude-1/demo", "--root", "/srv//agents", "--launch", h},
		{"start", "claude-1/demo", "--root", "/srv/agents", "--ready-fd", "-1"},
	} {
		if _, err := session.ParseArgs(args); !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
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
		e      session.Ended
		report bool
		want   string
	}{
		{"exit", "trace\n  at x\nThe runner failed: no key.\n", session.Ended{Code: 1}, false,
			"The runner ocx-runner-claude failed: exit 1.\n\n> The runner failed: no key."},
		{"signal, nothing printed", "", session.Ended{Code: 137, Signal: "SIGKILL"}, false,
			"The runner ocx-runner-claude failed: ended by SIGKILL."},
		{"not started", "", session.Ended{StartErr: errors.New("exec: \"ocx-runner-claude\": executable file not found in $PATH")}, false,
			"The runner ocx-runner-claude failed: it could not be started: exec: \"ocx-runner-claude\": executable file not found in $PATH."},
		{"a fence is not quoted", "```json\n{}\n```\n", session.Ended{Code: 2}, false,
			"The runner ocx-runner-claude failed: exit 2."},
	} {
		if got := session.FailedTurnText("ocx-runner-claude", session.Output{Tail: []byte(c.out)}, c.e, c.report); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
	got := session.FailedTurnText("ocx-runner-claude", session.Output{Tail: []byte("x\n" + long + "\n")}, session.Ended{Code: 1}, true)
	quote, _, _ := strings.Cut(strings.TrimPrefix(got, "The runner ocx-runner-claude failed: exit 1.\n\n> "), "\n")
	if len(quote) > session.MaxFailureLine+len("…") || !strings.HasSuffix(quote, "…") {
		t.Errorf("a long line quoted as %d bytes", len(quote))
	}
	r := session.ReportOf(got)
	if r == nil || r.Outcome != messages.ReportFailed || r.Summary != "The runner ocx-runner-claude failed: exit 1." {
		t.Errorf("the report of a completes session's failed turn: %v\n%s", r, got)
	}
}
