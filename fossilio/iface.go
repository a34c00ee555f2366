package fossilio

import (
	"context"
	"fmt"
	"time"
)

// NoteWrite is a post or a ticket comment to write as Login: a note's place
// and text (messages.Note is the note itself). Exactly one of these
// says where it goes: Title (a new thread), Thread and ReplyTo (a reply in
// a thread), or Ticket (a comment appended to a ticket).
type NoteWrite struct {
	Login   string
	Title   string // a new thread's title
	Thread  string // the thread's root post
	ReplyTo string // the post replied to (Thread itself for the first post)
	Ticket  string // the ticket's id
	Text    string // Markdown, holding the note's fenced JSON block
}

// String renders the note as one stable line, for logs and transcripts.
func (n NoteWrite) String() string {
	switch {
	case n.Ticket != "":
		return fmt.Sprintf("note by %s on ticket %s: %q", n.Login, Short(n.Ticket), n.Text)
	case n.Thread != "":
		return fmt.Sprintf("note by %s in thread %s replying to %s: %q", n.Login, Short(n.Thread), Short(n.ReplyTo), n.Text)
	}
	return fmt.Sprintf("note by %s in new thread %q: %q", n.Login, n.Title, n.Text)
}

// Notes writes notes over sync, each as its login, with the password that
// login keeps (Password looks it up, e.g. from AGENTS/LOGIN/password).
type Notes struct {
	URL         string
	ProjectCode string
	Password    func(login string) (string, error)
	// Cookie, when not nil, gives a login's Fossil login cookie: a login it
	// gives one for writes by it (Client.Cookie) and needs no password.
	Cookie func(login string) string
	// Backoffice, when not nil, runs after each note (see Client.Backoffice).
	Backoffice func(context.Context) error
	Now        func() time.Time
}

// WriteNote writes the note and returns its artifact's hash.
func (w *Notes) WriteNote(ctx context.Context, n NoteWrite) (string, error) {
	hashes, err := w.WriteNotes(ctx, n)
	if len(hashes) == 1 {
		return hashes[0], err
	}
	return "", err
}

// WriteNotes writes notes of one login in one sync request (Fossil's push
// takes many artifacts), runs the backoffice once, and returns their
// hashes in order. Nothing is sent when one of them is malformed.
func (w *Notes) WriteNotes(ctx context.Context, notes ...NoteWrite) ([]string, error) {
	if len(notes) == 0 {
		return nil, nil
	}
	login := notes[0].Login
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	artifacts := make([][]byte, len(notes))
	for i, n := range notes {
		if n.Login != login {
			return nil, fmt.Errorf("write %v: %w: notes written together are all by %q", n, ErrBadInput, login)
		}
		a, err := n.artifact(now())
		if err != nil {
			return nil, err
		}
		artifacts[i] = a
	}
	c := &Client{URL: w.URL, Login: login, ProjectCode: w.ProjectCode, Backoffice: w.Backoffice, Now: w.Now}
	if w.Cookie != nil {
		c.Cookie = w.Cookie(login)
	}
	if c.Cookie == "" {
		pw, err := w.Password(login)
		if err != nil {
			return nil, fmt.Errorf("write %v: password: %w", notes[0], err)
		}
		c.Password = pw
	}
	return c.PushAll(ctx, artifacts...)
}

// artifact builds the note's artifact, dated at.
func (n NoteWrite) artifact(at time.Time) ([]byte, error) {
	var (
		data []byte
		err  error
	)
	switch {
	case n.Ticket != "" && n.Thread == "" && n.Title == "":
		data, err = TicketDraft{Date: at, User: n.Login, Ticket: n.Ticket,
			Fields: []Field{{Name: "+icomment", Value: n.Text}, {Name: "mimetype", Value: MarkdownMimetype}}}.Bytes()
	case n.Thread != "" && n.ReplyTo != "" && n.Title == "":
		data, err = PostDraft{Date: at, User: n.Login, Root: n.Thread, InReplyTo: n.ReplyTo, Text: n.Text}.Bytes()
	case n.Title != "" && n.Thread == "" && n.ReplyTo == "":
		data, err = PostDraft{Date: at, User: n.Login, Title: n.Title, Text: n.Text}.Bytes()
	default:
		return nil, fmt.Errorf("write %v: %w: a note goes in a new thread (Title), a thread (Thread and ReplyTo) or a ticket (Ticket)", n, ErrBadInput)
	}
	if err != nil {
		return nil, fmt.Errorf("write %v: %w", n, err)
	}
	return data, nil
}
