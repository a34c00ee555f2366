package actors

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// branchCore decides for one branch listener: a `completes` session of a
// workspace listening to a branch (decisions D5). A check-in makes it reserve
// the workspace (granted only while nothing names it), find the newest
// untested check-in, write a launch note for it as the node user and hand that
// to the workspace. When its run ends it does the same again, unless the run
// left no result on its check-in. A check-in while the workspace is busy only
// waits: no note is written for it.
//
// A reviewer (D42) is the same listener whose runs leave a verdict: the
// query gives its queue, the check-ins without its verdict, and the ones it
// may never judge, which it logs once and never launches for.
type branchCore struct {
	base
	cfg     Config
	st      protocol.BranchState
	collect *protocol.CollectState
	// skipped are the check-ins whose skip this actor has logged: a log
	// line, not state; the query finds them again and they launch nothing.
	skipped map[string]bool
}

// newBranchCore makes the core of branch listener st, new or restored.
func newBranchCore(cfg Config, st protocol.BranchState) *branchCore {
	c := &branchCore{cfg: cfg.withDefaults(), st: st, skipped: map[string]bool{}}
	if c.st.Phase == "" {
		c.st.Phase = protocol.BranchIdle
	}
	return c
}

// State is the listener's part of a hand-off.
func (c *branchCore) State() protocol.BranchState { return c.st }

func (c *branchCore) parent() protocol.ActorAddr { return protocol.WorkspaceAddr(c.st.Workspace) }

// Start settles a restored listener. A hand-off holds only idle and running
// listeners; any other phase waited on something the old image held, so it
// becomes idle with its check-in still waiting.
func (c *branchCore) Start(time.Time) []protocol.DaemonEffect {
	switch c.st.Phase {
	case protocol.BranchIdle, protocol.BranchRunning:
	default:
		c.log(slog.LevelWarn, "branch listener restored mid-launch; its check-in waits", slog.String(KeyBranch, c.st.Branch), slog.String("phase", c.st.Phase))
		c.idle()
		c.st.Waiting = true
	}
	return c.take()
}

func (c *branchCore) idle() {
	c.st.Phase = protocol.BranchIdle
	c.st.Checkin, c.st.Launch, c.st.Proc = "", "", protocol.ProcID{}
}

// Step takes one message.
func (c *branchCore) Step(now time.Time, msg protocol.DaemonMessage) []protocol.DaemonEffect {
	c.settle(msg)
	switch m := msg.(type) {
	case protocol.CheckinArrived:
		c.checkinArrived(m)
	case protocol.ReservationGranted:
		c.reservationGranted()
	case protocol.ReservationRefused:
		if c.st.Phase == protocol.BranchReserving {
			c.log(slog.LevelInfo, "the workspace is busy; the check-in waits: "+m.Why, slog.String(KeyBranch, c.st.Branch))
			c.idle()
		}
	case protocol.UntestedFound:
		c.untestedFound(m)
	case protocol.LaunchWritten:
		c.launchWritten(m)
	case protocol.LaunchOutcome:
		c.launchOutcome(m)
	case protocol.WorkspaceFreed:
		c.freed(m)
	case protocol.CollectState:
		c.collect = &m
	case protocol.ResumeWork:
	default:
		c.log(slog.LevelWarn, "message not for a branch listener ignored", slog.String(keyMessage, msg.String()))
	}
	c.maybeReply()
	return c.take()
}

func (c *branchCore) checkinArrived(m protocol.CheckinArrived) {
	c.st.Listener = m.Listener
	if m.Listener.Lifetime != messages.Completes {
		if m.Checkin != "" {
			c.log(slog.LevelWarn, "a branch listener of a session that is not `completes` launches nothing", slog.String(KeyBranch, c.st.Branch), slog.String("lifetime", string(m.Listener.Lifetime)))
		}
		return
	}
	c.st.Waiting = true
	if c.st.Phase == protocol.BranchIdle {
		c.reserve()
	}
}

func (c *branchCore) reservationGranted() {
	if c.st.Phase != protocol.BranchReserving {
		c.tell(c.parent(), protocol.ReleaseWorkspace{Branch: c.st.Branch})
		return
	}
	c.st.Phase = protocol.BranchQuerying
	c.emit(protocol.FindUntested{Listener: c.st.Listener, Branch: c.st.Branch})
}

