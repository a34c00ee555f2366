package record_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// TestFindAgentRecord (issue 22 item 3, D47): an agent login's record is
// found from the node's repository alone: the first, in the server's
// order, of the threads' first posts that a user holding admin or setup
// sent, holding a record whose user is the login and whose node is this
// one. One alice (no admin) wrote, one for another node, and a reply
// holding a record do not count.
func TestFindAgentRecord(t *testing.T) {
	f := newFix(t)
	rec := func(user, node string, restrict runmsg.Restrict) string {
		r := &runmsg.TaskRecord{User: user, Node: node, Runner: "native", Objective: "Test.", Checkins: []string{},
			Hears: []string{"alice"}, Restrict: restrict, Sandbox: runmsg.DefaultRecordSandbox(true), Budget: runmsg.Budget{Wall: "1h"}}
		b, err := r.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return "Record.\n\n" + string(b)
	}
	if _, ok, err := record.FindAgentRecord(f.ctx, f.repo, "agent-1", "ocx"); err != nil || ok {
		t.Fatalf("a record before any: %v %v", ok, err)
	}
	// Forged: by alice, who holds neither admin nor setup, and with more
	// restrictions, which would hold the agent to her thread.
	if _, err := f.alice.NewThread(f.ctx, "Record", rec("agent-1", "ocx", runmsg.Restrict{NoPassword: true, OwnThread: true})); err != nil {
		t.Fatal(err)
	}
	if _, err := f.admin.NewThread(f.ctx, "Record", rec("agent-1", "another-node", runmsg.Restrict{})); err != nil {
		t.Fatal(err)
	}
	other, err := f.admin.NewThread(f.ctx, "Elsewhere", "a thread")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.admin.Reply(f.ctx, other, other, rec("agent-1", "ocx", runmsg.Restrict{})); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := record.FindAgentRecord(f.ctx, f.repo, "agent-1", "ocx"); err != nil || ok {
		t.Fatalf("only records that do not count: %v %v", ok, err)
	}
	want, err := f.admin.NewThread(f.ctx, "Record", rec("agent-1", "ocx", runmsg.Restrict{NoPassword: true, Branch: "feature"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.admin.NewThread(f.ctx, "Record", rec("agent-1", "ocx", runmsg.Restrict{})); err != nil {
		t.Fatal(err)
	}
	got, ok, err := record.FindAgentRecord(f.ctx, f.repo, "agent-1", "ocx")
	if err != nil || !ok || got.Hash != want || !got.Record.Restrict.NoPassword || got.Record.Restrict.Branch != "feature" || got.Sender != f.srv.AdminLogin {
		t.Fatalf("FindAgentRecord = %+v, %v, %v; want %s by the admin", got, ok, err, want)
	}
	if _, ok, _ := record.FindAgentRecord(f.ctx, f.repo, "agent-2", "ocx"); ok {
		t.Errorf("a record for agent-2")
	}
	clone, err := fossilio.OpenClone(f.srv.Repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer clone.Close()
	if _, _, err := record.FindAgentRecord(f.ctx, clone, "agent-1", "ocx"); err == nil || !strings.Contains(err.Error(), "a clone does not know who sent what") {
		t.Errorf("in a clone: %v", err)
	}
}

// TestFirstOf (D47): a ticket's first change is its first received, not
// the one whose D card is the earliest.
func TestFirstOf(t *testing.T) {
	f := newFix(t)
	first, id, err := f.alice.NewTicket(f.ctx, fossilio.Field{Name: "title", Value: "T"}, fossilio.Field{Name: "icomment", Value: "the real objective"})
	if err != nil {
		t.Fatal(err)
	}
	back, err := fossilio.TicketDraft{Date: time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC), User: "alice", Ticket: id,
		Fields: []fossilio.Field{{Name: "+icomment", Value: "backdated"}}}.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.agent.Push(f.ctx, back); err != nil {
		t.Fatal(err)
	}
	if got, err := record.FirstOf(f.ctx, f.repo, messages.ListenTicket, id); err != nil || got != first {
		t.Errorf("FirstOf the ticket = %s (%v); want %s", got, err, first)
	}
	if got, err := record.FirstOf(f.ctx, f.repo, messages.ListenThread, first); err != nil || got != first {
		t.Errorf("FirstOf a thread = %s (%v)", got, err)
	}
}
