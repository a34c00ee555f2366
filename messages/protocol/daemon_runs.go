package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// The vocabulary of a run's life (seed 004, section 10): what the run core
// takes and what it asks for. The core never sees a run's decoded message:
// only the facts of RunFacts, the results of its effects, and what the node
// sees (a stop, a start, a delivery, an exit, a run not in its care).

// RunFacts is what the run core needs of a run's message: its hash, whether
// it is manual, whether it is a session and how it is given deliveries, and
// its limits as far as the node enforces them (wall; whether cpu is set, so
// that SIGXCPU reads as past it).
type RunFacts struct {
	Hash    string
	Manual  bool
	Session bool
	// Deliveries is process.deliveries as written: "feed" (or empty) or
	// "start", the decoder's values.
	Deliveries string
	// Wall is limits.wall, zero for none: counted from the launch.
	Wall time.Duration
	// CPU says limits.cpu is set: a process the kernel ends with SIGXCPU is
	// past it.
	CPU bool
	// Project and At place the run in the server's order, which its
	// started keeps (D72, D86); At is zero for a run with no place.
	Project string
	At      RunPosition
	// Slot is the user whose slot the run takes before its layers are
	// made: its password step sets that user's password afresh on the
	// server's node (seed 004 §5); "" for none.
	Slot string
}

// StartsEach says the run is a session whose deliveries each start a process.
func (f RunFacts) StartsEach() bool { return f.Session && f.Deliveries == "start" }

func (f RunFacts) String() string {
	s := "run " + daemonShort(f.Hash)
	if f.Manual {
		s += " manual"
	}
	if f.Session {
		d := f.Deliveries
		if d == "" {
			d = "feed"
		}
		s += " session " + messages.Token(d)
	}
	if f.Wall > 0 {
		s += " wall " + f.Wall.String()
	}
	if f.CPU {
		s += " cpu"
	}
	if !f.At.IsZero() {
		s += " in " + messages.Token(f.Project) + " at " + f.At.String()
	}
	if f.Slot != "" {
		s += " slot " + messages.Token(f.Slot)
	}
	return s
}

// RunPosition is where an artifact stands in the server's order: its
// receipt's number, then its row number (protocol v1, section 1).
type RunPosition struct {
	Receipt int64 `json:"receipt"`
	Row     int64 `json:"row"`
}

// Before says p comes before q in the server's order.
func (p RunPosition) Before(q RunPosition) bool {
	return p.Receipt < q.Receipt || (p.Receipt == q.Receipt && p.Row < q.Row)
}

// IsZero says p is no position: nothing given yet.
func (p RunPosition) IsZero() bool { return p == RunPosition{} }

func (p RunPosition) String() string {
	return "r" + strconv.FormatInt(p.Receipt, 10) + "." + strconv.FormatInt(p.Row, 10)
}

// RunDelivery is one artifact a session is given (section 9): its hash, its
// place in the server's order, and its line (RunLine), which goes to the
// process as it is.
type RunDelivery struct {
	Hash string      `json:"hash"`
	At   RunPosition `json:"at"`
	Line string      `json:"line"`
}

func (d RunDelivery) String() string { return daemonShort(d.Hash) + "@" + d.At.String() }

// The purposes of a run's timers.
const (
	RunTimerWall  = "wall"  // the run is past limits.wall, counted from the launch
	RunTimerGrace = "grace" // TERM was sent; KILL when it fires
	RunTimerRetry = "retry" // writing started or ended failed; try again
)

// ---- events ----

// RunArrived is a run message the node read, in the server's order, for
// this node. Refusal is the note of the first refusal of section 11 that
// holds, empty when none does.
type RunArrived struct {
	Facts   RunFacts
	Refusal string
	// InOrder says the run was found to begin (not refused, not manual,
	// neither started nor ended): the runs of its project after it write
	// their started after its own (D86).
	InOrder bool
}

// RunStartRequested is a start of a manual run with OCX's run tool, by By.
// Privileged says By holds admin or setup; Refusal is section 11 checked
// again, now.
type RunStartRequested struct {
	By         string
	Privileged bool
	Refusal    string
}

// RunStopRequested is a stop message where the run is, by By; Privileged
// says By holds admin or setup (a stop by anyone else is ignored, section 3).
type RunStopRequested struct {
	By         string
	Privileged bool
}

// RunPrepared is the result of RunPrepare: layers 2 to 4 made, with the
// values they set (which started lists), or Failed, the note naming the
// step that failed and why (section 11, row 10).
type RunPrepared struct {
	Values map[string]string
	Failed string
}

