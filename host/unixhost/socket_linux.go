package unixhost

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// MaxSocketPath is the longest path a Unix socket may be bound at.
const MaxSocketPath = len(unix.RawSockaddrUnix{}.Path) - 1

// ListenSocket makes dir (mode 0700, beneath the root agents, following
// no link) and listens on the Unix socket dir/name (mode 0600), removing a
// socket left there by a server that is gone. Anything else at that path
// is refused, and so is a path too long for a socket.
func ListenSocket(agents, dir, name string) (net.Listener, error) {
	p := filepath.Join(dir, name)
	if len(p) > MaxSocketPath {
		return nil, fmt.Errorf("unixhost: socket %s: %d bytes, and a Unix socket's path holds at most %d: give the agents root a shorter path", p, len(p), MaxSocketPath)
	}
	root, err := OpenRoot(agents)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if err := root.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	if st, err := os.Lstat(p); err == nil {
		if st.Mode().Type() != fs.ModeSocket {
			return nil, &fs.PathError{Op: "listen", Path: p, Err: errors.New("is there and is not a socket")}
		}
		if err := os.Remove(p); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("unix", p)
	if err != nil {
		return nil, err
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(p, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// SameUser refuses a Unix connection whose peer (SO_PEERCRED) runs as
// another user than this process.
func SameUser(c net.Conn) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("unixhost: peer of a %T: not a Unix connection", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("unixhost: SO_PEERCRED: %w", cerr)
	}
	if int(cred.Uid) != os.Getuid() {
		return fmt.Errorf("unixhost: the peer (pid %d) runs as uid %d, not %d", cred.Pid, cred.Uid, os.Getuid())
	}
	return nil
}
