package turn

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// This file is the session's pure logic: what to do with a post it was woken
// for, how an answer is worded, what a CI run's result is, and which records
// the session listens to. It touches no file, process or server, so its
// tests need none.

// Post is what a turn needs to know of a post it was woken for: a forum post
// or a ticket change, as read from the agent's clone.
type Post struct {
	Hash string
	// Kind is where the post is: a thread (a forum post) or a ticket (a
	// ticket change).
	Kind messages.ListenKind
	// Record is the thread's root post or the ticket's id.
	Record string
	// Author is the name written inside the post (its U card). It proves
	// nothing: any user who may push can write any name (protocol v1 E2).
	// It is never read to decide anything; the log shows it beside Sender.
	Author string
	// Sender is the login the node's repository recorded as having sent it,
	// as the hook's wake line says (D27); "" when unknown, never the agent.
	Sender string
	// Text is the post's text, or the text the ticket change adds to the
	// ticket's comment.
	Text string
	// Edit says the post replaces an earlier version of a post.
	Edit bool
	// Time is the time written in the post.
	Time time.Time
	// Checkin says Hash is a check-in the session is given (seed 001 E7),
	// not a post: Text is its comment, and the answer goes on the
	// session's own record.
	Checkin bool
}

// PostOf reads a post from its own artifact, as the session fetched it: a
// forum post's thread is its G card (the thread's first post), or the post
// itself when it opens a thread; it is an edit when it names the version it
// replaces (P). A ticket change's record is its ticket (K), and its text what
// it adds to the ticket's comment (+icomment, or icomment).
func PostOf(hash string, a *fossilio.Artifact) (Post, error) {
	switch a.Type {
	case fossilio.TypeForum:
		root := a.ThreadRoot
		if root == "" {
			root = hash
		}
		return Post{Hash: hash, Kind: messages.ListenThread, Record: root, Author: a.User, Text: string(a.Text),
			Edit: len(a.Parents) > 0, Time: a.Date}, nil
	case fossilio.TypeTicket:
		p := Post{Hash: hash, Kind: messages.ListenTicket, Record: strings.ToLower(a.Ticket), Author: a.User, Time: a.Date}
		for _, f := range a.Fields {
			if f.Name == "+icomment" || f.Name == "icomment" {
				p.Text = f.Value
			}
		}
		return p, nil
	case fossilio.TypeManifest:
		return Post{Hash: hash, Checkin: true, Author: a.User, Text: a.Comment, Time: a.Date}, nil
	}
	return Post{}, fmt.Errorf("%s is a %s, not a forum post, a ticket change or a check-in", hash, a.Type)
}

// CheckinTurn is what a turn on a check-in reads (seed 001 E7): the
// check-in, who sent it, and its comment.
func CheckinTurn(p Post) string {
	from := p.Sender
	if from == "" {
		from = "an unknown sender"
	}
	return fmt.Sprintf("Check-in %s by %s: %s", p.Hash, from, p.Text)
}

// CheckinReply opens an answer to a check-in on the session's own thread:
// a link to the check-in, since a forum post can reply only to a post.
func CheckinReply(checkin, text string) string {
	short := checkin
	if len(short) > 10 {
		short = short[:10]
	}
	return fmt.Sprintf("On check-in [%s](/info/%s):", short, checkin) + "\n\n" + text
}

// From is who sent the post, when that is known.
func (p Post) From() string { return p.Sender }

// Action is what the session does with a post it was woken for.
type Action int

// The actions, in the order Decide considers them.
const (
	// Answer: run one turn on the post and reply with what it printed.
	Answer Action = iota
	// SkipOwn: the agent wrote the post itself.
	SkipOwn
	// SkipEdit: the post replaces an earlier version; the first was the one
	// to answer.
	SkipEdit
	// SkipAnswered: the agent already replied to it (a hash may come twice).
	SkipAnswered
	// SkipNote: the post holds an OCX note other than a stop request, or a
	// block that may have been one; notes are for the hook and the daemon.
	SkipNote
	// SkipStop: a stop request that is not for this session (another login's,
	// on another record, or from an unknown sender).
	SkipStop
	// Stop: a stop request for this session: write the stopped note, exit 0.
	Stop
)