// RunStartedWritten is the result of RunWriteStarted: started is on the
// record (for a node on another host: the server has it), or Err.
type RunStartedWritten struct {
	Err error
}

// RunProcessExited is the exit of the run's process number Proc: how it
// ended (ExitStatus: its code, the signal that ended it, the limit of its
// cgroup it went past; unknown when the node could not learn how, not
// being its parent). The host reports exactly one exit for each RunLaunch,
// a process that could not be started as code 127.
type RunProcessExited struct {
	Proc   int
	Status messages.ExitStatus
}

// Exit is the exit of table 12: the code, or 128 and N for signal N.
func (m RunProcessExited) Exit() int { return m.Status.Exit() }

// Words is the exit as the kept logs' reply says it: "unknown", "3", or
// "signal 15 (143)".
func (m RunProcessExited) Words() string {
	switch m.Status.State {
	case messages.EndUnknown:
		return "unknown"
	case messages.EndSignaled:
		return "signal " + strconv.Itoa(messages.SignalNumber(m.Status.Signal)) + " (" + strconv.Itoa(m.Exit()) + ")"
	}
	return strconv.Itoa(m.Status.Code)
}

// RunLogsKept is the result of RunKeepLogs for process Proc; Err says they
// could not be written (the run goes on: kept logs are a courtesy).
type RunLogsKept struct {
	Proc int
	Err  error
}

// RunEndedWritten is the result of RunWriteEnded: ended is on the record, or
// Err.
type RunEndedWritten struct {
	Err error
}

// RunDelivered is an artifact that passed the run's subscription (section 9)
// for a session.
type RunDelivered struct {
	Delivery RunDelivery
}

// RunNotInCare is the node finding a run whose started counts and whose
// ended does not, which it does not have in its care with a live process
// (RunsLost); Note says why.
type RunNotInCare struct {
	Note string
}

// RunTimerFired is a run's timer firing; Seq tells a current one from one a
// later decision made stale.
type RunTimerFired struct {
	Purpose string
	Seq     int
}

// ---- effects ----

// RunTakeIntoCare records, on the node's own host, that the run is in its
// care (section 4), before anything of it is made.
type RunTakeIntoCare struct {
	Run string
}

// RunPrepare runs layers 2 to 4 of the run: the workspace's steps, the
// sandbox and the limits, ready for a launch. Result: RunPrepared.
type RunPrepare struct {
	Run string
}

// ErrUnreachable marks a write a run's node could not make because the
// server could not be reached (refused connection, a timeout, an answer
// of 5xx): the run's core tries it again for as long as the node runs,
// never counting it among the attempts that end a run (D72: the node
// waits for the server, it never guesses). Any other failure counts.
var ErrUnreachable = errors.New("the server could not be reached")

// RunWriteStarted writes started, as the node user, where the run is, with
// the values set and the limits applied. Result: RunStartedWritten.
type RunWriteStarted struct {
	Run     string
	Values  map[string]string
	Attempt int
}

// RunLaunch launches the run's command as its process number Proc: for a
// session whose deliveries is start, with Delivery's line after the first.
type RunLaunch struct {
	Run      string
	Proc     int
	Delivery *RunDelivery
}

// RunDeliver writes a delivery's line to the STDIN of the run's process Proc.
type RunDeliver struct {
	Run      string
	Proc     int
	Delivery RunDelivery
}

// RunEndProcess sends Signal (SigTERM or SigKILL) to the run's process Proc.
type RunEndProcess struct {
	Run    string
	Proc   int
	Signal string
}

// RunEndPreparing ends the run's preparation in flight (RunPrepare) at a
// stop: a command step's process group is ended (D99), a step in its
// course given up; RunPrepared answers as ever, and the run ends stopped.
// It runs beside the run's other effects, which wait for the preparation.
type RunEndPreparing struct {
	Run string
}

// RunStartTimer asks for RunTimerFired after a duration.
type RunStartTimer struct {
	Run     string
	Purpose string
	Seq     int
	After   time.Duration
}

// RunKeepLogs writes the kept logs of process Proc (section 8.2): the files
// in the workspace and the reply where the run is, for each kept stream that
// printed a byte. Result: RunLogsKept.
type RunKeepLogs struct {
	Run  string
	Proc int
}

// RunWriteEnded writes ended, as the node user, where the run is (table
// 12). Result: RunEndedWritten.
type RunWriteEnded struct {
	Run     string
	Outcome runmsg.RunOutcome
	// Exit is set for RunExited alone.
	Exit *int
	// Note is required for refused, budget and lost, absent otherwise.
	Note    string
	Attempt int
}

