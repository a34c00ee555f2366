package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/cmd/internal/daemon/reaper"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
	"github.com/ocx-go/ocx/messages/protocol"
)

// inputs is the daemon's pipe reader and its reaper as the node sees them
// (actors.Inputs): each line read from AGENTS/ocxd becomes a LineRead, each
// child's end a ProcessExited, both sent to the node in the order they
// happen. Around a re-exec both pause, so that nothing reaches the old
// image's actors after their state was gathered.
type inputs struct {
	path   string
	reaper *reaper.Reaper
	send   func(protocol.DaemonMessage)
	log    *slog.Logger
	// fatal receives the error that ended the reader for good.
	fatal chan error
	// reexec, when set, is told of a `reexec` line as it is read, before
	// the node is.
	reexec func()

	mu     sync.Mutex
	reader *unixhost.PipeReader
	done   chan struct{}
	// draining says the daemon stops: no reader starts again.
	draining bool
	// pipe is the named pipe the reader reads, as it was when it started,
	// so that the drain reads the same pipe through its name (os.SameFile:
	// its device and inode).
	pipe os.FileInfo

	// read counts the lines read; refused counts those that did not parse.
	read, refused atomic.Int64

	// handMu guards shut: the lines handed in the daemon's own process
	// (hand) are taken while the pipe is read, and refused from a pause
	// or a drain on, so that none reaches the node after its state was
	// gathered for a re-exec.
	handMu sync.RWMutex
	shut   bool
}

// start reads the pipe with r until it is paused or closed.
func (in *inputs) start(r *unixhost.PipeReader) {
	done := make(chan struct{})
	in.mu.Lock()
	in.reader, in.done = r, done
	if fi, err := os.Stat(in.path); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
		in.pipe = fi
	}
	in.mu.Unlock()
	go func() {
		defer close(done)
		if err := r.Run(in.line); err != nil {
			in.log.Error("the daemon's pipe cannot be read", actors.ErrAttr(err))
			select {
			case in.fatal <- err:
			default:
			}
		}
	}()
}

// line is one line of the pipe, without its newline.
func (in *inputs) line(b []byte) {
	n := in.read.Add(1)
	l, err := pipe.Parse(b)
	if err != nil {
		in.refused.Add(1)
		in.log.Warn("a pipe line refused", slog.String("line", messages.ClipText(messages.CleanText(string(b)), 256)), slog.Int64("n", n), actors.ErrAttr(err))
		return
	}
	in.log.Info("read", slog.String("line", l.String()), slog.Int64("n", n))
	in.take(l)
}

// take hands line l to the node.
func (in *inputs) take(l pipe.Line) {
	if _, ok := l.(pipe.ReexecLine); ok && in.reexec != nil {
		in.reexec()
	}
	in.send(protocol.LineRead{Line: l})
}

// errInputsShut: the daemon's inputs are paused or drained; a line is
// written into its pipe instead.
var errInputsShut = errors.New("the daemon's inputs are paused")

// hand takes lines handed in the daemon's own process (the hook's work
// done for an ask on its socket, D88) as if they were read from the pipe,
// in order, with no line written back into the pipe. It refuses them
// (errInputsShut) while the inputs are paused or drained: the caller
// writes them into the pipe, where the image that reads it next finds them.
func (in *inputs) hand(lines []pipe.Line) error {
	in.handMu.RLock()
	defer in.handMu.RUnlock()
	if in.shut {
		return errInputsShut
	}
	for _, l := range lines {
		n := in.read.Add(1)
		in.log.Info("read", slog.String("line", l.String()), slog.Int64("n", n), slog.String("from", "socket"))
		in.take(l)
	}
	return nil
}

// shutHand refuses the lines handed from now on (shut) or takes them
// again; a hand under way finishes first.
func (in *inputs) shutHand(shut bool) {
	in.handMu.Lock()
	in.shut = shut
	in.handMu.Unlock()
}

// Pause stops reading the pipe and reaping. Stop returns once Run has handed
// on every complete line it read, so each is in the node's mailbox; the bytes
// of a line not yet complete come back for the hand-off.
func (in *inputs) Pause(ctx context.Context) ([]byte, error) {
	in.shutHand(true)
	in.mu.Lock()
	r, done := in.reader, in.done
	in.mu.Unlock()
	rest := r.Stop()
	<-done
	in.reaper.Pause()
	in.log.Info("inputs paused", slog.Int("pending_bytes", len(rest)))
	return rest, nil
}

