package unixhost

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The release root's links (docs/releases.md) are replaced whole: a new link
// made at a temporary name beside the old one and renamed over it, then the
// directory synced. rename(2) replaces the link itself, never what it points
// at, and at no instant is there no link at the name: a reader resolving it
// meanwhile finds the old target or the new one. (`ln -sf` removes the old
// link first and leaves that instant.) The directory's own path may hold
// links: the release root is the operator's, not an agent's.

// ReplaceLink makes link a symbolic link to target (as written: a relative
// target is read from link's directory), in one step. Something at link
// that is not a symbolic link (a release directory, a file) is refused and
// left alone.
func ReplaceLink(link, target string) error {
	if target == "" {
		return &fs.PathError{Op: "link", Path: link, Err: errors.New("no target")}
	}
	d, name, err := openParent("link", link)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.refuseNonLink("link", name); err != nil {
		return err
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := "." + name + ".tmp" + hex.EncodeToString(rnd[:])
	if err := unix.Symlinkat(target, d.fd, tmp); err != nil {
		return &fs.PathError{Op: "link", Path: d.join(tmp), Err: err}
	}
	if err := unix.Renameat(d.fd, tmp, d.fd, name); err != nil {
		unix.Unlinkat(d.fd, tmp, 0)
		return &os.LinkError{Op: "rename", Old: d.join(tmp), New: link, Err: err}
	}
	return d.Sync()
}

// RemoveLink removes the symbolic link at link, not what it points at, and
// syncs its directory. No link there is not an error; something else there
// is refused and left alone.
func RemoveLink(link string) error {
	d, name, err := openParent("unlink", link)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	defer d.Close()
	if err := d.refuseNonLink("unlink", name); err != nil {
		return err
	}
	if err := unix.Unlinkat(d.fd, name, 0); err != nil && err != unix.ENOENT {
		return &fs.PathError{Op: "unlink", Path: link, Err: err}
	}
	return d.Sync()
}

// openParent opens the directory holding p for syncing, with p's last name.
func openParent(op, p string) (*Dir, string, error) {
	if !filepath.IsAbs(p) {
		return nil, "", &fs.PathError{Op: op, Path: p, Err: errors.New("not an absolute path")}
	}
	p = filepath.Clean(p)
	dir, name := filepath.Split(p)
	if name == "" {
		return nil, "", &fs.PathError{Op: op, Path: p, Err: errors.New("no name to link")}
	}
	fd, err := openRetry(func() (int, error) {
		return unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, "", &fs.PathError{Op: op, Path: dir, Err: err}
	}
	return newDir(fd, filepath.Clean(dir)), name, nil
}

// refuseNonLink is an error when name in d is there and is not a symbolic
// link.
func (d *Dir) refuseNonLink(op, name string) error {
	var st unix.Stat_t
	err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case err == unix.ENOENT:
		return nil
	case err != nil:
		return &fs.PathError{Op: op, Path: d.join(name), Err: err}
	case st.Mode&unix.S_IFMT != unix.S_IFLNK:
		return &fs.PathError{Op: op, Path: d.join(name), Err: errors.New("is there and is not a symbolic link; left alone")}
	}
	return nil
}
