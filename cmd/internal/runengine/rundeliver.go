package runengine

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/messages/protocol"
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
// the run's core drops what it took already (actors.runGiven), so reading
// the same arrivals twice gives them once.

// Deliveries reads what the session runs in care of the repository at path
// (every repository when path is empty), or the one run when run is not
// empty, are to be given of what arrived
// since they were last given, each as a RunDelivered for its run's actor
// (actors.RunHost; the node routes them). A run whose deliveries cannot be
// read is logged and read again at the next arrival.
func (e *Engine) Deliveries(ctx context.Context, path, run string) ([]protocol.RunRouted, error) {
	e.deliverMu.Lock()
	defer e.deliverMu.Unlock()
	cares, err := e.cares()
	if err != nil {
		return nil, fmt.Errorf("the runs in care cannot be listed: %w", err)
	}
	var routed []protocol.RunRouted
	for _, c := range cares {
		if path != "" && c.Repository != path || run != "" && c.Run != run {
			continue
		}
		ds, err := e.deliveriesOf(ctx, c)
		if err != nil {
			e.log.Warn("a session's deliveries cannot be read; they are read again at the next arrival", slog.String(actors.KeyRun, c.Run), actors.ErrAttr(err))
			continue
		}
		for _, d := range ds {
			routed = append(routed, protocol.RunRouted{Run: c.Run, Event: protocol.RunDelivered{Delivery: d}})
		}
	}
	return routed, nil
}

func (e *Engine) deliveriesOf(ctx context.Context, c protocol.RunCare) ([]protocol.RunDelivery, error) {
	r, err := e.find(ctx, c.Run)
	if err != nil {
		return nil, err
	}
	if r.run == nil || !r.run.Process.Session {
		return nil, nil
	}
	msgs, err := r.x.Runs(ctx)
	if err != nil {
		return nil, err
	}
	st := record.StandingOf(msgs, r.msg, r.x.PrivilegedOnce(ctx))
	if !st.StartedCounts || st.EndedCounts {
		return nil, nil
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
	arrivals, err := record.ArrivalsAfter(ctx, r.x.Repo, r.x.Path, after)
	if err != nil {
		return nil, err
	}
	return actors.RunDeliveries(sub, after, arrivals), nil
}

// keepGiven records in the run's care file that the session was given the
// artifact at at, before it is written to the process or a process
// launched for it: at most once, if the daemon goes down between the two.
func (e *Engine) keepGiven(hash string, at protocol.RunPosition) error {
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
