package messages

import (
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestPrune (issue 22 item 5): a state the record made, with bad entries
// among the good (a verdict naming 5 KB, a workspace twice, a branch no
// branch may be named, a review of a bad login), loses exactly the bad
// ones, each with why, and validates; a state with none loses nothing.
func TestPrune(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genState().Draw(t, "state")
		want := *s
		if errs := s.Prune(); len(errs) != 0 || !reflect.DeepEqual(*s, want) {
			t.Fatalf("Prune changed a valid state: %v", errs)
		}
		bad := 0
		if len(s.Verdicts) > 0 {
			v := s.Verdicts[0]
			v.User = "someone-else"
			v.Against = strings.Repeat("x", 5000)
			s.Verdicts = append(s.Verdicts, v)
			bad++
		}
		if len(s.Workspaces) > 0 {
			s.Workspaces = append(s.Workspaces, s.Workspaces[0])
			bad++
			w := s.Workspaces[0]
			w.Login, w.Branch = "other-login", "two\nlines"
			s.Workspaces = append(s.Workspaces, w)
			bad++
		}
		s.Reviews = append(s.Reviews, ReviewStatus{Project: "demo", Login: "not a login", Branch: "trunk", Record: strings.Repeat("a", 64), Pending: []string{}})
		bad++
		kept := len(want.Verdicts) + len(want.Workspaces) + len(want.Reviews)
		errs := s.Prune()
		if len(errs) != bad {
			t.Fatalf("Prune removed %d entries (%v), want %d", len(errs), errs, bad)
		}
		if got := len(s.Verdicts) + len(s.Workspaces) + len(s.Reviews); got != kept {
			t.Fatalf("Prune kept %d entries, want %d", got, kept)
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("a pruned state does not validate: %v", err)
		}
	})
}
