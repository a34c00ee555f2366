package runengine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/host/runhold"
	runeng "github.com/ocx-go/ocx/host/runs"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// Every run's process runs in its holder, its watcher (seed 002, "watch a
// run"; docs/runs.md section 8.1): `$$release$$/ocx run hold`, started by
// runhold.Start in a session of its own, on its socket, bound already. The
// holder starts the command from the spec file the daemon writes (its
// environment, directory, sandbox, limits and first lines) as the launcher
// would, on a terminal or on pipes, and holds its streams, so that neither
// the daemon's death nor its re-exec touches the run. The daemon never
// waits for it: its end is watched by pidfd and read from its status file,
// and its socket takes the deliveries. Its files are under AGENTS/ocxd.runs
// (runhold.RunFilesBase).

// heldFiles are the holder's paths for a run.
type heldFiles struct {
	socket, status, stdout, stderr, log, spec string
}

func (e *Engine) heldFiles(hash string) heldFiles {
	b := runhold.RunFilesBase(e.careDir(), hash)
	return heldFiles{socket: b + ".sock", status: b + ".status", stdout: b + ".stdout.log",
		stderr: b + ".stderr.log", log: b + ".holder.log", spec: b + ".spec"}
}

// launchHeld starts the run's process in a holder. fail reports a process
// that could not be started (exit 127).
func (e *Engine) launchHeld(ctx context.Context, eff protocol.RunLaunch, r *engineRun, prep *runeng.Prepared, p *runProc, fail func(error) error) error {
	rel, err := e.release(messages.ReleaseCurrent)
	if err != nil {
		return fail(fmt.Errorf("the current release: %w", err))
	}
	hf := e.heldFiles(eff.Run)
	o, err := e.holderFiles(eff, r.run, prep, hf)
	if err != nil {
		return fail(err)
	}
	// The care file names the holder's socket before the holder starts:
	// a daemon that goes down before it learns the holder's PID finds the
	// holder there (Engine.found).
	if c, ok, _ := e.readCare(eff.Run); ok {
		c.Proc, c.Process, c.LaunchedAt, c.Socket, c.Workspace = eff.Proc, nil, e.now().UTC(), hf.socket, prep.Workspace
		// Given before it is given (section 4): at most once.
		if eff.Delivery != nil && c.Given.Before(eff.Delivery.At) {
			c.Given = eff.Delivery.At
		}
		if err := e.writeCare(c); err != nil {
			return fail(fmt.Errorf("the care file cannot name its holder: %w", err))
		}
	}
	// The holder, in a session of its own, with no environment of the
	// daemon's (the command's is in the spec): the daemon's child, which
	// outlives it; watchHolder reaps it, or a later image of the daemon.
	holder, err := runhold.Start([]string{filepath.Join(rel, "ocx"), "run", "hold"}, o, []string{}, hf.log)
	if err != nil {
		if holder != nil {
			holder.Kill()
			unixhost.ReapIfChild(holder.Pid)
		}
		return fail(err)
	}
	id, _ := holderID(holder.Pid)
	holder.Release()
	e.mu.Lock()
	p.id, p.socket = id, hf.socket
	e.mu.Unlock()
	e.log.Info("run's process launched in its holder", slog.String(actors.KeyRun, eff.Run), slog.Int("proc", eff.Proc),
		slog.String(actors.KeyPID, id.String()), slog.String("socket", hf.socket), slog.Bool("terminal", o.Terminal))
	if c, ok, _ := e.readCare(eff.Run); ok {
		c.Process = &id
		if err := e.writeCare(c); err != nil {
			e.log.Error("the run's care file does not name its process", slog.String(actors.KeyRun, eff.Run), actors.ErrAttr(err))
		}
	}
	go e.watchHolder(eff.Run, eff.Proc, p, id, hf)
	return nil
}

// feeds says the run's process is typed each delivery in (a session whose
// deliveries are fed, not each started).
func feeds(run *runmsg.Run) bool {
	return run.Process.Session && run.Process.Deliveries != runmsg.DeliveriesStart
}

