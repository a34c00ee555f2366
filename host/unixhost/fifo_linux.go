package unixhost

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
)

// PipeReader reads lines from a named pipe: the daemon's AGENTS/ocxd, or a
// session's wake pipe. It holds a write end of its own, so it never sees EOF
// while writers come and go, and it reads through Go's poller, so Close
// unblocks a Run in progress.
type PipeReader struct {
	path    string
	r       *os.File
	w       *os.File
	maxLine int
	dropped atomic.Int64

	mu       sync.Mutex
	running  chan struct{} // closed when Run returns; nil while it does not run
	stopping bool
	rest     []byte // the start of a line not yet complete, across Stop and adoption
}

// DefaultMaxLine bounds a line the reader keeps; a longer one is dropped and
// counted. Writers write at most host.PipeBuf bytes per line.
const DefaultMaxLine = 64 << 10

// OpenPipeReader opens the named pipe at path below root for reading.
func OpenPipeReader(root *Root, path string) (*PipeReader, error) {
	rfd, err := root.openFIFO(path)
	if err != nil {
		return nil, err
	}
	// The write end is opened through the read end's descriptor, so it is the
	// same pipe even if the path were replaced in between.
	wfd, err := openRetry(func() (int, error) {
		return unix.Open(fmt.Sprintf("/proc/self/fd/%d", rfd), unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		unix.Close(rfd)
		return nil, pathErr("open pipe", path, err)
	}
	return newPipeReader(rfd, wfd, path), nil
}

// OpenFIFO opens the named pipe at p below the root for reading, without
// waiting for a writer (O_NONBLOCK) and following no link; anything but a
// named pipe there is refused. It reads through Go's poller, so a read
// deadline holds: the daemon's drain reads its pipe to the end this way.
func (r *Root) OpenFIFO(p string) (*os.File, error) {
	fd, err := r.openFIFO(p)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), filepath.Clean(p)), nil
}

func (r *Root) openFIFO(p string) (int, error) {
	rel, err := r.rel("open pipe", p)
	if err != nil {
		return -1, err
	}
	fd, err := r.openBeneath(rel, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return -1, pathErr("open pipe", p, err)
	}
	if err := isFIFO(fd); err != nil {
		unix.Close(fd)
		return -1, pathErr("open pipe", p, err)
	}
	return fd, nil
}

func newPipeReader(rfd, wfd int, path string) *PipeReader {
	return &PipeReader{path: path, r: os.NewFile(uintptr(rfd), path), w: os.NewFile(uintptr(wfd), path), maxLine: DefaultMaxLine}
}

func isFIFO(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return errors.New("not a named pipe")
	}
	return nil
}

// AdoptPipeReader takes over the two descriptors a previous image kept with
// KeepOnExec, and rest, the start of a line its Stop returned. Both
// descriptors must be ends of the same pipe.
func AdoptPipeReader(rfd, wfd int, path string, rest []byte) (*PipeReader, error) {
	var a, b unix.Stat_t
	if err := unix.Fstat(rfd, &a); err != nil {
		return nil, pathErr("adopt pipe", path, err)
	}
	if err := unix.Fstat(wfd, &b); err != nil {
		return nil, pathErr("adopt pipe", path, err)
	}
	if a.Mode&unix.S_IFMT != unix.S_IFIFO || a.Dev != b.Dev || a.Ino != b.Ino {
		return nil, pathErr("adopt pipe", path, fmt.Errorf("descriptors %d and %d are not both ends of one named pipe", rfd, wfd))
	}
	for _, fd := range []int{rfd, wfd} {
		unix.CloseOnExec(fd)
		if err := unix.SetNonblock(fd, true); err != nil {
			return nil, pathErr("adopt pipe", path, err)
		}
	}
	p := newPipeReader(rfd, wfd, path)
	p.rest = bytes.Clone(rest)
	return p, nil
}

// SetBuffer asks the kernel for a pipe buffer of n bytes (F_SETPIPE_SZ), so a
// burst of writers waits less; it returns the size granted.
func (p *PipeReader) SetBuffer(n int) (int, error) {
	var size int
	var serr error
	rc, err := p.r.SyscallConn()
	if err != nil {
		return 0, err
	}
	if err := rc.Control(func(fd uintptr) {
		size, serr = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, n)
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, pathErr("size pipe", p.path, serr)
	}
	return size, nil
}

// KeepOnExec clears close-on-exec on both descriptors and returns them for
// the hand-off; after an exec, AdoptPipeReader takes them over. Lines written
// meanwhile wait in the pipe.
func (p *PipeReader) KeepOnExec() (rfd, wfd int, err error) {
	fds := [2]int{-1, -1}
	for i, f := range []*os.File{p.r, p.w} {
		rc, err := f.SyscallConn()
		if err != nil {
			return -1, -1, err
		}
		var ferr error
		if err := rc.Control(func(fd uintptr) {
			fds[i] = int(fd)
			_, ferr = unix.FcntlInt(fd, unix.F_SETFD, 0)
		}); err != nil {
			return -1, -1, err
		}
		if ferr != nil {
			return -1, -1, pathErr("keep pipe on exec", p.path, ferr)
		}
	}
	return fds[0], fds[1], nil
}

