package record

import (
	"testing"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// TestQueueOf: where a check-in stands for a branch listener (D5, D42). A
// reviewer's own check-in (sent by it: its U card, which anyone writes,
// proves nothing, D47) is skipped for good; any
// other waits until it carries the listener's own result: for a reviewer its
// verdict, as sentVerdicts reads it (another's verdict, a cancel or a value
// that is no verdict leave it waiting); for CI its ci tag.
func TestQueueOf(t *testing.T) {
	ch := func(op fossilio.TagOp, name, value, sender string) fossilio.TagChange {
		return fossilio.TagChange{Tag: fossilio.Tag{Op: op, Name: name, Value: value}, Sender: sender, Hash: "t-" + sender}
	}
	pass := ch(fossilio.TagAdd, messages.AuditedTag, "pass: ok (against R)", "rev")
	other := ch(fossilio.TagAdd, messages.AuditedTag, "fail: no (against R)", "bob")
	cancel := ch(fossilio.TagCancel, messages.AuditedTag, "", "rev")
	junk := ch(fossilio.TagAdd, messages.AuditedTag, "looks fine", "rev")
	green := ch(fossilio.TagAdd, messages.CITagName, "green: ok", "rev")
	ci := fossilio.Info{Hash: "c1", Sender: "alice", Author: "alice"}
	for _, c := range []struct {
		name    string
		kind    messages.ResultKind
		ci      fossilio.Info
		changes []fossilio.TagChange
		waits   bool
		skip    bool
		result  string
	}{
		{"a reviewer's fresh check-in", messages.ResultVerdict, ci, nil, true, false, ""},
		{"judged by the reviewer", messages.ResultVerdict, ci, []fossilio.TagChange{other, pass}, false, false, "pass: ok (against R)"},
		{"judged by another only", messages.ResultVerdict, ci, []fossilio.TagChange{other}, true, false, ""},
		{"the reviewer's verdict cancelled", messages.ResultVerdict, ci, []fossilio.TagChange{pass, cancel}, true, false, ""},
		{"a value that is no verdict", messages.ResultVerdict, ci, []fossilio.TagChange{junk}, true, false, ""},
		{"a ci tag is no verdict", messages.ResultVerdict, ci, []fossilio.TagChange{green}, true, false, ""},
		{"sent by the reviewer", messages.ResultVerdict, fossilio.Info{Hash: "c2", Sender: "rev", Author: "alice"}, nil, false, true, ""},
		{"naming the reviewer, judged", messages.ResultVerdict, fossilio.Info{Hash: "c3", Sender: "alice", Author: "rev"}, []fossilio.TagChange{pass}, false, false, "pass: ok (against R)"},
		{"naming the reviewer, waiting", messages.ResultVerdict, fossilio.Info{Hash: "c4", Sender: "alice", Author: "rev"}, nil, true, false, ""},
		{"CI: untested", "", ci, []fossilio.TagChange{pass}, true, false, ""},
		{"CI: tested", messages.ResultCI, ci, []fossilio.TagChange{green}, false, false, "green: ok"},
		{"CI tests its own check-in", "", fossilio.Info{Hash: "c2", Sender: "rev"}, nil, true, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := queueOf(c.kind, "rev", c.ci, c.changes)
			if q.Waits != c.waits || (q.Skip != "") != c.skip || q.Checkin != c.ci.Hash {
				t.Errorf("queueOf = %+v; want waits %v, skipped %v", q, c.waits, c.skip)
			}
			got, found := RunResult(c.kind, "rev", c.ci, c.changes)
			if got != c.result || found != (c.result != "") {
				t.Errorf("RunResult = %q, %v; want %q", got, found, c.result)
			}
		})
	}
}
