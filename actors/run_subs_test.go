package actors

import (
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/messages/protocol"
)

// TestRunFilter has one case per filter of seed 004's table 9, each failing
// that filter alone, in order, the arrivals that pass them all, then the
// order: an arrival failing two filters is held by the first.
func TestRunFilter(t *testing.T) {
	sub := RunSubscription{Session: true, StartedCounts: true, Started: protocol.RunPosition{Receipt: 10, Row: 2},
		User: "claude-1", Thread: "T1", Checkins: []string{"trunk"}, Hears: []string{"ana"}}
	post := protocol.RunArrival{Kind: protocol.RunPost, Hash: "P1", At: protocol.RunPosition{Receipt: 11, Row: 1}, From: "ana", Thread: "T1", Text: "hi"}
	with := func(f func(*RunSubscription, *protocol.RunArrival)) (RunSubscription, protocol.RunArrival) {
		s, a := sub, post
		f(&s, &a)
		return s, a
	}
	cases := []struct {
		name string
		f    func(*RunSubscription, *protocol.RunArrival)
		want string
	}{
		{"1 session: not a session", func(s *RunSubscription, _ *protocol.RunArrival) { s.Session = false }, runFilterSession},
		{"1 session: started does not count", func(s *RunSubscription, _ *protocol.RunArrival) { s.StartedCounts = false }, runFilterSession},
		{"2 after: received before started", func(_ *RunSubscription, a *protocol.RunArrival) { a.At = protocol.RunPosition{Receipt: 10, Row: 1} }, runFilterAfter},
		{"2 after: started itself", func(_ *RunSubscription, a *protocol.RunArrival) { a.At = sub.Started }, runFilterAfter},
		{"3 known: no sender", func(_ *RunSubscription, a *protocol.RunArrival) { a.From = "" }, runFilterKnown},
		{"4 no message: holds an OCX message", func(_ *RunSubscription, a *protocol.RunArrival) { a.HoldsMessage = true }, runFilterNoMessage},
		{"5 not its own: sent by process.user", func(s *RunSubscription, a *protocol.RunArrival) { a.From = "claude-1"; s.Hears = []string{"*"} }, runFilterNotItsOwn},
		{"6 where: a post in another thread", func(_ *RunSubscription, a *protocol.RunArrival) { a.Thread = "T2" }, runFilterWhere},
		{"6 where: a change to another ticket", func(s *RunSubscription, a *protocol.RunArrival) {
			s.Thread, s.Ticket = "", "K1"
			a.Kind, a.Thread, a.Ticket = protocol.RunChange, "", "K2"
		}, runFilterWhere},
		{"6 where: a check-in on a branch not in checkins", func(_ *RunSubscription, a *protocol.RunArrival) {
			a.Kind, a.Thread, a.Branch = protocol.RunCheckin, "", "dev"
		}, runFilterWhere},
		{"6 where: a post with no thread, the run on a ticket", func(s *RunSubscription, a *protocol.RunArrival) {
			s.Thread, s.Ticket = "", "K1"
			a.Thread = ""
		}, runFilterWhere},
		{"6 where: a change with no ticket, the run in a thread", func(_ *RunSubscription, a *protocol.RunArrival) {
			a.Kind, a.Thread = protocol.RunChange, ""
		}, runFilterWhere},
		{"7 heard: a sender not in hears", func(_ *RunSubscription, a *protocol.RunArrival) { a.From = "bob" }, runFilterHeard},
		{"given: a post in its thread by one it hears", func(*RunSubscription, *protocol.RunArrival) {}, ""},
		{"given: hears is [*]", func(s *RunSubscription, a *protocol.RunArrival) { s.Hears = []string{"*"}; a.From = "bob" }, ""},
		{"given: a change to its ticket", func(s *RunSubscription, a *protocol.RunArrival) {
			s.Thread, s.Ticket = "", "K1"
			a.Kind, a.Thread, a.Ticket = protocol.RunChange, "", "K1"
		}, ""},
		{"given: a check-in on a branch in checkins, whoever sent it", func(s *RunSubscription, a *protocol.RunArrival) {
			s.Hears = nil
			a.Kind, a.Thread, a.Branch, a.From = protocol.RunCheckin, "", "trunk", "bob"
		}, ""},
		// Order: an arrival failing two filters is held by the first.
		{"1 before 2", func(s *RunSubscription, a *protocol.RunArrival) {
			s.StartedCounts = false
			a.At = protocol.RunPosition{Receipt: 10, Row: 1}
		}, runFilterSession},
		{"2 before 3", func(_ *RunSubscription, a *protocol.RunArrival) { a.At, a.From = sub.Started, "" }, runFilterAfter},
		{"3 before 4", func(_ *RunSubscription, a *protocol.RunArrival) { a.From, a.HoldsMessage = "", true }, runFilterKnown},
		{"4 before 5", func(_ *RunSubscription, a *protocol.RunArrival) { a.HoldsMessage, a.From = true, "claude-1" }, runFilterNoMessage},
		{"5 before 6", func(s *RunSubscription, a *protocol.RunArrival) {
			s.Hears = []string{"*"}
			a.From, a.Thread = "claude-1", "T2"
		}, runFilterNotItsOwn},
		{"6 before 7", func(_ *RunSubscription, a *protocol.RunArrival) { a.Thread, a.From = "T2", "bob" }, runFilterWhere},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, a := with(tc.f)
			if got := runFilter(s, a); got != tc.want {
				t.Fatalf("RunFilter = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRunFilterOrder: the filter named is the first that fails, in table
// 9's order, whatever else fails after it.
func TestRunFilterOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := RunSubscription{Session: rapid.Bool().Draw(t, "session"), StartedCounts: rapid.Bool().Draw(t, "counts"),
			Started: protocol.RunPosition{Receipt: 5}, User: "u", Thread: "T", Ticket: "K", Checkins: []string{"trunk"},
			Hears: rapid.SampledFrom([][]string{nil, {"*"}, {"a"}}).Draw(t, "hears")}
		a := protocol.RunArrival{Kind: rapid.SampledFrom([]protocol.RunArrivalKind{protocol.RunPost, protocol.RunChange, protocol.RunCheckin}).Draw(t, "kind"),
			At: protocol.RunPosition{Receipt: rapid.Int64Range(1, 9).Draw(t, "at")}, From: rapid.SampledFrom([]string{"", "u", "a", "b"}).Draw(t, "from"),
			HoldsMessage: rapid.Bool().Draw(t, "msg"), Thread: rapid.SampledFrom([]string{"", "T", "X"}).Draw(t, "thread"),
			Ticket: rapid.SampledFrom([]string{"", "K", "X"}).Draw(t, "ticket"), Branch: rapid.SampledFrom([]string{"trunk", "dev"}).Draw(t, "branch")}
		got := runFilter(s, a)
		i := slices.Index(runFilters, got)
		if got != "" && i < 0 {
			t.Fatalf("no such filter %q", got)
		}
		for j, f := range runFilters {
			passes := runPasses(f, s, a)
			if (got == "" || j < i) && !passes {
				t.Fatalf("%q fails before %q", f, got)
			}
			if j == i && passes {
				t.Fatalf("%q named, but passes", f)
			}
		}
	})
}

// TestRunGivenOnce replays and reorders arrivals through the keeper: each
// artifact is given at most once, in the server's order, and when arrivals
// come in the server's order (replays aside) none is left out.
func TestRunGivenOnce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 30).Draw(t, "n")
		all := make([]protocol.RunPosition, n)
		for i := range all {
			all[i] = protocol.RunPosition{Receipt: int64(1 + i/3), Row: int64(1 + i%3)}
		}
		inOrder := rapid.Bool().Draw(t, "in order")
		var arrivals []protocol.RunPosition
		if inOrder {
			for i, p := range all {
				arrivals = append(arrivals, p)
				for range rapid.IntRange(0, 2).Draw(t, "replays") {
					arrivals = append(arrivals, all[rapid.IntRange(0, i).Draw(t, "replay")])
				}
			}
		} else {
			arrivals = rapid.SliceOfN(rapid.SampledFrom(all), 1, 3*n).Draw(t, "arrivals")
		}
		var g runGiven
		// A restart keeps g and may replay from anywhere.
		var given []protocol.RunPosition
		seen := map[protocol.RunPosition]bool{}
		for _, p := range arrivals {
			if g.Give(p) {
				if seen[p] {
					t.Fatalf("%s given twice", p)
				}
				if len(given) > 0 && !given[len(given)-1].Before(p) {
					t.Fatalf("%s given after %s", p, given[len(given)-1])
				}
				seen[p] = true
				given = append(given, p)
			}
		}
		if inOrder {
			// Replays aside, each arrived in the server's order: none is
			// left out.
			if !slices.Equal(all, given) {
				t.Fatalf("given %v, want all %d in order", given, n)
			}
		}
		if g.Give(protocol.RunPosition{}) {
			t.Fatalf("an artifact with no place given")
		}
	})
}

