package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	sessionturn "github.com/ocx-go/ocx/actors/turn"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/modelapi"
)

var heard = regexp.MustCompile(`^claude\(sonnet\) turn (\d+) of ([0-9a-f-]{36}) heard: `)

// The first turn opens the conversation with the objective; the second
// resumes it by the id claude handed out, with the post alone.
func TestFirstTurnThenResume(t *testing.T) {
	f := newFixture(t)
	out, errs, code := f.turn(t, input("hello"))
	m := heard.FindStringSubmatch(out)
	if code != 0 || m == nil || m[1] != "1" {
		t.Fatalf("first turn: exit %d, out %q, stderr %q", code, out, errs)
	}
	id := m[2]
	if want := "Record rec1: fix the build\n\nalice wrote on record rec1 (post p1):\nhello\n"; !strings.HasSuffix(out, want) {
		t.Errorf("first turn's prompt: %q, want it to end %q", out, want)
	}
	if got, turns := f.stored(t); got != id || turns != 1 {
		t.Errorf("stored %q after %d turns, want %q after 1", got, turns, id)
	}
	out, errs, code = f.turn(t, input("again"))
	m = heard.FindStringSubmatch(out)
	if code != 0 || m == nil || m[1] != "2" || m[2] != id {
		t.Fatalf("second turn: exit %d, out %q, stderr %q; want turn 2 of %s", code, out, errs, id)
	}
	if strings.Contains(out, "Record rec1") || !strings.HasSuffix(out, "alice wrote on record rec1 (post p1):\nagain\n") {
		t.Errorf("second turn's prompt: %q, want the post alone", out)
	}
	if got, turns := f.stored(t); got != id || turns != 2 {
		t.Errorf("stored %q after %d turns, want %q after 2", got, turns, id)
	}
}

// The MCP configuration names the server ocx alone, as `ocx mcp connect
// --socket SOCKET` by ocx's absolute path (the stand-in checks it too).
func TestMCPConfig(t *testing.T) {
	f := newFixture(t)
	if _, errs, code := f.turn(t, input("hello")); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(filepath.Join(f.SessionDir, configFile))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		MCPServers map[string]mcpServer `json:"mcpServers"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	want := mcpServer{Type: "stdio", Command: filepath.Join(kit.Standins, "ocx"), Args: []string{"mcp", "connect", "--socket", socket}}
	if s := c.MCPServers["ocx"]; len(c.MCPServers) != 1 || s.Type != want.Type || s.Command != want.Command ||
		strings.Join(s.Args, " ") != strings.Join(want.Args, " ") {
		t.Fatalf("MCP configuration %s, want the server %+v alone", b, want)
	}
}

// A node that serves no tools: claude runs with no MCP server, and the
// log says why.
func TestNoTools(t *testing.T) {
	f := newFixture(t)
	f.Tools = false
	out, errs, code := f.turn(t, input("hello"))
	if code != 0 || !heard.MatchString(out) {
		t.Fatalf("exit %d, out %q, stderr %q", code, out, errs)
	}
	if !strings.Contains(errs, "claude runs without the node's tools: the node serves no tools here ($OCX_MCP_SOCKET is not set)") {
		t.Errorf("stderr %q does not say why there are no tools", errs)
	}
}

// claude's error shapes become one-line failure notes, and a failed turn
// leaves the conversation as it was.
func TestErrorsAreFailureNotes(t *testing.T) {
	for _, tc := range []struct{ prompt, note string }{
		{"standin:is_error", `The runner failed: claude: success: API Error: 401 {"type":"error","error":{"type":"authentication_error"}} Please run /login.`},
		{"standin:max_turns", "The runner failed: claude: error_max_turns: Reached maximum number of turns (8)."},
		{"standin:garbage", "The runner failed: claude's output is not JSON: invalid character 'W' looking for beginning of value."},
		{"standin:crash", "The runner failed: claude exited with status 3 and no result (its standard error is in the session's log)."},
	} {
		t.Run(tc.prompt, func(t *testing.T) {
			f := newFixture(t)
			first, _, _ := f.turn(t, input("hello"))
			id, _ := f.stored(t)
			out, errs, code := f.turn(t, input(tc.prompt))
			if code != 1 || out != tc.note+"\n" {
				t.Fatalf("exit %d, out %q (stderr %q), want exit 1 and %q", code, out, errs, tc.note)
			}
			if got, turns := f.stored(t); got != id || turns != 1 {
				t.Errorf("after the failure the store holds %q, %d turns; want %q, 1 (first turn %q)", got, turns, id, first)
			}
		})
	}
}

// A conversation claude no longer knows is its error, said as a note.
func TestResumeUnknownSession(t *testing.T) {
	f := newFixture(t)
	if _, errs, code := f.turn(t, input("hello")); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if err := os.RemoveAll(filepath.Join(f.Home, ".standin-claude")); err != nil {
		t.Fatal(err)
	}
	id, _ := f.stored(t)
	out, _, code := f.turn(t, input("again"))
	if want := "The runner failed: claude: error_during_execution: No conversation found with session ID: " + id + ".\n"; code != 1 || out != want {
		t.Fatalf("exit %d, out %q, want %q", code, out, want)
	}
}

func TestMissingCLI(t *testing.T) {
	f := newFixture(t)
	f.Path = "/usr/bin:/bin"
	out, _, code := f.turn(t, input("hello"))
	if want := "The runner failed: claude is not on PATH (the sandbox's path must hold it).\n"; code != 1 || out != want {
		t.Fatalf("exit %d, out %q, want %q", code, out, want)
	}
}

func TestUsage(t *testing.T) {
	f := newFixture(t)
	for _, argv := range [][]string{{}, {"--model"}, {"--model", "m", "extra"}, {"--effort", "high"}} {
		out, _, code := f.turn(t, input("hello"), argv...)
		if code != 2 || !strings.HasPrefix(out, "The runner failed: usage: ocx-runner-claude --model MODEL") {
			t.Errorf("%q: exit %d, out %q", argv, code, out)
		}
	}
}

// A report note the model writes reaches the record as it is, where the
// session reads it.
func TestReportPassesThrough(t *testing.T) {
	f := newFixture(t)
	out, errs, code := f.turn(t, input("standin:report"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	r := sessionturn.ReportOf(out)
	if r == nil || r.Outcome != "done" || r.Summary != "claude did it" {
		t.Fatalf("answer %q holds report %+v, want done", out, r)
	}
}

// TestUsageReported: claude's result says what the turn used, its cache's
// tokens among them, and what it cost; the runner reports it for the
// session (D50), on a failed turn too (the tokens were spent), and
// reports nothing when the result says nothing.
func TestUsageReported(t *testing.T) {
	f := newFixture(t)
	if _, errs, code := f.turn(t, input("hello")); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := messages.RunnerReport{Tokens: modelapi.Tokens{Input: 115, Output: 20, Cached: 100}, Cost: "0.0123"}
	if got := f.Reported(t); got == nil || *got != want {
		t.Fatalf("reported %+v, want %+v", got, want)
	}
	if _, _, code := f.turn(t, input("standin:max_turns")); code != 1 {
		t.Fatalf("max turns: exit %d", code)
	}
	want.Cost = "0.5"
	if got := f.Reported(t); got == nil || *got != want {
		t.Fatalf("a failed turn reported %+v, want %+v", got, want)
	}
	if _, _, code := f.turn(t, input("standin:garbage")); code != 1 {
		t.Fatalf("garbage: exit %d", code)
	}
	if got := f.Reported(t); got != nil {
		t.Fatalf("output that is not a result reported %+v", got)
	}
}
