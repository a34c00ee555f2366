package record

import (
	"context"
	"fmt"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// agentRecord is an agent login's protocol v1 record (E3, D35): the first
// post of a thread, holding the record, sent by a user holding admin or
// setup.
type agentRecord struct {
	Record *runmsg.TaskRecord
	Hash   string // the thread's first post
	Sender string // who sent it, as the node's repository recorded it
}

// FindAgentRecord finds an agent login's record in the node's repository
// r, from the receipts and the posts' own texts alone (D47): of the
// threads' first posts, in the server's order, the first whose sender
// holds admin or setup now (D7), holding a record whose user is login and
// whose node is nodeUser, this node's. create makes one user per record,
// so there is one at most. Nothing of the agent's (its clone, its
// workspace's files) is read: removing a file lifts no restriction. ok is
// false when there is none.
func FindAgentRecord(ctx context.Context, r *fossilio.Repo, login, nodeUser string) (agentRecord, bool, error) {
	if !r.SendersKnown() {
		return agentRecord{}, false, fmt.Errorf("find the record of %q in %s: a clone does not know who sent what", login, r.Path())
	}
	// Only a post whose bytes name the login may be its record; the
	// others are never parsed. (A record writing the login with JSON
	// escapes is not found: create never writes one.)
	firsts, err := r.FirstPosts(ctx, login)
	if err != nil {
		return agentRecord{}, false, fmt.Errorf("find the record of %q: %w", login, err)
	}
	privileged := map[string]bool{}
	for _, p := range firsts {
		ok, seen := privileged[p.Sender]
		if !seen {
			ok = p.Sender != "" && Privileged(ctx, r, p.Sender)
			privileged[p.Sender] = ok
		}
		if !ok {
			continue
		}
		rec, err := runmsg.ReadTaskRecord([]byte(p.Text))
		if err != nil || rec.User != login || rec.Node != nodeUser {
			continue
		}
		return agentRecord{Record: rec, Hash: p.Hash, Sender: p.Sender}, true, nil
	}
	return agentRecord{}, false, nil
}

// FirstOf is a record's first post or change in the server's order: a
// thread's first post (id, the thread's root), or a ticket's first change
// by its receipt, then its row: what the session takes its objective from.
// Never the change whose D card is the earliest: anyone who may push
// writes any date there, and a backdated change would become the
// ticket's objective (D47). Only the node's repository knows the order; a
// clone's receipts are its own pulls'.
func FirstOf(ctx context.Context, r *fossilio.Repo, kind messages.ListenKind, id string) (string, error) {
	switch kind {
	case messages.ListenThread:
		return id, nil
	case messages.ListenTicket:
		changes, err := r.TicketChanges(ctx, id)
		if err != nil {
			return "", fmt.Errorf("the first change of ticket %s: %w", id, err)
		}
		if len(changes) == 0 {
			return "", fmt.Errorf("ticket %s has no change", id)
		}
		return changes[0].Hash, nil
	}
	return "", fmt.Errorf("a record is a thread or a ticket, not a %s", kind)
}