// Reopen makes a new reader of the same pipe on duplicates of p's two
// descriptors (close-on-exec), starting with rest, the start of a line p's
// Stop returned: a stopped reader cannot run again, so a re-exec that did
// not happen goes on with this one. p is still to be closed.
func (p *PipeReader) Reopen(rest []byte) (*PipeReader, error) {
	fds := [2]int{-1, -1}
	closeAll := func() {
		for _, fd := range fds {
			CloseFD(fd)
		}
	}
	for i, f := range []*os.File{p.r, p.w} {
		rc, err := f.SyscallConn()
		if err != nil {
			closeAll()
			return nil, pathErr("reopen pipe", p.path, err)
		}
		var derr error
		if err := rc.Control(func(fd uintptr) {
			fds[i], derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
		}); err != nil {
			derr = err
		}
		if derr != nil {
			fds[i] = -1
			closeAll()
			return nil, pathErr("reopen pipe", p.path, derr)
		}
	}
	r, err := AdoptPipeReader(fds[0], fds[1], p.path, rest)
	if err != nil {
		closeAll()
		return nil, err
	}
	return r, nil
}

// Dropped counts the lines dropped for being longer than the reader keeps.
func (p *PipeReader) Dropped() int64 { return p.dropped.Load() }

// Run reads until Close or Stop, calling fn with each complete line, without
// its newline; the slice is valid only during the call. It returns nil once
// closed or stopped, or the read error that stopped it.
func (p *PipeReader) Run(fn func(line []byte)) error {
	p.mu.Lock()
	if p.running != nil {
		p.mu.Unlock()
		return pathErr("read pipe", p.path, errors.New("already being read"))
	}
	done := make(chan struct{})
	p.running = done
	rest := p.rest
	p.rest = nil
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.running = nil
		p.mu.Unlock()
		close(done)
	}()
	b := &lineBuf{buf: make([]byte, 256<<10)}
	b.end = copy(b.buf, rest)
	for {
		b.lines(p.maxLine, &p.dropped, fn)
		b.room(&p.dropped)
		n, err := p.r.Read(b.buf[b.end:])
		b.end += n
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && p.isStopping() {
			// Stop: keep what was read of an incomplete line for the hand-off.
			if rest, ok := b.last(p.maxLine, fn); ok {
				p.mu.Lock()
				p.rest = rest
				p.mu.Unlock()
			}
			return nil
		}
		if errors.Is(err, os.ErrClosed) {
			return nil
		}
		if err == io.EOF {
			// Impossible while the reader holds its own write end.
			return pathErr("read pipe", p.path, io.ErrUnexpectedEOF)
		}
		return pathErr("read pipe", p.path, err)
	}
}

// lineBuf is what Run has read and not yet handed on: buf[start:end].
type lineBuf struct {
	buf        []byte
	start, end int
	// discarding: a line filled buf; the rest of it, up to its newline,
	// is dropped.
	discarding bool
}

// lines hands fn each complete line, without its newline, dropping (and
// counting in dropped) those longer than maxLine.
func (b *lineBuf) lines(maxLine int, dropped *atomic.Int64, fn func(line []byte)) {
	for b.start < b.end {
		i := bytes.IndexByte(b.buf[b.start:b.end], '\n')
		if i < 0 {
			break
		}
		line := b.buf[b.start : b.start+i]
		b.start += i + 1
		if b.discarding {
			b.discarding = false
			continue
		}
		if len(line) > maxLine {
			dropped.Add(1)
			continue
		}
		fn(line)
	}
	if b.start == b.end {
		b.start, b.end = 0, 0
	}
}

// room makes room for the next read when buf is full: it keeps the partial
// line, or drops it when it fills the buffer.
func (b *lineBuf) room(dropped *atomic.Int64) {
	if b.end != len(b.buf) {
		return
	}
	if b.start > 0 {
		b.end = copy(b.buf, b.buf[b.start:b.end])
		b.start = 0
		return
	}
	// One line fills the buffer: drop it, and whatever follows of it until
	// its newline.
	if !b.discarding {
		dropped.Add(1)
	}
	b.discarding = true
	b.start, b.end = 0, 0
}

// last hands on, at a stop, the complete lines that came with the last
// read, and returns a copy of the incomplete line left for the hand-off
// (ok false while a dropped line is being discarded).
func (b *lineBuf) last(maxLine int, fn func(line []byte)) (rest []byte, ok bool) {
	for b.start < b.end && !b.discarding {
		i := bytes.IndexByte(b.buf[b.start:b.end], '\n')
		if i < 0 {
			break
		}
		if line := b.buf[b.start : b.start+i]; len(line) <= maxLine {
			fn(line)
		}
		b.start += i + 1
	}
	if b.discarding {
		return nil, false
	}
	return bytes.Clone(b.buf[b.start:b.end]), true
}

