package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/cmd/internal/runhold"
	runeng "github.com/ocx-go/ocx/cmd/internal/runs"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// A run whose process.terminal is true runs in a holder (docs/runs.md
// section 8.1): `$$release$$/ocx run hold --detach`, started through the
// launcher, leaves the holder running in a session of its own and prints
// its PID; the holder is not the daemon's child, so its end is watched by
// pidfd and read from its status file. Its socket, status and logs are
// under AGENTS/ocxd.runs (runhold.RunFilesBase).

// detachWait bounds `ocx run hold --detach`, which returns once the
// holder listens.
const detachWait = 30 * time.Second

// terminalFiles are the holder's paths for a run.
type terminalFiles struct {
	socket, status, stdout, stderr, log, files string
}

func (e *runEngine) terminalFiles(hash string) terminalFiles {
	b := runhold.RunFilesBase(e.careDir(), hash)
	return terminalFiles{socket: b + ".sock", status: b + ".status", stdout: b + ".stdout.log",
		stderr: b + ".stderr.log", log: b + ".holder.log", files: b + ".files"}
}

// launchTerminal starts the run's process in a holder. fail reports a
// process that could not be started (exit 127).
func (e *runEngine) launchTerminal(ctx context.Context, eff messages.RunLaunch, r *engineRun, prep *runeng.Prepared, p *runProc, starter host.RunStarter, fail func(error) error) error {
	rel, err := e.rel.dir(messages.ReleaseCurrent)
	if err != nil {
		return fail(fmt.Errorf("the current release: %w", err))
	}
	tf := e.terminalFiles(eff.Run)
	if err := e.root.MkdirAll(e.careDir(), 0o700); err != nil {
		return fail(err)
	}
	for _, f := range []string{tf.status, tf.stdout, tf.stderr} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fail(err)
		}
	}
	spec := prep.Spec
	argv := spec.Command
	dir := spec.Dir
	if sb := spec.Sandbox; sb != nil {
		// The holder's pty is the run's own session: bwrap must not
		// detach it (--new-session). No descriptor reaches through the
		// holder, so the files are bound from files of the node's.
		s := *sb
		s.OwnSession = false
		paths, err := e.writeSandboxFiles(tf.files, s.Files)
		if err != nil {
			return fail(err)
		}
		argv, err = host.RunBwrapArgs(s, host.RunFDs{FilePaths: paths}, spec.Dir, spec.Command)
		if err != nil {
			return fail(err)
		}
		b, ok := starter.(interface{ Bwrap() string })
		if !ok || b.Bwrap() == "" {
			return fail(errors.New("this host has no bwrap for a sandbox"))
		}
		argv[0] = b.Bwrap()
		dir = "/"
	}
	first := strings.TrimSuffix(string(runeng.FirstLine(eff.Run, r.run.Objective)), "\n")
	o := runhold.Options{Socket: tf.socket, Status: tf.status, StdoutLog: tf.stdout, StderrLog: tf.stderr,
		KeepStdout: prep.Keep.Stdout, KeepStderr: prep.Keep.Stderr, FirstLine: first, Dir: dir, Argv: argv}
	if err := o.Check(); err != nil {
		return fail(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return fail(err)
	}
	defer errR.Close()
	hs := host.RunSpec{Command: append([]string{filepath.Join(rel, "ocx"), "run", "hold"}, runhold.DetachArgs(o, tf.log)...),
		Env: spec.Env, Dir: dir, Stdout: outW, Stderr: errW}
	done := make(chan host.Exit, 1)
	launchedAt := e.now()
	_, err = starter.StartRun(hs, func(x host.Exit) { done <- x })
	outW.Close()
	errW.Close()
	if err != nil {
		return fail(err)
	}
	errc := make(chan struct{})
	go func() { io.Copy(p.stderr, errR); close(errc) }()
	line, _ := bufio.NewReader(io.LimitReader(outR, 4096)).ReadString('\n')
	var x host.Exit
	select {
	case x = <-done:
	case <-time.After(detachWait):
		return fail(errors.New("ocx run hold --detach did not return"))
	}
	<-errc
	if o, code := x.Outcome(); o != host.OutcomeExited || code != 0 {
		return fail(fmt.Errorf("ocx run hold --detach: %s", x))
	}
	pidText, _, _ := strings.Cut(strings.TrimSpace(line), " ")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		return fail(fmt.Errorf("ocx run hold --detach printed %q, not PID SOCKET", line))
	}
	id := messages.ProcID{PID: pid}
	if st, err := unixhost.ReadStat(pid); err == nil {
		id.Start = st.Start
	}
	e.mu.Lock()
	p.id, p.socket = id, tf.socket
	e.mu.Unlock()
	e.log.Info("run's process launched in a holder", slog.String(actors.KeyRun, eff.Run), slog.Int("proc", eff.Proc),
		slog.String(actors.KeyPID, id.String()), slog.String("socket", tf.socket))
	if c, ok, _ := e.readCare(eff.Run); ok {
		c.Proc, c.Process, c.LaunchedAt, c.Terminal = eff.Proc, &id, launchedAt.UTC(), tf.socket
		if eff.Delivery != nil && c.Given.Before(eff.Delivery.At) {
			c.Given = eff.Delivery.At
		}
		if err := e.writeCare(c); err != nil {
			e.log.Error("the run's care file does not name its process", slog.String(actors.KeyRun, eff.Run), errAttr(err))
		}
	}
	go e.watchHolder(eff.Run, eff.Proc, p, id, tf)
	if eff.Delivery != nil {
		if err := runhold.Type(tf.socket, eff.Delivery.Line); err != nil {
			e.log.Warn("the delivery is not typed into the run's terminal", slog.String(actors.KeyRun, eff.Run), errAttr(err))
		}
	}
	if r.run.Process.Session && r.run.Process.Deliveries != messages.DeliveriesStart {
		e.deliver(ctx, r.x.path)
	}
	return nil
}

