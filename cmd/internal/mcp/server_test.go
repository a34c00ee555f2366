package mcp_test

import (
	"encoding/json"
	"testing"

	"github.com/ocx-go/ocx/cmd/internal/mcp"
)

// FuzzDecodeAnswer: the reader of an answer that came over MCP never
// panics, and what it accepts encodes back to an answer it reads the same.
func FuzzDecodeAnswer(f *testing.F) {
	for _, s := range []string{
		`{"tool":"post","dry_run":false,"log":[],"result":null,"stopped":null}`,
		`{"tool":"post","dry_run":true,"log":["would post"],"result":"ab","stopped":"to: no"}`,
		`{"tool":"post","dry_run":true,"log":null,"result":null,"stopped":null}`,
		`{"tool":"","dry_run":false,"log":[],"result":null,"stopped":null,"x":1}`,
		`[]`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := mcp.DecodeAnswer(b)
		if err != nil {
			return
		}
		again, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		b2, err := mcp.DecodeAnswer(again)
		if err != nil {
			t.Fatalf("%s: accepted, but its encoding %s is refused: %v", b, again, err)
		}
		if x, _ := json.Marshal(b2); string(x) != string(again) {
			t.Fatalf("%s reads back as %s", again, x)
		}
	})
}

// TestDecodeAnswerRefuses names what is wrong.
func TestDecodeAnswerRefuses(t *testing.T) {
	for in, want := range map[string]string{
		`{"tool":"post","dry_run":false,"log":[],"result":null}`:                      `answer: no "stopped"`,
		`{"tool":"post","dry_run":false,"log":[],"result":null,"stopped":null,"x":1}`: `answer: unknown field "x"`,
		`{"tool":"","dry_run":false,"log":[],"result":null,"stopped":null}`:           `answer: "tool" is empty`,
		`{"tool":"post","dry_run":false,"log":null,"result":null,"stopped":null}`:     `answer: "log" is null`,
		`{"tool":"post","dry_run":"no","log":[],"result":null,"stopped":null}`:        `answer: json: cannot unmarshal string into Go struct field Answer.dry_run of type bool`,
	} {
		if _, err := mcp.DecodeAnswer([]byte(in)); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", in, err, want)
		}
	}
}
