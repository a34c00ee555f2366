package fossilio_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
)

func TestSentByListsWhatTheLoginSent(t *testing.T) {
	n := newNode(t)
	ctx := n.ctx
	alice, bob := n.client("alice"), n.client("bob")
	root, err := alice.NewThread(ctx, "A thread", "alice's first post")
	if err != nil {
		t.Fatal(err)
	}
	// bob writes alice's name inside a post: the receipt says bob sent it.
	forged, err := fossilio.PostDraft{Date: time.Now(), User: "alice", Root: root, InReplyTo: root, Text: "I am alice"}.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Push(ctx, forged); err != nil {
		t.Fatal(err)
	}
	reply, err := alice.Reply(ctx, root, root, "alice replies")
	if err != nil {
		t.Fatal(err)
	}
	p, err := n.repo.Post(ctx, reply)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Edit(ctx, p, "alice edits her reply"); err != nil {
		t.Fatal(err)
	}
	change, ticket, err := alice.NewTicket(ctx, fossilio.Field{Name: "title", Value: "A bug"}, fossilio.Field{Name: "icomment", Value: "it breaks"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Tag(ctx, firstCheckin(t, n), "ci", "green"); err != nil {
		t.Fatal(err)
	}
	sent, err := n.repo.SentBy(ctx, "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range sent {
		if s.Sender != "alice" {
			t.Errorf("%s listed with sender %q", s.Hash, s.Sender)
		}
		got = append(got, s.Kind.String()+" "+s.Hash+" "+s.Text)
	}
	want := []string{
		"forum-post " + root + " alice's first post",
		"forum-post " + reply + " alice replies",
		"ticket-change " + change + " it breaks",
	}
	if !slices.Equal(got, want) {
		t.Errorf("sent by alice:\n got %q\nwant %q", got, want)
	}
	if len(sent) == 3 && (sent[2].Ticket != ticket || sent[1].Root != root) {
		t.Errorf("the ticket %q and the reply's thread %q", sent[2].Ticket, sent[1].Root)
	}
	// With a filter, only what holds a fenced JSON block: a post's W payload
	// and a ticket comment's fossilized J value alike.
	block := "A note.\n\n```json\n{\"ocx\": \"listen\"}\n```\n"
	noted, err := alice.Reply(ctx, root, root, block)
	if err != nil {
		t.Fatal(err)
	}
	notedChange, err := alice.ChangeTicket(ctx, ticket, fossilio.Field{Name: "+icomment", Value: block})
	if err != nil {
		t.Fatal(err)
	}
	notes, err := n.repo.SentBy(ctx, "alice", "```json")
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 2 || notes[0].Hash != noted || notes[1].Hash != notedChange || notes[0].Text != block || notes[1].Text != block {
		t.Errorf("sent by alice holding a block: %+v", notes)
	}
	if none, err := n.repo.SentBy(ctx, "dave", ""); err != nil || len(none) != 0 {
		t.Errorf("sent by dave: %v, %v", none, err)
	}
	clone, err := fossilio.OpenClone(n.workspace("alice", "trunk").clone, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer clone.Close()
	if _, err := clone.SentBy(ctx, "alice", ""); !errors.Is(err, fossilio.ErrBadInput) {
		t.Errorf("SentBy on a clone: %v", err)
	}
}
