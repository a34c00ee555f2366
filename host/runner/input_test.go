package runner_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/host/runner"
)

const (
	post = "1111111111111111111111111111111111111111111111111111111111111111"
	rec  = "2222222222222222222222222222222222222222222222222222222222222222"
)

// The session's own line decodes to the same values.
func TestSessionLineDecodes(t *testing.T) {
	line := runner.Input{Post: post, From: "alice", Text: "two\nlines <b>&", Record: rec,
		Objective: "Record " + rec + ": fix it", Login: "agent", Session: rec}.Line()
	in, err := runner.ReadInput(bytes.NewReader(line))
	if err != nil {
		t.Fatal(err)
	}
	want := runner.Input{Post: post, From: "alice", Text: "two\nlines <b>&", Record: rec,
		Objective: "Record " + rec + ": fix it", Login: "agent", Session: rec}
	if in != want {
		t.Fatalf("got %+v, want %+v", in, want)
	}
	if !bytes.Equal(in.Line(), line) {
		t.Fatalf("Line: %s, want %s", in.Line(), line)
	}
}

func TestDecodeInputRefuses(t *testing.T) {
	ok := `"post":"p","text":"t","record":"r","objective":"o","login":"l","session":"s"`
	for _, c := range []struct{ line, want string }{
		{`{` + ok + `,"extra":"x"}`, `field "extra", which this runner does not know`},
		{`{` + ok + `,"post":"q"}`, `field "post" twice`},
		{`{"text":"t","record":"r","objective":"o","login":"l","session":"s"}`, `no field "post"`},
		{`{"post":"","text":"t","record":"r","objective":"o","login":"l","session":"s"}`, `field "post" is empty`},
		{`{"post":1,"text":"t","record":"r","objective":"o","login":"l","session":"s"}`, `"post" is not a string`},
		{`[1]`, `not a JSON object`},
		{`{` + ok + `} {}`, `more than one JSON object`},
		{`{` + ok, `not valid JSON`},
		{"{\"post\":\"\xff\"}", `not valid UTF-8`},
		{``, `empty`},
	} {
		_, err := runner.ReadInput(strings.NewReader(c.line))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.line, err, c.want)
		}
	}
	if _, err := runner.DecodeInput([]byte(`{` + ok + `}`)); err != nil {
		t.Fatal(err)
	}
}

func TestMessage(t *testing.T) {
	in := runner.Input{Post: "P", From: "alice", Text: "hello", Record: "R", Objective: "Record R: say hi", Login: "a", Session: "R"}
	if got, want := in.Message(true), "Record R: say hi\n\nalice wrote on record R (post P):\nhello"; got != want {
		t.Errorf("first: %q, want %q", got, want)
	}
	if got, want := in.Message(false), "alice wrote on record R (post P):\nhello"; got != want {
		t.Errorf("later: %q, want %q", got, want)
	}
	in.From = ""
	if got, want := in.Message(false), "someone wrote on record R (post P):\nhello"; got != want {
		t.Errorf("no from: %q, want %q", got, want)
	}
}

// FuzzDecodeInput: the decoder never panics, and what it accepts renders
// to a line that decodes to the same input.
func FuzzDecodeInput(f *testing.F) {
	f.Add([]byte(`{"post":"p","from":"a","text":"t","record":"r","objective":"o","login":"l","session":"s"}`))
	f.Add([]byte(`{"post":"p","text":"t\n\u00e9","record":"r","objective":"","login":"l","session":"s"}`))
	f.Add([]byte(`{"post":"p","post":"p"}`))
	f.Add([]byte(`{"x":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := runner.DecodeInput(b)
		if err != nil {
			return
		}
		again, err := runner.DecodeInput(in.Line())
		if err != nil {
			t.Fatalf("%q: its line %q does not decode: %v", b, in.Line(), err)
		}
		if again != in {
			t.Fatalf("%q: %+v, then %+v", b, in, again)
		}
	})
}
