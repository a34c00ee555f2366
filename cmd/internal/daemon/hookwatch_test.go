package daemon

import (
	"testing"

	"pgregory.net/rapid"
)

// TestLagLook: the watch runs the hook one look after it found the mark
// behind, never while the mark keeps up, and backs off while runs do not
// help.
func TestLagLook(t *testing.T) {
	type step struct {
		mark, newest int64
		run          bool
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"a hook that keeps up", []step{{5, 5, false}, {5, 5, false}, {6, 6, false}}},
		{"a lag the hook clears by the next look", []step{{5, 6, false}, {6, 7, false}, {7, 7, false}, {7, 7, false}}},
		{"a lag that stays a whole look", []step{{5, 6, false}, {5, 6, true}, {6, 6, false}, {6, 6, false}}},
		{"more receipts while behind", []step{{5, 6, false}, {5, 9, true}, {9, 9, false}}},
		{"a hook that fails: runs back off", []step{
			{5, 6, false}, {5, 6, true}, // first run
			{5, 6, false}, {5, 6, true}, // after 2 looks
			{5, 6, false}, {5, 6, false}, {5, 6, false}, {5, 6, true}, // after 4
			{6, 8, false}, {6, 8, true}, // it caught up with 6; a new lag starts over
		}},
	} {
		var l lag
		for i, s := range c.steps {
			if got := l.look(s.mark, s.newest); got != s.run {
				t.Errorf("%s: look %d (mark %d, newest %d) = %v; want %v", c.name, i, s.mark, s.newest, got, s.run)
			}
		}
	}
}

// TestLagProperties drives the lag through random marks and receipts: it
// never runs the hook when the mark has caught up, and a mark that stays
// behind a receipt gets a run within the longest back-off.
func TestLagProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var l lag
		var mark, newest int64
		behindSince := -1 // the look since which the mark is behind the same receipt
		var behindOf int64
		lastRun := -1
		// How often Fossil runs the hook, in quarters: never (a hook held
		// back for good) to always.
		often := rapid.IntRange(0, 4).Draw(t, "often")
		for i := range rapid.IntRange(1, 200).Draw(t, "looks") {
			newest += rapid.Int64Range(0, 3).Draw(t, "received")
			if rapid.IntRange(0, 3).Draw(t, "chance") < often {
				mark += rapid.Int64Range(0, newest-mark).Draw(t, "handled")
			}
			run := l.look(mark, newest)
			if run && mark >= newest {
				t.Fatalf("look %d: a run with the mark (%d) caught up (%d)", i, mark, newest)
			}
			if run {
				lastRun = i
			}
			switch {
			case mark >= newest:
				behindSince = -1
			case behindSince < 0 || mark >= behindOf:
				behindSince, behindOf = i, newest
			}
			if behindSince >= 0 && i-max(behindSince, lastRun) > 1<<maxBackoff+1 {
				t.Fatalf("look %d: the mark %d stayed behind %d since look %d with no run since look %d", i, mark, behindOf, behindSince, lastRun)
			}
		}
	})
}
