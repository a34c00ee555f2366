package session

import (
	"context"
	"errors"
	"github.com/ocx-go/ocx/actors/turn"
	"time"

	"github.com/ocx-go/ocx/messages"
)

// Every write is made as the agent login, so the node's repository records
// the agent as the sender: over Fossil's sync with the password its clone
// remembers (contracts 4), or, when it remembers none, through the node's
// tools on the session's MCP socket (D39).

// try runs fn until it succeeds or the policy's attempts are spent, logging
// each failure; what names the operation. A stopping signal cuts the waiting
// short when interruptible is set (a pull, a read), never for a write that
// ends the session (a stopped note, a CI result).
func (s *session) try(ctx context.Context, what string, interruptible bool, fn func() error) error {
	delay := s.retry.delay
	var err error
	for attempt := 1; ; attempt++ {
		if err = fn(); err == nil {
			return nil
		}
		var pe *permanentError
		if errors.As(err, &pe) {
			s.log.Error("failed; trying again would not help", keyEvent, "failed", "op", what, keyAttempt, attempt, keyErr, pe.err)
			return pe.err
		}
		if attempt >= s.retry.attempts {
			s.log.Error("gave up", keyEvent, "failed", "op", what, keyAttempt, attempt, keyErr, err)
			return err
		}
		s.log.Warn("failed; trying again", keyEvent, "retry", "op", what, keyAttempt, attempt, keyErr, err, "in", delay.String())
		if interruptible && s.signaled() {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		delay *= 2
	}
}

// permanentError is a failure that trying again cannot mend: the server
// does not hold the post, or what it sent does not parse.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// replyTo writes text as a reply to p: a forum reply in its thread, or a
// comment on its ticket that says which change it answers.
func (s *session) replyTo(ctx context.Context, p turn.Post, text string) (string, error) {
	switch {
	case p.Kind == messages.ListenTicket:
		text = turn.TicketReply(p.Hash, text)
	case p.Checkin:
		// A forum post replies to a post: the answer to a check-in replies
		// to the session's own thread, and links the check-in.
		text = turn.CheckinReply(p.Hash, text)
		p = turn.Post{Hash: s.rec.First, Kind: s.rec.Kind, Record: s.rec.ID}
	}
	return s.writeOn(ctx, "reply to "+p.Hash, p, text)
}

// writeOn writes text where p is: a reply to p in its thread, or a comment on
// its ticket, trying again a bounded number of times.
func (s *session) writeOn(ctx context.Context, what string, p turn.Post, text string) (string, error) {
	var h string
	err := s.try(ctx, what, false, func() error {
		var err error
		switch p.Kind {
		case messages.ListenTicket:
			h, err = s.remote.comment(ctx, p.Record, text)
		default:
			h, err = s.remote.reply(ctx, p.Record, p.Hash, text)
		}
		return err
	})
	return h, err
}

// writeNote writes a note where p is; answering says the note answers p (a
// stop request), which a ticket comment then says in its first line.
func (s *session) writeNote(ctx context.Context, n messages.Note, p turn.Post, answering bool) (string, error) {
	block, err := n.Encode()
	if err != nil {
		return "", err
	}
	text := string(block)
	if answering && p.Kind == messages.ListenTicket {
		text = turn.TicketReply(p.Hash, text)
	}
	return s.writeOn(ctx, string(n.NoteKind())+" note", p, text)
}

// writeStopped writes the stopped note and says whether it is on the record;
// a failure is logged, and the session still ends as it was asked to.
func (s *session) writeStopped(ctx context.Context, n *messages.StoppedNote, at turn.Post, answering bool) bool {
	h, err := s.writeNote(ctx, n, at, answering)
	if err != nil {
		s.log.Error("stopped note not written", keyEvent, "stopped", keyErr, err)
		return false
	}
	s.log.Info("stopped note written", keyEvent, "stopped", keyHash, h, "cause", string(n.Cause), keySignal, n.Signal, "request", n.Request)
	return true
}
