package unixhost

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/ocx-go/ocx/host"
)

// The small process calls of the commands (the daemon's re-exec, the
// detached starts, a turn's process group, the demo's servers), so that no
// package but this one imports syscall or x/sys/unix.

// OSSignal is s as os/signal and os.Process take it.
func OSSignal(s host.Signal) os.Signal { return syscall.Signal(s) }

// OSSignals is OSSignal of each, for signal.Notify.
func OSSignals(ss ...host.Signal) []os.Signal {
	out := make([]os.Signal, len(ss))
	for i, s := range ss {
		out[i] = OSSignal(s)
	}
	return out
}

// SignalOf is the number of a signal os/signal delivered; false for an
// os.Signal that is not one of this system's.
func SignalOf(sig os.Signal) (host.Signal, bool) {
	n, ok := sig.(syscall.Signal)
	return host.Signal(n), ok
}

// Kill sends sig to the process pid by its number alone, with no check of
// its identity (host.Signaler and SignalOne check the start time): only the
// caller's own child, not yet waited for, cannot have lost its PID to another
// process meanwhile. A pid below 1, which kill(2) reads as a group or every
// process, is refused.
func Kill(pid int, sig host.Signal) error {
	if pid < 1 {
		return fmt.Errorf("unixhost: kill %d %s: not a process", pid, sig)
	}
	if err := syscall.Kill(pid, syscall.Signal(sig)); err != nil {
		return fmt.Errorf("unixhost: kill %d %s: %w", pid, sig, err)
	}
	return nil
}

// KillGroup sends sig to every process of the process group pgid, by its
// number: for a group whose leader is the caller's own child, not yet waited
// for (GroupAttr, SessionAttr). A pgid below 2 (the caller's own group, or
// every process) is refused.
func KillGroup(pgid int, sig host.Signal) error {
	if pgid < 2 {
		return fmt.Errorf("unixhost: kill group %d %s: not a process group of a child", pgid, sig)
	}
	if err := syscall.Kill(-pgid, syscall.Signal(sig)); err != nil {
		return fmt.Errorf("unixhost: kill group %d %s: %w", pgid, sig, err)
	}
	return nil
}

// GroupAttr starts an exec.Cmd's child in a process group of its own
// (Setpgid), which KillGroup(its PID) reaches whole.
func GroupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// SessionAttr starts an exec.Cmd's child in a session and process group of
// its own (Setsid): detached from the starter's terminal, so that no
// terminal's signal reaches it, and reached whole by KillGroup(its PID).
func SessionAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// EndingSignal is the signal that ended the process ps tells of; false when
// it exited (or ps is nil).
func EndingSignal(ps *os.ProcessState) (host.Signal, bool) {
	if ps == nil {
		return 0, false
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return host.Signal(ws.Signal()), true
}

// Exec replaces the process's image with the program at path (execve),
// argv and env as given. It returns only when the exec failed: an
// *fs.PathError "exec" naming path.
func Exec(path string, argv, env []string) error {
	err := syscall.Exec(path, argv, env)
	if err == nil {
		err = errors.New("execve returned")
	}
	return &fs.PathError{Op: "exec", Path: path, Err: err}
}
