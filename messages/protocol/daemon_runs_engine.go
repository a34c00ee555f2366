package protocol

import (
	"strconv"
	"time"
)

// The run engine's messages between the wiring and the node (seed 004):
// how a run event reaches its run's actor, and what a run actor starts
// from.

// RunRouted is an event for the actor of run Run: a run that arrived, a
// stop that counts, its process's exit, a run the node's check found lost.
// The node starts the run's actor if it does not run (from Start, when
// set, or in state none).
type RunRouted struct {
	Run   string
	Event DaemonMessage
	// Start is the actor's first state when it is started for this event;
	// nil starts it in state none.
	Start *RunActorState
}

func (RunRouted) daemonMessage() {}

func (m RunRouted) String() string {
	s := "for run " + daemonShort(m.Run) + ": "
	if m.Event == nil {
		return s + "nothing"
	}
	return s + m.Event.String()
}

// RunActorState is what a run's actor is rebuilt from when the node starts
// (seed 004, sections 4 and 10): the run's facts, what the record says
// (started, a stop and ended that count) and what the node keeps of a run
// in its care. Lost, when set, is the note of the node's check: the actor
// is told RunNotInCare once it starts.
type RunActorState struct {
	Facts         RunFacts  `json:"facts"`
	StartedCounts bool      `json:"started_counts,omitempty"`
	StopCounts    bool      `json:"stop_counts,omitempty"`
	EndedCounts   bool      `json:"ended_counts,omitempty"`
	InCare        bool      `json:"in_care,omitempty"`
	LaunchedAt    time.Time `json:"launched_at,omitzero"`
	Proc          int       `json:"proc,omitempty"`
	Alive         bool      `json:"alive,omitempty"`
	// Given is the place of the last artifact the session was given, as
	// its care file keeps it (seed 004, section 4): none at or before it is
	// given again.
	Given RunPosition `json:"given,omitzero"`
	Lost  string      `json:"lost,omitempty"`
}

func (s RunActorState) String() string {
	out := s.Facts.String()
	for _, f := range []struct {
		on   bool
		word string
	}{{s.StartedCounts, "started"}, {s.StopCounts, "stop"}, {s.EndedCounts, "ended"}, {s.InCare, "in care"}, {s.Alive, "alive"}} {
		if f.on {
			out += " " + f.word
		}
	}
	if s.Proc > 0 {
		out += " proc " + strconv.Itoa(s.Proc)
	}
	if !s.Given.IsZero() {
		out += " given " + s.Given.String()
	}
	if s.Lost != "" {
		out += " lost: " + oneLine(s.Lost)
	}
	return out
}

// CheckRuns asks the wiring for the node's runs that are to be ended lost
// (the `runs check` line). Result: RunsChecked.
type CheckRuns struct{}

// RunsChecked is CheckRuns's result: each run found lost, with its note.
type RunsChecked struct {
	Lost []RunRouted
	Err  error
}

func (CheckRuns) daemonEffect()    {}
func (RunsChecked) daemonMessage() {}
func (RunsChecked) answer()        {}

// Answer is RunsChecked.
func (CheckRuns) Answer() Answer { return RunsChecked{} }

func (CheckRuns) String() string { return "check the node's runs" }

func (m RunsChecked) String() string {
	return "runs checked: " + strconv.Itoa(len(m.Lost)) + " lost" + errSuffix(m.Err)
}

// RunsFound is what the node had in its care of Project's runs when it
// started, found once Project's record is fresh (a node on another host
// finds them after its first pull, D72): each run's state, or its note
// when found lost, as Boot's Runs are.
type RunsFound struct {
	Project string
	Runs    []RunActorState
}

func (RunsFound) daemonMessage() {}

func (m RunsFound) String() string {
	lost := 0
	for _, r := range m.Runs {
		if r.Lost != "" {
			lost++
		}
	}
	return "runs found of " + m.Project + ": " + strconv.Itoa(len(m.Runs)) + " in care or lost, " + strconv.Itoa(lost) + " lost"
}

// ReadDeliveries asks the wiring what the session runs in the node's care
// of Repository (every repository when empty), or the one run Run, are to
// be given of what arrived since each was last given (seed 004, section
// 9). Result: DeliveriesRead.
type ReadDeliveries struct {
	Repository string
	Run        string
}

// DeliveriesRead is ReadDeliveries's result: each delivery as the
// RunDelivered for its run's actor, in the server's order for each run.
type DeliveriesRead struct {
	Routed []RunRouted
	Err    error
}

func (ReadDeliveries) daemonEffect()  {}
func (DeliveriesRead) daemonMessage() {}
func (DeliveriesRead) answer()        {}

// Answer is DeliveriesRead.
func (ReadDeliveries) Answer() Answer { return DeliveriesRead{} }

func (e ReadDeliveries) String() string {
	if e.Run != "" {
		return "read the deliveries of " + daemonShort(e.Run)
	}
	if e.Repository == "" {
		return "read the deliveries of every repository"
	}
	return "read the deliveries of " + e.Repository
}

func (m DeliveriesRead) String() string {
	return "deliveries read: " + strconv.Itoa(len(m.Routed)) + errSuffix(m.Err)
}

// StartRun asks the wiring to start the manual run Run of Repository for By
// (the `run start` line): it reads the run from the record again, and By's
// standing and section 11's refusals now. Result: RunStartChecked.
type StartRun struct {
	Repository string
	Run        string
	By         string
}

// RunStartChecked is StartRun's result: the events for the run's actor (its
// arrival, so a run not yet in an actor waits, then the start), or Nothing
// saying why there is none.
type RunStartChecked struct {
	Run     string
	Routed  []RunRouted
	Nothing string
	Err     error
}

func (StartRun) daemonEffect()         {}
func (RunStartChecked) daemonMessage() {}
func (RunStartChecked) answer()        {}

// Answer is RunStartChecked.
func (StartRun) Answer() Answer { return RunStartChecked{} }

func (e StartRun) String() string {
	return "start the run " + e.Run + " of " + e.Repository + " for " + e.By
}

func (m RunStartChecked) String() string {
	s := "run start checked: " + m.Run
	if m.Nothing != "" {
		s += " nothing: " + oneLine(m.Nothing)
	} else {
		s += " " + strconv.Itoa(len(m.Routed)) + " events"
	}
	return s + errSuffix(m.Err)
}