// TestRunsLost: the node's check ends lost each run whose started counts
// and whose ended does not, and which it does not have in its care with a
// live process (or, a session between its processes, in its care at all).
func TestRunsLost(t *testing.T) {
	record := []runOnRecord{
		{Hash: "A", StartedCounts: true},                    // not in care: lost
		{Hash: "B", StartedCounts: true},                    // in care, alive
		{Hash: "C", StartedCounts: true},                    // in care, dead: lost
		{Hash: "D", StartedCounts: true},                    // a start-session between processes
		{Hash: "E", StartedCounts: true, EndedCounts: true}, // ended
		{Hash: "F"},                      // not started
		{Hash: "A", StartedCounts: true}, // named twice
	}
	care := []runInCare{{Hash: "B", Alive: true}, {Hash: "C"}, {Hash: "D", StartsEach: true}, {Hash: "F"}}
	got := runsLost(record, care)
	var hs []string
	for _, l := range got {
		if l.Note == "" {
			t.Fatalf("%s lost with no note", l.Hash)
		}
		hs = append(hs, l.Hash)
	}
	if !slices.Equal(hs, []string{"A", "C"}) {
		t.Fatalf("lost %v, want [A C]", hs)
	}
	if runsLost(nil, care) != nil {
		t.Fatalf("lost with nothing on the record")
	}
}

