package session

import (
	"github.com/ocx-go/ocx/actors/turn"
	"time"

	"github.com/ocx-go/ocx/host/usage"
)

// A session's account of its turns (D50): each turn's wall time, measured
// around its process, its CPU time (wait4's, with the processes it waited
// for), and what its runner reported of itself, kept in session/usage.json
// for the status and the daemon's end note to show. It is the session's
// own word, and decides nothing: the node's count of its model is its
// proxy's, outside the sandbox.

// startTurns begins the account, replacing what an earlier session left.
func (s *session) startTurns() {
	t, err := usage.StartTurns(s.root, s.ws, s.o.Launch)
	if err != nil {
		s.log.Warn("the session's turns are not kept", keyEvent, "usage", keyErr, err)
		return
	}
	s.turns = t
}

// beforeTurn removes what a runner reported in a turn before, and says
// when the turn starts.
func (s *session) beforeTurn() time.Time {
	if err := usage.ClearRunnerReport(s.root, s.ws); err != nil {
		s.log.Warn("the runner's last report is not removed", keyEvent, "usage", keyErr, err)
	}
	return time.Now()
}

// afterTurn adds the turn to the account.
func (s *session) afterTurn(post string, started time.Time, e turn.Ended) {
	wall := time.Since(started)
	r, err := usage.TakeRunnerReport(s.root, s.ws)
	if err != nil {
		s.log.Warn("the runner's report does not read; the turn is kept without it", keyEvent, "usage", keyErr, err)
	}
	if s.turns == nil {
		return
	}
	if err := s.turns.Add(usage.Turn(post, started, wall, e.CPU, r)); err != nil {
		s.log.Warn("the turn is not kept", keyEvent, "usage", keyErr, err)
		return
	}
	tot := s.turns.Total()
	s.log.Info("turn usage", keyEvent, "usage", keyPost, post, "wall_ms", wall.Milliseconds(), "cpu_ms", e.CPU.Milliseconds(),
		"runner_reported", r != nil, "turns", tot.Turns)
}