// RunRelease takes the run out of the node's care, once ended is written.
type RunRelease struct {
	Run string
}

// Answer is RunPrepared.
func (RunPrepare) Answer() Answer { return RunPrepared{} }

// Answer is RunStartedWritten.
func (RunWriteStarted) Answer() Answer { return RunStartedWritten{} }

// Answer is RunLogsKept.
func (RunKeepLogs) Answer() Answer { return RunLogsKept{} }

// Answer is RunEndedWritten.
func (RunWriteEnded) Answer() Answer { return RunEndedWritten{} }

func (RunArrived) daemonMessage()        {}
func (RunStartRequested) daemonMessage() {}
func (RunStopRequested) daemonMessage()  {}
func (RunPrepared) daemonMessage()       {}
func (RunStartedWritten) daemonMessage() {}
func (RunProcessExited) daemonMessage()  {}
func (RunLogsKept) daemonMessage()       {}
func (RunEndedWritten) daemonMessage()   {}
func (RunDelivered) daemonMessage()      {}
func (RunNotInCare) daemonMessage()      {}
func (RunTimerFired) daemonMessage()     {}

func (RunPrepared) answer()       {}
func (RunStartedWritten) answer() {}
func (RunLogsKept) answer()       {}
func (RunEndedWritten) answer()   {}

func (RunTakeIntoCare) daemonEffect() {}
func (RunPrepare) daemonEffect()      {}
func (RunWriteStarted) daemonEffect() {}
func (RunLaunch) daemonEffect()       {}
func (RunDeliver) daemonEffect()      {}
func (RunEndProcess) daemonEffect()   {}
func (RunEndPreparing) daemonEffect() {}
func (RunStartTimer) daemonEffect()   {}
func (RunKeepLogs) daemonEffect()     {}
func (RunWriteEnded) daemonEffect()   {}
func (RunRelease) daemonEffect()      {}

func (m RunArrived) String() string {
	s := "arrived " + m.Facts.String()
	if m.InOrder {
		s += ", in order"
	}
	if m.Refusal != "" {
		s += ", refused: " + oneLine(m.Refusal)
	}
	return s
}

func (m RunStartRequested) String() string {
	s := "start " + requestedBy(m.By, m.Privileged)
	if m.Refusal != "" {
		s += ", refused: " + oneLine(m.Refusal)
	}
	return s
}

func (m RunStopRequested) String() string { return "stop " + requestedBy(m.By, m.Privileged) }

// requestedBy renders who asked for a start or a stop, and whether they
// hold admin or setup.
func requestedBy(by string, privileged bool) string {
	s := "by " + messages.Token(by)
	if !privileged {
		s += " (not admin or setup)"
	}
	return s
}

func (m RunPrepared) String() string {
	if m.Failed != "" {
		return "prepared: failed: " + oneLine(m.Failed)
	}
	return "prepared: ok, " + strconv.Itoa(len(m.Values)) + " values"
}

func (m RunStartedWritten) String() string { return "started written" + errSuffix(m.Err) }

func (m RunProcessExited) String() string {
	s := "exit of process " + strconv.Itoa(m.Proc) + ": "
	switch m.Status.State {
	case messages.EndUnknown:
		s += "unknown"
	case messages.EndSignaled:
		s += "signal " + strconv.Itoa(messages.SignalNumber(m.Status.Signal))
	default:
		s += "code " + strconv.Itoa(m.Status.Code)
	}
	if m.Status.Limit != "" {
		s += ", past its " + m.Status.Limit
	}
	return s
}

func (m RunLogsKept) String() string {
	return "logs kept of process " + strconv.Itoa(m.Proc) + errSuffix(m.Err)
}

func (m RunEndedWritten) String() string { return "ended written" + errSuffix(m.Err) }

func (m RunDelivered) String() string { return "delivery " + m.Delivery.String() }

func (m RunNotInCare) String() string { return "not in care: " + oneLine(m.Note) }

func (m RunTimerFired) String() string {
	return "timer " + messages.Token(m.Purpose) + " #" + strconv.Itoa(m.Seq) + " fired"
}

func (e RunTakeIntoCare) String() string { return "take " + daemonShort(e.Run) + " into care" }

func (e RunPrepare) String() string { return "prepare " + daemonShort(e.Run) + " (layers 2-4)" }

