// Package usage keeps a session's use of the node in its files (D50): the
// node's count of its model (AGENTS/LOGIN/mcp/PROJECT/usage.json, written
// by its model proxy outside the sandbox), the session's own account of
// its turns (session/usage.json, written inside), and what a turn's runner
// reports (session/turn-usage.json). Every file below the agents root is
// read and written through host/unixhost's bounded reader and atomic
// writer; the two in the workspace are the agent's, believed of nothing
// but its own session.
package usage

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// WriteModel replaces the node's count of the session's model.
func WriteModel(root *unixhost.Root, ws host.Workspace, u *messages.ModelUsage) error {
	b, err := u.Encode()
	if err != nil {
		return err
	}
	return root.WriteFile(ws.ModelUsage(), b, 0o600)
}

// readModel reads the node's count of the session serving launch: nil
// when there is none, or it is another launch's (a session before, whose
// server wrote it; a server started by hand names none).
func readModel(root *unixhost.Root, ws host.Workspace, launch string) (*messages.ModelUsage, error) {
	b, err := root.ReadFile(ws.ModelUsage(), messages.MaxUsageFileLen)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the model's usage: %w", err)
	}
	m, err := messages.DecodeModelUsage(b)
	if err != nil {
		return nil, fmt.Errorf("the model's usage %s: %w", ws.ModelUsage(), err)
	}
	if m.Launch != launch {
		return nil, nil
	}
	return m, nil
}

// readTurns reads the session's own account of its turns, for launch: nil
// when there is none or it is another launch's. A file that does not read
// is the agent's doing and costs only its session: an error naming it.
func readTurns(root *unixhost.Root, ws host.Workspace, launch string) (*messages.SessionTurns, error) {
	b, err := root.ReadFile(ws.TurnsFile(), messages.MaxUsageFileLen)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the session's turns: %w", err)
	}
	t, err := messages.DecodeSessionTurns(b)
	if err != nil {
		return nil, fmt.Errorf("the session's turns %s: %w", ws.TurnsFile(), err)
	}
	if t.Launch != launch {
		return nil, nil
	}
	return t, nil
}

// Read is the session's usage: the node's count of its model and its own
// account of its turns, summed; nil when there is neither. reached is why
// its tokens are spent, as its proxy said ("" when they are not). A turns
// file that does not read leaves the node's count as it is, and the error
// says why.
func Read(root *unixhost.Root, ws host.Workspace, launch string) (u *messages.SessionUsage, reached string, err error) {
	m, merr := readModel(root, ws, launch)
	t, terr := readTurns(root, ws, launch)
	if m == nil && t == nil {
		return nil, "", errors.Join(merr, terr)
	}
	s, reached := messages.UsageOf(m, t)
	return &s, reached, errors.Join(merr, terr)
}

// Turns is a session's account of its turns as it keeps it: started for
// its launch, each turn added and the file replaced.
type Turns struct {
	root *unixhost.Root
	ws   host.Workspace
	t    messages.SessionTurns
}

// StartTurns begins the session's account: a session's usage is its own
// process's, so what an earlier session of the workspace left is
// replaced.
func StartTurns(root *unixhost.Root, ws host.Workspace, launch string) (*Turns, error) {
	t := &Turns{root: root, ws: ws, t: messages.SessionTurns{Launch: launch}}
	return t, t.write()
}

// Add adds a turn and writes the file.
func (t *Turns) Add(tu messages.TurnUsage) error {
	t.t.Add(tu)
	return t.write()
}

// Total is every turn so far, summed.
func (t *Turns) Total() messages.SessionUsage { return t.t.Total }

func (t *Turns) write() error {
	b, err := t.t.Encode()
	if err != nil {
		return err
	}
	return t.root.WriteFile(t.ws.TurnsFile(), b, 0o644)
}

// TakeRunnerReport reads what the turn's runner reported of itself and
// removes the file, so that the next turn starts without it: nil when it
// reported nothing (a runner that does not, or a release before D50).
func TakeRunnerReport(root *unixhost.Root, ws host.Workspace) (*messages.RunnerReport, error) {
	p := ws.RunnerUsage()
	b, err := root.ReadFile(p, messages.MaxUsageFileLen)
	if rerr := root.Remove(p); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
		err = rerr
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the runner's report: %w", err)
	}
	r, err := messages.DecodeRunnerReport(b)
	if err != nil {
		return nil, fmt.Errorf("the runner's report %s: %w", p, err)
	}
	return r, nil
}

// ClearRunnerReport removes a report a turn before left, before a turn
// starts.
func ClearRunnerReport(root *unixhost.Root, ws host.Workspace) error {
	if err := root.Remove(ws.RunnerUsage()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Turn is one turn as the session measured it around its process.
func Turn(post string, started time.Time, wall, cpu time.Duration, r *messages.RunnerReport) messages.TurnUsage {
	return messages.TurnUsage{Post: post, Started: started.UTC(), WallMS: uint64(max(wall, 0) / time.Millisecond),
		CPUMS: uint64(max(cpu, 0) / time.Millisecond), Runner: r}
}
