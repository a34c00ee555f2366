package unixhost

import (
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// MaxCanonicalLine is the longest line, its newline counted, that a
// terminal in canonical mode takes whole: Linux's line discipline keeps
// N_TTY_BUF_SIZE (4096) bytes and drops what is typed past 4095.
const MaxCanonicalLine = 4095

// OpenPTY opens a new pseudo-terminal pair: the master (non-blocking, so
// that its reads take deadlines and a Close ends them) and the terminal
// (the slave, /dev/pts/N). Neither becomes this process's controlling
// terminal, and neither passes through an exec.
func OpenPTY() (master, tty *os.File, err error) {
	mfd, err := openRetry(func() (int, error) {
		return unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, nil, &fs.PathError{Op: "open", Path: "/dev/ptmx", Err: err}
	}
	fail := func(op string, e error) (*os.File, *os.File, error) {
		unix.Close(mfd)
		return nil, nil, &fs.PathError{Op: op, Path: "/dev/ptmx", Err: e}
	}
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		return fail("unlockpt", err)
	}
	n, err := unix.IoctlGetInt(mfd, unix.TIOCGPTN)
	if err != nil {
		return fail("ptsname", err)
	}
	name := fmt.Sprintf("/dev/pts/%d", n)
	sfd, err := openRetry(func() (int, error) {
		return unix.Open(name, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		unix.Close(mfd)
		return nil, nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if err := unix.SetNonblock(mfd, true); err != nil {
		unix.Close(sfd)
		return fail("set non-blocking", err)
	}
	return os.NewFile(uintptr(mfd), "/dev/ptmx"), os.NewFile(uintptr(sfd), name), nil
}

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	return control(f, func(fd int) error { _, e := unix.IoctlGetTermios(fd, unix.TCGETS); return e }) == nil
}

// Canonical reports whether the terminal f (either end of a pair) is in
// canonical mode, where input is taken a line at a time and a line is at
// most MaxCanonicalLine bytes.
func Canonical(f *os.File) (bool, error) {
	var t *unix.Termios
	err := control(f, func(fd int) (e error) { t, e = unix.IoctlGetTermios(fd, unix.TCGETS); return })
	if err != nil {
		return false, &fs.PathError{Op: "tcgetattr", Path: f.Name(), Err: err}
	}
	return t.Lflag&unix.ICANON != 0, nil
}

// WindowChanged is the signal a process is sent when the size of its
// controlling terminal changes (SIGWINCH), for signal.Notify.
var WindowChanged os.Signal = unix.SIGWINCH

// WindowSize is a terminal's size in characters.
type WindowSize struct{ Rows, Cols uint16 }

// GetWindowSize reads the size of the terminal f.
func GetWindowSize(f *os.File) (WindowSize, error) {
	var ws *unix.Winsize
	err := control(f, func(fd int) (e error) { ws, e = unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); return })
	if err != nil {
		return WindowSize{}, &fs.PathError{Op: "TIOCGWINSZ", Path: f.Name(), Err: err}
	}
	return WindowSize{Rows: ws.Row, Cols: ws.Col}, nil
}

// SetWindowSize sets the size of the terminal f (its foreground process
// group is sent SIGWINCH when it changes).
func SetWindowSize(f *os.File, s WindowSize) error {
	err := control(f, func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: s.Rows, Col: s.Cols})
	})
	if err != nil {
		return &fs.PathError{Op: "TIOCSWINSZ", Path: f.Name(), Err: err}
	}
	return nil
}

// MakeRaw puts the terminal f in raw mode (as cfmakeraw(3) and x/term's
// MakeRaw do: no echo, no line editing, no signals from keys, no output
// processing) and returns what puts it back.
func MakeRaw(f *os.File) (restore func() error, err error) {
	var old *unix.Termios
	if err := control(f, func(fd int) (e error) { old, e = unix.IoctlGetTermios(fd, unix.TCGETS); return }); err != nil {
		return nil, &fs.PathError{Op: "tcgetattr", Path: f.Name(), Err: err}
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN] = 1
	raw.Cc[unix.VTIME] = 0
	if err := control(f, func(fd int) error { return unix.IoctlSetTermios(fd, unix.TCSETS, &raw) }); err != nil {
		return nil, &fs.PathError{Op: "tcsetattr", Path: f.Name(), Err: err}
	}
	return func() error {
		if err := control(f, func(fd int) error { return unix.IoctlSetTermios(fd, unix.TCSETS, old) }); err != nil {
			return &fs.PathError{Op: "tcsetattr", Path: f.Name(), Err: err}
		}
		return nil
	}, nil
}

// control runs op on f's descriptor without taking f out of the poller,
// retrying EINTR.
func control(f *os.File, op func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if opErr = op(int(fd)); opErr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return opErr
}
