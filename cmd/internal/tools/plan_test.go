package tools

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/node/plantest"
	"github.com/ocx-go/ocx/cmd/internal/workspaces"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
	"github.com/ocx-go/ocx/messages/runmsg"
)

type fakeAudit struct{ *plantest.Effects }

func (f fakeAudit) tag(_ context.Context, checkin, name, value string) (string, error) {
	return f.Hash(), f.Do("tag " + checkin + " " + name + "=" + value)
}
func (f fakeAudit) backoffice(context.Context, *node.Answer) { f.Calls = append(f.Calls, "backoffice") }

// TestAuditPlan is an audit's plan: the audited tag as the caller, then
// the backoffice; a tag that fails stops it before the backoffice.
func TestAuditPlan(t *testing.T) {
	f := auditFacts{Checkin: "c1", Value: "pass:fine", Caller: "agent-1", Project: "demo"}
	fx := fakeAudit{&plantest.Effects{}}
	dry, real := plantest.Run(t, auditPlan(f, fx))
	if want := []string{`would tag c1 audited="pass:fine" as "agent-1" on demo`}; !slices.Equal(dry.Log, want) {
		t.Errorf("dry run %q, want %q", dry.Log, want)
	}
	hash := strings.Repeat("1", 64)
	if !real.OK() || *real.Result != hash || !slices.Equal(fx.Calls, []string{"tag c1 audited=pass:fine", "backoffice"}) ||
		real.Log[0] != `tagged c1 audited="pass:fine" as "agent-1": `+hash {
		t.Errorf("real run ran %q, logged %q, stopped %v", fx.Calls, real.Log, real.Stopped)
	}
	fx = fakeAudit{&plantest.Effects{Fail: "tag"}}
	if _, real := plantest.Run(t, auditPlan(f, fx)); real.OK() || real.Result != nil || !slices.Equal(fx.Calls, []string{"tag c1 audited=pass:fine"}) {
		t.Errorf("a failed tag ran %q, stopped %v", fx.Calls, real.Stopped)
	}
}

type fakeStop struct{ *plantest.Effects }

func (f fakeStop) stopSession(_ context.Context, _ *node.Answer, key messages.WorkspaceKey) error {
	return f.Do("stop " + key.String())
}
func (f fakeStop) awaitEnd(_ context.Context, _ *node.Answer, key messages.WorkspaceKey) error {
	return f.Do("await " + key.String())
}
func (f fakeStop) withdraw(_ context.Context, _ *node.Answer, user string) error {
	return f.Do("withdraw " + user)
}

// TestStopPlan is a stop's plan: refused when the agent is not running;
// else its session stopped, its end awaited, its user's capabilities
// withdrawn, in that order, each only once the one before did its work.
func TestStopPlan(t *testing.T) {
	key := messages.WorkspaceKey{Login: "docs-1", Project: "demo"}
	f := stopFacts{Key: key, User: "docs-1", Record: "r1"}
	if _, err := stopPlan(f, fakeStop{&plantest.Effects{}}); err == nil || err.Error() != "record: the agent of r1 is not running (no process names workspace docs-1/demo)" {
		t.Errorf("not running: %v", err)
	}
	f.Named = true
	fx := fakeStop{&plantest.Effects{}}
	p, err := stopPlan(f, fx)
	if err != nil {
		t.Fatal(err)
	}
	dry, real := plantest.Run(t, p)
	want := []string{"would hand `stop docs-1 demo` to the daemon, which ends the session and writes the response (as docs-1) and its end note on r1",
		`would take every capability from "docs-1" once the session is gone`}
	if !slices.Equal(dry.Log, want) {
		t.Errorf("dry run %q, want %q", dry.Log, want)
	}
	if !real.OK() || !slices.Equal(fx.Calls, []string{"stop docs-1/demo", "await docs-1/demo", "withdraw docs-1"}) {
		t.Errorf("real run ran %q, stopped %v", fx.Calls, real.Stopped)
	}
	fx = fakeStop{&plantest.Effects{Fail: "await"}}
	p, _ = stopPlan(f, fx)
	if _, real := plantest.Run(t, p); real.OK() || !slices.Equal(fx.Calls, []string{"stop docs-1/demo", "await docs-1/demo"}) {
		t.Errorf("an end not awaited ran %q, stopped %v", fx.Calls, real.Stopped)
	}
}

// TestMerged: a sub-action's log and result join the answer; its stop is
// the step's error.
func TestMerged(t *testing.T) {
	a, sub := node.NewAnswer("stop", false), node.NewAnswer("login withdraw", false)
	sub.Logf("took")
	sub.SetResult("h")
	if err := merged(a, sub); err != nil || !slices.Equal(a.Log, []string{"took"}) || *a.Result != "h" {
		t.Errorf("merged %v: %q %v", err, a.Log, a.Result)
	}
	sub.Stop(errors.New("refused"))
	if err := merged(a, sub); err == nil || err.Error() != "refused" {
		t.Errorf("a stopped sub-action: %v", err)
	}
}

