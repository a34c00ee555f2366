package unixhost

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

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
	return listenUnix(p, false)
}

// SameUser refuses a Unix connection whose peer (SO_PEERCRED) runs as
// another user than this process. A connection wrapped (relay.Bounded's,
// tls.Conn) is looked at through its NetConn.
func SameUser(c net.Conn) error {
	for {
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = w.NetConn()
	}
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

// ListenSocketAt listens on the Unix socket at p (mode 0600) in a directory
// that is already there, which it leaves as it is: a run's holder binds its
// socket where its caller says. A socket left at p by a server that is
// gone is removed; one a server still answers on is refused, and so is
// anything else at p, and a path too long for a socket.
func ListenSocketAt(p string) (net.Listener, error) {
	if len(p) > MaxSocketPath {
		return nil, fmt.Errorf("unixhost: socket %s: %d bytes, and a Unix socket's path holds at most %d", p, len(p), MaxSocketPath)
	}
	if st, err := os.Lstat(p); err == nil {
		if st.Mode().Type() != fs.ModeSocket {
			return nil, &fs.PathError{Op: "listen", Path: p, Err: errors.New("is there and is not a socket")}
		}
		if c, err := net.Dial("unix", p); err == nil {
			c.Close()
			return nil, &fs.PathError{Op: "listen", Path: p, Err: errors.New("a server answers on it")}
		}
		if err := os.Remove(p); err != nil {
			return nil, err
		}
	}
	return listenUnix(p, true)
}

// listenUnix listens on the Unix socket at p, mode 0600, which closing the
// listener leaves in place; a socket it cannot make 0600 is closed, and
// removed when remove says.
func listenUnix(p string, remove bool) (net.Listener, error) {
	ln, err := net.Listen("unix", p)
	if err != nil {
		return nil, err
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(p, 0o600); err != nil {
		ln.Close()
		if remove {
			os.Remove(p)
		}
		return nil, err
	}
	return ln, nil
}

// WriteFileAtomic replaces the file at the absolute path p whole, as
// Root.WriteFile does beneath p's directory: a reader sees the old contents
// or the new, and a link at p is replaced, not followed.
func WriteFileAtomic(p string, data []byte, perm fs.FileMode) error {
	root, err := OpenRoot(filepath.Dir(p))
	if err != nil {
		return err
	}
	defer root.Close()
	return root.WriteFile(p, data, perm)
}

// DialSocket connects to the Unix socket at p, trying again every 50ms
// until wait has passed: a server that is not listening yet (a session's
// first moments, a holder starting) is waited for, not failed.
func DialSocket(ctx context.Context, p string, wait time.Duration) (net.Conn, error) {
	end := time.Now().Add(wait)
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "unix", p)
		if err == nil {
			return conn, nil
		}
		if time.Now().After(end) || ctx.Err() != nil {
			return nil, fmt.Errorf("connect to %s: %w", p, err)
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}
