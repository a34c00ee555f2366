package protocol_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// TestRunStringsAreOneLine renders one of every run message and effect:
// each is one non-empty line, as the logs and the transcripts need.
func TestRunStringsAreOneLine(t *testing.T) {
	h := strings.Repeat("ab", 20)
	d := protocol.RunDelivery{Hash: h, At: protocol.RunPosition{Receipt: 3, Row: 1}, Line: "{}"}
	exit := 143
	boom := errors.New("line one\nline two")
	facts := protocol.RunFacts{Hash: h, Manual: true, Session: true, Deliveries: "start", Wall: time.Hour, CPU: true,
		Project: "demo project", At: protocol.RunPosition{Receipt: 3, Row: 1}, Slot: "ana"}
	values := []fmt.Stringer{
		facts,
		protocol.RunArrived{Facts: facts, Refusal: "a\nb"},
		protocol.RunStartRequested{By: "ana"},
		protocol.RunStopRequested{By: "root", Privileged: true},
		protocol.RunPrepared{Values: map[string]string{"run": h}},
		protocol.RunPrepared{Failed: "workspace[0] directory: denied"},
		protocol.RunStartedWritten{Err: boom},
		protocol.RunProcessExited{Proc: 1, Status: messages.Signaled(15)},
		protocol.RunProcessExited{Proc: 1, Status: messages.ExitUnknown},
		protocol.RunLogsKept{Proc: 1, Err: boom},
		protocol.RunEndedWritten{},
		protocol.RunDelivered{Delivery: d},
		protocol.RunNotInCare{Note: "gone"},
		protocol.RunTimerFired{Purpose: protocol.RunTimerWall, Seq: 2},
		protocol.RunTakeIntoCare{Run: h},
		protocol.RunPrepare{Run: h},
		protocol.RunWriteStarted{Run: h, Values: map[string]string{"b": "1", "a": "2"}, Attempt: 2},
		protocol.RunLaunch{Run: h, Proc: 2, Delivery: &d},
		protocol.RunDeliver{Run: h, Proc: 1, Delivery: d},
		protocol.RunEndProcess{Run: h, Proc: 1, Signal: protocol.SigTERM},
		protocol.RunEndPreparing{Run: h},
		protocol.RunStartTimer{Run: h, Purpose: protocol.RunTimerGrace, Seq: 1, After: 10 * time.Second},
		protocol.RunKeepLogs{Run: h, Proc: 1},
		protocol.RunWriteEnded{Run: h, Outcome: runmsg.RunExited, Exit: &exit, Attempt: 2},
		protocol.RunWriteEnded{Run: h, Outcome: runmsg.RunLost, Note: "not\nhere"},
		protocol.RunRelease{Run: h},
		protocol.RunTurnRequested{Run: h, Turn: protocol.RunTurnStarted, Project: "demo", At: d.At, User: "ana"},
		protocol.RunTurnGiven{Turn: protocol.RunTurnSlot},
		protocol.RunTurnDone{Run: h, Turn: protocol.RunTurnSlot},
	}
	for _, v := range values {
		s := v.String()
		if s == "" || strings.ContainsAny(s, "\r\n") {
			t.Errorf("%T renders as %q", v, s)
		}
	}
	if got := (protocol.RunWriteStarted{Run: h, Values: map[string]string{"b": "1", "a": "2"}}).String(); !strings.HasSuffix(got, "values a,b") {
		t.Errorf("values not in order: %q", got)
	}
}

// TestRunEffectsAnswer: each run effect that asks names its result.
func TestRunEffectsAnswer(t *testing.T) {
	pairs := []struct {
		e    protocol.Asking
		want protocol.Answer
	}{
		{protocol.RunPrepare{}, protocol.RunPrepared{}},
		{protocol.RunWriteStarted{}, protocol.RunStartedWritten{}},
		{protocol.RunKeepLogs{}, protocol.RunLogsKept{}},
		{protocol.RunWriteEnded{}, protocol.RunEndedWritten{}},
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
		m    protocol.RunProcessExited
		want int
	}{{protocol.RunProcessExited{Status: messages.Exited(0)}, 0}, {protocol.RunProcessExited{Status: messages.Exited(3)}, 3}, {protocol.RunProcessExited{Status: messages.Signaled(9)}, 137}, {protocol.RunProcessExited{Status: messages.Signaled(15)}, 143}} {
		if got := c.m.Exit(); got != c.want {
			t.Errorf("%s: exit %d, want %d", c.m, got, c.want)
		}
	}
}

// TestRunPositionOrder: the server's order is by receipt, then by row.
func TestRunPositionOrder(t *testing.T) {
	a, b, c := protocol.RunPosition{Receipt: 1, Row: 5}, protocol.RunPosition{Receipt: 2, Row: 1}, protocol.RunPosition{Receipt: 2, Row: 2}
	if !a.Before(b) || !b.Before(c) || c.Before(b) || b.Before(b) {
		t.Fatal("RunPosition.Before is not the server's order")
	}
}

// TestRunLineShapes: the three lines of table 9, keys in the table's order,
// text kept as it is (no HTML escaping), one line each.
func TestRunLineShapes(t *testing.T) {
	cases := []struct {
		a    protocol.RunArrival
		want string
	}{
		{protocol.RunArrival{Kind: protocol.RunPost, Hash: "P1", From: "ana", Thread: "T", Text: "a <b> & \"c\"\nd"},
			`{"post":"P1","from":"ana","text":"a <b> & \"c\"\nd"}`},
		{protocol.RunArrival{Kind: protocol.RunChange, Hash: "C1", Ticket: "K1", From: "bob", Text: "fixed"},
			`{"change":"C1","ticket":"K1","from":"bob","text":"fixed"}`},
		{protocol.RunArrival{Kind: protocol.RunCheckin, Hash: "H1", Branch: "trunk", From: "cy", Text: "a comment"},
			`{"checkin":"H1","branch":"trunk","from":"cy","comment":"a comment"}`},
	}
	for _, c := range cases {
		got := protocol.RunLine(c.a)
		if got != c.want {
			t.Errorf("RunLine(%s) = %s, want %s", c.a.Kind, got, c.want)
		}
		if strings.Contains(got, "\n") || !json.Valid([]byte(got)) {
			t.Errorf("not one JSON line: %q", got)
		}
	}
	if protocol.RunLine(protocol.RunArrival{Kind: "wiki"}) != "" {
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
		if got := protocol.HoldsMessage(c.text); got != c.want {
			t.Errorf("HoldsMessage(%q) = %v, want %v", c.text, got, c.want)
		}
	}
}
