package messages

import (
	"bytes"
	"fmt"
	"strings"

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
	if err := CheckHash("post", l.Post); err != nil {
		return strictjson.At("wake line", err)
	}
	if l.From != "" {
		if err := checkUser("from", l.From); err != nil {
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
		return Token(l.Post)
	}
	return Token(l.Post) + " " + Token(l.From)
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

// checkUser checks a Fossil user's login as a receipt or a hears list names
// it: any login Fossil holds, so not only D1's agent names, but one line of
// valid UTF-8 without control characters and without space at either end.
func checkUser(field, s string) error {
	if s == "" {
		return strictjson.FieldErr(field, strictjson.ErrMissing, "is empty; it names a Fossil user")
	}
	if len(s) > MaxShortLen {
		return strictjson.FieldErr(field, strictjson.ErrTooLong, fmt.Sprintf("is %d bytes; a user's login is at most %d", len(s), MaxShortLen))
	}
	if strings.Trim(s, " ") != s {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s begins or ends with a space; a login does not", strictjson.QuoteShort(s)))
	}
	return checkChars(field, s, false)
}

// HearsFileContent is what AGENTS/LOGIN/held/PROJECT/hears holds for a resolved hears list:
// one login a line, in the order given, or "*" alone; an empty list (the
// session hears nobody) is an empty file. The hook reads it for each post
// that would wake the session (D27).
func HearsFileContent(hears []string) ([]byte, error) {
	if err := CheckHears("hears", hears); err != nil {
		return nil, strictjson.At("hears file", err)
	}
	var b bytes.Buffer
	for _, u := range hears {
		b.WriteString(u)
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// ParseHearsFile reads AGENTS/LOGIN/held/PROJECT/hears: the inverse of HearsFileContent.
// It never returns nil: an empty file hears nobody.
func ParseHearsFile(data []byte) ([]string, error) {
	const where = "hears file"
	out := []string{}
	if len(data) == 0 {
		return out, nil
	}
	if data[len(data)-1] != '\n' {
		return nil, &strictjson.FieldError{Where: where, Problem: "does not end with a newline: each login is a line", Err: strictjson.ErrSyntax}
	}
	for _, l := range strings.Split(string(data[:len(data)-1]), "\n") {
		out = append(out, l)
	}
	if err := CheckHears("hears", out); err != nil {
		return nil, strictjson.At(where, err)
	}
	return out, nil
}

// Hears reports whether a hears list names sender: "*" hears every known
// sender; nobody hears an unknown one ("").
func Hears(hears []string, sender string) bool {
	if sender == "" {
		return false
	}
	for _, u := range hears {
		if u == HearsEveryone || u == sender {
			return true
		}
	}
	return false
}

// CheckinsFileContent renders AGENTS/LOGIN/held/PROJECT/checkins: one branch a line, each
// line ended by a newline; no branch, an empty file.
func CheckinsFileContent(branches []string) ([]byte, error) {
	if err := CheckBranches("checkins", branches); err != nil {
		return nil, strictjson.At("checkins file", err)
	}
	var b bytes.Buffer
	for _, br := range branches {
		b.WriteString(br)
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// ParseCheckinsFile reads AGENTS/LOGIN/held/PROJECT/checkins: the inverse of
// CheckinsFileContent. It never returns nil.
func ParseCheckinsFile(data []byte) ([]string, error) {
	const where = "checkins file"
	out := []string{}
	if len(data) == 0 {
		return out, nil
	}
	if data[len(data)-1] != '\n' {
		return nil, &strictjson.FieldError{Where: where, Problem: "does not end with a newline: each branch is a line", Err: strictjson.ErrSyntax}
	}
	out = append(out, strings.Split(string(data[:len(data)-1]), "\n")...)
	if err := CheckBranches("checkins", out); err != nil {
		return nil, strictjson.At(where, err)
	}
	return out, nil
}
