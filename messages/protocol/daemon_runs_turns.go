package protocol

import "github.com/ocx-go/ocx/messages"

// The turns of a run (D86): the node's run schedule (actors.runSchedule)
// decides when a run may take its user's slot (seed 004 §5: the password
// step on the server's node "runs one run at a time for each user") and
// when it may write its started (section 10: in the server's order, D72).
// A run asks for a turn and is told when it has it; no effect waits for
// another run.

// The turns a run asks for.
const (
	// RunTurnSlot: its user's slot, before its layers are made.
	RunTurnSlot = "slot"
	// RunTurnStarted: its started, once the runs before it went on.
	RunTurnStarted = "started"
)

// RunTimerOrder is the node's timer on a run's turn to write started: past
// it (Config.OrderWait), the run is started out of the server's order.
const RunTimerOrder = "order"

// RunTurnRequested is a run asking the node for a turn. Project and At
// place it in the server's order (a run with no place waits for no one);
// User is the user whose slot it asks for.
type RunTurnRequested struct {
	Run     string
	Turn    string
	Project string
	At      RunPosition
	User    string
}

// RunTurnGiven tells a run that it has the turn it asked for.
type RunTurnGiven struct {
	Turn string
}

// RunTurnDone is a run done with a turn: for the slot, it gives it back
// (or stops waiting for it); for started, its started is written or it
// ends, so the runs after it go on.
type RunTurnDone struct {
	Run  string
	Turn string
}

func (RunTurnRequested) daemonMessage() {}
func (RunTurnGiven) daemonMessage()     {}
func (RunTurnDone) daemonMessage()      {}

func (m RunTurnRequested) String() string {
	s := daemonShort(m.Run) + " asks its turn " + messages.Token(m.Turn)
	if m.Project != "" {
		s += " in " + messages.Token(m.Project) + " at " + m.At.String()
	}
	if m.User != "" {
		s += " user " + messages.Token(m.User)
	}
	return s
}

func (m RunTurnGiven) String() string { return "turn " + messages.Token(m.Turn) + " given" }

func (m RunTurnDone) String() string {
	return daemonShort(m.Run) + " done with its turn " + messages.Token(m.Turn)
}
