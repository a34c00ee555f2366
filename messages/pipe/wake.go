package pipe

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// WakeLine is one line of a session's wake pipe, written by the hook: the
// post or ticket change the session is woken for, and who sent it as the
// node's repository recorded the receipt (seed 001 E2). The session, which
// reads only its own clone, learns the sender from this line and from
// nothing written inside the artifact: a name in a U card proves nothing.
//
// The line is `HASH` and, when the sender is known, a space and the sender's
// login to the end of the line: `HASH SENDER`. A line without a sender is a
// post from an unknown sender, never the agent's own.
type WakeLine struct {
	Post string // the artifact's full hash
	From string // the sender's login as the node recorded it; "" when unknown
}

// Validate checks the hash and the sender.
func (l WakeLine) Validate() error {
	if err := messages.CheckHash("post", l.Post); err != nil {
		return strictjson.At("wake line", err)
	}
	if l.From != "" {
		if err := messages.CheckUser("from", l.From); err != nil {
			return strictjson.At("wake line", err)
		}
	}
	return nil
}

// Encode renders the line with its newline.
func (l WakeLine) Encode() ([]byte, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	s := l.Post
	if l.From != "" {
		s += " " + l.From
	}
	return finishLine("wake line", s)
}

// String renders the line without its newline.
func (l WakeLine) String() string {
	if l.From == "" {
		return messages.Token(l.Post)
	}
	return messages.Token(l.Post) + " " + messages.Token(l.From)
}

// ParseWakeLine reads one wake line, with or without its newline. Each line
// has one encoding, so what parses re-encodes to the same bytes.
func ParseWakeLine(line []byte) (WakeLine, error) {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	if len(line)+1 > pipeBuf {
		return WakeLine{}, &strictjson.FieldError{Where: "wake line", Problem: fmt.Sprintf("is %d bytes with its newline; a wake line is at most %d (PIPE_BUF)", len(line)+1, pipeBuf), Err: strictjson.ErrTooLong}
	}
	hash, from, _ := strings.Cut(string(line), " ")
	l := WakeLine{Post: hash, From: from}
	if strings.Contains(string(line), " ") && from == "" {
		return WakeLine{}, &strictjson.FieldError{Where: "wake line", Field: "from", Problem: "is empty after the space; a line is HASH alone or HASH SENDER", Err: strictjson.ErrSyntax}
	}
	if err := l.Validate(); err != nil {
		return WakeLine{}, err
	}
	return l, nil
}
