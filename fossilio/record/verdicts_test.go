package record

import (
	"strings"
	"testing"

	"github.com/ocx-go/ocx/fossilio"
)

// TestAuditVerdicts: each user's latest verdict from the tag's history; a
// verdict by the check-in's sender does not count, while the user its U
// card names (which anyone who may push writes, D47) judges it as anyone
// does; a cancel withdraws; a value that is no verdict (a 5 KB against
// among them) leaves the earlier one, and is passed over, named.
func TestAuditVerdicts(t *testing.T) {
	ci := fossilio.Info{Hash: "c", Sender: "agent", Author: "alice"}
	ch := func(op fossilio.TagOp, name, value, sender, hash string) fossilio.TagChange {
		return fossilio.TagChange{Tag: fossilio.Tag{Op: op, Name: name, Value: value}, Sender: sender, Hash: hash}
	}
	changes := []fossilio.TagChange{
		ch(fossilio.TagAdd, "audited", "pass: mine (against PLAN.md)", "agent", "t1"),
		ch(fossilio.TagAdd, "audited", "pass: named (against PLAN.md)", "alice", "t2"),
		ch(fossilio.TagAdd, "audited", "fail: first (against PLAN.md)", "bob", "t3"),
		ch(fossilio.TagAdd, "audited", "pass: carol (against PLAN.md)", "carol", "t4"),
		ch(fossilio.TagAdd, "audited", "pass: second (against PLAN.md)", "bob", "t5"),
		ch(fossilio.TagAdd, "ci", "green: ok", "dave", "t6"),
		ch(fossilio.TagAdd, "audited", "no verdict", "carol", "t7"),
		ch(fossilio.TagAdd, "audited", "pass: gone (against PLAN.md)", "erin", "t8"),
		ch(fossilio.TagCancel, "audited", "", "erin", "t9"),
		ch(fossilio.TagAdd, "audited", "pass: unknown (against PLAN.md)", "", "t10"),
		ch(fossilio.TagAdd, "audited", "pass: long (against "+strings.Repeat("x", 5000)+")", "bob", "t11"),
	}
	got, passed := AuditVerdictsOf(ci, changes)
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
	if len(AuditVerdicts(ci, changes)) != len(got) {
		t.Errorf("AuditVerdicts differs from AuditVerdictsOf")
	}
}
