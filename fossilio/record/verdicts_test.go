package record

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

func tagChange(op fossilio.TagOp, name, value, sender, hash string) fossilio.TagChange {
	return fossilio.TagChange{Tag: fossilio.Tag{Op: op, Name: name, Value: value}, Sender: sender, Hash: hash}
}

// TestSentVerdicts: each user's latest verdict from the tag's history, as
// sent: a cancel withdraws; a value that is no verdict (a 5 KB against
// among them) leaves the earlier one, and is passed over, named.
func TestSentVerdicts(t *testing.T) {
	ch := tagChange
	changes := []fossilio.TagChange{
		ch(fossilio.TagAdd, "audited", "pass: named (against PLAN.md)", "alice", "t2"),
		ch(fossilio.TagAdd, "audited", "fail: first (against PLAN.md)", "bob", "t3"),
		ch(fossilio.TagAdd, "audited", "pass: carol (against PLAN.md)", "carol", "t4"),
		ch(fossilio.TagAdd, "audited", "pass: second (against PLAN.md)", "bob", "t5"),
		ch(fossilio.TagAdd, "ci", "green: ok", "dave", "t6"),
		ch(fossilio.TagAdd, "audited", "no verdict", "carol", "t7"),
		ch(fossilio.TagAdd, "audited", "pass: gone (against PLAN.md)", "erin", "t8"),
		ch(fossilio.TagCancel, "audited", "", "erin", "t9"),
		ch(fossilio.TagAdd, "audited", "pass: long (against "+strings.Repeat("x", 5000)+")", "bob", "t11"),
	}
	got, passed := sentVerdicts(changes)
	want := []struct{ user, reason, tag string }{{"alice", "named", "t2"}, {"carol", "carol", "t4"}, {"bob", "second", "t5"}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i, w := range want {
		if got[i].User != w.user || got[i].Reason != w.reason || got[i].Tag != w.tag {
			t.Errorf("%d: %+v, want %+v", i, got[i], w)
		}
	}
	if len(passed) != 2 || passed[0].Tag != "t7" || passed[1].Tag != "t11" || passed[1].Sender != "bob" || passed[1].Why == "" {
		t.Errorf("passed over: %+v; want t7 and t11, each with why", passed)
	}
}

// TestVerdictCounts is every rule of E6, each alone: a verdict counts from
// a known sender who did not send the check-in (the user its U card names
// judges it as anyone may, D47); a record it names counts and lists the
// check-in's branch; a file it names is in the check-in. Each refusal
// names the part at fault and why.
func TestVerdictCounts(t *testing.T) {
	rec := strings.Repeat("a", 64)
	ci := fossilio.Info{Hash: strings.Repeat("c", 64), Sender: "agent", Author: "alice", Branch: "trunk"}
	onRecord := messages.Verdict{Pass: true, Reason: "ok", Against: rec}
	onFile := messages.Verdict{Pass: true, Reason: "ok", Against: "PLAN.md"}
	counting := objective{Against: rec, Record: true, Found: true, Sender: "admin", Counts: true, Branches: []string{"docs", "trunk"}}
	file := objective{Against: "PLAN.md", HasFile: true}
	with := func(o objective, f func(*objective)) objective { f(&o); return o }
	for _, c := range []struct {
		name   string
		sender string
		v      messages.Verdict
		x      objective
		field  string
		says   string
	}{
		{"a record that counts, listing the branch", "bob", onRecord, counting, "", ""},
		{"a file of the check-in", "bob", onFile, file, "", ""},
		{"the user its U card names", "alice", onFile, file, "", ""},
		{"by the check-in's sender", "agent", onRecord, counting, "checkin", `was sent by "agent"`},
		{"by nobody known", "", onFile, file, "checkin", "not known"},
		{"a record written by a user without admin or setup", "bob", onRecord, with(counting, func(o *objective) { o.Counts, o.Sender = false, "alice" }),
			"against", `the record ` + rec + ` does not count: its sender "alice" holds neither admin nor setup`},
		{"a record without the branch", "bob", onRecord, with(counting, func(o *objective) { o.Branches = []string{"docs"} }),
			"against", `does not list the check-in's branch "trunk" in its checkins (docs)`},
		{"a record with no checkins", "bob", onRecord, with(counting, func(o *objective) { o.Branches = nil }), "against", `branch "trunk"`},
		{"no record at all", "bob", onRecord, objective{Against: rec, Record: true}, "against", "is no record"},
		{"no record, why said", "bob", onRecord, objective{Against: rec, Record: true, NoRecord: "sandbox.cpus: unknown"}, "against", "is no record: sandbox.cpus: unknown"},
		{"a file the check-in lacks", "bob", onFile, objective{Against: "PLAN.md"}, "against", `has no file "PLAN.md"`},
		{"a check-in whose files do not read", "bob", onFile, objective{Against: "PLAN.md", HasFile: true, FilesUnread: "malformed"}, "against", "do not read"},
		{"facts of another X", "bob", onFile, counting, "against", "was not read"},
	} {
		t.Run(c.name, func(t *testing.T) {
			no := VerdictCounts(c.sender, ci, c.v, c.x)
			if c.field == "" {
				if no != nil {
					t.Fatalf("does not count: %v", no)
				}
				return
			}
			if no == nil || no.Field != c.field || !strings.Contains(no.Why, c.says) {
				t.Fatalf("VerdictCounts = %v; want %s: ...%s...", no, c.field, c.says)
			}
		})
	}
}

// TestVerdictsProperties: for any tag history and any facts of the Xs its
// verdicts name, verdicts keeps exactly each user's latest verdict (a
// cancel withdrawing it, a value that is no verdict passed over) when
// VerdictCounts says it counts, in the server's order of those latest
// changes; every other audited change the history holds is either
// superseded or passed over with why, never both kept and passed.
func TestVerdictsProperties(t *testing.T) {
	users := []string{"", "agent", "alice", "bob", "carol"}
	xs := []string{strings.Repeat("a", 64), strings.Repeat("b", 40), "PLAN.md", "docs/x.md"}
	rapid.Check(t, func(t *rapid.T) {
		ci := fossilio.Info{Hash: strings.Repeat("c", 64), Sender: rapid.SampledFrom(users[1:]).Draw(t, "ci-sender"),
			Branch: rapid.SampledFrom([]string{"trunk", "feature"}).Draw(t, "branch")}
		facts := map[string]objective{}
		for _, x := range xs {
			o := objective{Against: x, Record: messages.Verdict{Against: x}.NamesRecord(),
				Found: rapid.Bool().Draw(t, "found"), Sender: rapid.SampledFrom(users[1:]).Draw(t, "rec-sender"),
				Counts: rapid.Bool().Draw(t, "counts"), HasFile: rapid.Bool().Draw(t, "has")}
			o.Branches = rapid.SliceOfDistinct(rapid.SampledFrom([]string{"trunk", "feature", "docs"}), func(s string) string { return s }).Draw(t, "branches")
			facts[x] = o
		}
		n := rapid.IntRange(0, 12).Draw(t, "n")
		var changes []fossilio.TagChange
		for i := range n {
			c := fossilio.TagChange{Sender: rapid.SampledFrom(users).Draw(t, "sender"), Hash: fmt.Sprintf("t%d", i)}
			c.Name = rapid.SampledFrom([]string{messages.AuditedTag, messages.AuditedTag, messages.AuditedTag, "ci"}).Draw(t, "name")
			switch rapid.IntRange(0, 5).Draw(t, "kind") {
			case 0:
				c.Op = fossilio.TagCancel
			case 1:
				c.Op, c.Value = fossilio.TagAdd, "looks fine"
			default:
				v := messages.Verdict{Pass: rapid.Bool().Draw(t, "pass"), Reason: "r", Against: rapid.SampledFrom(xs).Draw(t, "x")}
				c.Op, c.Value = fossilio.TagAdd, v.TagValue()
			}
			changes = append(changes, c)
		}
		kept, passed := verdicts(ci, changes, func(x string) objective { return facts[x] })

		// The model: each user's latest audited change that is a cancel or
		// reads as a verdict, kept when it is a verdict that counts.
		type latest struct {
			c   fossilio.TagChange
			at  int
			has bool
		}
		last := map[string]latest{}
		for i, c := range changes {
			if c.Name != messages.AuditedTag {
				continue
			}
			if c.Op != fossilio.TagCancel {
				if _, err := messages.ParseVerdict(c.Value); err != nil {
					continue
				}
			}
			last[c.Sender] = latest{c: c, at: i, has: true}
		}
		var want []string
		for i, c := range changes {
			l := last[c.Sender]
			if !l.has || l.at != i || c.Op == fossilio.TagCancel {
				continue
			}
			v, _ := messages.ParseVerdict(c.Value)
			x := facts[v.Against]
			ok := c.Sender != "" && c.Sender != ci.Sender
			if x.Record {
				ok = ok && x.Found && x.Counts && slices.Contains(x.Branches, ci.Branch)
			} else {
				ok = ok && x.HasFile
			}
			if ok != (VerdictCounts(c.Sender, ci, v, x) == nil) {
				t.Fatalf("VerdictCounts(%q, %+v, %+v) disagrees with E6's rules: %v", c.Sender, v, x, VerdictCounts(c.Sender, ci, v, x))
			}
			if ok {
				want = append(want, c.Hash)
			}
		}
		var got []string
		for _, v := range kept {
			got = append(got, v.Tag)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("kept %v, want %v", got, want)
		}
		for _, p := range passed {
			if slices.Contains(got, p.Tag) || p.Why == "" {
				t.Fatalf("%s passed over (%q) and kept", p.Tag, p.Why)
			}
		}
		for i, c := range changes {
			if c.Name != messages.AuditedTag || c.Op == fossilio.TagCancel || slices.Contains(got, c.Hash) {
				continue
			}
			l := last[c.Sender]
			superseded := l.has && l.at > i
			if _, err := messages.ParseVerdict(c.Value); err == nil && superseded {
				continue
			}
			if !slices.ContainsFunc(passed, func(p passedVerdict) bool { return p.Tag == c.Hash }) {
				t.Fatalf("%s (%q by %q) is neither kept, superseded nor passed over: passed %+v", c.Hash, c.Value, c.Sender, passed)
			}
		}
	})
}
