package daemon

import (
	"testing"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// TestArrivalOf: what table 9 reads of each kind of artifact; an edit, a
// post awaiting moderation and anything else are never given.
func TestArrivalOf(t *testing.T) {
	at := messages.RunPosition{Receipt: 7, Row: 9}
	msg := "```json\n{\"ocx\": 1, \"kind\": \"stop\"}\n```\n"
	for _, c := range []struct {
		name string
		info fossilio.Info
		text string
		ok   bool
		want messages.RunArrival
	}{
		{"a post", fossilio.Info{Hash: "P", Kind: fossilio.KindPost, Sender: "ana", Rcvid: 7, Rid: 9, Root: "R"}, "hi", true,
			messages.RunArrival{Kind: messages.RunPost, Hash: "P", At: at, From: "ana", Thread: "R", Text: "hi"}},
		{"a post holding a message", fossilio.Info{Hash: "P", Kind: fossilio.KindPost, Sender: "ana", Rcvid: 7, Rid: 9, Root: "R"}, msg, true,
			messages.RunArrival{Kind: messages.RunPost, Hash: "P", At: at, From: "ana", Thread: "R", Text: msg, HoldsMessage: true}},
		{"a ticket change", fossilio.Info{Hash: "C", Kind: fossilio.KindTicketChange, Rcvid: 7, Rid: 9, Ticket: "K"}, "more", true,
			messages.RunArrival{Kind: messages.RunChange, Hash: "C", At: at, Ticket: "K", Text: "more"}},
		{"a check-in", fossilio.Info{Hash: "I", Kind: fossilio.KindCheckin, Sender: "ana", Rcvid: 7, Rid: 9, Branch: "trunk", Comment: msg}, "", true,
			messages.RunArrival{Kind: messages.RunCheckin, Hash: "I", At: at, From: "ana", Branch: "trunk", Text: msg}},
		{"an edit", fossilio.Info{Kind: fossilio.KindPost, Edit: true}, "x", false, messages.RunArrival{}},
		{"a post awaiting moderation", fossilio.Info{Kind: fossilio.KindPost, Pending: true}, "x", false, messages.RunArrival{}},
		{"a tag change", fossilio.Info{Kind: fossilio.KindTagChange}, "", false, messages.RunArrival{}},
	} {
		got, ok := arrivalOf(c.info, c.text)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("%s: arrivalOf = %+v, %v; want %+v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}
