package messages

import (
	"fmt"
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
		if err := checkLogin("login", n.Login); err != nil {
			return err
		}
	}
	return checkText("reason", n.Reason, false, MaxTextLen)
}

// Encode renders the canonical block.
func (n *StopNote) Encode() ([]byte, error) { return encodeChecked(n) }

// String renders the note on one line.
func (n *StopNote) String() string {
	return newLine(KindStop).version(n.Version).optKV("login", n.Login).text("reason", n.Reason).String()
}

// StopCause says what stopped a session.
type StopCause string

// The causes (D4): a stop request on the record, or a signal (TERM from the daemon).
const (
	StopByRequest StopCause = "request"
	StopBySignal  StopCause = "signal"
)

// StoppedNote is what a session writes, as its agent login on its own record,
// when it stops on request or on TERM, before it exits 0.
type StoppedNote struct {
	Version int    `json:"-" ocx:"version"`
	Login   string `json:"login" why:"the note names the agent login of its workspace"`
	Project string `json:"project" why:"the note names the project of its workspace"`
	// Launch is the launch the session served; a terminal session has none.
	Launch string    `json:"launch,omitempty"`
	Cause  StopCause `json:"cause" why:"a stopped note says what stopped the session: request or signal"`
	// Request is the stop post it obeyed (cause request).
	Request string `json:"request,omitempty"`
	// Signal names the signal it obeyed (cause signal), as SIGTERM.
	Signal string `json:"signal,omitempty"`
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
		if err := checkHash("request", n.Request); err != nil {
			return err
		}
		if n.Signal != "" {
			return fieldErr("signal", ErrInvalid, "a session stopped by a request names the request, not a signal")
		}
	case StopBySignal:
		if n.Signal == "" {
			return fieldErr("signal", ErrMissing, "is missing; a session stopped by a signal names it, as SIGTERM")
		}
		if err := checkSignal("signal", n.Signal); err != nil {
			return err
		}
		if n.Request != "" {
			return fieldErr("request", ErrInvalid, "a session stopped by a signal names the signal, not a request")
		}
	case "":
		return fieldErr("cause", ErrMissing, "is empty; it is request or signal")
	default:
		return fieldErr("cause", ErrInvalid, fmt.Sprintf("%s is not a cause (request, signal)", quoteShort(string(n.Cause))))
	}
	return nil
}

// Encode renders the canonical block.
func (n *StoppedNote) Encode() ([]byte, error) { return encodeChecked(n) }

// String renders the note on one line.
func (n *StoppedNote) String() string {
	return newLine(KindStopped).version(n.Version).word(n.Login+"/"+n.Project).optKV("launch", n.Launch).
		kv("cause", string(n.Cause)).optKV("request", n.Request).optKV("signal", n.Signal).String()
}
