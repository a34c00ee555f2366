package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/daemonclient"
	"github.com/ocx-go/ocx/host/reexeccheck"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// The re-exec (seed 002, "re-exec the daemon"): the node has paused the
// inputs and gathered every actor's settled state; Exec checks that the
// release's ocxd reads this hand-off's version, detaches the reaper from the
// children (which stay ours: the PID does not change), keeps the lock's and
// the pipe's descriptors open across the exec, writes the hand-off to
// AGENTS/ocxd.handoff, has the release's ocxd check it (--handoff-check,
// D73), records the re-exec as pending and execs. If anything fails before
// the exec, it puts everything back and returns the error: the old image
// keeps running.

// target is the ocxd a re-exec runs: the release root's current one, or,
// without a release root, the running executable.
func (d *instance) target() (string, error) {
	if d.cfg.Release == "" {
		self, err := os.Executable()
		if err != nil {
			return "", err
		}
		return filepath.EvalSymlinks(self)
	}
	dir, err := d.rel.Dir(messages.ReleaseCurrent)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "ocxd"), nil
}

// Exec replaces the daemon's image with the release's ocxd, handing it h. It
// returns only if the exec did not happen, with everything as it was, and
// then records why in AGENTS/ocxd.reexec (the new image records its start
// there itself).
func (d *instance) Exec(ctx context.Context, h protocol.Handoff) error {
	target, err := d.exec(ctx, h)
	if err == nil {
		err = errors.New("re-exec: the exec returned without an error") // it never does
	}
	o := messages.ReexecOutcome{Target: target, Error: err.Error(), From: d.running()}
	if ref := (*refusal)(nil); errors.As(err, &ref) {
		o.State = messages.ReexecRefused
	}
	d.recordReexec(o)
	return err
}

// running is the release the running image belongs to ("" when it cannot
// be told): the one a rollback puts back.
func (d *instance) running() string {
	if d.rel == nil {
		return ""
	}
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		return ""
	}
	return d.rel.Name(filepath.Dir(self))
}

// recordReexec writes the outcome of a re-exec to AGENTS/ocxd.reexec, with
// the time, the PID and the target's release filled in; a failure to write
// it is logged, and changes nothing else.
func (d *instance) recordReexec(r messages.ReexecOutcome) {
	r.At, r.PID, r.OK = time.Now().UTC(), os.Getpid(), r.Error == ""
	if r.Target != "" && d.rel != nil {
		r.Release = d.rel.Name(filepath.Dir(r.Target))
	}
	if err := daemonclient.WriteReexec(d.layout, d.root, r); err != nil && d.log != nil {
		d.log.Warn("re-exec: its outcome is not recorded", actors.ErrAttr(err))
	}
}

