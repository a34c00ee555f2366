package unixhost

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/messages/protocol"
)

// WaitGone returns nil once the process id (its PID with its start time)
// is gone, at once when it is gone already, or ctx's error first. It reaps
// nothing: the process need not be a child, and a child of ours stays for
// its owner to reap.
func WaitGone(ctx context.Context, id protocol.ProcID) error {
	fd, err := openRetry(func() (int, error) { return unix.PidfdOpen(id.PID, 0) })
	if err == unix.ESRCH {
		return nil
	}
	if err != nil {
		return fmt.Errorf("unixhost: wait for %s: pidfd_open: %w", id, err)
	}
	defer unix.Close(fd)
	st, err := ReadStat(id.PID)
	if err != nil || st.Start != id.Start {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("unixhost: wait for %s: %w", id, err)
		}
		return nil // another process holds the PID now, or none does
	}
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 200)
		if err != nil && err != unix.EINTR {
			return fmt.Errorf("unixhost: wait for %s: poll: %w", id, err)
		}
		if n > 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// ReapIfChild reaps pid if it is a child of this process that has ended
// (a run's holder the daemon started, found gone by WaitGone, whichever
// image of the daemon started it); anything else is left alone.
func ReapIfChild(pid int) {
	if pid <= 0 {
		return // 0 and -1 would be any child: never
	}
	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err != unix.EINTR {
			return
		}
	}
}
