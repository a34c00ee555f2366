package wake

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
)

// This file is the hook's decisions as pure functions: whom a post wakes
// (D8, D27), with the reason for each session it does not wake, and how the
// posts nobody heard are gathered into notes (D28). The shell in
// cmd/internal/hook/hook.go
// reads the repository, the listening index and the hears files, and writes
// the wake pipes and the notes; nothing here touches a file, a process or a
// server, so a table of arrivals and listeners tests every rule.

// NoteSeen is what a post's text holds, as far as waking goes.
type NoteSeen int

const (
	// NoNote: plain text (or JSON that is no OCX note): a post to answer.
	NoNote NoteSeen = iota
	// StopRequest: `OCX stop`, or a stop note.
	StopRequest
	// OtherNote: an OCX note of another kind: for the daemon and the tools.
	OtherNote
	// BrokenNote: a block that may have been a note but does not decode
	// (two notes, a field at fault, a block never closed).
	BrokenNote
)

// Arrival is a post or ticket change the hook handles, as the node's
// repository tells it: its sender is the receipt's user, never a name
// written inside it (protocol v1 E2).
type Arrival struct {
	Hash   string
	Record string // the thread's root post, or the ticket's id
	Sender string // the login that sent it to the node; "" when unknown
	Rcvid  int64  // its receipt
	// Note is what its text holds; NoteErr says why it is broken.
	Note    NoteSeen
	NoteErr error
}

// Target is a session whose listening index names the arrival's record.
type Target struct {
	Workspace messages.WorkspaceKey
	// After is the receipt of the listen note that made the listener (0 for
	// the session's own record): only what arrived after it is heard.
	After int64
	// Hears are the users whose posts wake the session.
	Hears []string
}

// Verdict is what one arrival means to one target.
type Verdict struct {
	Target Target
	// Wake says to write Line into the target's wake pipe.
	Wake bool
	Line pipe.WakeLine
	// NoteIfUnheard says a failed wake earns an unheard note: the sender is
	// a person, not one of the node's own logins (D8).
	NoteIfUnheard bool
	// Why says, for the log, why the target is not woken.
	Why   string
	Level slog.Level
}

// Decide says what an arrival means to each target. nodeLogins are the
// node's own logins (its agents and the node user); privileged says whether
// the sender holds admin or setup (only it may stop a session).
func Decide(a Arrival, targets []Target, nodeLogins map[string]bool, privileged bool) []Verdict {
	out := make([]Verdict, 0, len(targets))
	for _, t := range targets {
		out = append(out, decideOne(a, t, nodeLogins, privileged))
	}
	return out
}

func decideOne(a Arrival, t Target, nodeLogins map[string]bool, privileged bool) Verdict {
	v := Verdict{Target: t, Level: slog.LevelInfo}
	skip := func(level slog.Level, why string) Verdict {
		v.Level, v.Why = level, why
		return v
	}
	switch {
	case a.Sender == "":
		return skip(slog.LevelWarn, "not woken: the node does not say who sent it, and a session hears no unknown sender")
	case a.Sender == t.Workspace.Login:
		return skip(slog.LevelInfo, "not woken: the session's own post")
	case a.Rcvid <= t.After:
		return skip(slog.LevelInfo, fmt.Sprintf("not woken: the node received it (receipt %d) before the agent's listen note on its record (receipt %d)", a.Rcvid, t.After))
	}
	switch a.Note {
	case StopRequest:
		if !privileged {
			return skip(slog.LevelWarn, fmt.Sprintf("not woken: a stop request from %q, who holds neither admin nor setup, is ignored (D27)", a.Sender))
		}
	case OtherNote:
		return skip(slog.LevelInfo, "not woken: the post holds an OCX note")
	case BrokenNote:
		return skip(slog.LevelWarn, fmt.Sprintf("not woken: the post holds a block that does not read as one OCX note: %v", a.NoteErr))
	case NoNote:
		if !messages.Hears(t.Hears, a.Sender) {
			return skip(slog.LevelInfo, fmt.Sprintf("not woken: the session does not hear %q (it hears %s)", a.Sender, hearsWords(t.Hears)))
		}
	}
	v.Wake = true
	v.Line = pipe.WakeLine{Post: a.Hash, From: a.Sender}
	v.NoteIfUnheard = !nodeLogins[a.Sender]
	return v
}

