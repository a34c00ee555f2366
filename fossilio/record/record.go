// Package record is the one reading of the record OCX keeps in a Fossil
// repository: which post or ticket change holds which note, who sent it (the
// node's receipt, never a name inside), where it stands in the server's
// order, and which notes count (D7). The daemon, the node's actions, the
// session outside its sandbox and the listening index all read notes
// through it, so a rule such as "a definition counts only when a user
// holding admin or setup sent it" is written once.
package record

import (
	"context"
	"fmt"
	"strings"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// Entry is one note on the record: the post or ticket change that holds it,
// who sent it and where it is.
type Entry struct {
	Hash   string
	Sender string // the node's receipt ("" in a clone: nothing counts there)
	// Rcvid and Rid place it in the server's order.
	Rcvid, Rid int64
	// Record is the thread's root post, or the ticket's id.
	Record string
	Ticket bool
	// InReplyTo is the post a reply answers ("" for a thread's first post
	// and for a ticket change).
	InReplyTo string
	Note      messages.Note
	// Err says why a post whose blocks claim to be notes (Claims) holds
	// none that reads: two notes, a field at fault, a block never closed.
	// Note is nil then.
	Err    error
	Claims []messages.Claim
}

// First says whether the entry opens its thread: where a workspace
// definition must be.
func (e Entry) First() bool { return !e.Ticket && e.InReplyTo == "" }

// After says whether e comes after o in the server's order: by receipt,
// then by row.
func (e Entry) After(o Entry) bool {
	return e.Rcvid > o.Rcvid || e.Rcvid == o.Rcvid && e.Rid > o.Rid
}

// Read reads the note an artifact holds: a post, read as first written (an
// edit changes no note, and one awaiting moderation is not on the record
// yet), or a ticket change's appended comment. ok is false for anything
// else and for text that holds no note; a post whose note does not read
// comes back with ok false and Err set.
func Read(ctx context.Context, r *fossilio.Repo, info fossilio.Info) (Entry, bool, error) {
	e := Entry{Hash: info.Hash, Sender: info.Sender, Rcvid: info.Rcvid, Rid: info.Rid, InReplyTo: info.InReplyTo}
	var text string
	switch info.Kind {
	case fossilio.KindPost:
		if info.Edit || info.Pending {
			return e, false, nil
		}
		p, err := r.Post(ctx, info.Hash)
		if err != nil {
			return e, false, fmt.Errorf("read post %s of %s: %w", info.Hash, r.Path(), err)
		}
		e.Record, text = info.Root, p.Text
	case fossilio.KindTicketChange:
		c, err := r.TicketChange(ctx, info.Hash)
		if err != nil {
			return e, false, fmt.Errorf("read ticket change %s of %s: %w", info.Hash, r.Path(), err)
		}
		e.Record, e.Ticket, e.InReplyTo, text = info.Ticket, true, "", c.Comment
	default:
		return e, false, nil
	}
	e, ok := fromText(e, text)
	return e, ok, nil
}

// entryOf is the entry of an artifact whose text was read (NoteTexts).
func entryOf(info fossilio.Info, text string) (Entry, bool) {
	e := Entry{Hash: info.Hash, Sender: info.Sender, Rcvid: info.Rcvid, Rid: info.Rid, InReplyTo: info.InReplyTo}
	switch info.Kind {
	case fossilio.KindPost:
		if info.Edit || info.Pending {
			return e, false
		}
		e.Record = info.Root
	case fossilio.KindTicketChange:
		e.Record, e.Ticket, e.InReplyTo = info.Ticket, true, ""
	default:
		return e, false
	}
	return fromText(e, text)
}

// fromText reads the note an entry's text holds.
func fromText(e Entry, text string) (Entry, bool) {
	if !strings.Contains(text, "```") && strings.TrimSpace(text) != messages.StopText {
		return e, false
	}
	note, err := messages.ReadPost([]byte(text))
	if err != nil {
		if !messages.Ignorable(err) {
			e.Err, e.Claims = err, messages.Claims([]byte(text))
		}
		return e, false
	}
	e.Note = note
	return e, true
}

// At reads the note of one post or ticket change, by full hash or prefix.
// A post without one that reads is an error saying why.
func At(ctx context.Context, r *fossilio.Repo, hash string) (Entry, error) {
	info, err := r.Info(ctx, hash)
	if err != nil {
		return Entry{}, err
	}
	e, ok, err := Read(ctx, r, info)
	if err != nil {
		return Entry{}, err
	}
	if !ok {
		if e.Err != nil {
			return Entry{}, fmt.Errorf("%s does not read as one note: %w", info.Hash, e.Err)
		}
		return Entry{}, fmt.Errorf("%s holds no note that counts (a %s)", info.Hash, info.Kind)
	}
	return e, nil
}

// Privileged says whether user holds admin or setup on the repository now
// (D7); one whose capabilities cannot be read does not.
func Privileged(ctx context.Context, r *fossilio.Repo, user string) bool {
	ok, err := r.Privileged(ctx, user)
	return err == nil && ok
}

// ListenCounts says whether a listen or unlisten note counts (D7): its
// workspace's agent login sent it.
func ListenCounts(e Entry) (messages.Listener, bool, bool) {
	switch n := e.Note.(type) {
	case *messages.ListenNote:
		return n.Listener, true, e.Sender == n.Login
	case *messages.UnlistenNote:
		return n.Listener, false, e.Sender == n.Login
	}
	return messages.Listener{}, false, false
}
