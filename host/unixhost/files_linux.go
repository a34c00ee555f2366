package unixhost

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Root writes and reads below the agents root without following any symbolic
// link below it: an agent owns its workspace directory, and a link it plants
// there must not turn a write of the daemon's (running as the node's account)
// into a write elsewhere. It uses openat2 with RESOLVE_BENEATH and
// RESOLVE_NO_SYMLINKS, or, where the kernel lacks openat2, a walk that opens
// each component with O_NOFOLLOW. Links in the root's own path are followed
// once, when it is opened.
type Root struct {
	path string
	fd   int // O_PATH descriptor of the root
	walk bool
}

// OpenRoot opens the agents root at path, which must exist and be absolute.
func OpenRoot(path string) (*Root, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("unixhost: open root %q: not an absolute path", path)
	}
	path = filepath.Clean(path)
	fd, err := openRetry(func() (int, error) {
		return unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open root", Path: path, Err: err}
	}
	r := &Root{path: path, fd: fd}
	probe, err := unix.Openat2(fd, ".", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: resolveFlags})
	if err == nil {
		unix.Close(probe)
	} else {
		r.walk = true
	}
	return r, nil
}

const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// Path is the root's path.
func (r *Root) Path() string { return r.path }

// Close releases the root's descriptor.
func (r *Root) Close() error { return unix.Close(r.fd) }

// rel returns p relative to the root. p must be absolute and lie strictly
// below the root; it is cleaned first, so ".." cannot climb out.
func (r *Root) rel(op, p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", &fs.PathError{Op: op, Path: p, Err: errors.New("not an absolute path")}
	}
	c := filepath.Clean(p)
	prefix := r.path + "/"
	if r.path == "/" {
		prefix = "/"
	}
	rel, ok := strings.CutPrefix(c, prefix)
	if !ok || rel == "" {
		return "", &fs.PathError{Op: op, Path: p, Err: fmt.Errorf("not below the agents root %s", r.path)}
	}
	return rel, nil
}

// openRetry retries an open that was interrupted, or that openat2 asks to
// retry because a rename raced with its lookup.
func openRetry(open func() (int, error)) (int, error) {
	for i := 0; ; i++ {
		fd, err := open()
		if (err == unix.EINTR || err == unix.EAGAIN) && i < 100 {
			continue
		}
		return fd, err
	}
}

// openBeneath opens rel below the root with flags, following no link.
func (r *Root) openBeneath(rel string, flags int, mode uint32) (int, error) {
	if !r.walk {
		how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolveFlags}
		fd, err := openRetry(func() (int, error) { return unix.Openat2(r.fd, rel, how) })
		if err != unix.ENOSYS {
			return fd, err
		}
	}
	dir, name := filepath.Split(rel)
	dfd, err := r.walkDir(strings.TrimSuffix(dir, "/"))
	if err != nil {
		return -1, err
	}
	defer unix.Close(dfd)
	return openRetry(func() (int, error) {
		return unix.Openat(dfd, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	})
}

