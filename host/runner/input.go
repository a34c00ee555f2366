package runner

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Input is the one line of JSON a turn gives its runner on standard input
// (the session writes it with Line; a runner reads it with ReadInput).
type Input struct {
	// Post is the post the turn answers.
	Post string `json:"post"`
	// From is the login that wrote it, "" when the session does not know.
	From string `json:"from,omitempty"`
	// Text is the post's text.
	Text string `json:"text"`
	// Record is the record the post is on.
	Record string `json:"record"`
	// Objective is the session's objective: "Record HASH: OBJECTIVE" for a
	// protocol v1 record (seed 001 E4).
	Objective string `json:"objective"`
	// Login is the session's agent login, whose posts are the answers.
	Login string `json:"login"`
	// Session is the session's own record, which its conversation belongs to.
	Session string `json:"session"`
}

// maxInputLen bounds the turn's line: a post's text and a little more.
const maxInputLen = 4 << 20

// inputFields are the line's keys and whether each is required.
var inputFields = []struct {
	name     string
	required bool
}{
	{"post", true}, {"from", false}, {"text", true}, {"record", true},
	{"objective", true}, {"login", true}, {"session", true},
}

// ReadInput reads the turn's one line from r (at most MaxInputLen bytes)
// and decodes it with DecodeInput. Anything after the line is ignored.
func ReadInput(r io.Reader) (Input, error) {
	br := bufio.NewReader(io.LimitReader(r, maxInputLen+1))
	line, err := br.ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return Input{}, fmt.Errorf("the turn's input: %w", err)
	}
	if len(line) > maxInputLen {
		return Input{}, fmt.Errorf("the turn's input is longer than %d bytes", maxInputLen)
	}
	if len(bytes.TrimSpace(line)) == 0 {
		return Input{}, errors.New("the turn's input is empty: a runner reads one line of JSON on standard input")
	}
	return DecodeInput(line)
}

// DecodeInput reads one turn line strictly: one JSON object of strings, no
// key it does not know (the error names it), no key twice, every key but
// from present, post, record, login and session not empty, valid UTF-8,
// nothing after the object but white space.
func DecodeInput(b []byte) (Input, error) {
	if !utf8.Valid(b) {
		return Input{}, errors.New("the turn's input is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return Input{}, errors.New("the turn's input is not a JSON object")
	}
	got := map[string]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Input{}, fmt.Errorf("the turn's input is not valid JSON: %v", err)
		}
		key, _ := tok.(string)
		if !knownInputField(key) {
			return Input{}, fmt.Errorf("the turn's input has the field %q, which this runner does not know", key)
		}
		if _, dup := got[key]; dup {
			return Input{}, fmt.Errorf("the turn's input has the field %q twice", key)
		}
		tok, err = dec.Token()
		if err != nil {
			return Input{}, fmt.Errorf("the turn's input is not valid JSON: %v", err)
		}
		s, ok := tok.(string)
		if !ok {
			return Input{}, fmt.Errorf("the turn's input field %q is not a string", key)
		}
		got[key] = s
	}
	if _, err := dec.Token(); err != nil {
		return Input{}, fmt.Errorf("the turn's input is not valid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Input{}, errors.New("the turn's input holds more than one JSON object")
	}
	for _, f := range inputFields {
		v, ok := got[f.name]
		if f.required && !ok {
			return Input{}, fmt.Errorf("the turn's input has no field %q", f.name)
		}
		if ok && v == "" && f.name != "text" && f.name != "objective" {
			return Input{}, fmt.Errorf("the turn's input field %q is empty", f.name)
		}
	}
	return Input{Post: got["post"], From: got["from"], Text: got["text"], Record: got["record"],
		Objective: got["objective"], Login: got["login"], Session: got["session"]}, nil
}

func knownInputField(key string) bool {
	for _, f := range inputFields {
		if f.name == key {
			return true
		}
	}
	return false
}

// Line renders the input as the one line of JSON a turn gives its runner.
func (in Input) Line() []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(in) // strings only: it cannot fail
	return b.Bytes()
}

// Message is what the model gets for the turn. The first turn of a
// conversation opens with the objective (seed 001 E4: "Record HASH:
// OBJECTIVE"), a blank line, then the post; a later turn is the post
// alone. The post says who wrote what, on which record:
//
//	alice wrote on record R (post P):
//	TEXT
func (in Input) Message(first bool) string {
	var b strings.Builder
	if first && strings.TrimSpace(in.Objective) != "" {
		b.WriteString(strings.TrimRight(in.Objective, "\n"))
		b.WriteString("\n\n")
	}
	who := in.From
	if who == "" {
		who = "someone"
	}
	fmt.Fprintf(&b, "%s wrote on record %s (post %s):\n%s", who, in.Record, in.Post, in.Text)
	return b.String()
}
