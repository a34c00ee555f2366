package record_test

import (
	"reflect"
	"testing"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// TestArrivalOf: what table 9 reads of each kind of artifact; an edit, a
// post awaiting moderation and anything else are never given.
func TestArrivalOf(t *testing.T) {
	at := protocol.RunPosition{Receipt: 7, Row: 9}
	msg := "```json\n{\"ocx\": 1, \"kind\": \"stop\"}\n```\n"
	for _, c := range []struct {
		name string
		info fossilio.Info
		text string
		ok   bool
		want protocol.RunArrival
	}{
		{"a post", fossilio.Info{Hash: "P", Kind: fossilio.KindPost, Sender: "ana", Rcvid: 7, Rid: 9, Root: "R"}, "hi", true,
			protocol.RunArrival{Kind: protocol.RunPost, Hash: "P", At: at, From: "ana", Thread: "R", Text: "hi"}},
		{"a post holding a message", fossilio.Info{Hash: "P", Kind: fossilio.KindPost, Sender: "ana", Rcvid: 7, Rid: 9, Root: "R"}, msg, true,
			protocol.RunArrival{Kind: protocol.RunPost, Hash: "P", At: at, From: "ana", Thread: "R", Text: msg, HoldsMessage: true}},
		{"a ticket change", fossilio.Info{Hash: "C", Kind: fossilio.KindTicketChange, Rcvid: 7, Rid: 9, Ticket: "K"}, "more", true,
			protocol.RunArrival{Kind: protocol.RunChange, Hash: "C", At: at, Ticket: "K", Text: "more"}},
		{"a check-in", fossilio.Info{Hash: "I", Kind: fossilio.KindCheckin, Sender: "ana", Rcvid: 7, Rid: 9, Branch: "trunk", Comment: msg}, "", true,
			protocol.RunArrival{Kind: protocol.RunCheckin, Hash: "I", At: at, From: "ana", Branch: "trunk", Text: msg}},
		{"an edit", fossilio.Info{Kind: fossilio.KindPost, Edit: true}, "x", false, protocol.RunArrival{}},
		{"a post awaiting moderation", fossilio.Info{Kind: fossilio.KindPost, Pending: true}, "x", false, protocol.RunArrival{}},
		{"a tag change", fossilio.Info{Kind: fossilio.KindTagChange}, "", false, protocol.RunArrival{}},
	} {
		got, ok := record.ArrivalOf(c.info, c.text)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("%s: ArrivalOf = %+v, %v; want %+v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// TestStandingOf: section 3's table over a run's messages, read once for
// the daemon and the run tool: the node's first started and ended where
// the run is count, a second does not, nor one elsewhere or by another
// user; a stop counts from an admin or setup where the run is, the first
// one named.
func TestStandingOf(t *testing.T) {
	const run, node = "R", "lab-1"
	admin := func(u string) bool { return u == "ana" }
	msg := func(hash, sender, where string, m runmsg.Message, at int64) record.RunMsg {
		return record.RunMsg{Hash: hash, Sender: sender, Record: where, Rcvid: at, Rid: at, Msg: m}
	}
	r := msg(run, "ana", "T", &runmsg.Run{Node: node, Process: runmsg.RunProcess{Manual: true}}, 1)
	started := &runmsg.RunStarted{Node: node, Run: run}
	stop := &runmsg.RunStop{Node: node, Run: run}
	ended := &runmsg.RunEnded{Node: node, Run: run, Outcome: "exited"}
	for _, c := range []struct {
		name  string
		msgs  []record.RunMsg
		want  record.RunStanding
		waits bool
	}{
		{"none", []record.RunMsg{r}, record.RunStanding{Run: r}, true},
		{"started by its node", []record.RunMsg{r, msg("S1", node, "T", started, 2), msg("S2", node, "T", started, 3)},
			record.RunStanding{Run: r, StartedCounts: true, Started: "S1", StartedAt: protocol.RunPosition{Receipt: 2, Row: 2}}, false},
		{"started elsewhere or by another", []record.RunMsg{r, msg("S1", node, "U", started, 2), msg("S2", "bob", "T", started, 3)},
			record.RunStanding{Run: r}, true},
		{"stops", []record.RunMsg{r, msg("P0", "bob", "T", stop, 2), msg("P1", "ana", "T", stop, 3), msg("P2", "ana", "T", stop, 4)},
			record.RunStanding{Run: r, StopCounts: true, Stopped: "P1"}, true},
		{"ended", []record.RunMsg{r, msg("E1", node, "T", ended, 2), msg("E2", node, "T", &runmsg.RunEnded{Node: node, Run: run}, 3)},
			record.RunStanding{Run: r, EndedCounts: true, Ended: "E1", EndedBy: ended}, false},
		{"a message that does not read", []record.RunMsg{r, {Hash: "M", Sender: node, Record: "T", Malformed: &runmsg.MalformedMessage{Kind: runmsg.MsgStarted}}},
			record.RunStanding{Run: r}, true},
	} {
		got := record.StandingOf(c.msgs, r, admin)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: StandingOf = %+v; want %+v", c.name, got, c.want)
		}
		if w := got.Waits(admin); w != c.waits {
			t.Errorf("%s: Waits = %v; want %v", c.name, w, c.waits)
		}
	}
}

// TestRunBinding: the users of other nodes, and the node a user's first
// run from an admin or setup named, whatever became of it.
func TestRunBinding(t *testing.T) {
	admin := func(u string) bool { return u == "ana" }
	run := func(hash, sender, node, user string) record.RunMsg {
		return record.RunMsg{Hash: hash, Sender: sender, Msg: &runmsg.Run{Node: node, Process: runmsg.RunProcess{User: user}}}
	}
	msgs := []record.RunMsg{run("1", "bob", "lab-9", "u"), run("2", "ana", "lab-2", "v"), run("3", "ana", "lab-1", "u"),
		run("4", "ana", "lab-3", "u"), run("5", "ana", "lab-2", "u")}
	users, bound := record.RunBinding(msgs, "lab-1", "u", admin)
	if !reflect.DeepEqual(users, []string{"lab-2", "lab-3"}) || bound != "lab-1" {
		t.Errorf("RunBinding = %v, %q; want [lab-2 lab-3], lab-1", users, bound)
	}
}

// TestVerdictOf: what each run engine message is to the node lab-1.
func TestVerdictOf(t *testing.T) {
	const node = "lab-1"
	admin := func(u string) bool { return u == "ana" }
	run := record.RunMsg{Hash: "R", Sender: "ana", Record: "T", Msg: &runmsg.Run{Node: node}}
	other := record.RunMsg{Hash: "O", Sender: "ana", Record: "U", Msg: &runmsg.Run{Node: "lab-2"}}
	stop := func(hash, sender, where string) record.RunMsg {
		return record.RunMsg{Hash: hash, Sender: sender, Record: where, Msg: &runmsg.RunStop{Node: node, Run: "R"}}
	}
	started := record.RunMsg{Hash: "S", Sender: node, Record: "T", Msg: &runmsg.RunStarted{Node: node, Run: "R"}}
	ended := record.RunMsg{Hash: "E", Sender: node, Record: "T", Msg: &runmsg.RunEnded{Node: node, Run: "R", Outcome: "exited"}}
	for _, c := range []struct {
		name string
		msgs []record.RunMsg
		want record.RunVerdict
	}{
		{"a run", []record.RunMsg{run}, record.RunVerdict{Run: true}},
		{"another node's", []record.RunMsg{other}, record.RunVerdict{Nothing: `a run for the node "lab-2", not this node's ("lab-1")`}},
		{"a run answered", []record.RunMsg{started, run}, record.RunVerdict{Nothing: "a run answered already (its started or ended counts)"}},
		{"a stop", []record.RunMsg{run, stop("P", "ana", "T")}, record.RunVerdict{Stop: "R"}},
		{"a stop elsewhere", []record.RunMsg{run, stop("P", "ana", "V")}, record.RunVerdict{Nothing: `a stop ignored (section 3, row 2): sent by "ana", where its run is: false`}},
		{"a stop of an ended run", []record.RunMsg{run, ended, stop("P", "ana", "T")}, record.RunVerdict{Nothing: "a stop of a run that has ended"}},
		{"the node's started", []record.RunMsg{run, started}, record.RunVerdict{Nothing: "the node's own started"}},
		{"a second started", []record.RunMsg{run, started, {Hash: "S2", Sender: node, Record: "T", Msg: started.Msg}}, record.RunVerdict{Nothing: "a started ignored (section 3, row 4)"}},
	} {
		if got := record.VerdictOf(c.msgs, len(c.msgs)-1, node, admin); got != c.want {
			t.Errorf("%s: VerdictOf = %+v; want %+v", c.name, got, c.want)
		}
	}
}

// TestWhyNoStart: a person starts a manual run of this node that neither
// started, ended nor was stopped.
func TestWhyNoStart(t *testing.T) {
	const node = "lab-1"
	admin := func(u string) bool { return u == "ana" }
	manual := record.RunMsg{Hash: "R", Sender: "ana", Record: "T", Msg: &runmsg.Run{Node: node, Process: runmsg.RunProcess{Manual: true}}}
	auto := record.RunMsg{Hash: "R", Sender: "ana", Record: "T", Msg: &runmsg.Run{Node: node}}
	stop := record.RunMsg{Hash: "P", Sender: "ana", Record: "T", Msg: &runmsg.RunStop{Node: node, Run: "R"}}
	for _, c := range []struct {
		msgs []record.RunMsg
		want string
	}{
		{[]record.RunMsg{manual}, ""},
		{[]record.RunMsg{auto}, "not a manual run (process.manual is false): the node started it when it arrived"},
		{[]record.RunMsg{manual, stop}, "the run was stopped"},
	} {
		if got := record.WhyNoStart(c.msgs, 0, node, admin); got != c.want {
			t.Errorf("%v: WhyNoStart = %q; want %q", c.msgs, got, c.want)
		}
	}
}
