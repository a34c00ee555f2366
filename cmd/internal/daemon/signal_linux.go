package daemon

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
)

// signalOne sends sig to one process, not its group: a process that names a
// workspace without being a session of the daemon's (a terminal session).
// The pidfd is opened first and the start time read after, so that the
// signal reaches the process asked about or nothing.
func signalOne(id host.ProcID, sig host.Signal) error {
	fd, err := unix.PidfdOpen(id.PID, 0)
	if err == unix.ESRCH {
		return fmt.Errorf("signal %s %s: %w", id, sig, host.ErrGone)
	}
	if err != nil {
		return fmt.Errorf("signal %s %s: pidfd_open: %w", id, sig, err)
	}
	defer unix.Close(fd)
	st, err := unixhost.ReadStat(id.PID)
	if errors.Is(err, fs.ErrNotExist) || err == nil && (st.Start != id.Start || st.Zombie()) {
		return fmt.Errorf("signal %s %s: %w", id, sig, host.ErrGone)
	}
	if err != nil {
		return fmt.Errorf("signal %s %s: %w", id, sig, err)
	}
	for {
		err = unix.PidfdSendSignal(fd, unix.Signal(sig), nil, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err == unix.ESRCH {
		return fmt.Errorf("signal %s %s: %w", id, sig, host.ErrGone)
	}
	if err != nil {
		return fmt.Errorf("signal %s %s: %w", id, sig, err)
	}
	return nil
}

// closeFD closes a descriptor handed over for an exec that did not happen.
func closeFD(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}

// cloexec sets close-on-exec again on descriptors kept for an exec that
// did not happen.
func cloexec(fds ...int) {
	for _, fd := range fds {
		if fd >= 0 {
			unix.CloseOnExec(fd)
		}
	}
}
