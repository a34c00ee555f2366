package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/ocx-go/ocx/fossilio"
)

// PostInput is what `ocx post`, `ocx thread` and `ocx ticket` take: small
// conveniences for a person at a terminal, writing as the caller.
type PostInput struct {
	// Project is the repository to write in; empty when the node has one.
	Project string
	// To is the post to reply to, or the ticket to comment on (full or a
	// prefix of at least 10 digits); `ocx post` only.
	To string
	// Title is a new thread's or ticket's title.
	Title  string
	Text   string
	DryRun bool
}

// DefaultProject picks the project a convenience writes in.
func (n *Node) DefaultProject(name string) (Project, error) {
	if name != "" {
		return n.Project(name)
	}
	ps := n.Projects()
	if len(ps) != 1 {
		return Project{}, fmt.Errorf("project: this node has %d projects; say which with --project", len(ps))
	}
	return ps[0], nil
}

// Post replies to a post in its thread, or appends a comment to a ticket,
// as the caller.
func (n *Node) Post(ctx context.Context, in PostInput) *Answer {
	a := NewAnswer("post", in.DryRun)
	if in.To == "" {
		return a.Stop(errors.New("to: say which post to reply to, or which ticket to comment on"))
	}
	if in.Text == "" {
		return a.Stop(errors.New("text: empty"))
	}
	return n.write(ctx, a, in, func(r *fossilio.Repo) (fossilio.NoteWrite, string, error) {
		info, err := r.Info(ctx, in.To)
		if err == nil {
			if info.Kind != fossilio.KindPost {
				return fossilio.NoteWrite{}, "", fmt.Errorf("to: %s is a %s, not a forum post", info.Hash, info.Kind)
			}
			return fossilio.NoteWrite{Login: n.Caller.Login, Thread: info.Root, ReplyTo: info.Hash, Text: in.Text}, "a reply to " + info.Hash, nil
		}
		if !errors.Is(err, fossilio.ErrNotFound) {
			return fossilio.NoteWrite{}, "", fmt.Errorf("to: %w", err)
		}
		changes, terr := r.TicketChanges(ctx, in.To)
		if terr != nil || len(changes) == 0 {
			return fossilio.NoteWrite{}, "", fmt.Errorf("to: %q names no forum post and no ticket", in.To)
		}
		return fossilio.NoteWrite{Login: n.Caller.Login, Ticket: changes[0].Ticket, Text: in.Text}, "a comment on ticket " + changes[0].Ticket, nil
	})
}

// Thread starts a new forum thread as the caller.
func (n *Node) Thread(ctx context.Context, in PostInput) *Answer {
	a := NewAnswer("thread", in.DryRun)
	if in.Title == "" || in.Text == "" {
		return a.Stop(errors.New("title and text: a thread needs both"))
	}
	return n.write(ctx, a, in, func(*fossilio.Repo) (fossilio.NoteWrite, string, error) {
		return fossilio.NoteWrite{Login: n.Caller.Login, Title: in.Title, Text: in.Text}, fmt.Sprintf("a new thread %q", in.Title), nil
	})
}

// Ticket opens a new ticket as the caller, its text the first comment.
func (n *Node) Ticket(ctx context.Context, in PostInput) *Answer {
	a := NewAnswer("ticket", in.DryRun)
	if in.Title == "" || in.Text == "" {
		return a.Stop(errors.New("title and text: a ticket needs both"))
	}
	if err := n.RequireCaller(); err != nil {
		return a.Stop(err)
	}
	p, err := n.DefaultProject(in.Project)
	if err != nil {
		return a.Stop(err)
	}
	var plan Plan
	plan.Add(fmt.Sprintf("open a ticket %q on %s as %q", in.Title, p.Name, n.Caller.Login), func(ctx context.Context, a *Answer) error {
		code, err := n.ProjectCode(ctx, p)
		if err != nil {
			return err
		}
		c := &fossilio.Client{URL: p.URL, Login: n.Caller.Login, Password: n.Caller.Password, Cookie: n.Caller.Cookie, ProjectCode: code, Now: n.Now}
		hash, id, err := c.NewTicket(ctx,
			fossilio.Field{Name: "title", Value: in.Title}, fossilio.Field{Name: "status", Value: "Open"},
			fossilio.Field{Name: "type", Value: "Code_Defect"}, fossilio.Field{Name: "icomment", Value: in.Text},
			fossilio.Field{Name: "mimetype", Value: fossilio.MarkdownMimetype})
		if err != nil {
			return fmt.Errorf("open the ticket: %w", err)
		}
		a.Logf("opened ticket %s on %s as %q (change %s)", id, p.Name, n.Caller.Login, hash)
		a.SetResult(id)
		n.Backoffice(ctx, a, p)
		return nil
	})
	return a.Stop(Execute(ctx, a, plan))
}

// ProjectCode reads project p's code from the node's repository.
func (n *Node) ProjectCode(ctx context.Context, p Project) (string, error) {
	r, err := n.OpenProjectRepo(p)
	if err != nil {
		return "", err
	}
	defer r.Close()
	return r.ProjectCode(ctx)
}

// write posts one note as the caller where plan says.
func (n *Node) write(ctx context.Context, a *Answer, in PostInput, plan func(*fossilio.Repo) (fossilio.NoteWrite, string, error)) *Answer {
	if err := n.RequireCaller(); err != nil {
		return a.Stop(err)
	}
	p, err := n.DefaultProject(in.Project)
	if err != nil {
		return a.Stop(err)
	}
	r, err := n.OpenProjectRepo(p)
	if err != nil {
		return a.Stop(err)
	}
	defer r.Close()
	note, what, err := plan(r)
	if err != nil {
		return a.Stop(err)
	}
	var steps Plan
	steps.Add(fmt.Sprintf("post %s on %s as %q", what, p.Name, n.Caller.Login), func(ctx context.Context, a *Answer) error {
		code, err := r.ProjectCode(ctx)
		if err != nil {
			return err
		}
		hash, err := n.Writer(p, code).WriteNote(ctx, note)
		if err != nil {
			return fmt.Errorf("post %s: %w", what, err)
		}
		a.Logf("posted %s on %s as %q: %s", what, p.Name, n.Caller.Login, hash)
		a.SetResult(hash)
		n.Backoffice(ctx, a, p)
		return nil
	})
	return a.Stop(Execute(ctx, a, steps))
}
