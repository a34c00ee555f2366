package messages_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/messages"
)

// TestRunStringsAreOneLine renders one of every run message and effect:
// each is one non-empty line, as the logs and the transcripts need.
func TestRunStringsAreOneLine(t *testing.T) {
	h := strings.Repeat("ab", 20)
	d := messages.RunDelivery{Hash: h, At: messages.RunPosition{Receipt: 3, Row: 1}, Line: "{}"}
	exit := 143
	boom := errors.New("line one\nline two")
	facts := messages.RunFacts{Hash: h, Manual: true, Session: true, Deliveries: "start", Wall: time.Hour, CPU: true,
		Project: "demo project", At: messages.RunPosition{Receipt: 3, Row: 1}, Slot: "ana"}
	values := []fmt.Stringer{
		facts,
		messages.RunArrived{Facts: facts, Refusal: "a\nb"},
		messages.RunStartRequested{By: "ana"},
		messages.RunStopRequested{By: "root", Privileged: true},
		messages.RunPrepared{Values: map[string]string{"run": h}},
		messages.RunPrepared{Failed: "workspace[0] directory: denied"},
		messages.RunStartedWritten{Err: boom},
		messages.RunProcessExited{Proc: 1, Status: messages.Signaled(15)},
		messages.RunProcessExited{Proc: 1, Status: messages.ExitUnknown},
		messages.RunLogsKept{Proc: 1, Err: boom},
		messages.RunEndedWritten{},
		messages.RunDelivered{Delivery: d},
		messages.RunNotInCare{Note: "gone"},
		messages.RunTimerFired{Purpose: messages.RunTimerWall, Seq: 2},
		messages.RunTakeIntoCare{Run: h},
		messages.RunPrepare{Run: h},
		messages.RunWriteStarted{Run: h, Values: map[string]string{"b": "1", "a": "2"}, Attempt: 2},
		messages.RunLaunch{Run: h, Proc: 2, Delivery: &d},
		messages.RunDeliver{Run: h, Proc: 1, Delivery: d},
		messages.RunEndProcess{Run: h, Proc: 1, Signal: messages.SigTERM},
		messages.RunStartTimer{Run: h, Purpose: messages.RunTimerGrace, Seq: 1, After: 10 * time.Second},
		messages.RunKeepLogs{Run: h, Proc: 1},
		messages.RunWriteEnded{Run: h, Outcome: messages.RunExited, Exit: &exit, Attempt: 2},
		messages.RunWriteEnded{Run: h, Outcome: messages.RunLost, Note: "not\nhere"},
		messages.RunRelease{Run: h},
		messages.RunTurnRequested{Run: h, Turn: messages.RunTurnStarted, Project: "demo", At: d.At, User: "ana"},
		messages.RunTurnGiven{Turn: messages.RunTurnSlot},
		messages.RunTurnDone{Run: h, Turn: messages.RunTurnSlot},
	}
	for _, v := range values {
		s := v.String()
		if s == "" || strings.ContainsAny(s, "\r\n") {
			t.Errorf("%T renders as %q", v, s)
		}
	}
	if got := (messages.RunWriteStarted{Run: h, Values: map[string]string{"b": "1", "a": "2"}}).String(); !strings.HasSuffix(got, "values a,b") {
		t.Errorf("values not in order: %q", got)
	}
}

// TestRunEffectsAnswer: each run effect that asks names its result.
func TestRunEffectsAnswer(t *testing.T) {
	pairs := []struct {
		e    messages.Asking
		want messages.Answer
	}{
		{messages.RunPrepare{}, messages.RunPrepared{}},
		{messages.RunWriteStarted{}, messages.RunStartedWritten{}},
		{messages.RunKeepLogs{}, messages.RunLogsKept{}},
		{messages.RunWriteEnded{}, messages.RunEndedWritten{}},
	}
	for _, p := range pairs {
		if fmt.Sprintf("%T", p.e.Answer()) != fmt.Sprintf("%T", p.want) {
			t.Errorf("%T answers with %T, want %T", p.e, p.e.Answer(), p.want)
		}
	}
}

