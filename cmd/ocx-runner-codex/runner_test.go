package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	sessionturn "github.com/ocx-go/ocx/actors/turn"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/modelapi"
)

var heard = regexp.MustCompile(`^codex\(gpt-5\) turn (\d+) of ([0-9a-f-]{36}) heard: `)

// The first turn opens the thread with the objective; the second resumes
// it by the id thread.started gave, with the post alone. The stand-in
// checks the -c overrides name `ocx mcp connect --socket SOCKET`.
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
	if strings.Contains(out, "a first thought") {
		t.Errorf("answer %q holds an earlier agent message, not only the last", out)
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

// A node that serves no tools: codex runs with no -c, and the log says why.
func TestNoTools(t *testing.T) {
	f := newFixture(t)
	f.Tools = false
	out, errs, code := f.turn(t, input("hello"))
	if code != 0 || !heard.MatchString(out) {
		t.Fatalf("exit %d, out %q, stderr %q", code, out, errs)
	}
	if !strings.Contains(errs, "codex runs without the node's tools: the node serves no tools here ($OCX_MCP_SOCKET is not set)") {
		t.Errorf("stderr %q does not say why there are no tools", errs)
	}
}

// An error event codex recovers from is logged, and the turn stands.
func TestRecoveredErrorIsLogged(t *testing.T) {
	f := newFixture(t)
	out, errs, code := f.turn(t, input("standin:reconnect"))
	if code != 0 || !heard.MatchString(out) || !strings.Contains(errs, "codex said: Reconnecting... 1/5") {
		t.Fatalf("exit %d, out %q, stderr %q", code, out, errs)
	}
	out, errs, code = f.turn(t, input("standin:garbage"))
	if code != 0 || !heard.MatchString(out) || !strings.Contains(errs, "1 lines of codex's output were not JSON events") {
		t.Fatalf("exit %d, out %q, stderr %q", code, out, errs)
	}
}

// codex's error shapes become one-line failure notes, and a failed turn
// leaves the conversation as it was.
func TestErrorsAreFailureNotes(t *testing.T) {
	for _, tc := range []struct{ prompt, note string }{
		{"standin:turn_failed", "The runner failed: codex: the turn failed: unexpected status 401 Unauthorized: Missing bearer."},
		{"standin:error_event", "The runner failed: codex: stream disconnected before completion."},
	} {
		t.Run(tc.prompt, func(t *testing.T) {
			f := newFixture(t)
			f.turn(t, input("hello"))
			id, _ := f.stored(t)
			out, errs, code := f.turn(t, input(tc.prompt))
			if code != 1 || out != tc.note+"\n" {
				t.Fatalf("exit %d, out %q (stderr %q), want exit 1 and %q", code, out, errs, tc.note)
			}
			if got, turns := f.stored(t); got != id || turns != 1 {
				t.Errorf("after the failure the store holds %q, %d turns; want %q, 1", got, turns, id)
			}
		})
	}
}

// A thread codex no longer knows is its error event, said as a note.
func TestResumeUnknownThread(t *testing.T) {
	f := newFixture(t)
	if _, errs, code := f.turn(t, input("hello")); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if err := os.RemoveAll(filepath.Join(f.Home, ".standin-codex")); err != nil {
		t.Fatal(err)
	}
	id, _ := f.stored(t)
	out, _, code := f.turn(t, input("again"))
	if want := "The runner failed: codex: thread/resume failed: no rollout found for thread id " + id + ".\n"; code != 1 || out != want {
		t.Fatalf("exit %d, out %q, want %q", code, out, want)
	}
}

// A completed turn with no agent message answers nothing: the session
// posts the empty answer as it posts any.
func TestNoMessage(t *testing.T) {
	f := newFixture(t)
	out, errs, code := f.turn(t, input("standin:no_message"))
	if code != 0 || out != "\n" {
		t.Fatalf("exit %d, out %q, stderr %q", code, out, errs)
	}
}

func TestMissingCLI(t *testing.T) {
	f := newFixture(t)
	f.Path = "/usr/bin:/bin"
	out, _, code := f.turn(t, input("hello"))
	if want := "The runner failed: codex is not on PATH (the sandbox's path must hold it).\n"; code != 1 || out != want {
		t.Fatalf("exit %d, out %q, want %q", code, out, want)
	}
}

func TestUsage(t *testing.T) {
	f := newFixture(t)
	for _, argv := range [][]string{{}, {"--model"}, {"--model", "m", "extra"}, {"--sandbox", "x"}} {
		out, _, code := f.turn(t, input("hello"), argv...)
		if code != 2 || !strings.HasPrefix(out, "The runner failed: usage: ocx-runner-codex --model MODEL") {
			t.Errorf("%q: exit %d, out %q", argv, code, out)
		}
	}
}

// A report note the model writes reaches the record as it is.
func TestReportPassesThrough(t *testing.T) {
	f := newFixture(t)
	out, errs, code := f.turn(t, input("standin:report"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	r := sessionturn.ReportOf(out)
	if r == nil || r.Outcome != "done" || r.Summary != "codex did it" {
		t.Fatalf("answer %q holds report %+v, want done", out, r)
	}
}

// TestUsageReported: codex's turn.completed says what the turn used, its
// input holding the cached; the runner reports it for the session (D50),
// and nothing when no turn completed.
func TestUsageReported(t *testing.T) {
	f := newFixture(t)
	if _, errs, code := f.turn(t, input("hello")); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := messages.RunnerReport{Tokens: modelapi.Tokens{Input: 100, Output: 20, Cached: 50}}
	if got := f.Reported(t); got == nil || *got != want {
		t.Fatalf("reported %+v, want %+v", got, want)
	}
	if _, _, code := f.turn(t, input("standin:turn_failed")); code != 1 {
		t.Fatalf("failed turn: exit %d", code)
	}
	if got := f.Reported(t); got != nil {
		t.Fatalf("a turn that never completed reported %+v", got)
	}
}
