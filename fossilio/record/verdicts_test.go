package record

import (
	"testing"

	"github.com/ocx-go/ocx/fossilio"
)

// TestAuditVerdicts: each user's latest verdict from the tag's history; a
// verdict by the check-in's sender or by the user it names does not count;
// a cancel withdraws; a value that is no verdict leaves the earlier one.
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
	}
	got := AuditVerdicts(ci, changes)
	want := []struct{ user, reason, tag string }{{"carol", "carol", "t4"}, {"bob", "second", "t5"}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i, w := range want {
		if got[i].User != w.user || got[i].Reason != w.reason || got[i].Tag != w.tag {
			t.Errorf("%d: %+v, want %+v", i, got[i], w)
		}
	}
}