// exec is Exec's work: it returns the target it found ("" when none) and
// why the exec did not happen.
func (d *instance) exec(ctx context.Context, h protocol.Handoff) (string, error) {
	d.execMu.Lock()
	defer d.execMu.Unlock()
	if d.stopping || d.stopAsked.Load() {
		return "", errStopAsked
	}
	// No hook the watch runs is left a child of the new image, which would
	// not wait for it.
	d.hooks.Pause()
	defer d.hooks.Resume()
	st := &stepTimes{began: time.Now()} // for the log
	target, err := d.target()
	if err != nil {
		return "", fmt.Errorf("re-exec: find the release's ocxd: %w", err)
	}
	if err := d.probes.Check(ctx, target); err != nil {
		return target, fmt.Errorf("re-exec: %w", &refusal{err})
	}
	st.mark("probe")
	x := d.detachChildren(&h)
	if x.err != nil {
		return target, x.undo(d, fmt.Errorf("re-exec: detach the children: %w", x.err))
	}
	st.mark("detach")
	if err := d.writeHandoff(h, x); err != nil {
		return target, x.undo(d, err)
	}
	st.mark("written")
	if err := d.checkTarget(ctx, target, x.kept); errors.Is(err, reexeccheck.ErrPredatesCheck) {
		d.log.Warn("re-exec: the release's ocxd predates --handoff-check; exec'd unchecked", slog.String("program", target))
	} else if err != nil {
		d.root.Remove(d.layout.Handoff())
		return target, x.undo(d, fmt.Errorf("re-exec: %w", err))
	}
	st.mark("checked")
	d.testDelay("checked")
	// Replaced by the new image once it runs; found by the next ensure
	// with no daemon holding the lock, it rolls the release back (D73).
	d.recordReexec(messages.ReexecOutcome{Target: target, State: messages.ReexecPending, From: d.running(),
		Error: "the daemon exec'd the release's ocxd, whose image has not recorded its start"})
	d.log.Info("re-exec: exec'ing the release's ocxd", slog.String("program", target), slog.String("handoff", h.Summary()), slog.Group("took", st.stages...))
	argv := d.opts.argv(target)
	// HUP is ignored across the exec, until the new image's Run catches it
	// (D26): Go's runtime keeps an inherited SIG_IGN for HUP, where its
	// default would end the new image, which holds the lock from the first
	// instruction. A HUP meanwhile asks for the re-exec under way.
	signal.Ignore(unixhost.OSSignal(host.SIGHUP))
	d.execing.Store(true)
	d.settleSignals()
	if d.stopAsked.Load() {
		// A stop came while the release was checked: the old image stops,
		// as asked, rather than exec an image that never heard of it. From
		// here on a stop tells the new image instead (stopAskedDuringExec).
		err = errStopAsked
	} else {
		d.testDelay("exec")
		if d.stopProfile != nil {
			d.stopProfile() // the new image does not go on with it
		}
		err = fmt.Errorf("re-exec: %w", unixhost.Exec(target, argv, os.Environ()))
	}
	d.execing.Store(false)
	daemonclient.TakeStopAsked(d.layout, d.root) // the old image stops itself
	if d.sigs != nil {
		signal.Notify(d.sigs, unixhost.OSSignal(host.SIGHUP))
	}
	d.root.Remove(d.layout.Handoff())
	return target, x.undo(d, err)
}

// settleWait bounds settleSignals' wait for the loop, which takes a
// signal at once unless it has returned.
const settleWait = 5 * time.Second

// settleSignals returns once the loop has acted on every signal Go's
// runtime caught before the call, so that a stop among them has set
// stopAsked (and the old image stops rather than exec) or been written
// for the new image. Without it, a TERM the runtime caught just before
// the exec dies with the old image: it goes from the runtime's handler
// through os/signal's goroutine to the loop, which an exec cuts short.
// It sends the daemon settleSignal and waits for the loop to take it:
// the runtime hands the signals it caught on in the order of their
// numbers, every stopping one (INT, TERM, QUIT) before settleSignal, and
// the loop takes them from one channel in order. What is left is a stop
// caught after this returns and not yet acted on when the exec ends the
// old image: the few instructions to the exec, where it was the whole
// hop through the two goroutines.
func (d *instance) settleSignals() {
	if d.sigs == nil {
		return
	}
	select {
	case <-d.settled: // an earlier settle's, or one sent from outside
	default:
	}
	if err := unixhost.Kill(os.Getpid(), settleSignal); err != nil { // itself: its PID is its own
		d.log.Warn("re-exec: signals not settled before the exec", actors.ErrAttr(err))
		return
	}
	t := time.NewTimer(settleWait)
	defer t.Stop()
	select {
	case <-d.settled:
	case <-t.C:
		d.log.Warn("re-exec: the loop did not settle the signals before the exec", slog.Duration("waited", settleWait))
	}
}

// tellNewImageToStop is a stop's word to the image an exec under way
// starts (AGENTS/ocxd.stopasked): the old image's stop goes with it.
func (d *instance) tellNewImageToStop() {
	if !d.execing.Load() {
		return
	}
	if err := daemonclient.WriteStopAsked(d.layout, d.root); err != nil {
		d.log.Warn("a stop during the exec is not written for the new image", actors.ErrAttr(err))
	}
}

// errStopAsked: a stop was asked before the exec; the old image stops.
var errStopAsked = errors.New("re-exec: the daemon is stopping")

// execUndo is what an exec changed so far, for undo: the children detached
// (hs; those of the sessions, children), those reaped meanwhile, whose
// ends are held, and the descriptors kept open across the exec.
type execUndo struct {
	hs       []unixhost.ChildHandoff
	children map[protocol.ProcID]messages.WorkspaceKey
	reaped   map[protocol.ProcID]bool
	held     []protocol.ProcessExited
	kept     []int
	err      error // the detach's
}

