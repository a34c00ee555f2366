package pipe

import (
	"bytes"
	"fmt"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// pipeRead is one result of splitting the daemon pipe's bytes: a parsed line, or
// the error that says why a line was refused. Raw is the line as read, without
// its newline (empty for an over-long line, which is not kept).
type pipeRead struct {
	Line Line
	Raw  []byte
	Err  error
}

// String renders the read on one line: the line, or the error.
func (r pipeRead) String() string {
	if r.Err != nil {
		return "refused: " + r.Err.Error()
	}
	if r.Line == nil {
		return "nothing"
	}
	return r.Line.String()
}

// pipeSplitter cuts the bytes read from the daemon's FIFO into lines. A read
// returns bytes in arbitrary chunks: half a line, several lines, a line and a
// half. Feed keeps the unfinished tail for the next call. A line longer than
// pipeBuf is reported once and skipped up to its newline, never taken as two
// lines; its bytes are not kept, so memory stays bounded by pipeBuf.
//
// The zero value is ready to use. A pipeSplitter is not safe for concurrent use;
// the daemon's one pipe reader owns it.
type pipeSplitter struct {
	buf      []byte
	skipping bool // inside an over-long line, dropping bytes up to its newline
	skipped  int  // how many bytes of that line were dropped so far
}

// Feed consumes chunk and returns what the lines it completes say, in order.
func (s *pipeSplitter) Feed(chunk []byte) []pipeRead {
	var out []pipeRead
	for len(chunk) > 0 {
		nl := bytes.IndexByte(chunk, '\n')
		if s.skipping {
			if nl < 0 {
				s.skipped += len(chunk)
				return out
			}
			s.skipped += nl
			out = append(out, pipeRead{Err: overlong(s.skipped+1, true)})
			s.skipping, s.skipped = false, 0
			chunk = chunk[nl+1:]
			continue
		}
		if nl < 0 {
			// No newline: keep the tail, unless it can no longer be a line.
			if len(s.buf)+len(chunk) >= pipeBuf {
				s.skipping = true
				s.skipped = len(s.buf) + len(chunk)
				s.buf = s.buf[:0]
				return out
			}
			s.buf = append(s.buf, chunk...)
			return out
		}
		var line []byte
		if len(s.buf) > 0 {
			s.buf = append(s.buf, chunk[:nl]...)
			line = s.buf
		} else {
			line = chunk[:nl]
		}
		chunk = chunk[nl+1:]
		if len(line)+1 > pipeBuf {
			out = append(out, pipeRead{Err: overlong(len(line)+1, true)})
		} else {
			raw := bytes.Clone(line)
			l, err := Parse(raw)
			out = append(out, pipeRead{Line: l, Raw: raw, Err: err})
		}
		s.buf = s.buf[:0]
	}
	return out
}

// Flush reports what is left without a newline, for when the pipe's last
// writer closed: writers always end a line with a newline, so a tail is a fault.
// It resets the splitter. It returns nil when nothing is left.
func (s *pipeSplitter) Flush() *pipeRead {
	defer func() { s.buf, s.skipping, s.skipped = s.buf[:0], false, 0 }()
	switch {
	case s.skipping:
		return &pipeRead{Err: overlong(s.skipped, false)}
	case len(s.buf) > 0:
		return &pipeRead{Raw: bytes.Clone(s.buf), Err: &strictjson.FieldError{Where: "pipe line", Problem: fmt.Sprintf("%d byte(s) ended without a newline when the last writer closed the pipe", len(s.buf)), Err: strictjson.ErrSyntax}}
	}
	return nil
}

// Pending is how many bytes wait for their newline (0 while skipping).
func (s *pipeSplitter) Pending() int { return len(s.buf) }

func overlong(n int, ended bool) error {
	size := fmt.Sprintf("is %d bytes with its newline", n)
	if !ended {
		size = fmt.Sprintf("ran to %d bytes without a newline", n)
	}
	return &strictjson.FieldError{Where: "pipe line", Problem: size + fmt.Sprintf("; a pipe line is at most %d (PIPE_BUF), so it was skipped", pipeBuf), Err: strictjson.ErrTooLong}
}
