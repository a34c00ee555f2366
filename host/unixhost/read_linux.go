package unixhost

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// The bounds of what the node reads below the agents root (docs/trust.md):
// every file there may have been written by an agent, so none is read
// without one.
const (
	// SmallFile bounds the node's own small files: a listening entry, a
	// hears or checkins file, a binding, a care or spawn record.
	SmallFile = 64 << 10
	// tailMax bounds the end of a log that a page or a status shows.
	tailMax = 1 << 20
	// NodeFile bounds the node's own files below the root that grow with
	// the node: node.json, model.json, the re-exec's hand-off.
	NodeFile = 16 << 20
)

// refusedError is a file below the agents root that the node will not read
// or write through, and why: a link on its path, a named pipe, a directory
// or anything else that is not a regular file, or a file larger than its
// bound. A reader takes it as absent (Absent): the agent that planted it
// harms only itself.
type refusedError struct {
	Op   string // "read", "open"
	Path string
	Why  string // "a symbolic link", "a named pipe", "larger than 64 KiB", ...
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("%s %s: refused: %s", e.Op, e.Path, e.Why)
}

// AsRefused returns the refusal err holds, if any.
func AsRefused(err error) (*refusedError, bool) {
	var r *refusedError
	ok := errors.As(err, &r)
	return r, ok
}

// refuseOpen turns an open's error into a refusal when it says why the
// path is not one the node follows; other errors (ENOENT among them) are
// kept as they are.
func refuseOpen(op, p string, err error) error {
	switch err {
	case unix.ELOOP:
		return &refusedError{Op: op, Path: p, Why: "a symbolic link"}
	case unix.EXDEV:
		return &refusedError{Op: op, Path: p, Why: "a path that leaves the agents root"}
	case unix.ENXIO:
		// Opening a socket (or a device with nothing behind it).
		return &refusedError{Op: op, Path: p, Why: "a socket"}
	case unix.ENOTDIR:
		// The walk (no openat2) opens each directory O_DIRECTORY|O_NOFOLLOW:
		// a link or a file where a directory should be.
		return &refusedError{Op: op, Path: p, Why: "a symbolic link or a file where a directory should be"}
	}
	return pathErr(op, p, err)
}

// kindOf names what st is, for a refusal: "" for a regular file.
func kindOf(st *unix.Stat_t) string {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return ""
	case unix.S_IFIFO:
		return "a named pipe"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "a device"
	case unix.S_IFLNK:
		return "a symbolic link"
	}
	return "not a regular file"
}

// sizeWords says "larger than 64 KiB" for a bound.
func sizeWords(max int64) string {
	switch {
	case max >= 1<<20 && max%(1<<20) == 0:
		return fmt.Sprintf("larger than %d MiB", max>>20)
	case max >= 1<<10 && max%(1<<10) == 0:
		return fmt.Sprintf("larger than %d KiB", max>>10)
	}
	return fmt.Sprintf("larger than %d bytes", max)
}

// openRegular opens rel below the root for reading as ReadFile does: no
// link anywhere on the path, without waiting (a named pipe opens at once,
// then is refused), a regular file only.
func (r *Root) openRegular(op, p string) (*os.File, int64, error) {
	rel, err := r.rel(op, p)
	if err != nil {
		return nil, 0, err
	}
	fd, err := r.openBeneath(rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, 0, refuseOpen(op, p, err)
	}
	return regular(fd, op, filepath.Clean(p))
}

// regular checks that fd is a regular file and returns it, with its size,
// as an *os.File; anything else is closed and refused.
func regular(fd int, op, p string) (*os.File, int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, 0, pathErr(op, p, err)
	}
	if why := kindOf(&st); why != "" {
		unix.Close(fd)
		return nil, 0, &refusedError{Op: op, Path: p, Why: why}
	}
	return os.NewFile(uintptr(fd), p), st.Size, nil
}

// readBounded reads f whole, refusing more than max bytes: the size fstat
// gave, and what is read, since the file may grow in between.
func readBounded(f *os.File, size, max int64, op, p string) ([]byte, error) {
	if size > max {
		return nil, &refusedError{Op: op, Path: p, Why: sizeWords(max)}
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, pathErr(op, p, err)
	}
	if int64(len(b)) > max {
		return nil, &refusedError{Op: op, Path: p, Why: sizeWords(max)}
	}
	return b, nil
}

