package runmsg

import "fmt"

// messageVerdict is what a message is (seed 004, section 3, the table "A
// message that ... is").
type messageVerdict int

// The verdicts.
const (
	// MessageCounts: the message counts; the engine acts on it.
	MessageCounts messageVerdict = iota
	// messageIgnored: nothing is done.
	messageIgnored
	// messageRefused: a run answered ended, refused (section 11, row 1).
	messageRefused
)

func (v messageVerdict) String() string {
	switch v {
	case MessageCounts:
		return "counts"
	case messageIgnored:
		return "ignored"
	case messageRefused:
		return "answered ended, refused"
	}
	return fmt.Sprintf("MessageVerdict(%d)", int(v))
}

// The rows of section 3's table "A message that ... is", in its order; 0
// is no row: the message counts.
const (
	messageRowRunSender    = 1 // a run sent by anyone table 3 does not name
	messageRowOtherSender  = 2 // a stop, started or ended sent by anyone else, or written elsewhere
	messageRowUnknownKind  = 3 // a kind the reader does not know
	messageRowSecondReport = 4 // a second started or ended for one run
)

// MessageStanding is what the table needs to know of a message, each fact
// read by the caller from the repository, never from the message's text.
type MessageStanding struct {
	// Kind is the message's kind as written ("" when it has none).
	Kind MessageKind
	// SenderPrivileged: the user the server received it from holds admin
	// or setup.
	SenderPrivileged bool
	// SenderIsNode: the user the server received it from is the node user
	// of its run's node (the run's "node").
	SenderIsNode bool
	// WhereItsRun: it was written where its run is, a reply in the run's
	// thread or a change to its ticket; false when no run has its hash.
	WhereItsRun bool
	// SeenBefore: a message of its kind for its run (a started, or an
	// ended) came before it in the server's order.
	SeenBefore bool
}

// ClassifyMessage applies section 3's table: it returns the verdict and
// the row that decided it (0: none held, it counts). A record (protocol v1)
// counts when a user holding admin or setup sent it, and is ignored
// otherwise (seed 001, E3).
func ClassifyMessage(m MessageStanding) (messageVerdict, int) {
	switch m.Kind {
	case MsgRun:
		if !m.SenderPrivileged {
			return messageRefused, messageRowRunSender
		}
		return MessageCounts, 0
	case MsgStop:
		if !m.SenderPrivileged || !m.WhereItsRun {
			return messageIgnored, messageRowOtherSender
		}
		return MessageCounts, 0
	case MsgStarted, MsgEnded:
		if !m.SenderIsNode || !m.WhereItsRun {
			return messageIgnored, messageRowOtherSender
		}
		if m.SeenBefore {
			return messageIgnored, messageRowSecondReport
		}
		return MessageCounts, 0
	case MsgRecord:
		if !m.SenderPrivileged {
			return messageIgnored, 0
		}
		return MessageCounts, 0
	}
	return messageIgnored, messageRowUnknownKind
}