func (e RunWriteStarted) String() string {
	s := "write started " + daemonShort(e.Run)
	if len(e.Values) > 0 {
		keys := make([]string, 0, len(e.Values))
		for k := range e.Values {
			keys = append(keys, k)
		}
		sortStrings(keys)
		s += " values " + strings.Join(keys, ",")
	}
	if e.Attempt > 1 {
		s += " (attempt " + strconv.Itoa(e.Attempt) + ")"
	}
	return s
}

func (e RunLaunch) String() string {
	s := "launch " + daemonShort(e.Run) + " process " + strconv.Itoa(e.Proc)
	if e.Delivery != nil {
		s += " for " + e.Delivery.String()
	}
	return s
}

func (e RunDeliver) String() string {
	return "deliver " + e.Delivery.String() + " to " + daemonShort(e.Run) + " process " + strconv.Itoa(e.Proc)
}

func (e RunEndProcess) String() string {
	return "signal " + messages.Token(e.Signal) + " " + daemonShort(e.Run) + " process " + strconv.Itoa(e.Proc)
}

func (e RunEndPreparing) String() string { return "end preparing " + daemonShort(e.Run) }

func (e RunStartTimer) String() string {
	return "start timer " + messages.Token(e.Purpose) + " " + daemonShort(e.Run) + " #" + strconv.Itoa(e.Seq) + " " + e.After.String()
}

func (e RunKeepLogs) String() string {
	return "keep logs " + daemonShort(e.Run) + " process " + strconv.Itoa(e.Proc)
}

func (e RunWriteEnded) String() string {
	s := "write ended " + daemonShort(e.Run) + " " + string(e.Outcome)
	if e.Exit != nil {
		s += " exit " + strconv.Itoa(*e.Exit)
	}
	if e.Note != "" {
		s += ": " + oneLine(e.Note)
	}
	if e.Attempt > 1 {
		s += " (attempt " + strconv.Itoa(e.Attempt) + ")"
	}
	return s
}

func (e RunRelease) String() string { return "release " + daemonShort(e.Run) + " from care" }

// oneLine keeps a text on one line for a rendering.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strconv.Quote(s)
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// ---- subscriptions (seed 004, section 9) ----

// RunArrivalKind is what kind of artifact arrived.
type RunArrivalKind string

// The kinds of artifact a session may be given.
const (
	RunPost    RunArrivalKind = "post"
	RunChange  RunArrivalKind = "change"
	RunCheckin RunArrivalKind = "checkin"
)

// RunArrival is an artifact the server received, as the subscription filters
// and the line need it.
type RunArrival struct {
	Kind RunArrivalKind
	Hash string
	At   RunPosition
	// From is the sender the server received it from; empty when the server
	// has not said.
	From string
	// HoldsMessage says it holds an OCX message.
	HoldsMessage bool
	// Thread is a post's thread's root; Ticket a change's ticket; Branch a
	// check-in's branch as Fossil's timeline shows it.
	Thread string
	Ticket string
	Branch string
	// Text is a post's text, the text a change adds, or a check-in's comment.
	Text string
}

// HoldsMessage says a post's text or the text a ticket change adds holds
// an OCX message (table 9, filter 4): a fenced JSON block with "ocx", of a
// run engine message or of the session design. Text whose blocks cannot be
// told apart (an unclosed fence, a block that does not parse, two blocks
// with "ocx") counts as holding one: a session is never given what a
// reader of messages might act on.
func HoldsMessage(text string) bool {
	_, _, err := messages.NoteBlock([]byte(text))
	return !errors.Is(err, strictjson.ErrNotANote)
}

// RunLine is the line a session is given for an arrival (table 9), one JSON
// object with its keys in the table's order, without its newline.
func RunLine(a RunArrival) string {
	var v any
	switch a.Kind {
	case RunPost:
		v = struct {
			Post string `json:"post"`
			From string `json:"from"`
			Text string `json:"text"`
		}{a.Hash, a.From, a.Text}
	case RunChange:
		v = struct {
			Change string `json:"change"`
			Ticket string `json:"ticket"`
			From   string `json:"from"`
			Text   string `json:"text"`
		}{a.Hash, a.Ticket, a.From, a.Text}
	case RunCheckin:
		v = struct {
			Checkin string `json:"checkin"`
			Branch  string `json:"branch"`
			From    string `json:"from"`
			Comment string `json:"comment"`
		}{a.Hash, a.Branch, a.From, a.Text}
	default:
		return ""
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "" // strings and structs always encode
	}
	return strings.TrimSuffix(b.String(), "\n")
}
