package runhold

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
)

// Status is what the status file holds: the command's exit, 128 and N for
// signal N (seed 004 §12), the signal's name when a signal ended it, and,
// when the command could not be started at all, why (exit is then 127).
type Status struct {
	Exit   int    `json:"exit"`
	Signal string `json:"signal,omitempty"`
	Error  string `json:"error,omitempty"`
}

// statusOf reads how a process ended.
func statusOf(ps *os.ProcessState) Status {
	if sig, ok := unixhost.EndingSignal(ps); ok {
		return Status{Exit: 128 + int(sig), Signal: host.SignalName(int(sig))}
	}
	return Status{Exit: ps.ExitCode()}
}

// ReadStatus reads a holder's status file; an error wrapping
// fs.ErrNotExist while the holder runs (or if it was killed outright).
func ReadStatus(p string) (Status, error) {
	b, err := os.ReadFile(p)
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
}

func newTail(max int) *tail { return &tail{max: max} }

func (t *tail) Write(p []byte) {
	if len(p) == 0 {
		return
	}
	t.wrote = true
	if t.max == 0 {
		return
	}
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
}

func (t *tail) Bytes() []byte { return bytes.Clone(t.buf) }
