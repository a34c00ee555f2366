package runengine

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/noderepos"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// Triggers (D101; docs/runs.md "Runs started by events"): the engine reads
// each trigger of this node from the record, hands the trigger core
// (actors.TriggerCore) what it says and what the server received after the
// trigger's mark, and writes each firing it decides as the node user, a
// fired in the trigger's thread. The daemon's own hook work then hands each
// fired back as a run (record.RunLog reads a fired that counts so), which
// arrives, starts and ends as any run.
//
// A pass runs after every post, ticket change or check-in the daemon
// classifies (KickTriggers, from the daemon's records), once at its start
// (Boot) and when a project's record is fresh (Fresh), and when a
// schedule's next minute is reached (a timer on the engine's clock). The
// kicks are coalesced: one worker runs the passes, one at a time.

// KickTriggers asks for a pass over the triggers of the repository at
// path ("" for every repository), soon, without waiting for it.
func (e *Engine) KickTriggers(path string) {
	e.trigOnce.Do(func() {
		e.trigKick = make(chan struct{}, 1)
		e.trigPending = map[string]bool{}
		e.trigDone.Add(1)
		go e.triggerWorker()
	})
	e.trigPendMu.Lock()
	e.trigPending[path] = true
	e.trigPendMu.Unlock()
	select {
	case e.trigKick <- struct{}{}:
	default:
	}
}

// triggerWorker runs the passes kicked, until the engine closes.
func (e *Engine) triggerWorker() {
	defer e.trigDone.Done()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-e.trigKick:
		}
		e.trigPendMu.Lock()
		pending := e.trigPending
		e.trigPending = map[string]bool{}
		e.trigPendMu.Unlock()
		if pending[""] {
			pending = map[string]bool{"": true}
		}
		for path := range pending {
			e.triggers(e.ctx, path)
		}
	}
}

// triggers reads and fires the triggers of the repository at path (every
// repository when ""); tick says the clock reached a schedule's minute.
func (e *Engine) triggers(ctx context.Context, path string) {
	e.trigMu.Lock()
	defer e.trigMu.Unlock()
	for _, name := range e.cfg.ProjectNames() {
		if e.fresh != nil && !e.fresh(name) {
			continue
		}
		x, err := e.repos.Index(name)
		if err != nil || path != "" && x.Path != path {
			continue
		}
		failed, err := e.triggersOf(ctx, x)
		if err != nil {
			e.log.Warn("a project's triggers cannot be read; they are read again soon", slog.String("project", name), actors.ErrAttr(err))
		}
		if (failed || err != nil) && ctx.Err() == nil {
			// Read again from the record: by the next arrival, or by
			// this timer when none comes (a schedule's timer is its
			// trigger's, which the core forgot).
			time.AfterFunc(TriggerRetry, func() { e.KickTriggers(x.Path) })
		}
	}
	e.armTriggerTimer()
}

// TriggerRetry is how long after a pass that could not read a project's
// triggers, or write a firing, the pass is made again.
const TriggerRetry = 5 * time.Second

// triggersOf is a pass over x's triggers; failed says a firing could not
// be written.
func (e *Engine) triggersOf(ctx context.Context, x *noderepos.Index) (failed bool, _ error) {
	msgs, err := x.Runs(ctx)
	if err != nil {
		return false, err
	}
	privileged := x.PrivilegedOnce(ctx)
	wrote := false
	defer func() {
		if wrote {
			e.besideLaunch(x)
		}
	}()
	for i, m := range msgs {
		run := m.Run()
		if run == nil || run.Process.On == nil || m.Firing != nil || run.Node != e.cfg.User || !privileged(m.Sender) {
			continue
		}
		st := record.StandingOf(msgs, m, privileged)
		seen := protocol.TriggerSeen{Trigger: m.Hash, Project: x.Project, Branches: run.Process.On.Checkin, Schedule: run.Process.On.Schedule,
			At: m.At(), Received: m.Received, Ended: st.StopCounts || st.EndedCounts}
		if !seen.Ended {
			// A trigger section 11 refuses never fires: its ended refused
			// is on its way.
			note, err := e.record.refusalOfIn(ctx, x, msgs[:i+1], m, privileged)
			if err != nil {
				return failed, err
			}
			if note != "" {
				continue
			}
		}
		last, err := e.lastFiring(ctx, x, msgs, m.Hash)
		if err != nil {
			return failed, err
		}
		seen.LastCheckin, seen.LastAt = last.LastCheckin, last.LastAt
		fires := e.trig.Step(e.clock.Now(), seen)
		if mark, ok := e.trig.Mark(m.Hash); ok {
			arrivals, err := record.ArrivalsAfter(ctx, x.Repo, x.Path, mark)
			if err != nil {
				return failed, err
			}
			cs := protocol.TriggerCheckins{Trigger: m.Hash}
			for _, a := range arrivals {
				if cs.ReadTo.Before(a.At) {
					cs.ReadTo = a.At
				}
				if a.Kind == protocol.RunCheckin {
					cs.Checkins = append(cs.Checkins, protocol.TriggerCheckin{Hash: a.Hash, Branch: a.Branch, At: a.At})
				}
			}
			fires = append(fires, e.trig.Step(e.clock.Now(), cs)...)
		}
		for _, f := range fires {
			if err := e.fire(ctx, x, msgs, f); err != nil {
				// The record is read again for it at the next pass.
				e.trig.Forget(m.Hash)
				e.log.Warn("a trigger's firing cannot be written; it is tried again soon", slog.String(actors.KeyRun, m.Hash), slog.String("firing", f.String()), actors.ErrAttr(err))
				failed = true
				break
			}
			wrote = true
		}
	}
	return failed, nil
}

