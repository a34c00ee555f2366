package daemon

import (
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/ocx-go/ocx/messages/protocol"

	"github.com/ocx-go/ocx/messages/pipe"
)

// TestHandTakesLinesAsTheyWereRead: the lines a hook's ask hands in the
// daemon's own process reach the node in order, as the pipe's would; once
// the inputs are shut (a pause for a re-exec, a drain) they are refused,
// for the caller to write into the pipe, and nothing reaches the node.
func TestHandTakesLinesAsTheyWereRead(t *testing.T) {
	var got []string
	in := &inputs{log: slog.New(slog.NewTextHandler(io.Discard, nil)), send: func(m protocol.DaemonMessage) {
		got = append(got, m.(protocol.LineRead).Line.String())
	}}
	a := pipe.PostLine{Repository: "/r/demo.fossil", Hash: "aa11"}
	b := pipe.PostLine{Repository: "/r/demo.fossil", Hash: "bb22"}
	if err := in.hand([]pipe.Line{a, b}); err != nil {
		t.Fatal(err)
	}
	if want := []string{a.String(), b.String()}; !slices.Equal(got, want) {
		t.Fatalf("the node got %q, want %q", got, want)
	}
	if n := in.read.Load(); n != 2 {
		t.Errorf("%d lines counted read, want 2", n)
	}
	in.shutHand(true)
	if err := in.hand([]pipe.Line{a}); !errors.Is(err, errInputsShut) {
		t.Fatalf("a hand while shut: %v, want errInputsShut", err)
	}
	if len(got) != 2 {
		t.Fatalf("a refused hand reached the node: %q", got)
	}
	in.shutHand(false)
	if err := in.hand([]pipe.Line{b}); err != nil || len(got) != 3 {
		t.Fatalf("a hand once open again: %v, the node got %q", err, got)
	}
}
