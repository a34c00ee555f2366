package runmsg

import (
	"fmt"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// RunState is one run as the record and the node's care say (`ocx run
// status`, the run_status tool, a runs ask's answer).
type RunState struct {
	Run       string `json:"run" why:"a run's state names the run"`
	Node      string `json:"node"`
	Objective string `json:"objective"`
	Sender    string `json:"sender"`
	// State is table 10's: none, waiting, started or ended; none is a run
	// the node has not answered (not yet arrived, or another node's).
	State   string `json:"state" why:"a run's state says which of table 10's it is"`
	Manual  bool   `json:"manual"`
	Started string `json:"started,omitempty"`
	Stopped string `json:"stopped,omitempty"`
	Ended   string `json:"ended,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	Exit    *int   `json:"exit,omitempty" max:"code"`
	Note    string `json:"note,omitempty"`
	// InCare says the node keeps it in its care (AGENTS/ocxd.runs), and
	// Alive that the process named there runs.
	InCare bool `json:"in_care"`
	Alive  bool `json:"alive"`
}

// runStateWords are table 10's states, as RunState.State says them.
var runStateWords = []string{"none", "waiting", "started", "ended"}

// Validate checks a run's state as a caller takes it.
func (s *RunState) Validate() error {
	if err := messages.CheckHash("run", s.Run); err != nil {
		return err
	}
	for _, w := range runStateWords {
		if s.State == w {
			return nil
		}
	}
	return strictjson.FieldErr("state", strictjson.ErrInvalid, fmt.Sprintf("is %s; a run's state is one of %s", strictjson.QuoteShort(s.State), strictjson.ListWords(runStateWords)))
}