// writeSandboxFiles writes the sandbox's files' texts under dir, one file
// each, readable by the sandbox's user (bound read-only where it sees them).
func (e *runEngine) writeSandboxFiles(dir string, files []host.RunFile) ([]string, error) {
	paths := []string{}
	if len(files) == 0 {
		return paths, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for i, f := range files {
		p := filepath.Join(dir, strconv.Itoa(i))
		if err := unixhost.WriteFileAtomic(p, []byte(f.Text), 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// watchHolder waits for a holder to be gone, then routes its command's
// exit as its status file says (unknown when there is none: the holder
// was killed outright), its logs read into the process's kept ends.
func (e *runEngine) watchHolder(hash string, proc int, p *runProc, id messages.ProcID, tf terminalFiles) {
	if id.Start != 0 {
		if err := unixhost.WaitGone(e.ctx, id); err != nil {
			return // the daemon goes down: the holder lives on
		}
	}
	m := holderExit(proc, tf.status)
	for _, s := range []struct {
		path string
		t    *runeng.Tail
	}{{tf.stdout, p.stdout}, {tf.stderr, p.stderr}} {
		if b, err := os.ReadFile(s.path); err == nil {
			s.t.Write(b)
		}
	}
	e.mu.Lock()
	p.exit = m
	p.socket = ""
	e.mu.Unlock()
	e.log.Info("run's holder exited", slog.String(actors.KeyRun, hash), slog.Int("proc", proc), slog.String("exit", exitWords(m)))
	e.exited(hash, m)
}

// holderExit is the exit a holder's status file records.
func holderExit(proc int, status string) messages.RunProcessExited {
	m := messages.RunProcessExited{Proc: proc}
	st, err := runhold.ReadStatus(status)
	switch {
	case err != nil:
		m.Unknown = true
	case st.Signal != "" && st.Exit > 128:
		m.Signal = st.Exit - 128
	default:
		m.Code = st.Exit
	}
	return m
}