type fakeRunStart struct{ *plantest.Effects }

func (f fakeRunStart) send(_ context.Context, _ *node.Answer, line pipe.Line) error {
	return f.Do("send " + line.String())
}
func (f fakeRunStart) awaitStarted(_ context.Context, _ *node.Answer, run string) error {
	return f.Do("await " + run)
}

// TestRunStartPlan is a manual start: refused unless the run is this
// node's, manual and waiting; else the line handed to the daemon and its
// started awaited.
func TestRunStartPlan(t *testing.T) {
	waiting := RunState{Run: "r1", Node: "node", Manual: true, State: "waiting"}
	for _, c := range []struct {
		change func(*RunState)
		want   string
	}{
		{func(*RunState) {}, ""},
		{func(s *RunState) { s.Node = "other" }, `run: r1 is for node "other", not this node ("node"); start it there`},
		{func(s *RunState) { s.Manual = false }, "not a manual run"},
		{func(s *RunState) { s.Ended, s.Outcome = "e1", "failed" }, "run: r1 has ended (failed, ended e1)"},
		{func(s *RunState) { s.Started = "s1" }, "has started already (started s1)"},
		{func(s *RunState) { s.Stopped = "x1" }, "was stopped (x1); its ended follows"},
		{func(s *RunState) { s.State = "running" }, "does not wait for a start (running)"},
	} {
		st := waiting
		c.change(&st)
		err := runStartRefusal(st, "node")
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: refused %v, want %q", st, err, c.want)
		}
	}
	line := pipe.RunStartLine{Repository: "/srv/demo.fossil", Hash: strings.Repeat("a", 64), By: "admin"}
	fx := fakeRunStart{&plantest.Effects{}}
	dry, real := plantest.Run(t, runStartPlan(line, fx))
	if want := []string{"would hand `" + line.String() + "` to the daemon, which starts run " + line.Hash}; !slices.Equal(dry.Log, want) {
		t.Errorf("dry run %q, want %q", dry.Log, want)
	}
	if !real.OK() || !slices.Equal(fx.Calls, []string{"send " + line.String(), "await " + line.Hash}) {
		t.Errorf("real run ran %q, stopped %v", fx.Calls, real.Stopped)
	}
	fx = fakeRunStart{&plantest.Effects{Fail: "send"}}
	if _, real := plantest.Run(t, runStartPlan(line, fx)); real.OK() || len(fx.Calls) != 1 {
		t.Errorf("a failed hand-off ran %q, stopped %v", fx.Calls, real.Stopped)
	}
}

type fakeCreate struct{ *plantest.Effects }

func (f fakeCreate) postRecord(_ context.Context, title, _ string) (string, error) {
	return f.Hash(), f.Do("post " + title)
}
func (f fakeCreate) loginAdd(_ context.Context, _ *node.Answer, login string) error {
	return f.Do("login add " + login)
}
func (f fakeCreate) workspaceAdd(_ context.Context, _ *node.Answer, in workspaces.WorkspaceAddInput) error {
	return f.Do("workspace add " + in.Login + "/" + in.Project + " on " + in.Branch)
}
func (f fakeCreate) forget(_ context.Context, ws host.Workspace) error {
	return f.Do("forget " + ws.Clone)
}
func (f fakeCreate) sessionStart(_ context.Context, _ *node.Answer, in workspaces.SessionStartInput) error {
	return f.Do("session start " + in.Workspace + " on " + in.Record[:4])
}

// TestCreatePlan is create's plan: the record, the login, the workspace,
// the clone's password forgotten only under no_password, the session on
// the record; the result is the record even when a later step fails.
func TestCreatePlan(t *testing.T) {
	key := messages.WorkspaceKey{Login: "docs-1", Project: "demo"}
	rec := &runmsg.TaskRecord{User: "docs-1", Runner: "native", Model: "m", Objective: "Write the docs.\nAll of them.", Budget: runmsg.Budget{Wall: "1h", Tokens: 5}}
	f := createFacts{Caller: "admin", Project: "demo", Rec: rec, Text: "Record of agent ...", NW: newWorkspace{key: key, ws: host.Workspace{Key: key, Clone: "/c"}, branch: "trunk"}}
	fx := fakeCreate{&plantest.Effects{}}
	dry, real := plantest.Run(t, createPlan(f, fx))
	want := []string{`would post as "admin" the first post of a new thread on demo:` + "\nRecord of agent ...",
		`would provision "docs-1" on demo with capabilities ` + fossilio.AgentCaps,
		`would add workspace docs-1/demo on branch "trunk" (its definition the first post of a thread of its own)`,
		"would start its llm session (runner native, model m, lifetime stays, wall 1h, tokens 5) on the record"}
	if !slices.Equal(dry.Log, want) {
		t.Errorf("dry run:\n%s", strings.Join(dry.Log, "\n"))
	}
	hash := strings.Repeat("1", 64)
	if calls := []string{"post Record: Write the docs.", "login add docs-1", "workspace add docs-1/demo on trunk", "session start docs-1/demo on 1111"}; !real.OK() || !slices.Equal(fx.Calls, calls) || *real.Result != hash {
		t.Errorf("real run ran %q, result %v, stopped %v", fx.Calls, real.Result, real.Stopped)
	}
	rec.Restrict.NoPassword = true
	fx = fakeCreate{&plantest.Effects{Fail: "session start"}}
	_, real = plantest.Run(t, createPlan(f, fx))
	if calls := []string{"post Record: Write the docs.", "login add docs-1", "workspace add docs-1/demo on trunk", "forget /c", "session start docs-1/demo on 1111"}; real.OK() || !slices.Equal(fx.Calls, calls) || *real.Result != hash {
		t.Errorf("no_password, a failed start: ran %q, result %v, stopped %v", fx.Calls, real.Result, real.Stopped)
	}
}