func (p *PipeReader) isStopping() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopping
}

// Stop ends Run without closing the pipe, for a re-exec: it returns the
// start of a line read but not yet complete, which the next image gives to
// AdoptPipeReader. Lines still in the pipe stay there for it.
func (p *PipeReader) Stop() []byte {
	p.mu.Lock()
	p.stopping = true
	done := p.running
	p.mu.Unlock()
	p.r.SetReadDeadline(time.Unix(1, 0))
	if done != nil {
		<-done
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	rest := p.rest
	p.rest = nil
	return rest
}

// Close stops Run and closes both ends.
func (p *PipeReader) Close() error {
	err := p.r.Close()
	if werr := p.w.Close(); err == nil {
		err = werr
	}
	return err
}

// LineWriter holds a named pipe open for writing lines.
type LineWriter struct {
	path string
	fd   int
	// Wait bounds how long a write waits while the pipe is full; 0 means one
	// second.
	Wait time.Duration
	mu   sync.Mutex
	buf  []byte
}

// OpenLineWriter opens the named pipe at path below root for writing, without
// waiting: host.ErrNoReader when nobody reads it.
func OpenLineWriter(root *Root, path string) (*LineWriter, error) {
	rel, err := root.rel("open pipe", path)
	if err != nil {
		return nil, err
	}
	fd, err := root.openBeneath(rel, unix.O_WRONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		if err == unix.ENXIO {
			return nil, &fs.PathError{Op: "open pipe", Path: path, Err: host.ErrNoReader}
		}
		return nil, pathErr("open pipe", path, err)
	}
	if err := isFIFO(fd); err != nil {
		unix.Close(fd)
		return nil, pathErr("open pipe", path, err)
	}
	return &LineWriter{path: path, fd: fd}, nil
}

// WriteLine writes line and a newline in one atomic write: host.ErrLineTooLong
// if that is more than host.PipeBuf bytes, host.ErrNoReader if the last reader
// went away, host.ErrPipeFull if the pipe stayed full past Wait.
func (w *LineWriter) WriteLine(line []byte) error {
	if bytes.IndexByte(line, '\n') >= 0 {
		return &fs.PathError{Op: "write pipe", Path: w.path, Err: errors.New("the line holds a newline")}
	}
	if len(line)+1 > host.PipeBuf {
		return &fs.PathError{Op: "write pipe", Path: w.path, Err: fmt.Errorf("%w: %d bytes", host.ErrLineTooLong, len(line)+1)}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(append(w.buf[:0], line...), '\n')
	return w.write(w.buf)
}

// WriteLines writes whole lines, packing as many as fit into each write of at
// most host.PipeBuf bytes: every line still arrives whole.
func (w *LineWriter) WriteLines(lines [][]byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = w.buf[:0]
	for _, l := range lines {
		if bytes.IndexByte(l, '\n') >= 0 {
			return &fs.PathError{Op: "write pipe", Path: w.path, Err: errors.New("a line holds a newline")}
		}
		if len(l)+1 > host.PipeBuf {
			return &fs.PathError{Op: "write pipe", Path: w.path, Err: fmt.Errorf("%w: %d bytes", host.ErrLineTooLong, len(l)+1)}
		}
		if len(w.buf)+len(l)+1 > host.PipeBuf {
			if err := w.write(w.buf); err != nil {
				return err
			}
			w.buf = w.buf[:0]
		}
		w.buf = append(append(w.buf, l...), '\n')
	}
	if len(w.buf) > 0 {
		return w.write(w.buf)
	}
	return nil
}

func (w *LineWriter) write(b []byte) error {
	wait := w.Wait
	if wait <= 0 {
		wait = time.Second
	}
	deadline := time.Now().Add(wait)
	for {
		n, err := unix.Write(w.fd, b)
		switch {
		case err == nil && n == len(b):
			return nil
		case err == nil:
			// A write of at most PIPE_BUF bytes is all or nothing.
			return &fs.PathError{Op: "write pipe", Path: w.path, Err: fmt.Errorf("short write: %d of %d bytes", n, len(b))}
		case err == unix.EINTR:
		case err == unix.EPIPE:
			return &fs.PathError{Op: "write pipe", Path: w.path, Err: host.ErrNoReader}
		case err == unix.EAGAIN:
			left := time.Until(deadline)
			if left <= 0 {
				return &fs.PathError{Op: "write pipe", Path: w.path, Err: host.ErrPipeFull}
			}
			pfd := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLOUT}}
			if _, err := unix.Poll(pfd, int(left/time.Millisecond)+1); err != nil && err != unix.EINTR {
				return &fs.PathError{Op: "write pipe", Path: w.path, Err: err}
			}
		default:
			return &fs.PathError{Op: "write pipe", Path: w.path, Err: err}
		}
	}
}

// Close closes the pipe.
func (w *LineWriter) Close() error {
	if err := unix.Close(w.fd); err != nil {
		return &fs.PathError{Op: "close pipe", Path: w.path, Err: err}
	}
	return nil
}
