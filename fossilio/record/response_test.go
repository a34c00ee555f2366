package record_test

import (
	"testing"

	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/messages"
)

// TestResponseOf (D51): the response that counts for a run is the last one
// its agent login sent in the record's thread answering the record, after
// the run's launch and before its end note. One the agent sent while it
// ran comes before the daemon's and does not count; one by another user,
// one answering another record, one before the launch and one after the
// end note never do.
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
	early, err := f.agent.Reply(f.ctx, rec, rec, resp(rec, messages.ResponseDone, "before its launch"))
	if err != nil {
		t.Fatal(err)
	}
	launch, err := f.nodeU.Reply(f.ctx, rec, rec, "The launch.")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := record.ResponseOf(f.ctx, f.repo, rec, "agent-1", launch, ""); err != nil || ok {
		t.Fatalf("a run with no response yet: %v %v (the one before its launch, %s, counts)", ok, err, early)
	}
	forged, err := f.agent.Reply(f.ctx, rec, rec, resp(rec, messages.ResponseDone, "the agent's own, while it ran"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.alice.Reply(f.ctx, rec, rec, resp(rec, messages.ResponseDone, "by alice")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.agent.Reply(f.ctx, rec, rec, resp(launch, messages.ResponseDone, "answering another")); err != nil {
		t.Fatal(err)
	}
	got, ok, err := record.ResponseOf(f.ctx, f.repo, rec, "agent-1", launch, "")
	if err != nil || !ok || got.Hash != forged {
		t.Fatalf("before the daemon's: %+v %v %v; want the agent's %s, the last so far", got, ok, err, forged)
	}
	daemons, err := f.agent.Reply(f.ctx, rec, rec, resp(rec, messages.ResponseStopped, "signaled SIGTERM"))
	if err != nil {
		t.Fatal(err)
	}
	end, err := f.nodeU.Reply(f.ctx, rec, launch, "The end note.")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.agent.Reply(f.ctx, rec, rec, resp(rec, messages.ResponseDone, "after the end")); err != nil {
		t.Fatal(err)
	}
	got, ok, err = record.ResponseOf(f.ctx, f.repo, rec, "agent-1", launch, end)
	if err != nil || !ok || got.Hash != daemons || got.Response.Outcome != messages.ResponseStopped {
		t.Errorf("ResponseOf = %+v %v %v; want %s, the last before the end note", got, ok, err, daemons)
	}
	// A record that is no thread's first post, and a ticket's id, have none.
	if _, ok, err := record.ResponseOf(f.ctx, f.repo, launch, "agent-1", "", ""); err != nil || ok {
		t.Errorf("a reply as the record: %v %v", ok, err)
	}
	if _, ok, err := record.ResponseOf(f.ctx, f.repo, "0123456789012345678901234567890123456789", "agent-1", "", ""); err != nil || ok {
		t.Errorf("an id that names nothing: %v %v", ok, err)
	}
}