func (c *branchCore) untestedFound(m protocol.UntestedFound) {
	if c.st.Phase != protocol.BranchQuerying {
		return
	}
	for _, k := range m.Skipped {
		if !c.skipped[k.Checkin] {
			c.skipped[k.Checkin] = true
			c.log(slog.LevelInfo, "a check-in this listener may not judge is skipped, with no result: "+k.Why, slog.String(KeyBranch, c.st.Branch), slog.String(KeyCheckin, k.Checkin))
		}
	}
	switch {
	case m.Err != nil:
		c.log(slog.LevelWarn, "cannot find the untested check-ins; the check-in waits", slog.String(KeyBranch, c.st.Branch), errAttr(m.Err))
		c.release()
	case m.Newest == "":
		c.st.Waiting = false
		c.release()
	default:
		c.st.Waiting = false
		c.st.Phase = protocol.BranchWriting
		c.st.Checkin = m.Newest
		c.emit(protocol.WriteLaunch{Listener: c.st.Listener, Branch: c.st.Branch, Checkin: m.Newest})
	}
}

func (c *branchCore) launchWritten(m protocol.LaunchWritten) {
	if c.st.Phase != protocol.BranchWriting {
		if m.Launch != nil {
			c.log(slog.LevelWarn, "a launch note written after the listener moved on", slog.String(KeyBranch, c.st.Branch), slog.String(KeyLaunch, m.Launch.Hash))
		}
		return
	}
	if m.Err != nil || m.Launch == nil {
		if m.Err != nil {
			c.log(slog.LevelError, "cannot write the CI launch note; the check-in waits", slog.String(KeyBranch, c.st.Branch), errAttr(m.Err))
		}
		c.st.Waiting = true
		c.release()
		return
	}
	if err := c.checkWritten(*m.Launch); err != nil {
		c.log(slog.LevelError, "the CI launch note written is not one this listener can launch; the check-in waits", slog.String(KeyBranch, c.st.Branch), errAttr(err))
		c.st.Waiting = true
		c.release()
		return
	}
	c.st.Phase = protocol.BranchLaunching
	c.st.Launch = m.Launch.Hash
	c.tell(c.parent(), protocol.LaunchCI{Launch: *m.Launch})
}

func (c *branchCore) launchOutcome(m protocol.LaunchOutcome) {
	if m.Refused != "" {
		if c.st.Phase == protocol.BranchLaunching && c.st.Launch == m.Launch.Hash {
			c.idle()
			c.st.Waiting = true
		}
		return
	}
	c.st.Phase = protocol.BranchRunning
	c.st.Proc, c.st.Checkin, c.st.Launch = m.Proc, m.Launch.Checkin, m.Launch.Hash
}

// checkWritten checks that a written launch note is this listener's CI launch
// for the check-in it asked for.
func (c *branchCore) checkWritten(l protocol.LaunchSpec) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if l.Workspace != c.st.Workspace || l.Branch != c.st.Branch || l.Checkin != c.st.Checkin {
		return fmt.Errorf("it launches %s on branch %q for %s, not %s on %q for %s", l.Workspace, l.Branch, l.Checkin, c.st.Workspace, c.st.Branch, c.st.Checkin)
	}
	return nil
}

func (c *branchCore) reserve() {
	c.st.Phase = protocol.BranchReserving
	c.tell(c.parent(), protocol.ReserveWorkspace{Branch: c.st.Branch})
}

func (c *branchCore) release() {
	c.idle()
	c.tell(c.parent(), protocol.ReleaseWorkspace{Branch: c.st.Branch})
}

// freed decides on the workspace being free again: after its own run, look
// again unless the run left no result (D5: a broken CI command cannot loop);
// after anything else, look again only if a check-in waits.
func (c *branchCore) freed(m protocol.WorkspaceFreed) {
	if c.st.Phase == protocol.BranchRunning {
		if m.Ended == nil || !m.Ended.Proc.Matches(c.st.Proc) {
			return
		}
		checkin := c.st.Checkin
		c.idle()
		if m.Ended.Launch.IsCI() && !m.Ended.LeftResult {
			c.log(slog.LevelWarn, "the run left no result on its check-in; not launched again", slog.String(KeyBranch, c.st.Branch), slog.String(KeyCheckin, checkin))
			return
		}
		c.reserve()
		return
	}
	if c.st.Phase == protocol.BranchIdle && c.st.Waiting && c.st.Listener.Lifetime == messages.Completes {
		c.reserve()
	}
}

// Quiescent reports whether the listener waits for nothing: idle, or running
// its session (whose end will come from its workspace).
func (c *branchCore) Quiescent() bool {
	return c.awaiting == 0 && (c.st.Phase == protocol.BranchIdle || c.st.Phase == protocol.BranchRunning)
}

func (c *branchCore) maybeReply() {
	if c.collect == nil || !c.Quiescent() {
		return
	}
	st := c.st
	c.tell(c.parent(), protocol.StateCollected{Seq: c.collect.Seq, Ask: c.collect.Ask, From: c.addr(), Branch: &st})
	c.collect = nil
}

func (c *branchCore) addr() protocol.ActorAddr {
	return protocol.BranchAddr(c.st.Workspace, c.st.Branch)
}
