package session

import (
	"errors"
	"github.com/ocx-go/ocx/actors/turn"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
)

// turnSpec is one process a turn runs.
type turnSpec struct {
	argv  []string
	env   []string
	dir   string
	stdin []byte
	// combined puts the process's standard error into its output (a
	// command's answer is all it printed); otherwise standard error goes to
	// the session's log (a runner's answer is its standard output).
	combined bool
}

// drainAfterExit bounds how long the output is read once the turn's process
// has exited and its group was ended: only a process that left the group
// can still hold the pipe.
const drainAfterExit = 2 * time.Second

// runTurn runs spec in a process group of its own and returns what it
// printed and how it ended. A stopping signal that arrives meanwhile is
// passed on to the group and noted, and the turn is waited for: the session
// stops once the turn has ended (the daemon sends KILL after its grace if the
// turn ignores TERM). When the turn's process exits, what is left of its
// group is killed: a turn leaves nothing running behind it.
func (s *session) runTurn(spec turnSpec) (turn.Output, turn.Ended) {
	cmd, inW, outR, err := s.startTurn(spec)
	if err != nil {
		return turn.Output{}, turn.Ended{StartErr: err}
	}
	pid := cmd.Process.Pid
	s.log.Info("turn started", keyEvent, "turn-start", keyPID, pid, "argv", strings.Join(spec.argv, " "))

	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		_, _ = inW.Write(spec.stdin)
		inW.Close()
	}()
	out := &tailBuffer{max: turn.MaxOutput}
	read := make(chan struct{})
	go func() {
		defer close(read)
		_, _ = io.Copy(out, outR)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	werr := s.waitTurn(pid, exited)
	// The group may outlive its leader; nothing of a turn runs on after it.
	_ = unixhost.KillGroup(pid, host.SIGKILL)
	_ = outR.SetReadDeadline(time.Now().Add(drainAfterExit))
	<-read
	outR.Close()
	_ = inW.SetWriteDeadline(time.Now())
	<-wrote

	return out.Output(), endedOf(cmd, werr)
}

// startTurn starts spec in a process group of its own, its standard input
// and output on pipes: the caller writes inW and reads outR.
func (s *session) startTurn(spec turnSpec) (*exec.Cmd, *os.File, *os.File, error) {
	if len(spec.argv) == 0 {
		return nil, nil, nil, errors.New("no program to run")
	}
	path := spec.argv[0]
	if !strings.Contains(path, "/") {
		p, err := exec.LookPath(path)
		if err != nil {
			return nil, nil, nil, err
		}
		path = p
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, nil, nil, err
	}
	cmd := &exec.Cmd{Path: path, Args: spec.argv, Env: spec.env, Dir: spec.dir, Stdin: inR, Stdout: outW}
	if spec.combined {
		cmd.Stderr = outW
	} else if f, ok := s.errOut.(*os.File); ok {
		cmd.Stderr = f
	}
	cmd.SysProcAttr = unixhost.GroupAttr()
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, nil, nil, err
	}
	return cmd, inW, outR, nil
}

// waitTurn waits for the turn pid to exit (exited says how), passing on
// to its group each stopping signal that arrives meanwhile.
func (s *session) waitTurn(pid int, exited <-chan error) error {
	for {
		select {
		case werr := <-exited:
			return werr
		case sig := <-s.sigs:
			s.noteSignal(sig)
			n, ok := unixhost.SignalOf(sig)
			if _, budget := sig.(budgetStop); budget {
				n, ok = host.SIGTERM, true // past its own wall: the turn is stopped as on TERM
			}
			if ok {
				s.log.Info("signal passed on to the turn", keyEvent, "turn-signal", keyPID, pid, keySignal, n.String())
				_ = unixhost.KillGroup(pid, n)
			}
		}
	}
}

// endedOf is how the turn cmd ended, werr its Wait's error.
func endedOf(cmd *exec.Cmd, werr error) turn.Ended {
	e := turn.Ended{}
	var xerr *exec.ExitError
	switch {
	case werr == nil:
	case errors.As(werr, &xerr):
	default:
		e.StartErr = werr
	}
	if cmd.ProcessState != nil {
		e.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		if sig, ok := unixhost.EndingSignal(cmd.ProcessState); ok {
			e.Signal = sig.String()
			e.Code = 128 + int(sig)
		} else {
			e.Code = cmd.ProcessState.ExitCode()
		}
	}
	return e
}

// tailBuffer keeps the last max bytes written to it, and counts the rest.
type tailBuffer struct {
	max     int
	buf     []byte
	dropped int64
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		cut := len(t.buf) - t.max
		t.dropped += int64(cut)
		t.buf = append(t.buf[:0], t.buf[cut:]...)
	}
	return len(p), nil
}

// Output returns what was kept, at most max bytes.
func (t *tailBuffer) Output() turn.Output {
	if len(t.buf) > t.max {
		cut := len(t.buf) - t.max
		return turn.Output{Tail: t.buf[cut:], Dropped: t.dropped + int64(cut)}
	}
	return turn.Output{Tail: t.buf, Dropped: t.dropped}
}
