package unixhost

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// DirWatch counts the changes in a set of directories, by inotify: an
// entry made, removed, renamed, written or its attributes changed, a
// directory of the set removed or moved, and a pipe named Opens opened or
// closed. The kernel queues each event while the change is made, so
// Changes, which reads the queue before it counts, counts every change
// made before it was called: what a reader derived after one count is
// current while the count stays the same (D70). A queue that overflowed
// counts as a change.
type DirWatch struct {
	mu      sync.Mutex
	fd      int
	buf     []byte
	wds     map[int32]*watchedDir
	byPath  map[string]int32
	changes uint64
	closed  bool
}

// watchedDir is one directory of the set and what is not a change in it.
type watchedDir struct {
	path string
	rule DirRule
	// dev and ino are the directory's when it was watched: a file system
	// mounted over the path later (a workspace's own disk, D82) makes no
	// event, so Add compares them to what the path is now.
	dev, ino uint64
}

// DirRule says what of a directory's changes are not counted.
type DirRule struct {
	// Ignore names entries whose changes are not counted: a log written
	// all the time that no reader reads.
	Ignore func(name string) bool
	// Opens names the entries (a session's wake pipe) whose opening and
	// closing count: whether a process holds one open is what is read of
	// it. Opening other entries, as a reader does, is not a change.
	Opens map[string]bool
}

// The changes counted; an open and a close only for DirRule.Opens.
const (
	dirChangeMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
		unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
	dirOpenMask = unix.IN_OPEN | unix.IN_CLOSE_NOWRITE
)

// NewDirWatch starts an empty watch.
func NewDirWatch() (*DirWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("unixhost: inotify: %w", err)
	}
	return &DirWatch{fd: fd, buf: make([]byte, 64<<10), wds: map[int32]*watchedDir{}, byPath: map[string]int32{}}, nil
}

// Add watches the directory dir under rule, following no link in its
// last element; added is false when it was watched already. A directory
// that is not there, or a link or a file in its place, is an error that
// is fs.ErrNotExist: its parent's watch sees it made.
func (w *DirWatch) Add(dir string, rule DirRule) (added bool, err error) {
	dir = filepath.Clean(dir)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false, errors.New("unixhost: the directory watch is closed")
	}
	var st unix.Stat_t
	statErr := unix.Lstat(dir, &st)
	if wd, ok := w.byPath[dir]; ok {
		d := w.wds[wd]
		if statErr != nil || (d.dev == st.Dev && d.ino == st.Ino) {
			return false, nil
		}
		// Another directory at the path now (a file system mounted over
		// it, or one unmounted): its watch is the old one's no longer.
		unix.InotifyRmWatch(w.fd, uint32(wd))
		delete(w.wds, wd)
		delete(w.byPath, dir)
		w.changes++
	}
	mask := uint32(dirChangeMask | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW | unix.IN_EXCL_UNLINK)
	if len(rule.Opens) > 0 {
		mask |= dirOpenMask
	}
	wd, err := unix.InotifyAddWatch(w.fd, dir, mask)
	if err == unix.ENOTDIR {
		// A link or a file where a directory is read: no directory is
		// there to watch, and what reads it finds none either.
		return false, pathErr("watch", dir, fmt.Errorf("not a directory: %w", fs.ErrNotExist))
	}
	if err != nil {
		return false, pathErr("watch", dir, err)
	}
	// Two paths of one directory share its descriptor: the later rule
	// holds, and the earlier path is forgotten.
	if old, ok := w.wds[int32(wd)]; ok {
		delete(w.byPath, old.path)
	}
	w.wds[int32(wd)] = &watchedDir{path: dir, rule: rule, dev: st.Dev, ino: st.Ino}
	w.byPath[dir] = int32(wd)
	return true, nil
}

// Watched counts the directories watched.
func (w *DirWatch) Watched() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.wds)
}

// Changes reads every queued event and returns the count of changes so
// far.
func (w *DirWatch) Changes() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.changes
	}
	for {
		n, err := unix.Read(w.fd, w.buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return w.changes
		}
		w.applyLocked(w.buf[:n])
	}
}

// applyLocked counts the changes among the events in b.
func (w *DirWatch) applyLocked(b []byte) {
	for _, e := range parseInotify(b) {
		switch {
		case e.mask&unix.IN_Q_OVERFLOW != 0:
			w.changes++
			continue
		case e.mask&unix.IN_IGNORED != 0:
			// The directory went (removed, or its file system unmounted):
			// a change, and its descriptor may be given to another.
			if d, ok := w.wds[e.wd]; ok {
				delete(w.byPath, d.path)
				delete(w.wds, e.wd)
			}
			w.changes++
			continue
		}
		d, ok := w.wds[e.wd]
		if !ok {
			continue
		}
		if e.name != "" && d.rule.Ignore != nil && d.rule.Ignore(e.name) {
			continue
		}
		if e.mask&dirChangeMask == 0 && !d.rule.Opens[e.name] {
			continue // an open or a close of an entry nobody watches opened
		}
		w.changes++
	}
}

// Close ends the watch.
func (w *DirWatch) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	return unix.Close(w.fd)
}

// inotifyEvent is one event of an inotify read.
type inotifyEvent struct {
	wd   int32
	mask uint32
	name string
}

// parseInotify reads the events of one read of an inotify descriptor
// (struct inotify_event: wd, mask, cookie, len, then len bytes of name
// padded with NULs). A truncated event ends the read.
func parseInotify(b []byte) []inotifyEvent {
	var out []inotifyEvent
	le := binary.LittleEndian
	for len(b) >= unix.SizeofInotifyEvent {
		e := inotifyEvent{wd: int32(le.Uint32(b)), mask: le.Uint32(b[4:])}
		n := int(le.Uint32(b[12:]))
		if n < 0 || unix.SizeofInotifyEvent+n > len(b) {
			break
		}
		name := b[unix.SizeofInotifyEvent : unix.SizeofInotifyEvent+n]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		e.name = string(name)
		out = append(out, e)
		b = b[unix.SizeofInotifyEvent+n:]
	}
	return out
}
