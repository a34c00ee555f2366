package runmsg

// RunOutcome is how a run ended (seed 004, table 12): the outcome of its
// ended message.
type RunOutcome string

// The outcomes of table 12, in its order.
const (
	// RunRefused: a refusal of section 11 held; the note names it.
	RunRefused RunOutcome = "refused"
	// RunStopped: a stop ended it, or came first.
	RunStopped RunOutcome = "stopped"
	// RunExited: its process exited by itself; exit is its code, 128+N
	// for signal N.
	RunExited RunOutcome = "exited"
	// RunBudget: past a limit; the note names which.
	RunBudget RunOutcome = "budget"
	// RunLost: the node found it not in its care.
	RunLost RunOutcome = "lost"
)

// runOutcomes lists the outcomes in table 12's order.
var runOutcomes = []RunOutcome{RunRefused, RunStopped, RunExited, RunBudget, RunLost}
