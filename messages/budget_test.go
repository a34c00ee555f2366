package messages

import (
	"errors"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// TestBudgetNotes: an end note and a stopped note may name the limit a
// session ran past (D40); one this reader does not know is refused, and so is
// budget on a note that has none, as a reader from before D40 refuses it on
// both (E9): a budget's end is never read as a plain exit.
func TestBudgetNotes(t *testing.T) {
	end := `{"ocx": "end", "launch": "` + h40 + `", "login": "a", "project": "p", "pid": 7, "start_time": 9,
		"status": "exited", "exit_code": 0, "killed": false, "release": "r", "seen": "2026-01-01T00:00:00Z", "note": "n"`
	stopped := `{"ocx": "stopped", "login": "a", "project": "p", "cause": "budget"`
	for _, c := range []struct {
		name, block, want string
	}{
		{"end past wall", end + `, "budget": "wall"}`, ""},
		{"end, no budget", end + `}`, ""},
		{"end past its tokens", end + `, "budget": "tokens"}`, ""},
		{"end past an unknown limit", end + `, "budget": "cpu"}`, "budget"},
		{"stopped past its tokens", stopped + `, "budget": "tokens"}`, "budget"},
		{"end, budget an object", end + `, "budget": {"wall": "2h"}}`, "budget"},
		{"stopped past wall", stopped + `, "budget": "wall"}`, ""},
		{"stopped by budget naming none", stopped + `}`, "budget: is missing"},
		{"stopped by budget and a signal", stopped + `, "budget": "wall", "signal": "SIGTERM"}`, "signal"},
		{"stopped by a signal with a budget", `{"ocx": "stopped", "login": "a", "project": "p", "cause": "signal", "signal": "SIGTERM", "budget": "wall"}`, "budget"},
		{"a note with no budget", `{"ocx": "stop", "budget": "wall"}`, "budget"},
	} {
		n, err := decodeNote([]byte(c.block))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v (%v), want an error naming %q", c.name, err, n, c.want)
		}
	}
	n, err := DecodeNoteAs[*EndNote]([]byte(end + `, "budget": "wall"}`))
	if err != nil || n.Budget != LimitWall || !strings.Contains(n.String(), "budget=wall") {
		t.Errorf("end note: %v %v", n, err)
	}
	if _, err := decodeNote([]byte(`{"ocx": "stop", "budget": "wall"}`)); !errors.Is(err, strictjson.ErrUnknownKey) {
		t.Errorf("budget on a stop note: %v, want ErrUnknownKey", err)
	}
}
