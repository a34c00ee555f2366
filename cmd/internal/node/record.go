package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// entry is one note found on the record: the post or ticket change that
// holds it, who sent it (the node's receipt), and where it is.
type entry struct {
	Hash       string
	Sender     string
	Rcvid, Rid int64
	Root       string // a post's thread root
	Ticket     string // a ticket change's ticket
	Note       messages.Note
}

// Record is the record a project's repository holds, read once: the notes of
// every post and ticket change, in the server's order, and who may write the
// notes that need admin or setup.
type Record struct {
	Entries []entry
	caps    map[string]bool
	repo    *fossilio.Repo
}

// classifyBatch bounds one read transaction of the scan.
const classifyBatch = 512

// ReadRecord reads every note of the repository. It costs one
// classification per artifact received and one read per post and ticket
// change, so it is for the tools and the status, not for the hook.
func ReadRecord(ctx context.Context, r *fossilio.Repo) (*Record, error) {
	hashes, _, err := r.Received(ctx, 0)
	if err != nil {
		return nil, fmt.Errorf("read the record of %s: %w", r.ProjectName(), err)
	}
	rec := &Record{caps: map[string]bool{}, repo: r}
	for len(hashes) > 0 {
		batch := hashes[:min(classifyBatch, len(hashes))]
		hashes = hashes[len(batch):]
		infos, err := r.Classify(ctx, batch...)
		if err != nil {
			return nil, fmt.Errorf("read the record of %s: %w", r.ProjectName(), err)
		}
		for _, info := range infos {
			e, ok, err := readEntry(ctx, r, info)
			if err != nil {
				return nil, fmt.Errorf("read the record of %s: %w", r.ProjectName(), err)
			}
			if ok {
				rec.Entries = append(rec.Entries, e)
			}
		}
	}
	return rec, nil
}

// readEntry reads the note an artifact holds, if it is a post (read from its
// first version; an edit changes no note) or a ticket change whose comment
// holds one. Posts awaiting moderation are passed over, as Fossil hides them.
func readEntry(ctx context.Context, r *fossilio.Repo, info fossilio.Info) (entry, bool, error) {
	e := entry{Hash: info.Hash, Sender: info.Sender, Rcvid: info.Rcvid, Rid: info.Rid}
	var text string
	switch info.Kind {
	case fossilio.KindPost:
		if info.Edit || info.Pending {
			return e, false, nil
		}
		p, err := r.Post(ctx, info.Hash)
		if err != nil {
			return e, false, err
		}
		e.Root, text = info.Root, p.Text
	case fossilio.KindTicketChange:
		c, err := r.TicketChange(ctx, info.Hash)
		if err != nil {
			return e, false, err
		}
		e.Ticket, text = info.Ticket, c.Comment
	default:
		return e, false, nil
	}
	note, err := messages.ReadPost([]byte(text))
	if err != nil {
		return e, false, nil
	}
	e.Note = note
	return e, true, nil
}

// Privileged says whether a sender holds admin or setup (D7), asking the
// repository once per sender.
func (rec *Record) Privileged(ctx context.Context, sender string) bool {
	if ok, seen := rec.caps[sender]; seen {
		return ok
	}
	ok, _, err := privileged(ctx, rec.repo, sender)
	ok = ok && err == nil
	rec.caps[sender] = ok
	return ok
}

// Workspace is a workspace as its record says it: its latest definition
// that counts, and whether a terminated note ends it.
type Workspace struct {
	Key        messages.WorkspaceKey
	Definition *messages.WorkspaceDefinition
	Hash       string // the post holding the definition
	Record     string // the workspace's record: the thread's root
	Terminated string // the terminated note's post, "" when none
}

// Workspaces returns each workspace defined on the record: for each key its
// latest definition sent by a user holding admin or setup, and the
// terminated note on that definition's record after it, if any.
func (rec *Record) Workspaces(ctx context.Context) map[messages.WorkspaceKey]*Workspace {
	out := map[messages.WorkspaceKey]*Workspace{}
	for _, e := range rec.Entries {
		switch note := e.Note.(type) {
		case *messages.WorkspaceDefinition:
			if e.Root == "" || !rec.Privileged(ctx, e.Sender) {
				continue
			}
			out[note.Key()] = &Workspace{Key: note.Key(), Definition: note, Hash: e.Hash, Record: e.Root}
		case *messages.TerminatedNote:
			w := out[note.Key()]
			if w == nil || e.Root != w.Record || !rec.Privileged(ctx, e.Sender) {
				continue
			}
			if w.Terminated == "" {
				w.Terminated = e.Hash
			}
		}
	}
	return out
}

// Listeners returns the listeners the record states: for each, the latest of
// its listen and unlisten notes sent by the workspace's own agent login
// (D7), kept when it is a listen note. Order: as first stated.
func (rec *Record) Listeners() []messages.Listener {
	latest := map[messages.Listener]bool{}
	var order []messages.Listener
	for _, e := range rec.Entries {
		var l messages.Listener
		var on bool
		switch note := e.Note.(type) {
		case *messages.ListenNote:
			l, on = note.Listener, true
		case *messages.UnlistenNote:
			l, on = note.Listener, false
		default:
			continue
		}
		if e.Sender != l.Login {
			continue
		}
		if _, seen := latest[l]; !seen {
			order = append(order, l)
		}
		latest[l] = on
	}
	var out []messages.Listener
	for _, l := range order {
		if latest[l] {
			out = append(out, l)
		}
	}
	return out
}

// replies returns the notes of kind T written by sender in reply to a post
// (a thread's reply whose in-reply-to is post) or, on a ticket, the
// changes after it. It reads the record afresh, for a poll.
func repliesTo[T messages.Note](ctx context.Context, r *fossilio.Repo, post fossilio.Info, sender string) ([]T, error) {
	var out []T
	keep := func(text, from string) {
		if from != sender {
			return
		}
		note, err := messages.ReadPost([]byte(text))
		if err != nil {
			return
		}
		if t, ok := note.(T); ok {
			out = append(out, t)
		}
	}
	switch post.Kind {
	case fossilio.KindPost:
		posts, err := r.Thread(ctx, post.Root)
		if err != nil {
			return nil, err
		}
		for _, p := range posts {
			if p.InReplyTo == post.Hash {
				first, err := r.Post(ctx, p.First)
				if err != nil {
					return nil, err
				}
				keep(first.Text, first.Sender)
			}
		}
	case fossilio.KindTicketChange:
		changes, err := r.TicketChanges(ctx, post.Ticket)
		if err != nil {
			return nil, err
		}
		for _, c := range changes {
			if c.Rcvid > post.Rcvid || (c.Rcvid == post.Rcvid && c.Rid > post.Rid) {
				keep(c.Comment, c.Sender)
			}
		}
	default:
		return nil, errors.New("not a post or a ticket change")
	}
	return out, nil
}
