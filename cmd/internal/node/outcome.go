package node

import (
	"fmt"

	"github.com/ocx-go/ocx/fossilio"
)

// How `ocx session restart` answers for each session (workspaces.SessionRestart).

// RestartPick is one session a restart's list showed: its workspace and
// the launch note that started it last.
type RestartPick struct {
	Workspace string `json:"workspace"` // LOGIN/PROJECT
	Start     string `json:"start"`
}

// A session's outcome in a restart's answer.
const (
	OutcomeRestarted    = "restarted"
	OutcomeWouldRestart = "would restart"
	OutcomeLeftAlone    = "left alone"
	OutcomeNotRestarted = "not restarted"
)

// SessionOutcome is one session in a restart's answer: its workspace, its
// own record, the launch note that started it last, and what the restart
// did with it and why. Launch and Release name the launch note a restart
// wrote (or, in a dry run, the release it would name).
type SessionOutcome struct {
	Workspace string `json:"workspace"`
	Record    string `json:"record"`
	Start     string `json:"start"`
	Outcome   string `json:"outcome"`
	Launch    string `json:"launch,omitempty"`
	Release   string `json:"release,omitempty"`
	Why       string `json:"why"`
}

// String is the pick as `ocx session restart --only` takes it:
// LOGIN/PROJECT@START.
func (p RestartPick) String() string { return p.Workspace + "@" + p.Start }

// Pick is the session as a list names it, for a confirming restart.
func (o SessionOutcome) Pick() RestartPick {
	return RestartPick{Workspace: o.Workspace, Start: o.Start}
}

func (o SessionOutcome) String() string {
	s := fmt.Sprintf("%s %s (record %s, started by %s)", o.Outcome, o.Workspace, fossilio.Short(o.Record), fossilio.Short(o.Start))
	if o.Launch != "" {
		s += fmt.Sprintf(": launch %s on release %s", o.Launch, o.Release)
	} else if o.Release != "" {
		s += " on release " + o.Release
	}
	return s + ": " + o.Why
}
