package record_test

import (
	"strings"
	"testing"

	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// TestOneRunPerTaskRecord (D76; seed 001 E4, E5): on a protocol v1 record
// the first launch that counts and was not refused is its run, and every
// launch after it is refused, naming it, whether the daemon classifies it
// (LaunchVerdict) or a tool asks before writing one (WouldLaunch, OneRun);
// what a launch describes (Described) is read all the same. A refused
// launch started no run, a launch alice sent does not count, and a record
// that is no v1 record of the login (a workspace's own thread, another
// login's record, one alice wrote) is launched as often as asked.
func TestOneRunPerTaskRecord(t *testing.T) {
	f := newFix(t)
	key := messages.WorkspaceKey{Login: "agent-1", Project: "demo"}
	home := f.thread(f.admin, f.srv.AdminLogin, f.block(wsDef("agent-1")))
	taskRecord := func(user string) string {
		b, err := (&runmsg.TaskRecord{User: user, Node: "ocx", Runner: "claude", Objective: "Do it.",
			Hears: []string{"alice"}, Sandbox: runmsg.DefaultRecordSandbox(true), Budget: runmsg.Budget{Wall: "1h"}}).Encode()
		if err != nil {
			t.Fatal(err)
		}
		return "The record.\n\n" + string(b)
	}
	def := f.block(&messages.SessionDefinition{Kind: messages.LLM, Runner: "claude", Model: "default", Lifetime: messages.Stays})
	note := func(session string) *messages.LaunchNote {
		return &messages.LaunchNote{Login: "agent-1", Project: "demo", Workspace: home, Session: session, Release: messages.ReleaseCurrent}
	}
	idx := record.NewIndex(f.repo, "ocx")
	verdict := func(hash string) (record.Verdict, record.Verdict) {
		t.Helper()
		e, err := record.At(f.ctx, f.repo, hash)
		if err != nil {
			t.Fatal(err)
		}
		v, err := idx.LaunchVerdict(f.ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		d, err := idx.Described(f.ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		return v, d
	}
	oneRun := func(rec string) string {
		t.Helper()
		why, err := idx.OneRun(f.ctx, key, rec, nil)
		if err != nil {
			t.Fatal(err)
		}
		return why
	}

	rec := f.thread(f.admin, f.srv.AdminLogin, taskRecord("agent-1"))
	sd := f.reply(f.admin, f.srv.AdminLogin, rec, def)
	if why := oneRun(rec); why != "" {
		t.Fatalf("a v1 record with no launch yet: %q", why)
	}
	// alice's launch counts for nothing; the node's refusal of the first
	// admin's launch means it started nothing.
	f.reply(f.alice, f.srv.AdminLogin, rec, f.block(note(sd)))
	refused := f.reply(f.admin, f.srv.AdminLogin, rec, f.block(note(sd)))
	f.reply(f.nodeU, "ocx", rec, f.block(&messages.RefusalNote{Launch: refused, Login: "agent-1", Project: "demo", Reason: "a session runs"}))
	if why := oneRun(rec); why != "" {
		t.Fatalf("a v1 record whose only launches were refused or did not count: %q", why)
	}
	run := f.reply(f.admin, f.srv.AdminLogin, rec, f.block(note(sd)))
	if v, _ := verdict(run); v.Spec == nil {
		t.Fatalf("the record's first launch that counts: %+v", v)
	}
	if why := oneRun(rec); !strings.Contains(why, "has had its run (launch "+run[:10]) || !strings.Contains(why, "create another") {
		t.Errorf("OneRun after the run's launch: %q", why)
	}
	again := f.reply(f.admin, f.srv.AdminLogin, rec, f.block(note(sd)))
	v, d := verdict(again)
	if v.Refuse == nil || !strings.Contains(v.Refuse.Reason, "launch "+run[:10]) || v.Refuse.Workspace != key {
		t.Errorf("a second launch on the record: %+v, want refused naming %s", v, run)
	}
	if d.Spec == nil || d.Spec.Hash != again {
		t.Errorf("what the second launch describes: %+v", d)
	}
	// The run itself is still its run, whatever follows it.
	if v, _ := verdict(run); v.Spec == nil {
		t.Errorf("the run's own launch read again: %+v", v)
	}
	at, err := record.At(f.ctx, f.repo, run)
	if err != nil {
		t.Fatal(err)
	}
	if w, err := idx.WouldLaunch(f.ctx, f.srv.AdminLogin, at, note(sd)); err != nil || w.Refuse == nil || !strings.Contains(w.Refuse.Reason, "launch "+run[:10]) {
		t.Errorf("a restart of the record's run would be: %+v %v, want refused", w, err)
	}

	// Not a v1 record of agent-1: launched as often as asked.
	for name, r := range map[string]string{
		"the workspace's own thread": home,
		"another login's record":     f.thread(f.admin, f.srv.AdminLogin, taskRecord("agent-2")),
		"a record alice wrote":       f.thread(f.alice, f.srv.AdminLogin, taskRecord("agent-1")),
	} {
		s := f.reply(f.admin, f.srv.AdminLogin, r, def)
		first := f.reply(f.admin, f.srv.AdminLogin, r, f.block(note(s)))
		second := f.reply(f.admin, f.srv.AdminLogin, r, f.block(note(s)))
		if v, _ := verdict(first); v.Spec == nil {
			t.Errorf("%s: the first launch %+v", name, v)
		}
		if v, _ := verdict(second); v.Spec == nil {
			t.Errorf("%s: the second launch %+v", name, v)
		}
		if why := oneRun(r); why != "" {
			t.Errorf("%s: OneRun %q", name, why)
		}
	}
}
