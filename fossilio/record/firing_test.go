package record_test

import (
	"fmt"
	"testing"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// TestFiringsOnTheRecord: a fired counts as a run, with the trigger's
// layers and sender, only when the trigger's node user wrote it where the
// trigger is, naming a cause of the trigger's kind no fired before it
// named, before the trigger's ended counts (D101).
func TestFiringsOnTheRecord(t *testing.T) {
	const node = "lab-1"
	h := func(i int) string { return fmt.Sprintf("%040x", i) }
	trigger, other := h(1), h(2)
	var l record.RunLog
	row := int64(0)
	post := func(hash, sender, root, text string) {
		row++
		l.Add(fossilio.Info{Hash: hash, Kind: fossilio.KindPost, Sender: sender, Root: root, Rcvid: row, Rid: row}, text)
	}
	block := func(s string) string { return "```json\n" + s + "\n```\n" }
	post(trigger, "ana", trigger, block(`{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "CI.", "process": {"user": "builder", "command": ["make"], "on": {"checkin": ["trunk"]}}}`))
	post(other, "ana", other, block(`{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "once.", "process": {"user": "builder", "command": ["make"]}}`))
	fired := func(run, cause string) string {
		return block(`{"ocx": 1, "kind": "fired", "node": "` + node + `", "run": "` + run + `", ` + cause + `}`)
	}
	ci := func(i int) string { return `"checkin": "` + h(100+i) + `"` }
	post(h(10), node, trigger, fired(trigger, ci(1)))                          // counts
	post(h(11), node, trigger, fired(trigger, ci(1)))                          // the same cause again
	post(h(12), "bob", trigger, fired(trigger, ci(2)))                         // not the node user
	post(h(13), node, other, fired(trigger, ci(3)))                            // not where the trigger is
	post(h(14), node, other, fired(other, ci(4)))                              // not a trigger
	post(h(15), node, trigger, fired(trigger, `"at": "2026-12-08T00:05:00Z"`)) // the other kind
	post(h(16), node, trigger, fired(trigger, ci(2)))                          // counts
	post(h(17), node, trigger, block(`{"ocx": 1, "kind": "ended", "node": "lab-1", "run": "`+trigger+`", "outcome": "stopped"}`))
	post(h(18), node, trigger, fired(trigger, ci(5))) // after the trigger's ended
	var firings []string
	for _, m := range l.Msgs() {
		if m.Firing == nil {
			if _, ok := m.Msg.(*runmsg.Run); ok && m.Hash != trigger && m.Hash != other {
				t.Errorf("%s is a run without a firing", m.Hash)
			}
			continue
		}
		r := m.Run()
		if r == nil || r.Process.On != nil || r.Process.User != "builder" || m.Sender != "ana" || m.Firing.By != node || m.Firing.Trigger != trigger || m.Kind() != runmsg.MsgRun {
			t.Errorf("firing %s: %+v %+v", m.Hash, r, m.Firing)
		}
		firings = append(firings, m.Hash)
	}
	if fmt.Sprint(firings) != fmt.Sprint([]string{h(10), h(16)}) {
		t.Fatalf("firings %v, want %s and %s", firings, h(10), h(16))
	}
	msgs := l.Msgs()
	if i := record.IndexRun(msgs, h(16)); i < 0 {
		t.Fatal("a firing is not found as a run")
	} else if why := record.WhyNoStart(msgs, record.IndexRun(msgs, trigger), node, func(string) bool { return true }); why == "" {
		t.Fatal("a trigger may be started by hand")
	}
}