type fakePush struct{ *plantest.Effects }

func (f fakePush) send(_ context.Context, artifacts [][]byte) error {
	var names []string
	for _, a := range artifacts {
		names = append(names, string(a))
	}
	return f.Do("send " + strings.Join(names, ","))
}
func (f fakePush) backoffice(context.Context, *node.Answer) { f.Calls = append(f.Calls, "backoffice") }

// TestPushPlan is a push's plan: each check-in said in both runs, then
// all sent at once, files first, and the backoffice; a check-in on a
// branch the record does not allow refuses the whole push.
func TestPushPlan(t *testing.T) {
	set := &pushSet{files: [][]byte{[]byte("f1")}, checkins: []pushCheckin{
		{hash: "c1", data: []byte("c1"), art: &fossilio.Artifact{Comment: "first\nmore"}, branch: "docs"},
		{hash: "c2", data: []byte("c2"), art: &fossilio.Artifact{Comment: "second"}, branch: "docs"},
	}}
	f := pushFacts{Caller: "docs-1", Project: "demo", Record: "r1", Branch: "docs", Set: set}
	fx := fakePush{&plantest.Effects{}}
	p, err := pushPlan(f, fx)
	if err != nil {
		t.Fatal(err)
	}
	dry, real := plantest.Run(t, p)
	want := []string{`would push check-in c1 on branch "docs" (first)`, `would push check-in c2 on branch "docs" (second)`,
		`would send 2 check-in(s) and 1 file(s) to demo as "docs-1", then run the backoffice`}
	if !slices.Equal(dry.Log, want) {
		t.Errorf("dry run %q", dry.Log)
	}
	if !real.OK() || *real.Result != "c2" || !slices.Equal(fx.Calls, []string{"send f1,c1,c2", "backoffice"}) ||
		!slices.Equal(real.Log, []string{want[0][6:], want[1][6:], `sent 2 check-in(s) and 1 file(s) to demo as "docs-1"`}) {
		t.Errorf("real run ran %q, logged %q, result %v, stopped %v", fx.Calls, real.Log, real.Result, real.Stopped)
	}
	f.Branch = "main"
	if _, err := pushPlan(f, fx); err == nil || err.Error() != `checkin c1 is on branch "docs", not "main" (restrict branch of record r1); nothing pushed` {
		t.Errorf("another branch: %v", err)
	}
}

type fakeRunCheck struct{ *plantest.Effects }

func (f fakeRunCheck) send(_ context.Context, _ *node.Answer, line pipe.Line) error {
	return f.Do("send " + line.String())
}
func (f fakeRunCheck) awaitEnded(context.Context, *node.Answer) error { return f.Do("await") }

// TestRunCheckPlan is a check of the node's runs: each run to end lost
// said in both runs, `runs check` handed over, the ends awaited; with
// none lost, a real run says so after the hand-off.
func TestRunCheckPlan(t *testing.T) {
	lost := []RunState{{Run: "r1", Started: "s1", InCare: true}}
	fx := fakeRunCheck{&plantest.Effects{}}
	dry, real := plantest.Run(t, runCheckPlan(lost, fx))
	said := "find run r1 lost (started s1, no ended, in care true, its process alive false)"
	if want := []string{"would " + said, "would hand `runs check` to the daemon"}; !slices.Equal(dry.Log, want) {
		t.Errorf("dry run %q", dry.Log)
	}
	if !real.OK() || !slices.Equal(real.Log, []string{said}) || !slices.Equal(fx.Calls, []string{"send runs check", "await"}) {
		t.Errorf("real run ran %q, logged %q, stopped %v", fx.Calls, real.Log, real.Stopped)
	}
	fx = fakeRunCheck{&plantest.Effects{}}
	if _, real := plantest.Run(t, runCheckPlan(nil, fx)); !slices.Equal(real.Log, []string{"no run of this node is to end lost"}) || !slices.Equal(fx.Calls, []string{"send runs check"}) {
		t.Errorf("none lost: ran %q, logged %q", fx.Calls, real.Log)
	}
}