// ReadFile reads the regular file at p below the root, at most max bytes:
// a link anywhere below the root on its path, a named pipe (opened without
// waiting), a directory, a device or a socket there, or a file larger than
// max is refused with a *refusedError; a missing file is fs.ErrNotExist.
// This is the one way the node reads a file an agent may have written
// (docs/trust.md).
func (r *Root) ReadFile(p string, max int64) ([]byte, error) {
	f, size, err := r.openRegular("read", p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readBounded(f, size, max, "read", f.Name())
}

// ReadTail reads the last max bytes of the regular file at p below the
// root, and says how large the file is: the end of a log, however long
// (a sparse file of a terabyte costs as much as a short one). It refuses
// as ReadFile does, but for the size.
func (r *Root) ReadTail(p string, max int64) (tail []byte, size int64, err error) {
	f, size, err := r.openRegular("read", p)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	off := size - max
	if off < 0 {
		off = 0
	}
	b, err := io.ReadAll(io.LimitReader(io.NewSectionReader(f, off, max), max))
	if err != nil {
		return nil, 0, pathErr("read", f.Name(), err)
	}
	return b, size, nil
}

// ReadAt reads at most max bytes of the regular file at p below the root
// from offset off on, and says how large the file is: a log followed from
// where its reader left off (nothing past its end). It refuses as
// ReadFile does, but for the size.
func (r *Root) ReadAt(p string, off, max int64) (b []byte, size int64, err error) {
	f, size, err := r.openRegular("read", p)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	if off >= size {
		return nil, size, nil
	}
	b, err = io.ReadAll(io.NewSectionReader(f, off, min(max, size-off)))
	if err != nil {
		return nil, 0, pathErr("read", f.Name(), err)
	}
	return b, size, nil
}

// IsRegular says whether a regular file is at p below the root, reached
// without a link; a link, a pipe or anything else there is refused, a
// missing one is fs.ErrNotExist.
func (r *Root) IsRegular(p string) error {
	rel, err := r.rel("stat", p)
	if err != nil {
		return err
	}
	dir, name, err := r.parent(rel)
	if err != nil {
		return refuseOpen("stat", p, err)
	}
	defer unix.Close(dir)
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return pathErr("stat", p, err)
	}
	if why := kindOf(&st); why != "" {
		return &refusedError{Op: "stat", Path: filepath.Clean(p), Why: why}
	}
	return nil
}

