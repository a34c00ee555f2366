package unixhost

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
)

// FileLock is a held flock. Its open file description is the lock, so a
// descriptor kept across an exec keeps the lock held throughout.
type FileLock struct {
	f    *os.File
	path string
}

// AcquireLock takes an exclusive flock on path (created 0600 if missing)
// without waiting. host.ErrLocked, naming the holder's PID when /proc/locks
// shows it, when another process holds it.
func AcquireLock(path string) (*FileLock, error) {
	for range 10 {
		fd, err := openRetry(func() (int, error) {
			return unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		})
		if err != nil {
			return nil, &fs.PathError{Op: "lock", Path: path, Err: err}
		}
		f := os.NewFile(uintptr(fd), path)
		if err := TryLock(f, Exclusive); err != nil {
			f.Close()
			return nil, err
		}
		// The lock is on the file we opened; if the path was removed or
		// replaced meanwhile, another process may lock the new file, so try
		// again on what the path names now.
		same, err := sameFile(fd, path)
		if err != nil {
			f.Close()
			return nil, &fs.PathError{Op: "lock", Path: path, Err: err}
		}
		if same {
			return &FileLock{f: f, path: path}, nil
		}
		f.Close()
	}
	return nil, &fs.PathError{Op: "lock", Path: path, Err: fmt.Errorf("the file kept being replaced")}
}

// lockMode is the kind of flock LockFile takes.
type lockMode int

const (
	// Exclusive: no other holder at all (LOCK_EX).
	Exclusive lockMode = iota
	// Shared: other shared holders, but no exclusive one (LOCK_SH).
	Shared
)

func (m lockMode) how() int {
	if m == Shared {
		return unix.LOCK_SH
	}
	return unix.LOCK_EX
}

// HeldError is host.ErrLocked naming the holder: the PID /proc/locks gives
// for the file's flock when the attempt failed, 0 when it shows none (a
// holder outside this PID namespace, or one gone meanwhile).
type HeldError struct{ PID int }

func (e *HeldError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("%v (pid %d)", host.ErrLocked, e.PID)
	}
	return host.ErrLocked.Error()
}

func (e *HeldError) Unwrap() error { return host.ErrLocked }

// maxLockPoll caps the pause between two attempts while LockFile waits: the
// first is 1 ms, doubled after each.
const maxLockPoll = 10 * time.Millisecond

// LockFile takes a flock of mode on f's open file description (so closing f,
// or Unlock, drops it), waiting while another holds it at most wait (none
// when wait is 0) or until ctx ends; a free lock is taken even when ctx has
// ended. EINTR is retried. Every error is an *fs.PathError naming "lock"
// and f: while another holds the lock it wraps a *HeldError (host.ErrLocked,
// with the holder's PID), and ctx's error too when ctx ended first.
func LockFile(ctx context.Context, f *os.File, mode lockMode, wait time.Duration) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return &fs.PathError{Op: "lock", Path: f.Name(), Err: err}
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) { lerr = flockWait(ctx, int(fd), mode.how(), wait) }); err != nil {
		return &fs.PathError{Op: "lock", Path: f.Name(), Err: err}
	}
	if lerr != nil {
		return &fs.PathError{Op: "lock", Path: f.Name(), Err: lerr}
	}
	return nil
}

// TryLock is LockFile without waiting: host.ErrLocked at once while another
// holds the lock.
func TryLock(f *os.File, mode lockMode) error {
	return LockFile(context.Background(), f, mode, 0)
}

// Unlock drops the flock f holds.
func Unlock(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return &fs.PathError{Op: "unlock", Path: f.Name(), Err: err}
	}
	var uerr error
	if err := rc.Control(func(fd uintptr) { uerr = flock(int(fd), unix.LOCK_UN) }); err != nil {
		uerr = err
	}
	if uerr != nil {
		return &fs.PathError{Op: "unlock", Path: f.Name(), Err: uerr}
	}
	return nil
}

