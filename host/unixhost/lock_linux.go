package unixhost

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
)

// Locker takes the daemon's flock and probes it through /proc/locks, which
// lists every lock without taking one: a probe can never make a daemon's
// Acquire lose a race (as a probe that took the lock for a moment could).
type Locker struct{}

var _ host.Locker = Locker{}

// FileLock is a held flock. Its open file description is the lock, so a
// descriptor kept across an exec keeps the lock held throughout.
type FileLock struct {
	f    *os.File
	path string
}

// Acquire takes an exclusive flock on path (created 0600 if missing) without
// waiting. host.ErrLocked, naming the holder's PID when /proc/locks shows it,
// when another process holds it.
func (Locker) Acquire(path string) (host.Lock, error) { return AcquireLock(path) }

// AcquireLock is Acquire returning the concrete lock.
func AcquireLock(path string) (*FileLock, error) {
	for range 10 {
		fd, err := openRetry(func() (int, error) {
			return unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		})
		if err != nil {
			return nil, &fs.PathError{Op: "lock", Path: path, Err: err}
		}
		if err := flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			unix.Close(fd)
			if err == unix.EWOULDBLOCK {
				if pid, held, _ := LockHolder(path); held && pid > 0 {
					return nil, &fs.PathError{Op: "lock", Path: path, Err: fmt.Errorf("%w (pid %d)", host.ErrLocked, pid)}
				}
				return nil, &fs.PathError{Op: "lock", Path: path, Err: host.ErrLocked}
			}
			return nil, &fs.PathError{Op: "lock", Path: path, Err: err}
		}
		// The lock is on the file we opened; if the path was removed or
		// replaced meanwhile, another process may lock the new file, so try
		// again on what the path names now.
		same, err := sameFile(fd, path)
		if err != nil {
			unix.Close(fd)
			return nil, &fs.PathError{Op: "lock", Path: path, Err: err}
		}
		if same {
			return &FileLock{f: os.NewFile(uintptr(fd), path), path: path}, nil
		}
		unix.Close(fd)
	}
	return nil, &fs.PathError{Op: "lock", Path: path, Err: fmt.Errorf("the file kept being replaced")}
}

func flock(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		if err != unix.EINTR {
			return err
		}
	}
}

func sameFile(fd int, path string) (bool, error) {
	var a, b unix.Stat_t
	if err := unix.Fstat(fd, &a); err != nil {
		return false, err
	}
	if err := unix.Lstat(path, &b); err != nil {
		if err == unix.ENOENT {
			return false, nil
		}
		return false, err
	}
	return a.Dev == b.Dev && a.Ino == b.Ino, nil
}

// Release drops the lock.
func (l *FileLock) Release() error {
	if err := l.f.Close(); err != nil {
		return &fs.PathError{Op: "unlock", Path: l.path, Err: err}
	}
	return nil
}

// Fd is the lock's descriptor.
func (l *FileLock) Fd() int { return int(l.f.Fd()) }

// KeepOnExec clears close-on-exec on the lock's descriptor, so that the image
// the daemon execs holds the lock from the first instruction; it returns the
// descriptor's number for the hand-off.
func (l *FileLock) KeepOnExec() (int, error) {
	fd := int(l.f.Fd())
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
		return -1, &fs.PathError{Op: "keep lock on exec", Path: l.path, Err: err}
	}
	return fd, nil
}

// AdoptLock takes over a lock descriptor inherited across an exec. It checks
// that fd is the file at path and still holds the lock (flock on the same open
// file description succeeds at once), and sets close-on-exec again.
func AdoptLock(fd int, path string) (*FileLock, error) {
	same, err := sameFile(fd, path)
	if err != nil {
		return nil, &fs.PathError{Op: "adopt lock", Path: path, Err: err}
	}
	if !same {
		return nil, &fs.PathError{Op: "adopt lock", Path: path, Err: fmt.Errorf("descriptor %d is not this file", fd)}
	}
	if err := flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil, &fs.PathError{Op: "adopt lock", Path: path, Err: fmt.Errorf("descriptor %d does not hold the lock: %w", fd, err)}
	}
	unix.CloseOnExec(fd)
	return &FileLock{f: os.NewFile(uintptr(fd), path), path: path}, nil
}

// Held says whether a process holds a flock on path; a missing file is not
// held. It reads /proc/locks and takes no lock.
func (Locker) Held(path string) (bool, error) {
	_, held, err := LockHolder(path)
	return held, err
}

// LockHolder returns the PID holding a flock on path (as /proc/locks gives it;
// 0 when the holder is outside this PID namespace).
func LockHolder(path string) (pid int, held bool, err error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		if err == unix.ENOENT {
			return 0, false, nil
		}
		return 0, false, &fs.PathError{Op: "probe lock", Path: path, Err: err}
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0, false, fmt.Errorf("probe lock %s: %w", path, err)
	}
	for _, l := range ParseLocks(b) {
		if l.Kind == "FLOCK" && l.Major == unix.Major(st.Dev) && l.Minor == unix.Minor(st.Dev) && l.Inode == st.Ino {
			return l.PID, true, nil
		}
	}
	return 0, false, nil
}

// LockEntry is one held lock of /proc/locks.
type LockEntry struct {
	Kind  string // FLOCK, POSIX, OFDLCK, LEASE, ...
	Mode  string // READ or WRITE
	PID   int
	Major uint32
	Minor uint32
	Inode uint64
}

// ParseLocks parses /proc/locks. Lines of waiters ("->") hold nothing and are
// skipped, as are lines it cannot read.
func ParseLocks(b []byte) []LockEntry {
	var out []LockEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] == "->" {
			continue
		}
		pid, err := strconv.Atoi(f[4])
		if err != nil {
			continue
		}
		id := strings.Split(f[5], ":")
		if len(id) != 3 {
			continue
		}
		maj, err1 := strconv.ParseUint(id[0], 16, 32)
		min, err2 := strconv.ParseUint(id[1], 16, 32)
		ino, err3 := strconv.ParseUint(id[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		out = append(out, LockEntry{Kind: f[1], Mode: f[3], PID: pid, Major: uint32(maj), Minor: uint32(min), Inode: ino})
	}
	return out
}
