package runs

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// The command step (D99, beyond seed 004's section 5): a command of the
// run's choosing, run after the steps that set values, in the run's own
// sandbox and limits, with the run's environment, in its in. It is started
// as the holder starts the run's process (host.RunStarter: unixhost's
// StartRun, the one builder of the bwrap command, the prlimits and the
// run's cgroup), so it is held to the same confinement; its output, STDOUT
// and STDERR on one pipe, is kept as a kept log is (its end, of keep's
// size); a stop (the context's end) or limits.wall ends its process group.

// StepLauncher starts a command step's process and signals it:
// unixhost.Launcher, which the holder starts the run's process with.
type StepLauncher interface {
	host.RunStarter
	host.Signaler
}

// StepLog is what a command step printed, and how it ended: what the node
// posts where the run is, as it posts kept logs.
type StepLog struct {
	Step  int      // its index in the workspace
	Run   []string // its command, values in place
	End   []byte   // the end of its output (STDOUT and STDERR on one pipe)
	Total int64    // how many bytes it printed in all
	Exit  string   // how it ended, in words: "exit 0", "exit 3", "signal SIGKILL (137)"
	OK    bool     // it exited 0
}

// stepGrace is how long a command step's process has after TERM, at a stop
// or past limits.wall, before KILL.
const stepGrace = 5 * time.Second

// stepDrain is how long the output is read after the command's exit: what
// it left running may hold the pipe.
const stepDrain = time.Second

// stepLauncher is the launcher of p's command steps, and its closing.
func (p *Layers) stepLauncher() (StepLauncher, func(), error) {
	if p.Launcher != nil {
		return p.Launcher, func() {}, nil
	}
	l, err := unixhost.NewLauncher(unixhost.LauncherOptions{})
	if err != nil {
		return nil, nil, err
	}
	return l, func() { l.Close() }, nil
}

// command runs the command step i, its values in place: the run's layers
// with every value now set (the steps that set one are all before it), the
// process's spec with the step's run as its command and in as its
// directory. Its output is kept in w.logs whatever its end. A refusal of
// the layers (rows 2, 8, 9) is returned as such; any other failure is
// the step's (row 10).
func (w *workspace) command(ctx context.Context, i int) error {
	p := w.p
	// Expanded again with the values as the steps before it set them: the
	// plan put a stand-in for the checkout's check-in.
	s, err := runmsg.ExpandStep(w.msg.Workspace[i], stepField(i), w.vals)
	if err != nil {
		return fieldRefusal(err)
	}
	l, err := p.layers(w.msg, w.vals, nil)
	if err != nil {
		return err
	}
	spec := l.spec
	spec.Command, spec.Dir = slices.Clone(s.Run), s.In
	spec.HangUpWithStarter = true // a daemon gone ends its preparation: the step is made again
	if (spec.Limits.Memory > 0 || spec.Limits.Processes > 0) && p.RunCgroup != nil {
		spec.Cgroup = p.RunCgroup(w.hash)
	}
	keep, err := KeepOf(l.run.Process)
	if err != nil {
		return refused(runmsg.RefusedMalformed, err.Error(), err)
	}
	var wall time.Duration
	if lim := w.msg.Limits; lim != nil && lim.Wall != "" {
		if wall, err = messages.ParseWall("limits.wall", lim.Wall); err != nil {
			return refused(runmsg.RefusedMalformed, err.Error(), err)
		}
	}
	launcher, closeLauncher, err := p.stepLauncher()
	if err != nil {
		return fmt.Errorf("its command cannot be started: %w", err)
	}
	defer closeLauncher()
	// Its output goes through the kept logs' filter (D98) before its end
	// is cut: keep.mask and keep.match, and the run's own secrets, so that
	// no cut leaves a part of one.
	filter, err := FilterOf(l.run.Process, w.secrets()).Filter()
	if err != nil {
		return refused(runmsg.RefusedMalformed, err.Error(), err)
	}
	tail := &Tail{Max: max(keep.Stderr, keep.Stdout)}
	out := filter.Writer(tail)
	log := StepLog{Step: i, Run: spec.Command}
	x, why, err := runStep(ctx, launcher, spec, out, wall)
	if err != nil {
		log.Exit = "not started: " + err.Error()
		fmt.Fprintf(out, "ocxd: the command could not be started: %v\n", err)
		out.Flush()
		log.End, log.Total = tail.Bytes()
		w.logs = append(w.logs, log)
		return fmt.Errorf("its command could not be started: %w", err)
	}
	out.Flush()
	log.End, log.Total = tail.Bytes()
	st := x.Status().AfterKill(why != "")
	log.Exit = exitWords(st)
	log.OK = why == "" && st.State == messages.EndExited && st.Code == 0
	w.logs = append(w.logs, log)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case why != "":
		return fmt.Errorf("its command %s, and was ended (%s)", why, log.Exit)
	case st.Limit != "":
		return fmt.Errorf("its command went past limits.%s: %s (%s)", st.Limit, st.LimitNote, log.Exit)
	case st.State == messages.EndSandboxFailed:
		return fmt.Errorf("the sandbox did not run its command (%s)", log.Exit)
	case !log.OK:
		return fmt.Errorf("its command ended with %s", log.Exit)
	}
	return nil
}

// exitWords says how a command step ended: "exit 3", "exit 137 (SIGKILL)".
func exitWords(st messages.ExitStatus) string {
	switch st.State {
	case messages.EndUnknown:
		return "an exit the node could not learn"
	case messages.EndSignaled:
		return fmt.Sprintf("exit %d (%s)", st.Exit(), st.Signal)
	}
	return fmt.Sprintf("exit %d", st.Code)
}

// runStep starts spec with its output, STDOUT and STDERR, on one pipe
// copied to out, and waits for its exit. The context's end (a stop) and
// wall (0: none) end its process group: TERM, then KILL after stepGrace;
// why then says which ended it.
func runStep(ctx context.Context, l StepLauncher, spec host.RunSpec, out io.Writer, wall time.Duration) (host.Exit, string, error) {
	r, wr, err := os.Pipe()
	if err != nil {
		return host.Exit{}, "", err
	}
	defer r.Close()
	spec.Stdout, spec.Stderr = wr, wr
	exits := make(chan host.Exit, 1)
	id, err := l.StartRun(spec, func(x host.Exit) { exits <- x })
	wr.Close()
	if err != nil {
		return host.Exit{}, "", err
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			out.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	var past <-chan time.Time
	if wall > 0 {
		t := time.NewTimer(wall)
		defer t.Stop()
		past = t.C
	}
	var kill <-chan time.Time
	done := ctx.Done()
	why := ""
	end := func(reason string) {
		if why == "" {
			why = reason
		}
		done, past = nil, nil
		signal(l, id, host.SIGTERM)
		t := time.NewTimer(stepGrace)
		kill = t.C
	}
	var x host.Exit
wait:
	for {
		select {
		case x = <-exits:
			break wait
		case <-done:
			end("was stopped")
		case <-past:
			end(fmt.Sprintf("went past limits.wall (%s)", wall))
		case <-kill:
			kill = nil
			signal(l, id, host.SIGKILL)
		}
	}
	select {
	case <-copied:
	case <-time.After(stepDrain):
		r.SetReadDeadline(time.Now())
		<-copied
	}
	return x, why, nil
}

// signal sends sig to the step's process group (inside its sandbox, as
// the launcher signals a sandboxed child); a process already gone, or one
// the signal does not reach, ends by itself or at KILL.
func signal(l StepLauncher, id protocol.ProcID, sig host.Signal) {
	_ = l.Signal(id, sig)
}