// flockWait is LockFile on a descriptor, its error not yet naming the file.
func flockWait(ctx context.Context, fd, how int, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	delay := time.Millisecond
	for {
		err := flock(fd, how|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if err != unix.EWOULDBLOCK {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w while waiting: %w", ctx.Err(), heldBy(fd))
		}
		left := time.Until(deadline)
		if left <= 0 {
			if wait <= 0 {
				return heldBy(fd)
			}
			return fmt.Errorf("%w, still after %s", heldBy(fd), wait)
		}
		t := time.NewTimer(min(delay, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w while waiting: %w", ctx.Err(), heldBy(fd))
		case <-t.C:
		}
		delay = min(delay*2, maxLockPoll)
	}
}

// flock is flock(2), EINTR retried.
func flock(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		if err != unix.EINTR {
			return err
		}
	}
}

// heldBy is the HeldError for the file fd, its holder read from
// /proc/locks.
func heldBy(fd int) *HeldError {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return &HeldError{}
	}
	pid, _, _ := holderOf(&st)
	return &HeldError{PID: pid}
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
	if err := flockWait(context.Background(), fd, unix.LOCK_EX, 0); err != nil {
		return nil, &fs.PathError{Op: "adopt lock", Path: path, Err: fmt.Errorf("descriptor %d does not hold the lock: %w", fd, err)}
	}
	unix.CloseOnExec(fd)
	return &FileLock{f: os.NewFile(uintptr(fd), path), path: path}, nil
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
	pid, held, err = holderOf(&st)
	if err != nil {
		return 0, false, fmt.Errorf("probe lock %s: %w", path, err)
	}
	return pid, held, nil
}

// holderOf finds the flock of the file st in /proc/locks (the thin reader;
// parseLocks is the parser). The kernel writes /proc/locks a page per
// read, walking its list anew by position each time, so a lock released
// meanwhile ahead of the one sought can make that one slip past unseen:
// a miss is read again before it counts. A caller that knows the PID to
// ask about has HoldsLock, which cannot miss.
func holderOf(st *unix.Stat_t) (pid int, held bool, err error) {
	for range 2 {
		b, err := os.ReadFile("/proc/locks")
		if err != nil {
			return 0, false, err
		}
		if l, ok := flockOf(parseLocks(b), st); ok {
			return l.PID, true, nil
		}
	}
	return 0, false, nil
}

// flockOf is the flock among ls on the file st.
func flockOf(ls []lockEntry, st *unix.Stat_t) (lockEntry, bool) {
	for _, l := range ls {
		if l.Kind == "FLOCK" && l.Major == unix.Major(st.Dev) && l.Minor == unix.Minor(st.Dev) && l.Inode == st.Ino {
			return l, true
		}
	}
	return lockEntry{}, false
}

// HoldsLock reports whether process pid holds the flock on path, as its
// own descriptors show it: /proc/PID/fdinfo names the locks on each open
// file, so, unlike a read of /proc/locks, the answer cannot miss a lock
// held throughout. False, with no error, when path or the process is gone.
// Each fdinfo read holds that file of pid's for its moment, so a lock pid
// drops just then goes when the read ends: ask it on a miss of
// LockHolder's, not in a loop of its own.
func HoldsLock(pid int, path string) (bool, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		if err == unix.ENOENT {
			return false, nil
		}
		return false, &fs.PathError{Op: "probe lock", Path: path, Err: err}
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/fdinfo"
	fds, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, fd := range fds {
		b, err := os.ReadFile(filepath.Join(dir, fd.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if _, ok := flockOf(parseLocks(fdinfoLocks(b)), &st); ok {
			return true, nil
		}
	}
	return false, nil
}

// fdinfoLocks is the lock lines of an fdinfo file ("lock:\t1: FLOCK ..."),
// in /proc/locks's shape.
func fdinfoLocks(b []byte) []byte {
	var out []byte
	for line := range bytes.Lines(b) {
		if rest, ok := bytes.CutPrefix(line, []byte("lock:")); ok {
			out = append(out, bytes.TrimLeft(rest, " \t")...)
		}
	}
	return out
}

// lockEntry is one held lock of /proc/locks.
type lockEntry struct {
	Kind  string // FLOCK, POSIX, OFDLCK, LEASE, ...
	Mode  string // READ or WRITE
	PID   int
	Major uint32
	Minor uint32
	Inode uint64
}

// parseLocks parses /proc/locks. Lines of waiters ("->") hold nothing and are
// skipped, as are lines it cannot read.
func parseLocks(b []byte) []lockEntry {
	var out []lockEntry
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
		out = append(out, lockEntry{Kind: f[1], Mode: f[3], PID: pid, Major: uint32(maj), Minor: uint32(min), Inode: ino})
	}
	return out
}
