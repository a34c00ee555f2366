package runhold

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// Status is what the status file holds: the command's exit, 128 and N for
// signal N (seed 004 §12), the signal's name when a signal ended it, and,
// when the command could not be started at all, why (exit is then 127).
type Status struct {
	Exit   int    `json:"exit"`
	Signal string `json:"signal,omitempty"`
	Error  string `json:"error,omitempty"`
	// StdoutBytes and StderrBytes are how many bytes each stream printed
	// in all; the logs hold their ends.
	StdoutBytes int64 `json:"stdout_bytes,omitempty"`
	StderrBytes int64 `json:"stderr_bytes,omitempty"`
	// Limit names the limit of its cgroup the command went past (memory:
	// an OOM kill, which ends the sandbox whole; processes: a fork
	// refused), and LimitNote what the counts showed; absent for none.
	Limit     string `json:"limit,omitempty"`
	LimitNote string `json:"limit_note,omitempty"`
}

// statusOf is the status file of how the command ended (host.Exit.Status
// made it). bwrap gives a sandboxed command's signal as 128 and N, which
// is all the holder learns.
func statusOf(x messages.ExitStatus) Status {
	s := Status{Exit: x.Exit(), Limit: x.Limit, LimitNote: x.LimitNote}
	switch x.State {
	case messages.EndSignaled:
		s.Signal = x.Signal
	case messages.EndSandboxFailed:
		s.Error = "the sandbox did not run the command to its end (bwrap's own message is on standard error)"
	case messages.EndUnknown:
		s.Exit, s.Error = 127, "the command's end is unknown"
	}
	return s
}

// ExitStatus is the exit the file records: a code, or the signal that
// ended the command (128 and N); a command that could not be started, or
// whose end is unknown, exited 127.
func (s Status) ExitStatus() messages.ExitStatus {
	x := messages.Exited(s.Exit)
	if s.Signal != "" && s.Exit > 128 {
		x = messages.ExitStatus{State: messages.EndSignaled, Signal: s.Signal}
	}
	x.Limit, x.LimitNote = s.Limit, s.LimitNote
	return x
}

// ReadStatus reads a holder's status file; an error wrapping
// fs.ErrNotExist while the holder runs (or if it was killed outright).
func ReadStatus(p string) (Status, error) {
	b, err := unixhost.Below(filepath.Dir(p)).ReadFile(p, unixhost.SmallFile)
	if err != nil {
		return Status{}, err
	}
	var s Status
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&s); err != nil {
		return Status{}, fmt.Errorf("runhold: status %s: %w", p, err)
	}
	return s, nil
}

func writeStatus(p string, s Status) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return unixhost.WriteFileAtomic(p, append(b, '\n'), 0o600)
}

// tail keeps the last max bytes written to it, and whether any were.
type tail struct {
	max   int
	buf   []byte
	wrote bool
	total int64
}

func newTail(max int) *tail { return &tail{max: max} }

// Write keeps the end of p; it never fails.
func (t *tail) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	t.wrote = true
	t.total += int64(len(p))
	if t.max == 0 {
		return len(p), nil
	}
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return len(p), nil
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return len(p), nil
}

func (t *tail) Bytes() []byte { return bytes.Clone(t.buf) }
