package node

import (
	"context"
	"fmt"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// ListenerInput is what `ocx listener add|remove` takes.
type ListenerInput struct {
	Workspace string // LOGIN/PROJECT
	Kind      string // thread, ticket or branch
	// Names is what is listened to: any post of the thread (or a prefix),
	// the ticket's id (or a prefix), or the branch's name.
	Names string
	// Record is, for a branch, the session's own record where the note goes;
	// empty means the workspace's record.
	Record string
	DryRun bool
}

// ListenerAdd adds a listener (seed 002, "add a listener"): the listen note,
// as the workspace's agent login (D10), on the record listened to (for a
// branch, on the session's own record), and the listener's file in the
// listening index.
func (n *Node) ListenerAdd(ctx context.Context, in ListenerInput) *Answer {
	return n.listener(ctx, "listener add", in, true)
}

// ListenerRemove removes a listener (seed 002, "remove a listener"): the
// unlisten note where the listen note went, and the listener's file removed
// from the listening index.
func (n *Node) ListenerRemove(ctx context.Context, in ListenerInput) *Answer {
	return n.listener(ctx, "listener remove", in, false)
}

func (n *Node) listener(ctx context.Context, tool string, in ListenerInput, on bool) *Answer {
	a := newAnswer(tool, in.DryRun)
	key, err := messages.ParseWorkspaceKey(in.Workspace)
	if err != nil {
		return a.Stop(fmt.Errorf("workspace: %w", err))
	}
	kind := messages.ListenKind(in.Kind)
	switch kind {
	case messages.ListenThread, messages.ListenTicket, messages.ListenBranch:
	default:
		return a.Stop(fmt.Errorf("kind: %q is not a kind of listener (thread, ticket, branch)", in.Kind))
	}
	if in.Names == "" {
		return a.Stop(fmt.Errorf("names: say what to listen to (a thread's post, a ticket's id or a branch)"))
	}
	p, err := n.project(key.Project)
	if err != nil {
		return a.Stop(fmt.Errorf("workspace: %w", err))
	}
	ws, err := n.workspace(key)
	if err != nil {
		return a.Stop(err)
	}
	if err := onHost(ws); err != nil {
		return a.Stop(fmt.Errorf("workspace %s does not exist on the host (%v); `ocx workspace add` makes it", key, err))
	}
	if _, err := n.password(key.Login); err != nil {
		return a.Stop(fmt.Errorf("workspace %s: its agent login writes the note: %w", key, err))
	}
	r, err := n.openRepo(p)
	if err != nil {
		return a.Stop(err)
	}
	defer r.Close()
	b, err := n.boundWorkspace(ctx, r, ws)
	if err != nil {
		return a.Stop(fmt.Errorf("workspace %s does not exist on the host (%v); `ocx workspace add` makes it", key, err))
	}
	// Where the note goes, and what the listener names, in full.
	var where ownRecord
	names := in.Names
	switch kind {
	case messages.ListenThread:
		info, err := r.Info(ctx, in.Names)
		if err != nil {
			return a.Stop(fmt.Errorf("names: %w", err))
		}
		if info.Kind != fossilio.KindPost {
			return a.Stop(fmt.Errorf("names: %s is a %s, not a forum post", info.Hash, info.Kind))
		}
		names, where = info.Root, ownRecord{Kind: messages.ListenThread, ID: info.Root}
	case messages.ListenTicket:
		changes, err := r.TicketChanges(ctx, in.Names)
		if err != nil || len(changes) == 0 {
			return a.Stop(fmt.Errorf("names: %q is not a ticket of %s", in.Names, p.Name))
		}
		names, where = changes[0].Ticket, ownRecord{Kind: messages.ListenTicket, ID: changes[0].Ticket}
	case messages.ListenBranch:
		where = ownRecord{Kind: messages.ListenThread, ID: b.Home}
		if in.Record != "" {
			if where, err = resolveRecord(ctx, r, in.Record); err != nil {
				return a.Stop(err)
			}
		}
	}
	l := messages.Listener{Login: key.Login, Project: key.Project, Kind: kind, Names: names}
	var note messages.Note = &messages.ListenNote{Listener: l}
	verb := "Listening to"
	if !on {
		note, verb = &messages.UnlistenNote{Listener: l}, "No longer listening to"
	}
	block, err := note.Encode()
	if err != nil {
		return a.Stop(err)
	}
	file, err := messages.ListeningFileName(kind, names)
	if err != nil {
		return a.Stop(err)
	}
	path, err := ws.Listening(file)
	if err != nil {
		return a.Stop(err)
	}
	text := fmt.Sprintf("%s %s `%s` in workspace `%s`.\n\n%s", verb, kind, names, key, block)
	if in.DryRun {
		a.Would("post as %q on %s %s:\n%s", key.Login, where.Kind, where.ID, text)
		if on {
			a.Would("write %s", path)
		} else {
			a.Would("remove %s", path)
		}
		return a
	}
	code, err := r.ProjectCode(ctx)
	if err != nil {
		return a.Stop(err)
	}
	hash, err := n.writer(p, code).WriteNote(ctx, where.note(key.Login, text))
	if err != nil {
		return a.Stop(fmt.Errorf("post the %s note: %w", note.NoteKind(), err))
	}
	a.Logf("posted the %s note as %q at %s on %s %s", note.NoteKind(), key.Login, hash, where.Kind, where.ID)
	a.SetResult(hash)
	defer n.backoffice(ctx, a, p)
	// The listener hears what the node receives after its note (D27).
	var after int64
	if on {
		info, err := r.Info(ctx, hash)
		if err != nil {
			return a.Stop(fmt.Errorf("read the listen note %s back: %w", hash, err))
		}
		after = info.Rcvid
	}
	if err := n.setListening(ctx, ws, kind, names, after, on); err != nil {
		return a.Stop(err)
	}
	if on {
		a.Logf("wrote %s", path)
	} else {
		a.Logf("removed %s", path)
	}
	return a
}
