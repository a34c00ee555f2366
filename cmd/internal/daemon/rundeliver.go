package daemon

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// The deliveries of seed 004's sessions (section 9): what each session run
// in the node's care is given of the posts, ticket changes and check-ins the
// server received. The record is the queue: whenever the hook hands the
// daemon an artifact of a repository, and once when the daemon starts, each
// session run of that repository in care is given, in the server's order,
// every arrival after the place its care file says it was last given (or
// after its started) that passes table 9's filters. What was given is kept
// in the care file before the line is written to the process (or the
// process for it launched), so a daemon started again gives nothing twice;
// the run's core drops what it took already (actors.RunGiven), so reading
// the same arrivals twice gives them once.

// arrivalOf is an artifact as table 9's filters and lines read it; ok is
// false for what no session is given: an edit of a post, a post awaiting
// moderation, anything but a post, a ticket change or a check-in. text is
// what NoteTexts read of it.
func arrivalOf(info fossilio.Info, text string) (messages.RunArrival, bool) {
	a := messages.RunArrival{Hash: info.Hash, At: messages.RunPosition{Receipt: info.Rcvid, Row: info.Rid}, From: info.Sender}
	switch {
	case info.Kind == fossilio.KindPost && !info.Edit && !info.Pending:
		a.Kind, a.Thread, a.Text, a.HoldsMessage = messages.RunPost, info.Root, text, messages.HoldsMessage(text)
	case info.Kind == fossilio.KindTicketChange:
		a.Kind, a.Ticket, a.Text, a.HoldsMessage = messages.RunChange, info.Ticket, text, messages.HoldsMessage(text)
	case info.Kind == fossilio.KindCheckin:
		// An OCX message is written in a post or a ticket change alone.
		a.Kind, a.Branch, a.Text = messages.RunCheckin, info.Branch, info.Comment
	default:
		return a, false
	}
	return a, true
}

// arrivalsAfter reads what the repository received after the place at, in
// the server's order.
func (x *repoIndex) arrivalsAfter(ctx context.Context, at messages.RunPosition) ([]messages.RunArrival, error) {
	hashes, _, err := x.repo.Received(ctx, max(at.Receipt-1, 0))
	if err != nil {
		return nil, fmt.Errorf("read what %s received: %w", x.path, err)
	}
	var out []messages.RunArrival
	for len(hashes) > 0 {
		batch := hashes[:min(512, len(hashes))]
		hashes = hashes[len(batch):]
		infos, err := x.repo.Classify(ctx, batch...)
		if err != nil {
			return nil, fmt.Errorf("classify what %s received: %w", x.path, err)
		}
		texts, err := x.repo.NoteTexts(ctx, infos)
		if err != nil {
			return nil, fmt.Errorf("read what %s received: %w", x.path, err)
		}
		for i, info := range infos {
			if a, ok := arrivalOf(info, texts[i]); ok && at.Before(a.At) {
				out = append(out, a)
			}
		}
	}
	return out, nil
}

// deliver gives the session runs in care of the repository at path (every
// repository when path is empty) what arrived for them since they were last
// given, each as a RunDelivered to its run's actor. The deliveries of all
// runs go out under one lock, so each run's actor has them in the server's
// order whoever asked.
func (e *runEngine) deliver(ctx context.Context, path string) {
	e.deliverMu.Lock()
	defer e.deliverMu.Unlock()
	cares, err := e.cares()
	if err != nil {
		e.log.Warn("the runs in care cannot be listed; no deliveries now", errAttr(err))
		return
	}
	for _, c := range cares {
		if path != "" && c.Repository != path {
			continue
		}
		if err := e.deliverRun(ctx, c); err != nil {
			e.log.Warn("a session's deliveries cannot be read; they are read again at the next arrival", slog.String(actors.KeyRun, c.Run), errAttr(err))
		}
	}
}

func (e *runEngine) deliverRun(ctx context.Context, c runCare) error {
	r, err := e.find(ctx, c.Run)
	if err != nil {
		return err
	}
	if r.run == nil || !r.run.Process.Session {
		return nil
	}
	msgs, err := r.x.runs(ctx)
	if err != nil {
		return err
	}
	st := standingOf(msgs, r.msg, privilegedOnce(ctx, r.x))
	if !st.StartedCounts || st.EndedCounts {
		return nil
	}
	sub := actors.RunSubscription{Session: true, StartedCounts: true, Started: st.StartedAt, User: r.run.Process.User,
		Checkins: r.run.Process.Checkins, Hears: r.run.Process.Hears}
	if r.msg.Ticket {
		sub.Ticket = r.msg.Record
	} else {
		sub.Thread = r.msg.Record
	}
	after := st.StartedAt
	if after.Before(c.Given) {
		after = c.Given
	}
	arrivals, err := r.x.arrivalsAfter(ctx, after)
	if err != nil {
		return err
	}
	for _, d := range actors.RunDeliveries(sub, after, arrivals) {
		e.send(messages.RunRouted{Run: c.Run, Event: messages.RunDelivered{Delivery: d}})
	}
	return nil
}

// keepGiven records in the run's care file that the session was given the
// artifact at at, before it is written to the process or a process
// launched for it: at most once, if the daemon goes down between the two.
func (e *runEngine) keepGiven(hash string, at messages.RunPosition) error {
	c, ok, err := e.readCare(hash)
	if err != nil || !ok {
		return err
	}
	if !c.Given.Before(at) {
		return nil
	}
	c.Given = at
	return e.writeCare(c)
}
