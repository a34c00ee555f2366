package record_test

import (
	"testing"

	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/messages"
)

// TestResponseOf (E5, D51): the response that counts for a run is the
// last one the node user sent in the record's thread answering the
// record, after the run's launch and before its end note. One the agent
// (or anyone else) sent never counts, however it is placed; one answering
// another record, one before the launch and one after the end note never
// do.
func TestResponseOf(t *testing.T) {
	f := newFix(t)
	rec, err := f.admin.NewThread(f.ctx, "Record", "The record.")
	if err != nil {
		t.Fatal(err)
	}
	resp := func(answers string, o messages.ResponseOutcome, note string) string {
		r := &messages.Response{Answers: answers, Outcome: o, Note: note}
		b, err := r.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return "The run ended.\n\n" + string(b)
	}
	early, err := f.nodeU.Reply(f.ctx, rec, rec, resp(rec, messages.ResponseDone, "before its launch"))
	if err != nil {
		t.Fatal(err)
	}
	launch, err := f.nodeU.Reply(f.ctx, rec, rec, "The launch.")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := record.ResponseOf(f.ctx, f.repo, rec, "ocx", launch, ""); err != nil || ok {
		t.Fatalf("a run with no response yet: %v %v (the one before its launch, %s, counts)", ok, err, early)
	}
	forged, err := f.agent.Reply(f.ctx, rec, rec, resp(rec, messages.ResponseDone, "the agent's own, while it ran"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.alice.Reply(f.ctx, rec, rec, resp(rec, messages.ResponseDone, "by alice")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.nodeU.Reply(f.ctx, rec, rec, resp(launch, messages.ResponseDone, "answering another")); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := record.ResponseOf(f.ctx, f.repo, rec, "ocx", launch, ""); err != nil || ok {
		t.Fatalf("before the node's: %+v %v %v; the agent's %s, alice's and one answering another count", got, ok, err, forged)
	}
	nodes, err := f.nodeU.Reply(f.ctx, rec, rec, resp(rec, messages.ResponseStopped, "signaled SIGTERM"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.agent.Reply(f.ctx, rec, rec, resp(rec, messages.ResponseDone, "the agent's, after the node's")); err != nil {
		t.Fatal(err)
	}
	end, err := f.nodeU.Reply(f.ctx, rec, launch, "The end note.")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.nodeU.Reply(f.ctx, rec, rec, resp(rec, messages.ResponseDone, "after the end")); err != nil {
		t.Fatal(err)
	}
	got, ok, err := record.ResponseOf(f.ctx, f.repo, rec, "ocx", launch, end)
	if err != nil || !ok || got.Hash != nodes || got.Response.Outcome != messages.ResponseStopped {
		t.Errorf("ResponseOf = %+v %v %v; want the node user's %s, before the end note", got, ok, err, nodes)
	}
	// A record that is no thread's first post, and a ticket's id, have none.
	if _, ok, err := record.ResponseOf(f.ctx, f.repo, launch, "ocx", "", ""); err != nil || ok {
		t.Errorf("a reply as the record: %v %v", ok, err)
	}
	if _, ok, err := record.ResponseOf(f.ctx, f.repo, "0123456789012345678901234567890123456789", "ocx", "", ""); err != nil || ok {
		t.Errorf("an id that names nothing: %v %v", ok, err)
	}
}