func hearsWords(h []string) string {
	switch {
	case len(h) == 0:
		return "nobody"
	case len(h) == 1 && h[0] == messages.HearsEveryone:
		return "everyone"
	}
	return strings.Join(h, ", ")
}

// Missed is a post a session should have heard but whose wake pipe had no
// reader (or was missing), and which earns an unheard note.
type Missed struct {
	Workspace messages.WorkspaceKey
	// Kind and Record are where the post is.
	Kind   messages.ListenKind
	Record string
	Post   string
	Why    messages.UnheardWhy
}

// maxUnheardPosts bounds the posts one unheard note names, so that a note
// stays well within a note's size (strictjson.MaxNoteLen).
const maxUnheardPosts = 1000

// unheardNote is one note to write: as Login, on the record, replying to
// the first post it names.
type unheardNote struct {
	Kind   messages.ListenKind
	Record string
	Note   messages.UnheardNote
}

// Unheard gathers the posts nobody heard into notes (D28): one note per
// session, record and reason in one run, naming every post in the order
// given (the server's), at most maxUnheardPosts each. A post named twice
// for one session is named once.
func Unheard(missed []Missed) []unheardNote {
	type group struct {
		ws     messages.WorkspaceKey
		kind   messages.ListenKind
		record string
		why    messages.UnheardWhy
	}
	var order []group
	posts := map[group][]string{}
	seen := map[string]bool{}
	for _, m := range missed {
		g := group{m.Workspace, m.Kind, m.Record, m.Why}
		k := m.Workspace.String() + " " + m.Post
		if seen[k] {
			continue
		}
		seen[k] = true
		if _, ok := posts[g]; !ok {
			order = append(order, g)
		}
		posts[g] = append(posts[g], m.Post)
	}
	var out []unheardNote
	for _, g := range order {
		all := posts[g]
		for len(all) > 0 {
			chunk := all[:min(len(all), maxUnheardPosts)]
			all = all[len(chunk):]
			n := messages.UnheardNote{Post: chunk[0], Login: g.ws.Login, Project: g.ws.Project, Why: g.why}
			if len(chunk) > 1 {
				n.Posts = append([]string(nil), chunk...)
			}
			out = append(out, unheardNote{Kind: g.kind, Record: g.record, Note: n})
		}
	}
	return out
}

// Text words an unheard note's post: a line a person reads, then the block.
func (u unheardNote) Text(block []byte) string {
	what, them := "This post", "it"
	if n := len(u.Note.All()); n > 1 {
		what, them = fmt.Sprintf("These %d posts", n), "them"
	}
	if u.Note.Why == messages.UnheardEnded {
		return fmt.Sprintf("%s reached the session of workspace `%s/%s`, which ended before it answered %s (%s).\n\n%s",
			what, u.Note.Login, u.Note.Project, them, u.Note.Why, block)
	}
	return fmt.Sprintf("%s reached the session of workspace `%s/%s`, but nothing holds its wake pipe (%s): nobody heard %s.\n\n%s",
		what, u.Note.Login, u.Note.Project, u.Note.Why, them, block)
}

// CheckinTarget is a session given the check-ins of some branches: those
// its AGENTS/LOGIN/held/PROJECT/checkins names (seed 001 E4, E7).
type CheckinTarget struct {
	Workspace messages.WorkspaceKey
	Branches  []string
}

// DecideCheckin says what a check-in on branch, sent by sender, means to
// each session given check-ins (seed 001 E7): it is given to each whose
// branches name its branch, unless that session's own login sent it. A
// check-in reaches no session by its sender's standing: who may check in
// is Fossil's to say. A failed wake earns no unheard note (D28 counts
// posts a person wrote to be answered).
func DecideCheckin(hash, branch, sender string, targets []CheckinTarget) []Verdict {
	var out []Verdict
	for _, t := range targets {
		v := Verdict{Target: Target{Workspace: t.Workspace}}
		switch {
		case !slices.Contains(t.Branches, branch):
			continue // the common case: said nothing, logged nothing
		case sender != "" && sender == t.Workspace.Login:
			v.Why, v.Level = "not given: the session's own login sent the check-in", slog.LevelInfo
		default:
			v.Wake, v.Line = true, pipe.WakeLine{Post: hash, From: sender}
		}
		out = append(out, v)
	}
	return out
}