// ReadFile reads the regular file name in d, at most max bytes, refusing
// as Root.ReadFile does.
func (d *Dir) ReadFile(name string, max int64) ([]byte, error) {
	p := d.join(name)
	fd, err := openRetry(func() (int, error) {
		return unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, refuseOpen("read", p, err)
	}
	f, size, err := regular(fd, "read", p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readBounded(f, size, max, "read", p)
}

// RefusalLog logs each refusal once, with why, so that a file an agent
// planted costs one line however often it is met, and says whether a
// read's error leaves the file absent.
type RefusalLog struct {
	log  *slog.Logger
	mu   sync.Mutex
	seen map[refusedError]bool
}

// NewRefusalLog logs to log (nil: nothing is logged).
func NewRefusalLog(log *slog.Logger) *RefusalLog {
	return &RefusalLog{log: log, seen: map[refusedError]bool{}}
}

// Absent says whether err leaves the file absent for its reader: it does
// not exist, or it was refused, which is logged the first time.
func (l *RefusalLog) Absent(err error) bool {
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	r, ok := AsRefused(err)
	if !ok {
		return false
	}
	l.Note(r)
	return true
}

// Note logs r unless it was logged before.
func (l *RefusalLog) Note(r *refusedError) {
	if l == nil {
		return
	}
	l.mu.Lock()
	first := !l.seen[*r]
	l.seen[*r] = true
	l.mu.Unlock()
	if first && l.log != nil {
		l.log.Warn("a file below the agents root is refused; taken as absent", slog.String("path", r.Path), slog.String("why", r.Why), slog.String("op", r.Op))
	}
}

// Below is a directory (the agents root, or one of the node's own below
// it) whose Root is opened for each call and closed after: for a program
// that reads or writes a file or two there, and for an interface another
// package declares (fossilio's PasswordFiles).
type Below string

func (b Below) with(f func(r *Root) error) error {
	r, err := OpenRoot(string(b))
	if err != nil {
		return err
	}
	defer r.Close()
	return f(r)
}

// ReadFile is Root.ReadFile.
func (b Below) ReadFile(p string, max int64) (data []byte, err error) {
	err = b.with(func(r *Root) error { data, err = r.ReadFile(p, max); return err })
	return data, err
}

// ReadTail is Root.ReadTail.
func (b Below) ReadTail(p string, max int64) (tail []byte, size int64, err error) {
	err = b.with(func(r *Root) error { tail, size, err = r.ReadTail(p, max); return err })
	return tail, size, err
}

// ReadSecret is Root.ReadSecret.
func (b Below) ReadSecret(p string, max int64) (data []byte, err error) {
	err = b.with(func(r *Root) error { data, err = r.ReadSecret(p, max); return err })
	return data, err
}

// ReadDir is Root.ReadDir.
func (b Below) ReadDir(p string) (entries []fs.DirEntry, err error) {
	err = b.with(func(r *Root) error { entries, err = r.ReadDir(p); return err })
	return entries, err
}

// WriteFile is Root.WriteFile.
func (b Below) WriteFile(p string, data []byte, perm fs.FileMode) error {
	return b.with(func(r *Root) error { return r.WriteFile(p, data, perm) })
}

// MkdirAll is Root.MkdirAll.
func (b Below) MkdirAll(p string, perm fs.FileMode) error {
	return b.with(func(r *Root) error { return r.MkdirAll(p, perm) })
}

// Rename is Root.Rename.
func (b Below) Rename(from, to string) error {
	return b.with(func(r *Root) error { return r.Rename(from, to) })
}

// Remove is Root.Remove.
func (b Below) Remove(p string) error {
	return b.with(func(r *Root) error { return r.Remove(p) })
}

// ReadSecret reads a file only its owner may read (a password, a key), as
// ReadFile does: one that its group or others may read is refused, naming
// its mode, since what it holds would not be its owner's alone.
func (r *Root) ReadSecret(p string, max int64) ([]byte, error) {
	f, size, err := r.openRegular("read", p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, pathErr("read", f.Name(), err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, &refusedError{Op: "read", Path: f.Name(), Why: fmt.Sprintf("mode %v lets others read it", perm)}
	}
	return readBounded(f, size, max, "read", f.Name())
}

// ReadDir lists the directory at p, the root itself or a directory below
// it, reached through no link, sorted by name.
func (r *Root) ReadDir(p string) ([]fs.DirEntry, error) {
	var fd int
	var err error
	if filepath.Clean(p) == r.path {
		fd, err = openRetry(func() (int, error) {
			return unix.Openat(r.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		})
		if err != nil {
			return nil, pathErr("open", p, err)
		}
	} else {
		rel, rerr := r.rel("open", p)
		if rerr != nil {
			return nil, rerr
		}
		if fd, err = r.openBeneath(rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK, 0); err != nil {
			return nil, refuseOpen("open", p, err)
		}
	}
	f := os.NewFile(uintptr(fd), filepath.Clean(p))
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, pathErr("read", p, err)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

// Rename renames the file at from to the name to in the same directory
// below the root, replacing what is there (a link is replaced, not
// followed).
func (r *Root) Rename(from, to string) error {
	if filepath.Dir(filepath.Clean(from)) != filepath.Dir(filepath.Clean(to)) {
		return &fs.PathError{Op: "rename", Path: from, Err: fmt.Errorf("not in the directory of %s", to)}
	}
	rel, err := r.rel("rename", from)
	if err != nil {
		return err
	}
	dfd, name, err := r.parent(rel)
	if err != nil {
		return refuseOpen("rename", from, err)
	}
	defer unix.Close(dfd)
	if err := unix.Renameat(dfd, name, dfd, filepath.Base(to)); err != nil {
		return pathErr("rename", from, err)
	}
	return nil
}
