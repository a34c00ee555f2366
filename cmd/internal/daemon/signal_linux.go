package daemon

import (
	"golang.org/x/sys/unix"
)

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
