package daemon

import (
	"encoding/json"
	"fmt"

	"github.com/ocx-go/ocx/host/unixhost"

	"github.com/ocx-go/ocx/messages/protocol"
)

// handoffFile is what a re-exec writes to AGENTS/ocxd.handoff: the actors'
// hand-off, and beside it what only the wiring keeps across the exec. The
// actors' part is inline, so the file is one JSON object (the format of
// hand-off version 1).
type handoffFile struct {
	protocol.Handoff
	// FDs are the descriptors kept open across the exec (the lock and the
	// pipe's two ends), by name.
	FDs map[string]int `json:"fds,omitempty"`
	// Reaper is, for each child the reaper still follows, the descriptor of
	// bwrap's status pipe kept open across the exec and what was already
	// read of it, so that the new image learns the sandboxed command's exit
	// code.
	Reaper []unixhost.ChildHandoff `json:"reaper,omitempty"`
}

// HandoffPart is the actors' part, for protocol.DecodeHandoffInto.
func (f *handoffFile) HandoffPart() protocol.Handoff { return f.Handoff }

// validate checks the wiring's own fields.
func (f *handoffFile) validate() error {
	for i, c := range f.Reaper {
		if err := c.ID.Validate(); err != nil {
			return fmt.Errorf("hand-off: reaper[%d].proc: %w", i, err)
		}
		if c.StatusFD < -1 {
			return fmt.Errorf("hand-off: reaper[%d].status_fd: is %d; a descriptor is -1 (none) or more", i, c.StatusFD)
		}
	}
	for name, fd := range f.FDs {
		if fd < 0 {
			return fmt.Errorf("hand-off: fds.%s: is %d, not a descriptor", name, fd)
		}
	}
	return nil
}

// encodeHandoff validates and renders the file.
func encodeHandoff(f handoffFile) ([]byte, error) {
	if err := f.Handoff.Validate(); err != nil {
		return nil, err
	}
	if err := f.validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("hand-off: encode: %w", err)
	}
	return b, nil
}

// decodeHandoff reads the file: a key neither part knows refuses it whole.
func decodeHandoff(data []byte) (handoffFile, error) {
	var f handoffFile
	if err := protocol.DecodeHandoffInto(data, &f); err != nil {
		return handoffFile{}, err
	}
	if err := f.validate(); err != nil {
		return handoffFile{}, err
	}
	return f, nil
}

// The names of the descriptors a re-exec keeps, in the hand-off's fds.
const (
	fdLock      = "lock"
	fdPipeRead  = "pipe_read"
	fdPipeWrite = "pipe_write"
)