// TestRunExit: table 12's exit is the code, or 128 and N for signal N.
func TestRunExit(t *testing.T) {
	for _, c := range []struct {
		m    messages.RunProcessExited
		want int
	}{{messages.RunProcessExited{Status: messages.Exited(0)}, 0}, {messages.RunProcessExited{Status: messages.Exited(3)}, 3}, {messages.RunProcessExited{Status: messages.Signaled(9)}, 137}, {messages.RunProcessExited{Status: messages.Signaled(15)}, 143}} {
		if got := c.m.Exit(); got != c.want {
			t.Errorf("%s: exit %d, want %d", c.m, got, c.want)
		}
	}
}

// TestRunPositionOrder: the server's order is by receipt, then by row.
func TestRunPositionOrder(t *testing.T) {
	a, b, c := messages.RunPosition{Receipt: 1, Row: 5}, messages.RunPosition{Receipt: 2, Row: 1}, messages.RunPosition{Receipt: 2, Row: 2}
	if !a.Before(b) || !b.Before(c) || c.Before(b) || b.Before(b) {
		t.Fatal("RunPosition.Before is not the server's order")
	}
}

// TestRunLineShapes: the three lines of table 9, keys in the table's order,
// text kept as it is (no HTML escaping), one line each.
func TestRunLineShapes(t *testing.T) {
	cases := []struct {
		a    messages.RunArrival
		want string
	}{
		{messages.RunArrival{Kind: messages.RunPost, Hash: "P1", From: "ana", Thread: "T", Text: "a <b> & \"c\"\nd"},
			`{"post":"P1","from":"ana","text":"a <b> & \"c\"\nd"}`},
		{messages.RunArrival{Kind: messages.RunChange, Hash: "C1", Ticket: "K1", From: "bob", Text: "fixed"},
			`{"change":"C1","ticket":"K1","from":"bob","text":"fixed"}`},
		{messages.RunArrival{Kind: messages.RunCheckin, Hash: "H1", Branch: "trunk", From: "cy", Text: "a comment"},
			`{"checkin":"H1","branch":"trunk","from":"cy","comment":"a comment"}`},
	}
	for _, c := range cases {
		got := messages.RunLine(c.a)
		if got != c.want {
			t.Errorf("RunLine(%s) = %s, want %s", c.a.Kind, got, c.want)
		}
		if strings.Contains(got, "\n") || !json.Valid([]byte(got)) {
			t.Errorf("not one JSON line: %q", got)
		}
	}
	if messages.RunLine(messages.RunArrival{Kind: "wiki"}) != "" {
		t.Error("a line for an arrival of no kind of table 9")
	}
}

// TestHoldsMessage: table 9's filter 4 reads a fenced JSON block with "ocx"
// as an OCX message, of the run engine or of the session design, and text
// whose blocks cannot be told apart as one too.
func TestHoldsMessage(t *testing.T) {
	fence := func(s string) string { return "```json\n" + s + "\n```\n" }
	for _, c := range []struct {
		text string
		want bool
	}{
		{"plain words", false},
		{"", false},
		{fence(`{"a": 1}`), false},
		{fence(`{"ocx": 1, "kind": "stop", "node": "n", "run": "r"}`), true},
		{fence(`{"ocx": 1, "kind": "nonsense"}`), true},
		{fence(`{"ocx": "workspace", "kind": "wake"}`), true},
		{"```json\n{\"ocx\": 1\n", true},
		{fence(`{"ocx": 1}`) + fence(`{"ocx": 1}`), true},
	} {
		if got := messages.HoldsMessage(c.text); got != c.want {
			t.Errorf("HoldsMessage(%q) = %v, want %v", c.text, got, c.want)
		}
	}
}
