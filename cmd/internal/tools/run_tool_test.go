package tools

import (
	"strings"
	"testing"
)

func TestRunInputDecoding(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"empty", "  ", "input: empty"},
		{"not json", "{", "message"},
		{"no ocx", `{"kind": "run"}`, "ocx"},
		{"a stop", `{"ocx": 1, "kind": "stop", "node": "node-1", "run": "` + strings.Repeat("a", 64) + `"}`, "kind: \"stop\" is not a run"},
		{"no objective", `{"ocx": 1, "kind": "run", "node": "node-1", "process": {"user": "b", "command": ["true"]}}`, "objective"},
		{"no command", `{"ocx": 1, "kind": "run", "node": "node-1", "objective": "x", "process": {"user": "b"}}`, "command"},
		{"unknown field", `{"ocx": 1, "kind": "run", "node": "node-1", "objective": "x", "process": {"user": "b", "command": ["true"], "colour": 1}}`, "colour"},
	} {
		_, err := decodeRunInput([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one naming %q", c.name, err, c.want)
		}
	}
	r, err := decodeRunInput([]byte(`{"ocx": 1, "kind": "run", "node": "node-1", "objective": "Say hello.\nThen stop.", "process": {"user": "b", "command": ["echo"], "manual": true}}`))
	if err != nil || !r.Process.Manual {
		t.Fatalf("a valid manual run: %v %+v", err, r)
	}
	if got := runTitle(r.Objective); got != "Say hello." {
		t.Errorf("title %q", got)
	}
	if got := runTitle(strings.Repeat("x", 200)); len([]rune(got)) != 80 {
		t.Errorf("a long title is %d runes", len([]rune(got)))
	}
}
