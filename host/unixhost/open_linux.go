package unixhost

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// OpenRegular opens the regular file at p below the root for a program
// that works on it in place through its descriptor, as SQLite works on an
// agent's clone (fossilio.OpenCloneFile, RememberFile): flag is
// os.O_RDONLY or os.O_RDWR. It refuses, with a *refusedError, as ReadFile
// does: a link anywhere below the root on the path, a named pipe (opened
// without waiting), a directory, a device or a socket. It refuses too a
// file with more than one name (a hard link): its other name may be a
// file of the node's, its repository say, which the agent could not
// reach from its sandbox but must never reach through the node. A missing
// file is fs.ErrNotExist.
func (r *Root) OpenRegular(p string, flag int) (*os.File, error) {
	const op = "open"
	if flag != os.O_RDONLY && flag != os.O_RDWR {
		return nil, pathErr(op, p, fmt.Errorf("flag %#x: only os.O_RDONLY or os.O_RDWR", flag))
	}
	rel, err := r.rel(op, p)
	if err != nil {
		return nil, err
	}
	fd, err := r.openBeneath(rel, flag|unix.O_NONBLOCK|unix.O_NOFOLLOW, 0)
	if err == unix.EISDIR {
		return nil, &refusedError{Op: op, Path: filepath.Clean(p), Why: "a directory"}
	}
	if err != nil {
		return nil, refuseOpen(op, p, err)
	}
	clean := filepath.Clean(p)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, pathErr(op, clean, err)
	}
	if why := kindOf(&st); why != "" {
		unix.Close(fd)
		return nil, &refusedError{Op: op, Path: clean, Why: why}
	}
	if st.Nlink > 1 {
		unix.Close(fd)
		return nil, &refusedError{Op: op, Path: clean, Why: fmt.Sprintf("a file with %d names (a hard link)", st.Nlink)}
	}
	// A regular file never blocks; the flag only kept a pipe from it.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, pathErr(op, clean, err)
	}
	return os.NewFile(uintptr(fd), clean), nil
}

// OwnedByUs says whether the file info st (of a file this process
// opened) belongs to this process's own account, and which account it
// belongs to: a file of secrets another account owns could have been
// written by it.
func OwnedByUs(st os.FileInfo) (owner int, ours bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, false
	}
	return int(s.Uid), int(s.Uid) == os.Geteuid()
}