// Resume reads the pipe and reaps again after a re-exec that did not
// happen. A stopped reader cannot run again, so a new one takes over
// duplicates of its descriptors (the pipe and what waits in it stay), with
// the bytes of an incomplete line.
func (in *inputs) Resume(ctx context.Context, rest []byte) error {
	in.mu.Lock()
	old, draining := in.reader, in.draining
	in.mu.Unlock()
	if draining {
		return fmt.Errorf("resume the pipe: the daemon is stopping")
	}
	r2, err := old.Reopen(rest)
	if err != nil {
		return fmt.Errorf("resume the pipe: %w", err)
	}
	old.Close()
	in.start(r2)
	in.shutHand(false)
	in.reaper.Open(nil)
	in.log.Info("inputs resumed", slog.Int("pending_bytes", len(rest)))
	return nil
}

// current is the reader in use.
func (in *inputs) current() *unixhost.PipeReader {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.reader
}

// drain ends the reading on TERM or INT so that no line a writer managed to
// write is left unread (seed 002: the hook never waits for the daemon, so a
// line it wrote and nobody read would be lost without a trace). A second
// read end is opened through the pipe's name, the name is removed, so that
// no writer opens the pipe any more (its open fails, and it knows), the
// reader stops and closes its ends, its own write end among them, and what
// the pipe holds is read to its end: the end comes once every writer that
// still has it open has closed it. Each line goes to the node as any other.
// A writer that keeps the pipe open past bound is cut off: its next write
// fails. It returns the number of lines read after the reader stopped.
func (in *inputs) drain(root *unixhost.Root, bound time.Duration) (int, error) {
	in.shutHand(true)
	in.mu.Lock()
	in.draining = true
	r, done, want := in.reader, in.done, in.pipe
	in.mu.Unlock()
	if r == nil {
		return 0, nil
	}
	f, err := root.OpenFIFO(in.path)
	if err == nil {
		fi, serr := f.Stat()
		if serr != nil || fi.Mode()&os.ModeNamedPipe == 0 || !os.SameFile(fi, want) {
			f.Close()
			f, err = nil, fmt.Errorf("%s is no longer the pipe the daemon read", in.path)
		}
	}
	// Removed whatever happens next, so that writers learn that nobody
	// will read it; the next daemon makes it again.
	if rerr := root.Remove(in.path); rerr != nil {
		in.log.Warn("the daemon's pipe cannot be removed; a writer may still open it", actors.ErrAttr(rerr))
	}
	rest := r.Stop()
	if done != nil {
		<-done
	}
	r.Close()
	if err != nil {
		return 0, fmt.Errorf("drain %s: %w", in.path, err)
	}
	defer f.Close()
	f.SetReadDeadline(time.Now().Add(bound))
	buf := append([]byte(nil), rest...)
	chunk := make([]byte, 64<<10)
	lines := 0
	for {
		n, rerr := f.Read(chunk)
		buf = append(buf, chunk[:n]...)
		for {
			i := bytes.IndexByte(buf, '\n')
			if i < 0 {
				break
			}
			if i <= unixhost.DefaultMaxLine {
				in.line(buf[:i])
				lines++
			}
			buf = buf[i+1:]
		}
		switch {
		case rerr == nil:
			continue
		case errors.Is(rerr, io.EOF):
			if len(buf) > 0 {
				in.refused.Add(1)
				in.log.Warn("a pipe line refused: the pipe ended before its newline", slog.String("line", messages.ClipText(messages.CleanText(string(buf)), 256)))
			}
			return lines, nil
		case errors.Is(rerr, os.ErrDeadlineExceeded):
			return lines, fmt.Errorf("drain %s: a writer kept the pipe open past %s; it is cut off", in.path, bound)
		default:
			return lines, fmt.Errorf("drain %s: %w", in.path, rerr)
		}
	}
}

// close stops reading for good and closes the pipe.
func (in *inputs) close() {
	in.shutHand(true)
	in.mu.Lock()
	r, done := in.reader, in.done
	in.mu.Unlock()
	if r == nil {
		return
	}
	r.Close()
	if done != nil {
		<-done
	}
}