// holderFiles clears the last process's status and logs and writes the
// holder's spec: the prepared command, and its first lines, STDIN's
// (section 8.1): the line {"run", "objective"}, then, for a process a
// delivery starts, the delivery's line. It returns the holder's options.
func (e *Engine) holderFiles(eff protocol.RunLaunch, run *runmsg.Run, prep *runeng.Prepared, hf heldFiles) (runhold.Options, error) {
	if err := e.root.MkdirAll(e.careDir(), 0o700); err != nil {
		return runhold.Options{}, err
	}
	for _, f := range []string{hf.status, hf.stdout, hf.stderr} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return runhold.Options{}, err
		}
	}
	terminal := run.Process.Terminal
	input := []string{strings.TrimSuffix(string(runeng.FirstLine(eff.Run, run.Objective)), "\n")}
	if eff.Delivery != nil {
		input = append(input, eff.Delivery.Line)
	}
	if terminal {
		for _, l := range input {
			if err := runhold.CheckLine(l); err != nil {
				return runhold.Options{}, fmt.Errorf("a line for its terminal: %w", err)
			}
		}
	}
	spec := prep.Spec
	hs := runhold.Spec{Command: spec.Command, Env: spec.Env, Dir: spec.Dir, Sandbox: spec.Sandbox, Limits: spec.Limits, Input: input}
	if f := prep.Filter; len(f.Mask) > 0 || f.Match != "" {
		// The kept logs' filter (D98): the holder keeps each stream's end
		// as it passes it, so its log files hold nothing it masks.
		hs.Keep = &f
	}
	if spec.Limits.Memory > 0 || spec.Limits.Processes > 0 {
		// Its memory, and its processes where a cgroup can be made, are
		// held by a cgroup of its own (D46).
		hs.Cgroup = e.layout.RunCgroup(eff.Run)
	}
	if err := runhold.WriteSpec(hf.spec, hs); err != nil {
		return runhold.Options{}, err
	}
	o := runhold.Options{Socket: hf.socket, Status: hf.status, StdoutLog: hf.stdout, StderrLog: hf.stderr,
		KeepStdout: prep.Keep.Stdout, KeepStderr: prep.Keep.Stderr, Terminal: terminal, Feed: feeds(run) && !terminal, Spec: hf.spec}
	return o, o.Check()
}

// holderID is a run's process, its holder, as the node names it: its PID
// and its start time (zero when its stat cannot be read); false when it is
// gone or a zombie.
func holderID(pid int) (protocol.ProcID, bool) {
	id := protocol.ProcID{PID: pid}
	st, err := unixhost.ReadStat(pid)
	if err != nil {
		return id, false
	}
	id.Start = st.Start
	return id, !st.Zombie()
}

// watchHolder waits for a holder to be gone, then routes its command's
// exit as its status file says (unknown when there is none: the holder
// was killed outright), its logs read into the process's kept ends.
func (e *Engine) watchHolder(hash string, proc int, p *runProc, id protocol.ProcID, tf heldFiles) {
	if id.Start != 0 {
		if err := unixhost.WaitGone(e.ctx, id); err != nil {
			return // the daemon goes down: the holder lives on
		}
	}
	unixhost.ReapIfChild(id.PID)
	m, st := holderExit(proc, tf.status)
	for _, s := range []struct {
		path  string
		t     *runeng.Tail
		total int64
	}{{tf.stdout, p.stdout, st.StdoutBytes}, {tf.stderr, p.stderr, st.StderrBytes}} {
		if b, _, err := e.root.ReadTail(s.path, int64(s.t.Max)); err == nil {
			s.t.Write(b)
			s.t.Counted(s.total)
		}
	}
	e.mu.Lock()
	p.exit = m
	p.socket = ""
	e.mu.Unlock()
	e.log.Info("run's holder exited", slog.String(actors.KeyRun, hash), slog.Int("proc", proc), slog.String("exit", m.Words()))
	e.exited(hash, m)
}

// holderExit is the exit a holder's status file records, and the file;
// unknown when there is none (the holder was killed outright).
func holderExit(proc int, status string) (protocol.RunProcessExited, runhold.Status) {
	st, err := runhold.ReadStatus(status)
	if err != nil {
		return protocol.RunProcessExited{Proc: proc, Status: messages.ExitUnknown}, st
	}
	return protocol.RunProcessExited{Proc: proc, Status: st.ExitStatus()}, st
}
