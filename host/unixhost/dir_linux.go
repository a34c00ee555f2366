package unixhost

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Dir is a directory opened without following a symbolic link. Its methods
// take one name in it, never a path, and open that name with O_NOFOLLOW, so
// nothing done through a Dir follows a link: the listening index is written
// through its session directory, and Root.WriteFile through the target's
// directory.
type Dir struct {
	f    *os.File
	fd   int
	path string
}

func newDir(fd int, path string) *Dir {
	return &Dir{f: os.NewFile(uintptr(fd), path), fd: fd, path: path}
}

// OpenDir opens the directory at p below the root, following no link.
func (r *Root) OpenDir(p string) (*Dir, error) {
	rel, err := r.rel("open", p)
	if err != nil {
		return nil, err
	}
	fd, err := r.openBeneath(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, pathErr("open", p, err)
	}
	return newDir(fd, filepath.Clean(p)), nil
}

// parentDir opens the directory that holds rel, following no link, for
// reading and syncing (parent's descriptor is O_PATH, which fsync refuses).
func (r *Root) parentDir(rel string) (*Dir, string, error) {
	pfd, name, err := r.parent(rel)
	if err != nil {
		return nil, "", err
	}
	defer unix.Close(pfd)
	fd, err := openRetry(func() (int, error) {
		return unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, "", err
	}
	return newDir(fd, filepath.Join(r.path, filepath.Dir(rel))), name, nil
}

// Path is the directory's path.
func (d *Dir) Path() string { return d.path }

// File is the directory's open file, for LockFile; closing it closes d.
func (d *Dir) File() *os.File { return d.f }

// Close closes the directory.
func (d *Dir) Close() error { return d.f.Close() }

func (d *Dir) join(name string) string { return filepath.Join(d.path, name) }

// OpenDir opens the directory name in d, not through a link.
func (d *Dir) OpenDir(name string) (*Dir, error) {
	fd, err := openRetry(func() (int, error) {
		return unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, pathErr("open", d.join(name), err)
	}
	return newDir(fd, d.join(name)), nil
}

// Names lists what d holds, each time afresh.
func (d *Dir) Names() ([]string, error) {
	fd, err := openRetry(func() (int, error) {
		return unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, pathErr("open", d.path, err)
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	return f.Readdirnames(-1)
}

// Mkdir makes the directory name in d with perm (less the umask).
func (d *Dir) Mkdir(name string, perm fs.FileMode) error {
	if err := unix.Mkdirat(d.fd, name, uint32(perm.Perm())); err != nil {
		return pathErr("mkdir", d.join(name), err)
	}
	return nil
}

// Sync commits d's entries to disk: what WriteFile and ExchangeDir renamed.
func (d *Dir) Sync() error {
	for {
		err := unix.Fsync(d.fd)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "sync", Path: d.path, Err: err}
		}
		return nil
	}
}

// WriteFile replaces the file name in d whole: it writes a temporary file
// beside it (created O_EXCL and O_NOFOLLOW), gives it exactly perm, syncs it
// and renames it over name, so a reader sees the old contents or the new,
// never half of them; a link at name is replaced, not followed. d itself is
// not synced: Sync it once after the writes to make them last.
func (d *Dir) WriteFile(name string, data []byte, perm fs.FileMode) error {
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := "." + name + ".tmp" + hex.EncodeToString(rnd[:])
	fd, err := openRetry(func() (int, error) {
		return unix.Openat(d.fd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	})
	if err != nil {
		return pathErr("write", d.join(name), err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm.Perm())
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(d.fd, tmp, d.fd, name)
	}
	if err != nil {
		unix.Unlinkat(d.fd, tmp, 0)
		return pathErr("write", d.join(name), err)
	}
	return nil
}

// Holds says whether name in d is a regular file holding exactly want. It
// opens name without following a link and without waiting, so that a named
// pipe planted there cannot hold it (and is not a regular file); anything it
// cannot read makes it false.
func (d *Dir) Holds(name string, want []byte) bool {
	fd, err := openRetry(func() (int, error) {
		return unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != int64(len(want)) {
		return false
	}
	var small [128]byte
	buf := small[:]
	if len(want) >= len(buf) {
		buf = make([]byte, len(want)+1)
	}
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false
		}
		if m == 0 {
			break
		}
		n += m
	}
	return bytes.Equal(buf[:n], want)
}

// renameat2 is unix.Renameat2; a test makes it refuse RENAME_EXCHANGE as a
// file system that cannot exchange does.
var renameat2 = unix.Renameat2

// ExchangeDir puts the directory from, in d, at to, in one step: renamed
// there when to is missing (or is a file or a link, removed first, never
// followed), or exchanged with the directory at to (renameat2's
// RENAME_EXCHANGE), which leaves the old directory at from for the caller to
// remove. On a file system that cannot exchange, each entry of from is
// renamed into to instead, and then what to holds beyond them removed: a
// name from holds is never missing from to, and from is left empty. d is not
// synced: Sync it to make the change last.
func (d *Dir) ExchangeDir(from, to string) error {
	fromPath, toPath := d.join(from), d.join(to)
	var st unix.Stat_t
	err := unix.Fstatat(d.fd, to, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case err == unix.ENOENT:
	case err != nil:
		return &fs.PathError{Op: "stat", Path: toPath, Err: err}
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		if err := unix.Unlinkat(d.fd, to, 0); err != nil {
			return &fs.PathError{Op: "remove", Path: toPath, Err: err}
		}
	default:
		err := renameat2(d.fd, from, d.fd, to, unix.RENAME_EXCHANGE)
		if err == unix.EINVAL || err == unix.ENOSYS || err == unix.EOPNOTSUPP {
			return d.moveInto(from, to)
		}
		if err != nil {
			return &os.LinkError{Op: "exchange", Old: fromPath, New: toPath, Err: err}
		}
		return nil
	}
	if err := renameat2(d.fd, from, d.fd, to, unix.RENAME_NOREPLACE); err != nil {
		return &os.LinkError{Op: "rename", Old: fromPath, New: toPath, Err: err}
	}
	return nil
}

// moveInto is ExchangeDir where directories cannot be exchanged: from's
// entries renamed into to, to synced, then to's other entries removed.
func (d *Dir) moveInto(from, to string) error {
	src, err := d.OpenDir(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := d.OpenDir(to)
	if err != nil {
		return err
	}
	defer dst.Close()
	names, err := src.Names()
	if err != nil {
		return err
	}
	keep := make(map[string]bool, len(names))
	for _, n := range names {
		if err := unix.Renameat(src.fd, n, dst.fd, n); err != nil {
			return &os.LinkError{Op: "rename", Old: src.join(n), New: dst.join(n), Err: err}
		}
		keep[n] = true
	}
	if err := dst.Sync(); err != nil {
		return err
	}
	old, err := dst.Names()
	if err != nil {
		return err
	}
	for _, n := range old {
		if keep[n] {
			continue
		}
		if err := removeAllAt(dst.fd, n); err != nil {
			return pathErr("remove", dst.join(n), err)
		}
	}
	return nil
}
