package fossilio

import (
	"context"
	"fmt"
	"time"
)

// Reader answers "what is artifact X": its kind, its sender, and what the
// hook and the daemon need of it. *Repo is one; fossiliotest.Reader is a fake
// for unit tests of pure logic.
type Reader interface {
	Info(ctx context.Context, hashOrPrefix string) (Info, error)
}

// Writer writes a note (a post or a ticket comment) as a given login.
// *Notes is one; fossiliotest.Writer records notes for unit tests.
type Writer interface {
	WriteNote(ctx context.Context, n Note) (string, error)
}

var (
	_ Reader = (*Repo)(nil)
	_ Writer = (*Notes)(nil)
)

// Note is a post or a ticket comment to write as Login. Exactly one of these
// says where it goes: Title (a new thread), Thread and ReplyTo (a reply in
// a thread), or Ticket (a comment appended to a ticket).
type Note struct {
	Login   string
	Title   string // a new thread's title
	Thread  string // the thread's root post
	ReplyTo string // the post replied to (Thread itself for the first post)
	Ticket  string // the ticket's id
	Text    string // Markdown, holding the note's fenced JSON block
}

// String renders the note as one stable line, for logs and transcripts.
func (n Note) String() string {
	switch {
	case n.Ticket != "":
		return fmt.Sprintf("note by %s on ticket %s: %q", n.Login, short(n.Ticket), n.Text)
	case n.Thread != "":
		return fmt.Sprintf("note by %s in thread %s replying to %s: %q", n.Login, short(n.Thread), short(n.ReplyTo), n.Text)
	}
	return fmt.Sprintf("note by %s in new thread %q: %q", n.Login, n.Title, n.Text)
}

func short(h string) string {
	if len(h) > MinPrefix {
		return h[:MinPrefix]
	}
	return h
}

// Notes writes notes over sync, each as its login, with the password that
// login keeps (Password looks it up, e.g. from AGENTS/LOGIN/password).
type Notes struct {
	URL         string
	ProjectCode string
	Password    func(login string) (string, error)
	// Backoffice, when not nil, runs after each note (see Client.Backoffice).
	Backoffice func(context.Context) error
	Now        func() time.Time
}

// WriteNote writes the note and returns its artifact's hash.
func (w *Notes) WriteNote(ctx context.Context, n Note) (string, error) {
	pw, err := w.Password(n.Login)
	if err != nil {
		return "", fmt.Errorf("write %v: password: %w", n, err)
	}
	c := &Client{URL: w.URL, Login: n.Login, Password: pw, ProjectCode: w.ProjectCode, Backoffice: w.Backoffice, Now: w.Now}
	switch {
	case n.Ticket != "" && n.Thread == "" && n.Title == "":
		return c.ChangeTicket(ctx, n.Ticket, Field{Name: "+icomment", Value: n.Text}, Field{Name: "mimetype", Value: MarkdownMimetype})
	case n.Thread != "" && n.ReplyTo != "" && n.Title == "":
		return c.Reply(ctx, n.Thread, n.ReplyTo, n.Text)
	case n.Title != "" && n.Thread == "" && n.ReplyTo == "":
		return c.NewThread(ctx, n.Title, n.Text)
	}
	return "", fmt.Errorf("write %v: %w: a note goes in a new thread (Title), a thread (Thread and ReplyTo) or a ticket (Ticket)", n, ErrBadInput)
}
