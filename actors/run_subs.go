package actors

import (
	"slices"

	"github.com/ocx-go/ocx/messages/protocol"
)

// RunSubscription is what the filters of seed 004's section 9 read of a
// run: its process.session, whether its started counts and where the server
// received it, its process.user, its thread or ticket, its process.checkins
// and process.hears.
type RunSubscription struct {
	Session       bool
	StartedCounts bool
	Started       protocol.RunPosition
	User          string
	// Thread is the root of the thread the run is in; Ticket the ticket it
	// is a change to. One of them is set.
	Thread   string
	Ticket   string
	Checkins []string
	Hears    []string
}

// The filters of table 9, in its order.
const (
	runFilterSession   = "session"
	runFilterAfter     = "after"
	runFilterKnown     = "known"
	runFilterNoMessage = "no message"
	runFilterNotItsOwn = "not its own"
	runFilterWhere     = "where"
	runFilterHeard     = "heard"
)

// runFilters lists the filters in table 9's order.
var runFilters = []string{runFilterSession, runFilterAfter, runFilterKnown, runFilterNoMessage, runFilterNotItsOwn, runFilterWhere, runFilterHeard}

// runFilter checks an arrival against a run's subscription, the filters in
// order, and returns the first that fails, or "" when the arrival is to be
// given (at most once, in the server's order: runGiven).
func runFilter(s RunSubscription, a protocol.RunArrival) string {
	for _, f := range runFilters {
		if !runPasses(f, s, a) {
			return f
		}
	}
	return ""
}

func runPasses(f string, s RunSubscription, a protocol.RunArrival) bool {
	switch f {
	case runFilterSession:
		return s.Session && s.StartedCounts
	case runFilterAfter:
		return s.Started.Before(a.At)
	case runFilterKnown:
		return a.From != ""
	case runFilterNoMessage:
		return !a.HoldsMessage
	case runFilterNotItsOwn:
		return a.From != s.User
	case runFilterWhere:
		switch a.Kind {
		case protocol.RunPost:
			return s.Thread != "" && a.Thread == s.Thread
		case protocol.RunChange:
			return s.Ticket != "" && a.Ticket == s.Ticket
		case protocol.RunCheckin:
			return slices.Contains(s.Checkins, a.Branch)
		}
		return false
	case runFilterHeard:
		return a.Kind == protocol.RunCheckin || slices.Contains(s.Hears, "*") || slices.Contains(s.Hears, a.From)
	}
	return false
}

// RunDeliveries is what a session is to be given of arrivals read from the
// repository in the server's order: each that comes after the place after
// (the last given, or the run's started) and passes every filter, as its
// delivery, at most once and in the server's order. An arrival at or behind
// one already taken is left out, so a list read twice, or out of order,
// gives nothing twice.
func RunDeliveries(s RunSubscription, after protocol.RunPosition, arrivals []protocol.RunArrival) []protocol.RunDelivery {
	var out []protocol.RunDelivery
	last := after
	for _, a := range arrivals {
		if a.At.IsZero() || !last.Before(a.At) || runFilter(s, a) != "" {
			continue
		}
		last = a.At
		out = append(out, protocol.RunDelivery{Hash: a.Hash, At: a.At, Line: protocol.RunLine(a)})
	}
	return out
}

// runGiven is what the node keeps so that a session is given each artifact
// at most once, in the server's order (seed 004, section 4): the place of
// the last artifact given. An artifact at or before it, a replay or one
// that arrives behind a later one, is not given; nothing else needs to be
// kept, however long the session runs.
type runGiven struct {
	Last protocol.RunPosition `json:"last"`
}

// Give says whether the artifact at this place is to be given, and if so
// remembers it. An artifact with no place in the server's order is never
// given.
func (g *runGiven) Give(at protocol.RunPosition) bool {
	if at.IsZero() || !g.Last.Before(at) {
		return false
	}
	g.Last = at
	return true
}

// runOnRecord is a run as the repository says: its hash, and whether its
// started and its ended count (section 3).
type runOnRecord struct {
	Hash          string
	StartedCounts bool
	EndedCounts   bool
}

// runInCare is a run the node has in its care (section 4): whether a
// process of it is alive, and whether it is a session whose deliveries is
// start, which may rightly have no process between its deliveries.
type runInCare struct {
	Hash       string
	Alive      bool
	StartsEach bool
}

// runFoundLost is a run the node's check ends lost, and why.
type runFoundLost struct {
	Hash string
	Note string
}

// runsLost is the node's check of its runs (seed 004, section 10, its last
// paragraph), when it starts and whenever its administrator runs it again:
// each run whose started counts and whose ended does not, and which is not
// in its care with a live process (or, for a session whose deliveries is
// start, in its care at all), is to be ended lost, in the record's order.
func runsLost(record []runOnRecord, care []runInCare) []runFoundLost {
	byHash := make(map[string]runInCare, len(care))
	for _, r := range care {
		byHash[r.Hash] = r
	}
	var lost []runFoundLost
	seen := map[string]bool{}
	for _, r := range record {
		if !r.StartedCounts || r.EndedCounts || seen[r.Hash] {
			continue
		}
		seen[r.Hash] = true
		c, ok := byHash[r.Hash]
		switch {
		case !ok:
			lost = append(lost, runFoundLost{Hash: r.Hash, Note: "its started counts and no ended does, but the node has no record of it in its care: what ran it is gone"})
		case !c.Alive && !c.StartsEach:
			lost = append(lost, runFoundLost{Hash: r.Hash, Note: "it is in the node's care, but its process is no longer alive and its exit was not seen"})
		}
	}
	return lost
}