func (x *execUndo) undo(d *instance, err error) error {
	return d.undo(err, x.hs, x.children, x.reaped, x.held, x.kept)
}

// detachChildren stops following the children for the exec, and puts the
// exits held meanwhile into the hand-off.
func (d *instance) detachChildren(h *protocol.Handoff) *execUndo {
	x := &execUndo{children: h.ChildWorkspaces(), reaped: map[protocol.ProcID]bool{}}
	d.testDelay("detach")
	x.hs, x.err = d.reaper.Detach()
	// Exits reaped after the inputs paused are the new image's to claim. They
	// are taken only now: detaching waits for the launcher's followers, so an
	// exit reaped up to the last moment is held by now and none comes after.
	x.held = d.reaper.TakeHeld()
	h.Held = append(h.Held, x.held...)
	// A child reaped meanwhile is not handed over to be followed again: its
	// end is in Held, and its status descriptor, if the hand-off names one,
	// was closed by the follower that reaped it.
	for _, e := range x.held {
		x.reaped[e.Proc] = true
		delete(x.children, e.Proc)
	}
	return x
}

// writeHandoff keeps the pipe and the lock open across the exec, and
// writes the hand-off naming them and the children to follow.
func (d *instance) writeHandoff(h protocol.Handoff, x *execUndo) error {
	file := handoffFile{Handoff: h}
	var status []int // the status descriptors handed over, kept open by the detach
	for _, c := range x.hs {
		if _, ok := x.children[c.ID]; ok {
			file.Reaper = append(file.Reaper, c)
			status = append(status, c.StatusFD)
		}
	}
	rfd, wfd, err := d.inputs.current().KeepOnExec()
	if err != nil {
		return fmt.Errorf("re-exec: keep the pipe: %w", err)
	}
	x.kept = []int{rfd, wfd}
	lfd, err := d.lock.KeepOnExec()
	if err != nil {
		return fmt.Errorf("re-exec: keep the lock: %w", err)
	}
	x.kept = append(x.kept, lfd)
	x.kept = append(x.kept, status...)
	file.FDs = map[string]int{fdLock: lfd, fdPipeRead: rfd, fdPipeWrite: wfd}
	data, err := encodeHandoff(file)
	if err != nil {
		return fmt.Errorf("re-exec: encode the hand-off: %w", err)
	}
	if err := d.root.WriteFile(d.layout.Handoff(), data, 0o600); err != nil {
		return fmt.Errorf("re-exec: write the hand-off: %w", err)
	}
	return nil
}

// undo puts back what Exec changed before failing: the descriptors close on
// exec again, the children are followed again (but those reaped meanwhile,
// whose ends are held), the held exits wait for the inputs to resume.
func (d *instance) undo(err error, hs []unixhost.ChildHandoff, children map[protocol.ProcID]messages.WorkspaceKey, reaped map[protocol.ProcID]bool, held []protocol.ProcessExited, kept []int) error {
	unixhost.CloseOnExec(kept...)
	errs := []error{err}
	if hs != nil {
		if rerr := d.reaper.Reattach(hs, children, reaped); rerr != nil {
			errs = append(errs, fmt.Errorf("follow the children again: %w", rerr))
		}
	}
	d.reaper.Hold(held)
	return errors.Join(errs...)
}

// takeHandoff reads the hand-off of the image before and takes over the lock
// it held throughout.
func (d *instance) takeHandoff() (handoffFile, error) {
	p := d.layout.Handoff()
	data, err := unixhost.Below(d.layout.Root()).ReadFile(p, unixhost.NodeFile)
	if err != nil {
		return handoffFile{}, fmt.Errorf("read the hand-off: %w", err)
	}
	os.Remove(p)
	h, err := parseHandoff(p, data)
	if err != nil {
		return handoffFile{}, err
	}
	if d.lock, err = unixhost.AdoptLock(h.FDs[fdLock], d.layout.Lock()); err != nil {
		return handoffFile{}, fmt.Errorf("take the lock over: %w", err)
	}
	return h, nil
}
