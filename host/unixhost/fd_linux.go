package unixhost

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Descriptors known by their numbers: the standard ones, and those the
// daemon keeps across a re-exec or hands to a child.

// PointAtDevNull points each descriptor fd at /dev/null, opened for writing
// (dup3): what a process does with standard output and error nobody reads
// to their end.
func PointAtDevNull(fds ...int) error {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	for _, fd := range fds {
		for {
			err = unix.Dup3(int(null.Fd()), fd, 0)
			if err != unix.EINTR {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("point descriptor %d at /dev/null: %w", fd, err)
		}
	}
	return nil
}

// CloseOnExec sets close-on-exec on each descriptor (a negative one is
// skipped): one inherited for this process alone, or one kept for an exec
// that did not happen.
func CloseOnExec(fds ...int) {
	for _, fd := range fds {
		if fd >= 0 {
			unix.CloseOnExec(fd)
		}
	}
}

// KeepOnExec clears close-on-exec on each descriptor (a negative one is
// skipped): kept open for the image an exec starts, again after CloseOnExec
// kept them from a program run meanwhile.
func KeepOnExec(fds ...int) error {
	for _, fd := range fds {
		if fd < 0 {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
			return fmt.Errorf("keep descriptor %d open on exec: %w", fd, err)
		}
	}
	return nil
}

// CloseFD closes a descriptor known by its number (a negative one is
// skipped): one handed over for an exec that did not happen.
func CloseFD(fd int) error {
	if fd < 0 {
		return nil
	}
	return unix.Close(fd)
}

func openLogNoFollow(p string) (int, error) {
	return openRetry(func() (int, error) {
		return unix.Open(p, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	})
}
