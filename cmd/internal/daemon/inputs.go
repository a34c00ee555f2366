package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// inputs is the daemon's pipe reader and its reaper as the node sees them
// (actors.Inputs): each line read from AGENTS/ocxd becomes a LineRead, each
// child's end a ProcessExited, both sent to the node in the order they
// happen. Around a re-exec both pause, so that nothing reaches the old
// image's actors after their state was gathered.
type inputs struct {
	path   string
	reaper *reaper
	send   func(messages.DaemonMessage)
	log    *slog.Logger
	// fatal receives the error that ended the reader for good.
	fatal chan error

	mu     sync.Mutex
	reader *unixhost.PipeReader
	done   chan struct{}

	// read counts the lines read; refused counts those that did not parse.
	read, refused atomic.Int64
}

// start reads the pipe with r until it is paused or closed.
func (in *inputs) start(r *unixhost.PipeReader) {
	done := make(chan struct{})
	in.mu.Lock()
	in.reader, in.done = r, done
	in.mu.Unlock()
	go func() {
		defer close(done)
		if err := r.Run(in.line); err != nil {
			in.log.Error("the daemon's pipe cannot be read", errAttr(err))
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
	l, err := messages.ParsePipeLine(b)
	if err != nil {
		in.refused.Add(1)
		in.log.Warn("a pipe line refused", slog.String("line", clip(messages.CleanText(string(b)), 256)), slog.Int64("n", n), errAttr(err))
		return
	}
	in.log.Info("read", slog.String("line", l.String()), slog.Int64("n", n))
	in.send(messages.LineRead{Line: l})
}

// Pause stops reading the pipe and reaping. Stop returns once Run has handed
// on every complete line it read, so each is in the node's mailbox; the bytes
// of a line not yet complete come back for the hand-off.
func (in *inputs) Pause(ctx context.Context) ([]byte, error) {
	in.mu.Lock()
	r, done := in.reader, in.done
	in.mu.Unlock()
	rest := r.Stop()
	<-done
	in.reaper.pause()
	in.log.Info("inputs paused", slog.Int("pending_bytes", len(rest)))
	return rest, nil
}

// Resume reads the pipe and reaps again after a re-exec that did not
// happen. A stopped reader cannot run again, so a new one takes over
// duplicates of its descriptors (the pipe and what waits in it stay), with
// the bytes of an incomplete line.
func (in *inputs) Resume(ctx context.Context, rest []byte) error {
	in.mu.Lock()
	old := in.reader
	in.mu.Unlock()
	rfd, wfd, err := old.KeepOnExec()
	if err != nil {
		return fmt.Errorf("resume the pipe: %w", err)
	}
	r2, err := dupReader(rfd, wfd, in.path, rest)
	if err != nil {
		return fmt.Errorf("resume the pipe: %w", err)
	}
	old.Close()
	in.start(r2)
	in.reaper.open(nil)
	in.log.Info("inputs resumed", slog.Int("pending_bytes", len(rest)))
	return nil
}

// dupReader makes a reader of duplicates of a pipe's two descriptors.
func dupReader(rfd, wfd int, path string, rest []byte) (*unixhost.PipeReader, error) {
	r2, err := unix.FcntlInt(uintptr(rfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	w2, err := unix.FcntlInt(uintptr(wfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		unix.Close(r2)
		return nil, err
	}
	p, err := unixhost.AdoptPipeReader(r2, w2, path, rest)
	if err != nil {
		unix.Close(r2)
		unix.Close(w2)
		return nil, err
	}
	return p, nil
}

// current is the reader in use.
func (in *inputs) current() *unixhost.PipeReader {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.reader
}

// close stops reading for good and closes the pipe.
func (in *inputs) close() {
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
