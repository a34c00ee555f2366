package daemon

import (
	"context"
	"log/slog"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/fossilio/record"
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

func (e *runEngine) deliverRun(ctx context.Context, c messages.RunCare) error {
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
	st := record.StandingOf(msgs, r.msg, privilegedOnce(ctx, r.x))
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
	arrivals, err := record.ArrivalsAfter(ctx, r.x.repo, r.x.path, after)
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