// lastFiring is what the firings of trigger on the record name last: the
// place of the latest check-in, the latest minute.
func (e *Engine) lastFiring(ctx context.Context, x *noderepos.Index, msgs []record.RunMsg, trigger string) (protocol.TriggerSeen, error) {
	var out protocol.TriggerSeen
	var checkin string
	for _, o := range msgs {
		if o.Firing == nil || o.Firing.Trigger != trigger {
			continue
		}
		if f := o.Firing.Fired; f.Checkin != "" {
			checkin = f.Checkin
		} else if f.At.After(out.LastAt) {
			out.LastAt = f.At
		}
	}
	if checkin == "" {
		return out, nil
	}
	infos, err := x.Repo.Classify(ctx, checkin)
	if err != nil {
		return out, fmt.Errorf("read the check-in %s a firing names: %w", checkin, err)
	}
	for _, in := range infos {
		if in.Hash == checkin {
			out.LastCheckin = protocol.RunPosition{Receipt: in.Rcvid, Row: in.Rid}
		}
	}
	return out, nil
}

// fire writes one fired, unless the record holds one for that trigger and
// cause already (D6's rule for notes: look first).
func (e *Engine) fire(ctx context.Context, x *noderepos.Index, msgs []record.RunMsg, f protocol.TriggerFire) error {
	fired := &runmsg.RunFired{Node: e.cfg.User, Run: f.Trigger, Checkin: f.Checkin, At: f.At}
	for _, o := range msgs {
		if o.Firing != nil && o.Firing.Trigger == f.Trigger && o.Firing.Fired.Cause() == fired.Cause() {
			e.log.Info("the trigger's firing is on the record already", slog.String(actors.KeyRun, f.Trigger), slog.String("cause", fired.Cause()))
			return nil
		}
	}
	block, err := fired.Encode()
	if err != nil {
		return err
	}
	line := fmt.Sprintf("Trigger %s fired: check-in %s.", fossilio.Short(f.Trigger), f.Checkin)
	if f.Checkin == "" {
		line = fmt.Sprintf("Trigger %s fired: the scheduled minute %s.", fossilio.Short(f.Trigger), f.At.UTC().Format(runmsg.FiredTimeLayout))
	}
	if err := e.writeNote(ctx, x, f.Trigger, line+"\n\n"+string(block), string(runmsg.MsgFired), false); err != nil {
		return err
	}
	e.log.Info("a trigger fired", slog.String(actors.KeyRun, f.Trigger), slog.String("cause", fired.Cause()))
	return nil
}

// armTriggerTimer sets the timer for the earliest schedule's next minute.
func (e *Engine) armTriggerTimer() {
	next := e.trig.NextTick()
	if e.trigTimer != nil {
		e.trigTimer()
		e.trigTimer = nil
	}
	if next.IsZero() || e.ctx.Err() != nil {
		return
	}
	// The pass decides the minutes reached (the core's Step of what the
	// record says fires a schedule that is due) and writes them.
	e.trigTimer = e.clock.AfterFunc(max(next.Sub(e.clock.Now()), 0), func() { e.KickTriggers("") })
}