// TestRunDeliveriesAtMostOnceInOrder: whatever arrivals are read, in
// whatever order and however often, what RunDeliveries gives passes every
// filter, comes after the place given, is in strictly rising server order
// (so nothing twice), and leaves out no arrival that passes and comes after
// the last one before it; reading the same list again from the last given
// place gives nothing.
func TestRunDeliveriesAtMostOnceInOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := RunSubscription{Session: true, StartedCounts: true, Started: protocol.RunPosition{Receipt: 3, Row: 1},
			User: "u", Thread: "T", Checkins: []string{"trunk"}, Hears: rapid.SampledFrom([][]string{nil, {"*"}, {"a"}}).Draw(t, "hears")}
		arr := rapid.Custom(func(t *rapid.T) protocol.RunArrival {
			return protocol.RunArrival{
				Kind:         rapid.SampledFrom([]protocol.RunArrivalKind{protocol.RunPost, protocol.RunChange, protocol.RunCheckin}).Draw(t, "kind"),
				Hash:         rapid.StringMatching(`[0-9a-f]{4}`).Draw(t, "hash"),
				At:           protocol.RunPosition{Receipt: rapid.Int64Range(0, 8).Draw(t, "rcv"), Row: rapid.Int64Range(0, 4).Draw(t, "row")},
				From:         rapid.SampledFrom([]string{"", "a", "b", "u"}).Draw(t, "from"),
				HoldsMessage: rapid.Bool().Draw(t, "msg"),
				Thread:       rapid.SampledFrom([]string{"T", "X"}).Draw(t, "thread"),
				Branch:       rapid.SampledFrom([]string{"trunk", "dev"}).Draw(t, "branch"),
				Text:         "t",
			}
		})
		arrivals := rapid.SliceOf(arr).Draw(t, "arrivals")
		after := s.Started
		if rapid.Bool().Draw(t, "given") {
			after = protocol.RunPosition{Receipt: 5, Row: 0}
		}
		got := RunDeliveries(s, after, arrivals)
		last := after
		j := 0
		for _, a := range arrivals {
			passes := runFilter(s, a) == "" && last.Before(a.At)
			if passes {
				if j >= len(got) || got[j].Hash != a.Hash || got[j].At != a.At || got[j].Line != protocol.RunLine(a) {
					t.Fatalf("arrival %+v passes but is not delivery %d of %+v", a, j, got)
				}
				last = a.At
				j++
			}
		}
		if j != len(got) {
			t.Fatalf("%d deliveries, want %d: %+v", len(got), j, got)
		}
		var g runGiven
		g.Last = after
		for _, d := range got {
			if !g.Give(d.At) {
				t.Fatalf("delivery %s is at or behind one given before it", d)
			}
		}
		if again := RunDeliveries(s, g.Last, arrivals); len(again) != 0 {
			t.Fatalf("read again from %s, it gives %+v", g.Last, again)
		}
	})
}
