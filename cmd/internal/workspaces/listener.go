package workspaces

import (
	"context"
	"fmt"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
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
func (n Actions) ListenerAdd(ctx context.Context, in ListenerInput) *node.Answer {
	return n.listener(ctx, "listener add", in, true)
}

// ListenerRemove removes a listener (seed 002, "remove a listener"): the
// unlisten note where the listen note went, and the listener's file removed
// from the listening index.
func (n Actions) ListenerRemove(ctx context.Context, in ListenerInput) *node.Answer {
	return n.listener(ctx, "listener remove", in, false)
}

func (n Actions) listener(ctx context.Context, tool string, in ListenerInput, on bool) *node.Answer {
	a := node.NewAnswer(tool, in.DryRun)
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
	p, ws, err := n.projectWorkspace(key)
	if err != nil {
		return a.Stop(err)
	}
	if err := node.OnHost(ws); err != nil {
		return a.Stop(fmt.Errorf("workspace %s does not exist on the host (%v); `ocx workspace add` makes it", key, err))
	}
	if _, err := n.node.Password(key.Login); err != nil {
		return a.Stop(fmt.Errorf("workspace %s: its agent login writes the note: %w", key, err))
	}
	r, err := n.node.OpenProjectRepo(p)
	if err != nil {
		return a.Stop(err)
	}
	defer r.Close()
	b, err := n.node.BoundWorkspace(ctx, r, ws)
	if err != nil {
		return a.Stop(fmt.Errorf("workspace %s does not exist on the host (%v); `ocx workspace add` makes it", key, err))
	}
	f := listenerFacts{Key: key, Kind: kind, On: on}
	if f.Where, f.Names, err = listened(ctx, r, p, b.Home, kind, in); err != nil {
		return a.Stop(err)
	}
	if f.Path, err = listeningPath(ws, kind, f.Names); err != nil {
		return a.Stop(err)
	}
	plan, err := listenerPlan(f, &listenerRun{n: n, r: r, p: p, ws: ws})
	return node.Executed(ctx, a, plan, err)
}

// listened says where a listener's note goes and what the listener names,
// in full: the thread's root post, the ticket's id, or the branch (whose
// note goes on the session's own record, home unless the input names one).
func listened(ctx context.Context, r *fossilio.Repo, p node.Project, home string, kind messages.ListenKind, in ListenerInput) (ownRecord, string, error) {
	switch kind {
	case messages.ListenThread:
		info, err := r.Info(ctx, in.Names)
		if err != nil {
			return ownRecord{}, "", fmt.Errorf("names: %w", err)
		}
		if info.Kind != fossilio.KindPost {
			return ownRecord{}, "", fmt.Errorf("names: %s is a %s, not a forum post", info.Hash, info.Kind)
		}
		return ownRecord{Kind: messages.ListenThread, ID: info.Root}, info.Root, nil
	case messages.ListenTicket:
		changes, err := r.TicketChanges(ctx, in.Names)
		if err != nil || len(changes) == 0 {
			return ownRecord{}, "", fmt.Errorf("names: %q is not a ticket of %s", in.Names, p.Name)
		}
		return ownRecord{Kind: messages.ListenTicket, ID: changes[0].Ticket}, changes[0].Ticket, nil
	}
	if in.Record == "" {
		return ownRecord{Kind: messages.ListenThread, ID: home}, in.Names, nil
	}
	where, err := resolveRecord(ctx, r, in.Record)
	return where, in.Names, err
}

// listenerFacts is what a listener's add or remove read, for listenerPlan.
type listenerFacts struct {
	Key   messages.WorkspaceKey
	Kind  messages.ListenKind
	Names string    // what is listened to, in full
	Where ownRecord // where the note goes
	Path  string    // the listener's file in the listening index
	On    bool      // add (true) or remove
}

// listenerEffects are the effects a listener's plan runs.
type listenerEffects interface {
	// post writes a note as the workspace's agent login.
	post(ctx context.Context, where ownRecord, login, text string) (string, error)
	// received is the receipt of a note on the node.
	received(ctx context.Context, hash string) (int64, error)
	// listen writes (on) or removes the listener's file.
	listen(ctx context.Context, kind messages.ListenKind, names string, after int64, on bool) error
	backoffice(ctx context.Context, a *node.Answer)
}

// listenerPlan is a listener's add or remove (seed 002): the listen or
// unlisten note, as the workspace's agent login (D10), where it goes; then
// the listener's file written or removed. An added listener hears what the
// node receives after its note (D27).
func listenerPlan(f listenerFacts, fx listenerEffects) (node.Plan, error) {
	l := messages.Listener{Login: f.Key.Login, Project: f.Key.Project, Kind: f.Kind, Names: f.Names}
	var note messages.Note = &messages.ListenNote{Listener: l}
	verb, file, done := "Listening to", "write", "wrote"
	if !f.On {
		note, verb, file, done = &messages.UnlistenNote{Listener: l}, "No longer listening to", "remove", "removed"
	}
	block, err := note.Encode()
	if err != nil {
		return node.Plan{}, err
	}
	text := fmt.Sprintf("%s %s `%s` in workspace `%s`.\n\n%s", verb, f.Kind, f.Names, f.Key, block)
	var plan node.Plan
	var hash string
	plan.Add(fmt.Sprintf("post as %q on %s %s:\n%s", f.Key.Login, f.Where.Kind, f.Where.ID, text), func(ctx context.Context, a *node.Answer) error {
		var err error
		if hash, err = fx.post(ctx, f.Where, f.Key.Login, text); err != nil {
			return fmt.Errorf("post the %s note: %w", note.NoteKind(), err)
		}
		a.Logf("posted the %s note as %q at %s on %s %s", note.NoteKind(), f.Key.Login, hash, f.Where.Kind, f.Where.ID)
		a.SetResult(hash)
		return nil
	})
	plan.Deferred(fx.backoffice)
	plan.Add(file+" "+f.Path, func(ctx context.Context, a *node.Answer) error {
		var after int64
		if f.On {
			var err error
			if after, err = fx.received(ctx, hash); err != nil {
				return fmt.Errorf("read the listen note %s back: %w", hash, err)
			}
		}
		if err := fx.listen(ctx, f.Kind, f.Names, after, f.On); err != nil {
			// The note is on the record: say so, and what follows (D74).
			if f.On {
				return fmt.Errorf("%w; the listen note %s is on the record, so the session hears %s %s from its next launch (which rebuilds the index from the notes), not before", err, hash, f.Kind, f.Names)
			}
			return fmt.Errorf("%w; the unlisten note %s is on the record, so the session stops hearing %s %s at its next launch (which rebuilds the index from the notes), not before", err, hash, f.Kind, f.Names)
		}
		a.Logf("%s %s", done, f.Path)
		return nil
	})
	return plan, nil
}

// listenerRun is listenerEffects on this node.
type listenerRun struct {
	n  Actions
	r  *fossilio.Repo
	p  node.Project
	ws host.Workspace
}

func (l *listenerRun) post(ctx context.Context, where ownRecord, login, text string) (string, error) {
	code, err := l.r.ProjectCode(ctx)
	if err != nil {
		return "", err
	}
	return l.n.node.Writer(l.p, code).WriteNote(ctx, where.note(login, text))
}

func (l *listenerRun) received(ctx context.Context, hash string) (int64, error) {
	info, err := l.r.Info(ctx, hash)
	return info.Rcvid, err
}

func (l *listenerRun) listen(ctx context.Context, kind messages.ListenKind, names string, after int64, on bool) error {
	return l.n.setListening(ctx, l.ws, kind, names, after, on)
}

func (l *listenerRun) backoffice(ctx context.Context, a *node.Answer) {
	l.n.node.Backoffice(ctx, a, l.p)
}