// walkDir opens the directory rel below the root component by component, each
// with O_NOFOLLOW, and returns a descriptor the caller closes.
func (r *Root) walkDir(rel string) (int, error) {
	fd, err := unix.Dup(r.fd)
	if err != nil {
		return -1, err
	}
	if rel == "" || rel == "." {
		return fd, nil
	}
	for _, c := range strings.Split(rel, "/") {
		next, err := openRetry(func() (int, error) {
			return unix.Openat(fd, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		})
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// parent opens the directory that holds rel, following no link, and returns
// it with rel's last name.
func (r *Root) parent(rel string) (int, string, error) {
	dir, name := filepath.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		fd, err := unix.Dup(r.fd)
		return fd, name, err
	}
	if r.walk {
		fd, err := r.walkDir(dir)
		return fd, name, err
	}
	fd, err := r.openBeneath(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	return fd, name, err
}

func pathErr(op, p string, err error) error {
	if err == unix.ELOOP || err == unix.EXDEV {
		err = fmt.Errorf("a symbolic link lies on the path or the path leaves the agents root: %w", err)
	}
	return &fs.PathError{Op: op, Path: p, Err: err}
}

// OpenFile opens the file at p with flag (os.O_* values) and, when it creates
// the file, perm.
func (r *Root) OpenFile(p string, flag int, perm fs.FileMode) (*os.File, error) {
	rel, err := r.rel("open", p)
	if err != nil {
		return nil, err
	}
	fd, err := r.openBeneath(rel, flag, uint32(perm.Perm()))
	if err != nil {
		return nil, pathErr("open", p, err)
	}
	return os.NewFile(uintptr(fd), filepath.Clean(p)), nil
}

// MkdirAll makes the directory p and any parent below the root that is
// missing, with perm (less the umask); a link where a directory should be is
// an error.
func (r *Root) MkdirAll(p string, perm fs.FileMode) error {
	rel, err := r.rel("mkdir", p)
	if err != nil {
		return err
	}
	fd, err := unix.Dup(r.fd)
	if err != nil {
		return pathErr("mkdir", p, err)
	}
	defer func() { unix.Close(fd) }()
	for _, c := range strings.Split(rel, "/") {
		if err := unix.Mkdirat(fd, c, uint32(perm.Perm())); err != nil && err != unix.EEXIST {
			return pathErr("mkdir", p, err)
		}
		next, err := openRetry(func() (int, error) {
			return unix.Openat(fd, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		})
		if err != nil {
			if err == unix.ENOTDIR {
				err = fmt.Errorf("%s is not a directory (or is a symbolic link): %w", c, err)
			}
			return pathErr("mkdir", p, err)
		}
		unix.Close(fd)
		fd = next
	}
	return nil
}

// WriteFile replaces the file at p whole (Dir.WriteFile in p's directory,
// which is then synced): a reader sees the old contents or the new, never
// half of them, and a link at p is replaced, not followed.
func (r *Root) WriteFile(p string, data []byte, perm fs.FileMode) error {
	rel, err := r.rel("write", p)
	if err != nil {
		return err
	}
	d, name, err := r.parentDir(rel)
	if err != nil {
		return pathErr("write", p, err)
	}
	defer d.Close()
	if err := d.WriteFile(name, data, perm); err != nil {
		return err
	}
	// As before, the file is written once it is renamed; a directory that
	// cannot be synced does not undo that.
	d.Sync()
	return nil
}

// maxRewrite bounds RewriteInPlace: what fits in the first page of a file.
const maxRewrite = 4096

// RewriteInPlace replaces the contents of the small file f (one that holds
// its own lock, so it cannot be replaced by a rename: the hook's mark)
// with data, never leaving it empty nor half of one and half of the other
// once it returns (a read during the write, taking no lock, may see part
// of it: host.ReadHookMark reads again until two reads agree):
// data is written over the old contents from offset 0 in one pwrite(2),
// within the file's first page, which the old contents (when there were
// any) already hold, so a full disk does not refuse it; then the file is
// cut to len(data), which only ever shrinks it. A failed write leaves the
// old contents. data must be at most 4096 bytes.
func RewriteInPlace(f *os.File, data []byte) error {
	if len(data) > maxRewrite {
		return &fs.PathError{Op: "rewrite", Path: f.Name(), Err: fmt.Errorf("%d bytes, more than the %d a rewrite in place takes", len(data), maxRewrite)}
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return &fs.PathError{Op: "rewrite", Path: f.Name(), Err: err}
	}
	var werr error
	cerr := rc.Control(func(fd uintptr) {
		var n int
		for {
			n, werr = unix.Pwrite(int(fd), data, 0)
			if werr != unix.EINTR {
				break
			}
		}
		if werr == nil && n < len(data) {
			werr = fmt.Errorf("short write: %d of %d bytes", n, len(data))
		}
		for werr == nil {
			werr = unix.Ftruncate(int(fd), int64(len(data)))
			if werr != unix.EINTR {
				break
			}
			werr = nil
		}
	})
	if cerr != nil {
		werr = cerr
	}
	if werr != nil {
		return &fs.PathError{Op: "rewrite", Path: f.Name(), Err: werr}
	}
	return nil
}

// Remove removes the file or empty directory at p; a link is removed, not
// followed. A p that does not exist is not an error.
func (r *Root) Remove(p string) error {
	dfd, name, ok, err := r.removeParent(p)
	if !ok {
		return err
	}
	defer unix.Close(dfd)
	err = unix.Unlinkat(dfd, name, 0)
	if err == unix.EISDIR {
		err = unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR)
	}
	if err != nil && err != unix.ENOENT {
		return pathErr("remove", p, err)
	}
	return nil
}

// RemoveAll removes p and all it holds, following no link: a link inside is
// removed as a link.
func (r *Root) RemoveAll(p string) error {
	dfd, name, ok, err := r.removeParent(p)
	if !ok {
		return err
	}
	defer unix.Close(dfd)
	if err := removeAllAt(dfd, name); err != nil {
		return pathErr("remove", p, err)
	}
	return nil
}

// removeParent opens the directory a removal of p works in, and names p in
// it; ok is false when there is nothing to remove (err nil: its parent is
// not there) or the parent cannot be opened (err says why).
func (r *Root) removeParent(p string) (dfd int, name string, ok bool, err error) {
	rel, err := r.rel("remove", p)
	if err != nil {
		return -1, "", false, err
	}
	dfd, name, err = r.parent(rel)
	if err != nil {
		if err == unix.ENOENT {
			return -1, "", false, nil
		}
		return -1, "", false, pathErr("remove", p, err)
	}
	return dfd, name, true, nil
}

func removeAllAt(dfd int, name string) error {
	err := unix.Unlinkat(dfd, name, 0)
	if err == nil || err == unix.ENOENT {
		return nil
	}
	if err != unix.EISDIR {
		return err
	}
	fd, err := openRetry(func() (int, error) {
		return unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(fd), name)
	for {
		names, rerr := d.Readdirnames(256)
		for _, n := range names {
			if err := removeAllAt(fd, n); err != nil {
				d.Close()
				return err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			d.Close()
			return rerr
		}
	}
	d.Close()
	if err := unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT {
		return err
	}
	return nil
}

// Mkfifo makes a named pipe at p with exactly perm. A pipe already there is
// kept and given perm; anything else there is an error.
func (r *Root) Mkfifo(p string, perm fs.FileMode) error {
	rel, err := r.rel("mkfifo", p)
	if err != nil {
		return err
	}
	dfd, name, err := r.parent(rel)
	if err != nil {
		return pathErr("mkfifo", p, err)
	}
	defer unix.Close(dfd)
	if err := unix.Mkfifoat(dfd, name, uint32(perm.Perm())); err != nil && err != unix.EEXIST {
		return pathErr("mkfifo", p, err)
	}
	// Opening a pipe for reading without waiting never blocks; through the
	// descriptor the mode is set on the pipe itself, never on a link's target.
	fd, err := openRetry(func() (int, error) {
		return unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return pathErr("mkfifo", p, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return pathErr("mkfifo", p, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return pathErr("mkfifo", p, errors.New("something other than a named pipe is there"))
	}
	if err := unix.Fchmod(fd, uint32(perm.Perm())); err != nil {
		return pathErr("mkfifo", p, err)
	}
	return nil
}

// Reclaim makes room at p below the root for what the node makes there:
// a directory (want fs.ModeDir), a named pipe (fs.ModeNamedPipe) or a
// regular file (0). Anything else at p, a link above all, is removed (a
// directory with what it holds, no link followed), and what it was is
// returned for the caller to log; "" when p is missing or already of the
// kind wanted. A workspace is its agent's to fill: what it planted where
// the node writes harms only its own session, which the node then makes
// afresh (docs/trust.md).
func (r *Root) Reclaim(p string, want fs.FileMode) (string, error) {
	rel, err := r.rel("reclaim", p)
	if err != nil {
		return "", err
	}
	dfd, name, err := r.parent(rel)
	if err != nil {
		if err == unix.ENOENT {
			return "", nil
		}
		return "", refuseOpen("reclaim", p, err)
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return "", nil
		}
		return "", pathErr("reclaim", p, err)
	}
	var is fs.FileMode
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		is = fs.ModeDir
	case unix.S_IFIFO:
		is = fs.ModeNamedPipe
	case unix.S_IFREG:
		is = 0
	default:
		is = fs.ModeIrregular
	}
	if is == want.Type() {
		return "", nil
	}
	what := kindOf(&st)
	if what == "" {
		what = "a regular file"
	}
	if err := removeAllAt(dfd, name); err != nil {
		return what, pathErr("reclaim", p, err)
	}
	return what, nil
}

// AppendBounded appends data to the regular file at p below the root,
// made (0600) when missing in a directory that is there, in one write:
// one that stops short (a full disk) is cut back off, so the file holds
// whole appends alone. A file that would pass max is emptied first, and
// emptied says so (the caller's oldest records are lost).
func AppendBounded(r *Root, p string, data []byte, max int64) (emptied bool, err error) {
	f, err := r.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE|unix.O_NONBLOCK, 0o600)
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	if !st.Mode().IsRegular() {
		return false, &fs.PathError{Op: "append", Path: p, Err: fmt.Errorf("not a regular file (%s)", st.Mode().Type())}
	}
	size := st.Size()
	if size+int64(len(data)) > max {
		if err := f.Truncate(0); err != nil {
			return false, err
		}
		size, emptied = 0, true
	}
	n, err := f.Write(data)
	if err != nil || n < len(data) {
		f.Truncate(size)
		if err == nil {
			err = io.ErrShortWrite
		}
		return emptied, &fs.PathError{Op: "append", Path: p, Err: err}
	}
	return emptied, nil
}
