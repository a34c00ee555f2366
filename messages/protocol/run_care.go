package protocol

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// RunCare is the file the node keeps for a run in its care (seed 004,
// section 4; AGENTS/ocxd.runs/HASH.json, host.Layout.RunCareFile): enough
// for a daemon started again to know it, and whether its process may still
// be alive. The daemon writes it; the run tool reads it too.
type RunCare struct {
	Run        string    `json:"run"`
	Repository string    `json:"repository"`
	Since      time.Time `json:"since"`
	Proc       int       `json:"proc,omitempty"`
	Process    *ProcID   `json:"process,omitempty"`
	LaunchedAt time.Time `json:"launched_at,omitzero"`
	// Given is the place of the last artifact the session was given
	// (section 4), written before its line goes to the process.
	Given RunPosition `json:"given,omitzero"`
	// Socket is its process's holder's (docs/runs.md section 8.1).
	Socket string `json:"socket,omitempty"`
	// Workspace is $$workspace$$, where its kept logs' files go.
	Workspace string `json:"workspace,omitempty"`
}

// Encode is the care file's content: indented JSON and a newline.
func (c RunCare) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// DecodeRunCare reads a care file's content. A field it does not know is
// ignored: a file an older or newer daemon wrote still reads.
func DecodeRunCare(b []byte) (RunCare, error) {
	var c RunCare
	if err := json.Unmarshal(b, &c); err != nil {
		return RunCare{}, fmt.Errorf("a run's care file: %w", err)
	}
	return c, nil
}

// RunFactsOf are what the run core needs of a run's message; r is nil for
// a run that does not decode.
func RunFactsOf(hash string, r *runmsg.Run) RunFacts {
	f := RunFacts{Hash: hash}
	if r == nil {
		return f
	}
	// A trigger (D101) is never launched: it waits, as a manual run does,
	// until its stop; its firings are runs of their own.
	f.Manual, f.Session, f.Deliveries = r.Process.Manual || r.Process.On != nil, r.Process.Session, r.Process.Deliveries
	if r.Limits != nil {
		if r.Limits.Wall != "" {
			f.Wall, _ = messages.ParseWall("limits.wall", r.Limits.Wall)
		}
		f.CPU = r.Limits.CPU != nil
	}
	return f
}
