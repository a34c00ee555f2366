package listening

import (
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/messages"
)

func TestWant(t *testing.T) {
	key := messages.WorkspaceKey{Login: "agent-1", Project: "demo"}
	own := strings.Repeat("1", 64)
	other := strings.Repeat("2", 64)
	ph := strings.Repeat("3", 64)
	l := func(kind messages.ListenKind, names string) messages.Listener {
		return messages.Listener{Login: "agent-1", Project: "demo", Kind: kind, Names: names}
	}
	events := []event{
		// Given out of order: the server's order decides.
		{Listener: l(messages.ListenThread, other), On: false, Rcvid: 3},
		{Listener: l(messages.ListenThread, other), On: true, Rcvid: 1},
		{Listener: l(messages.ListenBranch, "a/b"), On: true, Rcvid: 2},
		{Listener: l(messages.ListenTicket, strings.Repeat("4", 40)), On: true, Rcvid: 2, Rid: 7},
		{Listener: l(messages.ListenTicket, strings.Repeat("4", 40)), On: false, Rcvid: 2, Rid: 9},
		{Listener: messages.Listener{Login: "agent-2", Project: "demo", Kind: messages.ListenThread, Names: ph}, On: true, Rcvid: 1},
		{Listener: messages.Listener{Login: "agent-1", Project: "other", Kind: messages.ListenThread, Names: ph}, On: true, Rcvid: 1},
		// An unlisten of the own record leaves it: a session hears its record.
		{Listener: l(messages.ListenThread, own), On: false, Rcvid: 5},
	}
	got, err := Want(key, Own{Kind: messages.ListenThread, ID: own}, events)
	if err != nil {
		t.Fatal(err)
	}
	// The own record is heard from the start; a listener after its note.
	want := map[string]messages.ListeningEntry{
		own:            {Kind: messages.ListenThread, Names: own},
		"branch-a%2Fb": {Kind: messages.ListenBranch, Names: "a/b", After: 2},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("got %v, want %v", got, want)
		}
	}
	if _, err := Want(key, Own{Kind: messages.ListenThread, ID: "not a hash"}, nil); err == nil {
		t.Error("an own record that is not a hash: no error")
	}
}

// TestWantIsTheLatestNote: whatever the notes and their order, a listener is
// in the index exactly when its latest note in the server's order is a
// listen note, and the own record always is.
func TestWantIsTheLatestNote(t *testing.T) {
	key := messages.WorkspaceKey{Login: "agent-1", Project: "demo"}
	branches := []string{"trunk", "dev", "a/b", "100% x"}
	own := strings.Repeat("5", 40)
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 30).Draw(t, "n")
		events := make([]event, n)
		latest := map[string]event{}
		for i := range events {
			b := rapid.SampledFrom(branches).Draw(t, "branch")
			e := event{
				Listener: messages.Listener{Login: "agent-1", Project: "demo", Kind: messages.ListenBranch, Names: b},
				On:       rapid.Bool().Draw(t, "on"),
				// Distinct places in the server's order, drawn in any order.
				Rcvid: int64(rapid.IntRange(0, 1000).Draw(t, "rcvid")),
				Rid:   int64(i),
			}
			events[i] = e
			if prev, ok := latest[b]; !ok || e.Rcvid > prev.Rcvid || (e.Rcvid == prev.Rcvid && e.Rid > prev.Rid) {
				latest[b] = e
			}
		}
		got, err := Want(key, Own{Kind: messages.ListenTicket, ID: own}, events)
		if err != nil {
			t.Fatal(err)
		}
		if got[own] != (messages.ListeningEntry{Kind: messages.ListenTicket, Names: own}) {
			t.Fatalf("the own record is missing: %v", got)
		}
		count := 1
		for b, e := range latest {
			name, _ := messages.ListeningFileName(messages.ListenBranch, b)
			g, in := got[name]
			if in != e.On {
				t.Fatalf("branch %q: in the index %v, latest note on=%v", b, in, e.On)
			}
			if in && g.After != e.Rcvid {
				t.Fatalf("branch %q: heard after receipt %d, its listen note's is %d", b, g.After, e.Rcvid)
			}
			if e.On {
				count++
			}
		}
		if len(got) != count {
			t.Fatalf("index %v holds %d files, want %d", got, len(got), count)
		}
	})
}
