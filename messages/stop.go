package messages

import (
	"fmt"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// StopNote asks the sessions on its record to stop: written by anyone but the
// agent, on the session's own record. A plain post whose text is "OCX stop" is
// the same request. Login, when set, stops only that login's session there.
type StopNote struct {
	Version int    `json:"-" ocx:"version"`
	Login   string `json:"login,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// NoteKind is "stop".
func (*StopNote) NoteKind() NoteKind { return KindStop }

func (n *StopNote) version() int { return n.Version }

// Validate checks the login, when set, and the reason.
func (n *StopNote) Validate() error {
	if err := checkVersion(n.Version); err != nil {
		return err
	}
	if n.Login != "" {
		if err := CheckLogin("login", n.Login); err != nil {
			return err
		}
	}
	return CheckText("reason", n.Reason, false, MaxTextLen)
}

// Encode renders the canonical block.
func (n *StopNote) Encode() ([]byte, error) { return encodeChecked(n) }

// String renders the note on one line.
func (n *StopNote) String() string {
	return Render(KindStop).version(n.Version).OptKV("login", n.Login).Text("reason", n.Reason).String()
}

// stopCause says what stopped a session.
type stopCause string

// The causes (D4): a stop request on the record, a signal (TERM from the
// daemon), or the session's own budget (D40: a terminal session past its
// limits.wall, or a daemon's session past it with no daemon to end it).
const (
	StopByRequest stopCause = "request"
	StopBySignal  stopCause = "signal"
	StopByBudget  stopCause = "budget"
)

// LimitWall names the wall limit: a session definition's limits.wall, a
// protocol v1 record's budget.wall (seed 004 section 7).
const LimitWall = "wall"

// budgetLimits lists the limits a note's budget may name: the limits this
// node enforces by ending a session past them: its wall (D40), the memory
// and processes of its cgroup (D46), and the tokens its model proxy
// counted (D50). A reader refuses a budget it does not know rather than
// read the end some other way (E9).
var budgetLimits = []string{LimitWall, LimitMemory, LimitProcesses, LimitTokens}

// stoppedBudgetLimits lists the limits a stopped note's budget may name:
// the session stops itself past its wall alone (D40); past its memory or
// processes the daemon stops it, and the session's stopped note says
// signal.
var stoppedBudgetLimits = []string{LimitWall}

// checkBudget checks a note's budget: one of known.
func checkBudget(field, s string, known []string) error {
	for _, l := range known {
		if s == l {
			return nil
		}
	}
	if s == "" {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, "is empty; leave the key out instead")
	}
	return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s is not a limit this reader knows (%s)", strictjson.QuoteShort(s), strictjson.ListWords(known)))
}

// StoppedNote is what a session writes, as its agent login on its own record,
// when it stops on request or on TERM, before it exits 0.
type StoppedNote struct {
	Version int    `json:"-" ocx:"version"`
	Login   string `json:"login" why:"the note names the agent login of its workspace"`
	Project string `json:"project" why:"the note names the project of its workspace"`
	// Launch is the launch the session served; a terminal session has none.
	Launch string    `json:"launch,omitempty"`
	Cause  stopCause `json:"cause" why:"a stopped note says what stopped the session: request or signal"`
	// Request is the stop post it obeyed (cause request).
	Request string `json:"request,omitempty"`
	// Signal names the signal it obeyed (cause signal), as SIGTERM.
	Signal string `json:"signal,omitempty"`
	// Budget names the limit it ran past (cause budget), as wall. A reader
	// from before D40 refuses the note (budget is a limit-bearing key, E9).
	Budget string `json:"budget,omitempty"`
}

// NoteKind is "stopped".
func (*StoppedNote) NoteKind() NoteKind { return KindStopped }

func (n *StoppedNote) version() int { return n.Version }

// Validate checks every field and that the cause has what it needs.
func (n *StoppedNote) Validate() error {
	if err := checkHeader(n.Version, n.Login, n.Project); err != nil {
		return err
	}
	if err := checkOptHash("launch", n.Launch); err != nil {
		return err
	}
	switch n.Cause {
	case StopByRequest:
		if err := CheckHash("request", n.Request); err != nil {
			return err
		}
		return n.namesOnly("a request", "request", "signal", "budget")
	case StopBySignal:
		if n.Signal == "" {
			return strictjson.FieldErr("signal", strictjson.ErrMissing, "is missing; a session stopped by a signal names it, as SIGTERM")
		}
		if err := checkSignal("signal", n.Signal); err != nil {
			return err
		}
		return n.namesOnly("a signal", "signal", "request", "budget")
	case StopByBudget:
		if n.Budget == "" {
			return strictjson.FieldErr("budget", strictjson.ErrMissing, "is missing; a session stopped by its budget names the limit, as wall")
		}
		if err := checkBudget("budget", n.Budget, stoppedBudgetLimits); err != nil {
			return err
		}
		if n.Request != "" || n.Signal != "" {
			f := "request"
			if n.Signal != "" {
				f = "signal"
			}
			return strictjson.FieldErr(f, strictjson.ErrInvalid, "a session stopped by its budget names the limit, not a request or a signal")
		}
	case "":
		return strictjson.FieldErr("cause", strictjson.ErrMissing, "is empty; it is request, signal or budget")
	default:
		return strictjson.FieldErr("cause", strictjson.ErrInvalid, fmt.Sprintf("%s is not a cause (request, signal, budget)", strictjson.QuoteShort(string(n.Cause))))
	}
	return nil
}

// namesOnly refuses the first of others that is set: a session stopped by
// by names its own field only.
func (n *StoppedNote) namesOnly(by, own string, others ...string) error {
	set := map[string]bool{"request": n.Request != "", "signal": n.Signal != "", "budget": n.Budget != ""}
	for _, f := range others {
		if set[f] {
			return strictjson.FieldErr(f, strictjson.ErrInvalid, "a session stopped by "+by+" names the "+own+", not a "+f)
		}
	}
	return nil
}

// Encode renders the canonical block.
func (n *StoppedNote) Encode() ([]byte, error) { return encodeChecked(n) }

// String renders the note on one line.
func (n *StoppedNote) String() string {
	return Render(KindStopped).version(n.Version).Word(n.Login+"/"+n.Project).OptKV("launch", n.Launch).
		KV("cause", string(n.Cause)).OptKV("request", n.Request).OptKV("signal", n.Signal).OptKV("budget", n.Budget).String()
}