func (a Action) String() string {
	switch a {
	case Answer:
		return "answer"
	case SkipOwn:
		return "skip-own"
	case SkipEdit:
		return "skip-edit"
	case SkipAnswered:
		return "skip-answered"
	case SkipNote:
		return "skip-note"
	case SkipStop:
		return "skip-stop"
	case Stop:
		return "stop"
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// decision is an action and why, in words for the log.
type decision struct {
	Action Action
	Why    string
}

// Decide says what a session of login, whose own record is ownRecord, does
// with post p; answered says whether the record already holds the agent's
// reply to it. The hook, which reads the node's repository, already decided
// that the session hears p (its sender, its place after the listen note, a
// stop only from a user holding admin or setup: D27), and told its sender
// in the wake line; nothing written inside p decides anything here. A stop
// request counts only on the session's own record (D3), from a known sender
// and, when it names a login, only for that login.
func Decide(login, ownRecord string, p Post, answered bool) decision {
	if p.Sender == login {
		return decision{SkipOwn, "the agent sent it"}
	}
	if p.Edit {
		return decision{SkipEdit, "it is an edit of an earlier post"}
	}
	if answered {
		return decision{SkipAnswered, "the agent already replied to it"}
	}
	n, err := messages.ReadPost([]byte(p.Text))
	switch {
	case errors.Is(err, strictjson.ErrNotANote):
		return decision{Answer, "a post to answer"}
	case err != nil:
		return decision{SkipNote, "it may hold a note: " + err.Error()}
	}
	stop, ok := n.(*messages.StopNote)
	if !ok {
		return decision{SkipNote, "it holds a " + string(n.NoteKind()) + " note"}
	}
	if p.Record != ownRecord {
		return decision{SkipStop, "a stop request on another record than the session's own"}
	}
	if p.Sender == "" {
		return decision{SkipStop, "a stop request from an unknown sender"}
	}
	if stop.Login != "" && stop.Login != login {
		return decision{SkipStop, "a stop request for " + stop.Login}
	}
	return decision{Stop, "a stop request"}
}

// Ended is how a turn's process ended.
type Ended struct {
	// Code is the exit code; with Signal, 128 and the signal's number.
	Code int
	// Signal names the signal that ended it ("SIGTERM"), or "".
	Signal string
	// StartErr says why it could not be started at all.
	StartErr error
	// CPU is the CPU time its process used, with the processes it waited
	// for (the runner's CLI), as wait4 reports it (D50).
	CPU time.Duration
}

// OK says whether the process ran and exited 0.
func (e Ended) OK() bool { return e.StartErr == nil && e.Signal == "" && e.Code == 0 }

func (e Ended) String() string {
	switch {
	case e.StartErr != nil:
		return "not started: " + e.StartErr.Error()
	case e.Signal != "":
		return "ended by " + e.Signal
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

// Output is what a turn's process printed: at most its last MaxOutput
// bytes, and how many bytes before them were dropped.
type Output struct {
	Tail    []byte
	Dropped int64
}

// MaxOutput bounds what an answer carries of a process's output: its end,
// where a command's result is, as seed 004's kept logs keep the end.
const MaxOutput = 64 << 10

// AnswerText words the reply to a post from what the turn printed (D4): the
// output as it is, since it may hold a report note; a line saying so when it
// printed nothing; and the exit status when it is not 0. who is "command" or
// "runner".
func AnswerText(who string, out Output, e Ended) string {
	var b strings.Builder
	if out.Dropped > 0 {
		fmt.Fprintf(&b, "(the first %d bytes of the %s's output are left out)\n\n", out.Dropped, who)
	}
	text := cleanOutput(out.Tail)
	if strings.TrimSpace(text) == "" {
		if e.StartErr != nil {
			fmt.Fprintf(&b, "The %s could not be started: %v", who, e.StartErr)
			return b.String()
		}
		fmt.Fprintf(&b, "The %s printed nothing.", who)
	} else {
		b.WriteString(strings.TrimRight(text, "\n"))
	}
	if !e.OK() {
		fmt.Fprintf(&b, "\n\n(%s: %s)", who, e)
	}
	return b.String()
}

// MaxFailureLine bounds what a failed turn's answer quotes of the runner's
// own output: its last line, the runner's failure note when it printed one.
const MaxFailureLine = 400

// FailedTurnText words the answer to a post whose llm turn failed (issue 15):
// the runner could not be started, exited other than 0, or a signal ended
// it. The answer is one short line saying what failed, then the last line
// the runner printed, quoted and cut to MaxFailureLine bytes (a runner's
// failure note, "The runner failed: WHAT."); nothing else of its output, so
// a stack trace or a half answer never reaches the record. With report (a
// completes session not being stopped) it adds a failed report note, which
// ends the session as a done one does.
func FailedTurnText(prog string, out Output, e Ended, report bool) string {
	var what string
	switch {
	case e.StartErr != nil:
		what = "it could not be started: " + clipLine(e.StartErr.Error(), MaxFailureLine)
	case e.Signal != "":
		what = "ended by " + e.Signal
	default:
		what = fmt.Sprintf("exit %d", e.Code)
	}
	summary := fmt.Sprintf("The runner %s failed: %s.", prog, strings.TrimRight(what, "."))
	var b strings.Builder
	b.WriteString(summary)
	if line := clipLine(messages.LastLine(out.Tail), MaxFailureLine); line != "" && !strings.Contains(line, "```") {
		b.WriteString("\n\n> " + line)
	}
	if report {
		if block, err := (&messages.ReportNote{Outcome: messages.ReportFailed, Summary: summary}).Encode(); err == nil {
			b.WriteString("\n\n" + string(block))
		}
	}
	return b.String()
}

// JobResultText is the answer of a job (D56, seed 002 "report a job's
// result"): a mechanical completes session's command has ended, and its end
// is the result. The answer keeps what the command printed and adds a
// report note: the command's own when its output holds one, otherwise done
// when it exited 0 and failed when it did not, the summary its last line
// (how it ended first for a failure; how it ended alone when it printed
// nothing).
func JobResultText(answer string, out Output, e Ended) string {
	if ReportOf(answer) != nil {
		return answer
	}
	last := clipLine(messages.LastLine(out.Tail), MaxFailureLine)
	r := &messages.ReportNote{Outcome: messages.ReportDone, Summary: last}
	switch {
	case !e.OK() && last != "":
		r.Outcome, r.Summary = messages.ReportFailed, clipLine(e.String(), MaxFailureLine)+": "+last
	case !e.OK():
		r.Outcome, r.Summary = messages.ReportFailed, clipLine(e.String(), MaxFailureLine)
	case last == "":
		r.Summary = e.String()
	}
	block, err := r.Encode()
	if err != nil {
		return answer
	}
	return answer + "\n\n" + string(block)
}

// clipLine makes s one line of at most max bytes, cut on a character
// boundary with an ellipsis.
func clipLine(s string, max int) string {
	s = strings.Join(strings.Fields(messages.CleanText(s)), " ")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// cleanOutput makes a process's bytes fit a post: valid UTF-8, no NUL.
func cleanOutput(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "")
}

// ReportOf returns the report an answer holds (D4), or nil: an answer without
// one is a question or a reply, and keeps a completes session running.
func ReportOf(answer string) *messages.ReportNote {
	n, err := messages.ReadPost([]byte(answer))
	if err != nil {
		return nil
	}
	r, _ := n.(*messages.ReportNote)
	return r
}

// CIResultOf is the ci tag a CI run earns (D5): green when the command exited
// 0, red otherwise, with its last line of output.
func CIResultOf(out Output, e Ended) messages.CITag {
	t := messages.CITag{Result: messages.CIRed, Line: messages.LastLine(out.Tail)}
	if e.OK() {
		t.Result = messages.CIGreen
	}
	if t.Line == "" && e.StartErr != nil {
		t.Line = messages.LastLine([]byte("not started: " + e.StartErr.Error()))
	}
	return t
}

// VerdictOf is the verdict a reviewer's run earns (D42), as CIResultOf is
// a CI run's result: pass when the command exited 0, fail otherwise; its
// reason the command's last line of output, or how it ended when it printed
// none; judged against the session's own record, where its objective is.
func VerdictOf(out Output, e Ended, against string) messages.Verdict {
	reason := messages.LastLine(out.Tail)
	if strings.TrimSpace(reason) == "" {
		reason = messages.LastLine([]byte(e.String()))
	}
	return messages.Verdict{Pass: e.OK(), Reason: reason, Against: against}
}

// TicketReply words a ticket comment that answers change to: a ticket change
// has no "in reply to" of its own, so its first line says it, as a link a
// person can follow and a session can find again (RepliesTo).
func TicketReply(to, text string) string {
	return ticketReplyLine(to) + "\n\n" + text
}

func ticketReplyLine(to string) string {
	short := to
	if len(short) > 10 {
		short = short[:10]
	}
	return fmt.Sprintf("In reply to [%s](/info/%s):", short, to)
}

// RepliesTo says whether a ticket comment written by TicketReply answers
// change to.
func RepliesTo(comment, to string) bool {
	first, _, _ := strings.Cut(comment, "\n")
	return strings.TrimRight(first, "\r ") == ticketReplyLine(to)
}
