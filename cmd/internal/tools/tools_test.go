package tools_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/node/nodetest"
	"github.com/ocx-go/ocx/cmd/internal/tools"
	"github.com/ocx-go/ocx/cmd/internal/workspaces"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// toolCaller is a caller for the tools: a login and its password.
func toolCaller(login, password string) node.Caller {
	return node.Caller{Login: login, Password: password}
}

func (f *fix) admin() node.Caller { return toolCaller(f.Srv.AdminLogin, f.Srv.AdminPassword) }

// call runs a tool through the registry.
func (f *fix) call(c node.Caller, tool, input string) *node.Answer {
	f.T.Helper()
	return tools.Of(f.N).Call(f.Ctx, c, tool, json.RawMessage(input))
}

// agentRecord sets up what create sets up but the session (which needs a
// daemon; the command line's tests start one): the record as a new thread
// by the admin, the agent's user, its workspace, the record in its
// listening index, and for no_password a clone that forgot its password.
func (f *fix) agentRecord(login string, restrict runmsg.Restrict, checkins ...string) (record string, caller node.Caller) {
	f.T.Helper()
	rec := &runmsg.TaskRecord{User: login, Node: f.N.Config.User, Runner: "native", Objective: "Test the tools.",
		Checkins: checkins, Hears: []string{f.Srv.AdminLogin}, Restrict: restrict,
		Sandbox: runmsg.DefaultRecordSandbox(true), Budget: runmsg.Budget{Wall: "1h"}}
	block, err := rec.Encode()
	if err != nil {
		f.T.Fatal(err)
	}
	a := f.OK(f.N.Thread(f.Ctx, node.PostInput{Title: "Record of " + login, Text: "Record.\n\n" + string(block)}))
	f.OK(f.N.LoginAdd(f.Ctx, login, false))
	f.OK(workspaces.Of(f.N).WorkspaceAdd(f.Ctx, workspaces.WorkspaceAddInput{Login: login, Project: "demo", Branch: "trunk"}))
	// The session's own record, as session start writes it in the index.
	if err := os.WriteFile(filepath.Join(f.Agents, login, "held", "demo", "listening", *a.Result), []byte("thread\n"), 0o600); err != nil {
		f.T.Fatal(err)
	}
	if restrict.NoPassword {
		if err := fossilio.Forget(f.Ctx, filepath.Join(f.Agents, login, "projects", "demo", "clone")); err != nil {
			f.T.Fatal(err)
		}
	}
	c, err := tools.Of(f.N).AgentCaller(login)
	if err != nil {
		f.T.Fatal(err)
	}
	return *a.Result, c
}

// personRecord is a record alice, who holds neither admin nor setup,
// wrote as a new thread: one that does not count (E3).
func (f *fix) personRecord(checkins ...string) string {
	f.T.Helper()
	rec := &runmsg.TaskRecord{User: "nobody-1", Node: f.N.Config.User, Runner: "native", Objective: "Not a task.",
		Checkins: checkins, Hears: []string{person}, Sandbox: runmsg.DefaultRecordSandbox(true), Budget: runmsg.Budget{Wall: "1h"}}
	block, err := rec.Encode()
	if err != nil {
		f.T.Fatal(err)
	}
	h, err := f.Client(person).NewThread(f.Ctx, "A record by alice", "Record.\n\n"+string(block))
	if err != nil {
		f.T.Fatal(err)
	}
	return h
}

// commit checks a file in, in the agent's tree, with fossil itself (the
// tree's autosync is off: nothing leaves the clone). extra are more
// arguments to fossil commit (--branch NAME, --user NAME).
func (f *fix) commit(login, file, text string, extra ...string) string {
	f.T.Helper()
	tree := filepath.Join(f.Agents, login, "projects", "demo", "tree")
	if err := os.WriteFile(filepath.Join(tree, file), []byte(text), 0o644); err != nil {
		f.T.Fatal(err)
	}
	run := func(args ...string) string {
		cmd := exec.Command("fossil", args...)
		cmd.Dir = tree
		ws := filepath.Dir(tree)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + ws, "FOSSIL_HOME=" + ws, "USER=" + login}
		out, err := cmd.CombinedOutput()
		if err != nil {
			f.T.Fatalf("fossil %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("add", file)
	run(append([]string{"commit", "--no-warnings", "-m", "add " + file}, extra...)...)
	out := run("info", "current")
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, "hash:"); ok {
			clone, err := fossilio.OpenClone(filepath.Join(filepath.Dir(tree), "clone"), nil)
			if err != nil {
				f.T.Fatal(err)
			}
			defer clone.Close()
			full, err := clone.Resolve(f.Ctx, strings.Fields(rest)[0])
			if err != nil {
				f.T.Fatal(err)
			}
			return full
		}
	}
	f.T.Fatalf("no hash in fossil info:\n%s", out)
	return ""
}

// count is how many artifacts the node's repository holds.
func (f *fix) count() int { return len(f.Artifacts()) }

// noWrite fails unless a dry run wrote nothing.
func (f *fix) noWrite(before int, a *node.Answer) {
	f.T.Helper()
	f.OK(a)
	if !a.DryRun || a.Result != nil {
		f.T.Errorf("%s: a dry run answered dry_run %v, result %v", a.Tool, a.DryRun, a.Result)
	}
	if after := f.count(); after != before {
		f.T.Errorf("%s: a dry run wrote %d artifacts", a.Tool, after-before)
	}
}

func TestToolRegistryListsEveryTool(t *testing.T) {
	tools := tools.Tools()
	if len(tools) != 5 {
		t.Fatalf("%d tools", len(tools))
	}
	for i, name := range []string{"create", "post", "audit", "push", "stop"} {
		var schema map[string]any
		if tools[i].Name != name || tools[i].Description == "" || json.Unmarshal(tools[i].InputSchema, &schema) != nil || schema["type"] != "object" {
			t.Errorf("tool %d: %+v", i, tools[i])
		}
	}
}

// TestToolAnswerShapeOnEveryRefusal: an input that does not decode, a tool
// that does not exist and a call without a caller all answer in E8's one
// shape, stopped naming the field.
func TestToolAnswerShapeOnEveryRefusal(t *testing.T) {
	f := newFix(t)
	for _, c := range []struct {
		caller      node.Caller
		tool, input string
		dry         bool
		want        string
	}{
		{f.admin(), "post", `{"to": "0123456789", "text": "x", "colour": "red", "dry_run": true}`, true, "colour: is not a field of post"},
		{f.admin(), "post", `{"to": "01234", "text": "x"}`, false, `to: "01234" is 5 characters`},
		{f.admin(), "post", `{"to": "0123456789abcdef", "text": "x"}`, false, `to: "0123456789abcdef" names no artifact of demo`},
		{f.admin(), "audit", `not json`, false, "audit input: is not valid JSON"},
		{f.admin(), "launch", `{}`, false, `"launch" is not a tool`},
		{node.Caller{}, "post", `{"to": "0123456789", "text": "x"}`, false, "caller: no --user given"},
		{toolCaller("nobody-here", "pw"), "stop", `{"record": "0123456789"}`, false, "is not a user of demo"},
	} {
		a := f.call(c.caller, c.tool, c.input)
		f.Refused(a, c.want)
		b, _ := json.Marshal(a)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil || len(m) != 5 || m["result"] != nil || a.DryRun != c.dry || a.Tool != c.tool {
			t.Errorf("%s %s: the answer %s is not the one shape", c.tool, c.input, b)
		}
	}
}

func TestToolPostRepliesAndHoldsOwnThread(t *testing.T) {
	f := newFix(t)
	other := f.OK(f.N.Thread(f.Ctx, node.PostInput{Title: "Elsewhere", Text: "another thread"}))
	record, agentC := f.agentRecord("agent-2", runmsg.Restrict{NoPassword: true, OwnThread: true})

	// A person replies anywhere, as themselves.
	a := f.OK(f.call(toolCaller(person, personPW), "post", `{"to": "`+(*other.Result)[:12]+`", "text": "hello"}`))
	if p := f.Post(*a.Result); p.Sender != person || p.InReplyTo != *other.Result {
		t.Errorf("the reply was sent by %q in reply to %q", p.Sender, p.InReplyTo)
	}
	// The agent posts in its record's thread, as itself; not outside it.
	a = f.OK(f.call(agentC, "post", `{"to": "`+record+`", "text": "working on it"}`))
	if p := f.Post(*a.Result); p.Sender != "agent-2" || p.Root != record {
		t.Errorf("the agent's post was sent by %q in thread %q", p.Sender, p.Root)
	}
	before := f.count()
	f.Refused(f.call(agentC, "post", `{"to": "`+*other.Result+`", "text": "out of bounds"}`), "to: ", "outside the thread of record "+record, "restrict own_thread")
	f.noWrite(before, f.call(agentC, "post", `{"to": "`+record+`", "text": "dry", "dry_run": true}`))
	if f.count() != before {
		t.Errorf("a refused post wrote")
	}
}

func TestToolPushCopiesCheckinsAndHoldsTheBranch(t *testing.T) {
	f := newFix(t)
	_, free := f.agentRecord("agent-3", runmsg.Restrict{NoPassword: true})
	_, held := f.agentRecord("agent-4", runmsg.Restrict{NoPassword: true, Branch: "feature"})

	// The clone holds no password (no_password).
	if _, err := fossilio.Remembered(f.Ctx, filepath.Join(f.Agents, "agent-3", "projects", "demo", "clone")); err == nil {
		t.Errorf("the clone of a no_password agent remembers a password")
	}
	f.OK(f.call(free, "push", `{}`)) // nothing new: nothing pushed
	ci := f.commit("agent-3", "a.txt", "hello\n")
	before := f.count()
	f.noWrite(before, f.call(free, "push", `{"dry_run": true}`))
	a := f.OK(f.call(free, "push", `{}`))
	if *a.Result != ci {
		t.Errorf("push answered %s, want the check-in %s", *a.Result, ci)
	}
	info, err := f.Repo().Info(f.Ctx, ci)
	if err != nil || info.Kind != fossilio.KindCheckin || info.Sender != "agent-3" {
		t.Fatalf("on the node the check-in is %+v (%v), want one sent by agent-3", info, err)
	}
	if _, err := f.Repo().Content(f.Ctx, fossilio.HashOf([]byte("hello\n"))); err != nil {
		t.Errorf("its file did not arrive: %v", err)
	}

	// Held to branch feature: a check-in on trunk is refused, naming it,
	// and nothing is pushed (it stays in the clone, so every later push is
	// refused too: the agent's branch is the record's).
	bad := f.commit("agent-4", "b.txt", "on trunk\n")
	before = f.count()
	f.Refused(f.call(held, "push", `{}`), "checkin "+bad, `is on branch "trunk", not "feature"`, "nothing pushed")
	if f.count() != before {
		t.Errorf("a refused push wrote")
	}
	// The person is no agent of a record: push is not theirs.
	f.Refused(f.call(toolCaller(person, personPW), "push", `{}`), "push is for an agent whose record restricts no_password")
}

func TestToolAuditWritesVerdictsAndRefusesOwnCheckins(t *testing.T) {
	f := newFix(t)
	rec, agentC := f.agentRecord("agent-5", runmsg.Restrict{NoPassword: true}, "trunk")
	other, _ := f.agentRecord("agent-6", runmsg.Restrict{NoPassword: true}, "release")
	ci := f.commit("agent-5", "PLAN.md", "# Plan\n")
	f.OK(f.call(agentC, "push", `{}`))
	// agent-5 checks in once more, naming alice as the check-in's user.
	named := f.commit("agent-5", "c.txt", "c\n", "--user-override", person)
	f.OK(f.call(agentC, "push", `{}`))

	before := f.count()
	in := `{"checkin": "` + ci[:10] + `", "verdict": "pass", "reason": "the plan is there", "against": "PLAN.md"}`
	f.noWrite(before, f.call(f.admin(), "audit", strings.Replace(in, `}`, `, "dry_run": true}`, 1)))
	a := f.OK(f.call(f.admin(), "audit", in))
	tags, err := f.Repo().CheckinTags(f.Ctx, ci)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := fossilio.LatestTag(tags, messages.AuditedTag, f.Srv.AdminLogin)
	if !ok || got.Value != "pass: the plan is there (against PLAN.md)" || got.Hash != *a.Result {
		t.Errorf("the audited tag: %+v %v", got, ok)
	}
	// Against a record: in full, when it lists the branch.
	a = f.OK(f.call(toolCaller(person, personPW), "audit", `{"checkin": "`+ci+`", "verdict": "fail", "reason": "not yet", "against": "`+rec[:12]+`"}`))
	tags, _ = f.Repo().CheckinTags(f.Ctx, ci)
	if got, _ := fossilio.LatestTag(tags, messages.AuditedTag, person); got.Value != "fail: not yet (against "+rec+")" {
		t.Errorf("alice's verdict: %q", got.Value)
	}
	// The status shows each user's latest verdict, and what this node
	// enforces.
	st, err := f.N.Status(f.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(st.Restrictions, ",") != strings.Join(node.EnforcedRestrictions, ",") {
		t.Errorf("status restrictions: %q", st.Restrictions)
	}
	seen := map[string]string{}
	for _, v := range st.Verdicts {
		if v.Checkin == ci {
			seen[v.User] = v.Verdict + ": " + v.Reason + " against " + v.Against
		}
	}
	if len(seen) != 2 || seen[f.Srv.AdminLogin] != "pass: the plan is there against PLAN.md" || seen[person] != "fail: not yet against "+rec {
		t.Errorf("status verdicts on %s: %v", ci, seen)
	}
	before = f.count()
	for _, c := range []struct {
		caller node.Caller
		in     string
		want   []string
	}{
		{agentC, in, []string{"checkin: ", `was sent by "agent-5", who judges it`}},
		{f.admin(), `{"checkin": "` + ci + `", "verdict": "pass", "reason": "r", "against": "` + other + `"}`, []string{"against: record " + other, `does not list the check-in's branch "trunk"`}},
		{f.admin(), `{"checkin": "` + ci + `", "verdict": "pass", "reason": "r", "against": "NOPE.md"}`, []string{`against: check-in ` + ci + ` has no file "NOPE.md"`}},
		{f.admin(), `{"checkin": "` + rec + `", "verdict": "pass", "reason": "r", "against": "PLAN.md"}`, []string{"checkin: " + rec + " is a forum-post, not a check-in"}},
	} {
		f.Refused(f.call(c.caller, "audit", c.in), c.want...)
	}
	if f.count() != before {
		t.Errorf("a refused audit wrote")
	}
	// E6's record rules, the writer's and the readers' alike
	// (record.VerdictCounts): a record alice wrote does not count; a
	// check-in is no record; a workspace's record (D42) lists the
	// branches its listeners name there.
	aliceRec := f.personRecord("trunk")
	before = f.count()
	f.Refused(f.call(f.admin(), "audit", `{"checkin": "`+ci+`", "verdict": "pass", "reason": "r", "against": "`+aliceRec+`"}`),
		"against: the record "+aliceRec+" does not count", `its sender "alice" holds neither admin nor setup`)
	f.Refused(f.call(f.admin(), "audit", `{"checkin": "`+ci+`", "verdict": "pass", "reason": "r", "against": "`+named+`"}`),
		"against: "+named+" is no record: it is a check-in, not a forum post")
	const rev = "rev-1"
	f.OK(f.N.LoginAdd(f.Ctx, rev, false))
	wsRec := *f.OK(workspaces.Of(f.N).WorkspaceAdd(f.Ctx, workspaces.WorkspaceAddInput{Login: rev, Project: "demo", Branch: "trunk"})).Result
	f.OK(workspaces.Of(f.N).ListenerAdd(f.Ctx, workspaces.ListenerInput{Workspace: rev + "/demo", Kind: "branch", Names: "release"}))
	if f.count() != before+2 {
		t.Errorf("the refused audits wrote")
	}
	before = f.count()
	f.Refused(f.call(f.admin(), "audit", `{"checkin": "`+ci+`", "verdict": "pass", "reason": "r", "against": "`+wsRec+`"}`),
		"against: record "+wsRec, `does not list the check-in's branch "trunk" in its checkins (release)`)
	if f.count() != before {
		t.Errorf("the refused audit wrote")
	}
	f.OK(workspaces.Of(f.N).ListenerAdd(f.Ctx, workspaces.ListenerInput{Workspace: rev + "/demo", Kind: "branch", Names: "trunk"}))
	f.OK(f.call(f.admin(), "audit", `{"checkin": "`+ci+`", "verdict": "pass", "reason": "reviewed", "against": "`+wsRec+`"}`))
	// The readers apply the same rules: alice's raw tags, which no tool
	// checked, against her own record and against a check-in, are passed
	// over by the status, and her earlier verdict does not stand in for
	// them; the admin's verdict against the reviewer's record counts.
	for _, against := range []string{aliceRec, named} {
		if _, err := f.Client(person).Tag(f.Ctx, ci, messages.AuditedTag, "pass: raw (against "+against+")"); err != nil {
			t.Fatal(err)
		}
		st, err := f.N.Status(f.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		admins := 0
		for _, v := range st.Verdicts {
			if v.Checkin == ci && v.User == person {
				t.Errorf("the status shows alice's verdict against %s, which does not count: %+v", against, v)
			}
			if v.Checkin == ci && v.User == f.Srv.AdminLogin && v.Against == wsRec {
				admins++
			}
		}
		if admins != 1 {
			t.Errorf("the status shows the admin's verdict against the reviewer's record %d times, want once: %+v", admins, st.Verdicts)
		}
	}
	// A check-in whose U card names alice (--user-override) is not hers:
	// agent-5 sent it, and alice judges it as anyone may (D47).
	a = f.OK(f.call(toolCaller(person, personPW), "audit", `{"checkin": "`+named+`", "verdict": "pass", "reason": "r", "against": "c.txt"}`))
	tags, _ = f.Repo().CheckinTags(f.Ctx, named)
	if got, _ := fossilio.LatestTag(tags, messages.AuditedTag, person); got.Hash != *a.Result {
		t.Errorf("alice's verdict on the check-in naming her: %+v", got)
	}
}

// TestToolCreateChecksBeforeWriting: create's refusals, each before any
// write; its dry run writes nothing and shows the record it would post.
func TestToolCreateChecksBeforeWriting(t *testing.T) {
	f := newFix(t)
	before := f.count()
	base := `"objective": "Keep docs in step.", "budget": {"wall": "2h"}, "model": "m-1"`
	for _, c := range []struct {
		caller node.Caller
		in     string
		want   []string
	}{
		{toolCaller(person, personPW), `{` + base + `}`, []string{"without admin (a) or setup (s)"}},
		{f.admin(), `{` + base + `, "user": "alice"}`, []string{`user: "alice" is already a user of demo`}},
		// D84: no runner offers remote control here; the refusal says why.
		{f.admin(), `{` + base + `, "remote": true}`, []string{`remote: runner "claude" offers no remote control on this node`, "claude.ai login", "inside the agent's sandbox", "an API key"}},
		{f.admin(), `{` + base + `, "runner": "native", "remote": true}`, []string{`remote: runner "native" offers no remote control on this node`, "has no remote control"}},
		{f.admin(), `{` + base + `, "restrict": {"no_password": true, "sudo": true}}`, []string{"restrict.sudo"}},
		{f.admin(), `{` + base + `, "restrict": {"branch": "docs"}}`, []string{"restrict.branch", "no_password"}},
		{f.admin(), `{` + base + `, "restrict": {"own_thread": true}}`, []string{"restrict.own_thread", "no_password"}},
		{f.admin(), `{"objective": "o", "budget": {"wall": "2h", "cpu": 60}}`, []string{"budget.cpu"}},
		{f.admin(), `{` + base + `, "sandbox": {"network": true, "read_only": ["` + f.Agents + `"], "read_write": []}}`, []string{"sandbox: ", f.Agents}},
		{f.admin(), `{` + base + `, "sandbox": {"network": true, "read_only": [], "read_write": [], "homes": []}}`, []string{"sandbox.homes"}},
		// E9: runners the protocol knows that this node's release does not
		// hold (it holds native alone), refused naming them and the offered.
		{f.admin(), `{` + base + `, "runner": "codex"}`, []string{`runner: "codex" is not offered by this node`, "it offers: native"}},
		{f.admin(), `{` + base + `}`, []string{`runner: "claude" is not offered`}},
		{f.admin(), `{` + base + `, "runner": "gpt"}`, []string{"runner"}},
	} {
		f.Refused(f.call(c.caller, "create", c.in), c.want...)
	}
	a := f.call(f.admin(), "create", `{`+base+`, "user": "docs-1", "runner": "native", "checkins": ["docs"], "dry_run": true}`)
	f.noWrite(before, a)
	log := strings.Join(a.Log, "\n")
	rec, err := runmsg.ReadTaskRecord([]byte(log[strings.Index(log, "```json"):]))
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if rec.User != "docs-1" || rec.Node != f.N.Config.User || strings.Join(rec.Hears, ",") != f.Srv.AdminLogin || rec.Remote || rec.Checkins[0] != "docs" || rec.Sandbox.Network {
		t.Errorf("the record it would write: %+v", rec)
	}
	if nodetest.Exists(filepath.Join(f.Agents, "docs-1")) {
		t.Errorf("a dry run made the login")
	}
}

// TestToolCreateModel: the record names its model, written out (D52):
// with no model.json one the record names, none refused; with one, a
// model it lists for the API the runner speaks, its first when the
// record names none, another refused naming it and what the node offers.
func TestToolCreateModel(t *testing.T) {
	f := newFix(t)
	before := f.count()
	in := func(model string) string {
		m := ""
		if model != "" {
			m = `, "model": "` + model + `"`
		}
		return `{"objective": "o", "budget": {"wall": "2h"}, "user": "docs-2", "runner": "native", "dry_run": true` + m + `}`
	}
	modelOf := func(a *node.Answer) string {
		t.Helper()
		log := strings.Join(a.Log, "\n")
		i := strings.Index(log, "```json")
		if i < 0 {
			t.Fatalf("no record in the dry run's log:\n%s", log)
		}
		rec, err := runmsg.ReadTaskRecord([]byte(log[i:]))
		if err != nil {
			t.Fatalf("%v\n%s", err, log)
		}
		if !strings.Contains(log, "model "+rec.Model+",") {
			t.Errorf("the dry run does not say the session's model %q:\n%s", rec.Model, log)
		}
		return rec.Model
	}
	f.Refused(f.call(f.admin(), "create", in("")), "model: the record names none, and this node has no model.json naming one for runner native")
	if got := modelOf(f.call(f.admin(), "create", in("llama-own-login"))); got != "llama-own-login" {
		t.Errorf("no model.json, the record's model: %q", got)
	}
	if err := os.WriteFile(filepath.Join(f.Agents, "model.json"), []byte(`{"api": "openai", "base_url": "http://127.0.0.1:1", "models": ["llama3.2", "qwen3"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := modelOf(f.call(f.admin(), "create", in(""))); got != "llama3.2" {
		t.Errorf("none named: %q, want model.json's first", got)
	}
	if got := modelOf(f.call(f.admin(), "create", in("qwen3"))); got != "qwen3" {
		t.Errorf("one offered: %q", got)
	}
	f.Refused(f.call(f.admin(), "create", in("default")), `model: "default" is not a model this node offers for runner native (the openai API): it offers "llama3.2", "qwen3"`)
	f.noWrite(before, f.call(f.admin(), "create", in("")))
}

// TestToolCreateNetwork: the record's sandbox, written out, has the
// network only where its runner reaches its own service (D79): never for
// native, with or without model.json. A record that says its sandbox
// keeps it.
func TestToolCreateNetwork(t *testing.T) {
	f := newFix(t)
	before := f.count()
	networkOf := func(runner, extra string) bool {
		t.Helper()
		a := f.call(f.admin(), "create", `{"objective": "o", "budget": {"wall": "2h"}, "user": "net-1", "model": "m-1", "runner": "`+runner+`", "dry_run": true`+extra+`}`)
		log := strings.Join(a.Log, "\n")
		i := strings.Index(log, "```json")
		if i < 0 {
			t.Fatalf("no record in the dry run's log:\n%s", log)
		}
		rec, err := runmsg.ReadTaskRecord([]byte(log[i:]))
		if err != nil {
			t.Fatalf("%v\n%s", err, log)
		}
		return rec.Sandbox.Network
	}
	// This release offers native alone (a dry run for claude is refused);
	// the choice for each runner is model.DefaultNetwork's
	// (TestDefaultNetwork), claude's and codex's on the real CLIs in
	// itest TestAgentRelayKeyed.
	if networkOf("native", "") {
		t.Errorf("native, no model.json: the record has the network")
	}
	if err := os.WriteFile(filepath.Join(f.Agents, "model.json"), []byte(`{"api": "openai", "base_url": "http://127.0.0.1:1", "models": ["m-1"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if networkOf("native", "") {
		t.Errorf("native, model.json: the record has the network")
	}
	if !networkOf("native", `, "sandbox": {"network": true, "read_only": [], "read_write": []}`) {
		t.Errorf("a record asking the network lost it")
	}
	f.noWrite(before, f.call(f.admin(), "create", `{"objective": "o", "budget": {"wall": "2h"}, "user": "net-1", "model": "m-1", "runner": "native", "dry_run": true}`))
}

// TestToolStopRefusals: stop needs admin or setup, a record that counts,
// on this node, whose agent runs; each refusal writes nothing.
func TestToolStopRefusals(t *testing.T) {
	f := newFix(t)
	rec, _ := f.agentRecord("agent-7", runmsg.Restrict{})
	forged := &runmsg.TaskRecord{User: "agent-8", Node: f.N.Config.User, Runner: "native", Objective: "o", Hears: []string{},
		Sandbox: runmsg.DefaultRecordSandbox(true), Budget: runmsg.Budget{Wall: "1h"}}
	block, _ := forged.Encode()
	fake := f.OK(f.Open(person, personPW).Thread(f.Ctx, node.PostInput{Title: "Not a record", Text: string(block)}))
	elsewhere := *forged
	elsewhere.Node = "another-node"
	block, _ = elsewhere.Encode()
	far := f.OK(f.N.Thread(f.Ctx, node.PostInput{Title: "Another node's record", Text: string(block)}))
	before := f.count()
	for _, c := range []struct {
		caller node.Caller
		in     string
		want   []string
	}{
		{f.admin(), `{"record": "` + rec + `"}`, []string{"record: the agent of " + rec + " is not running"}},
		{f.admin(), `{"record": "` + rec + `", "dry_run": true}`, []string{"is not running"}},
		{toolCaller(person, personPW), `{"record": "` + rec + `"}`, []string{"without admin (a) or setup (s)"}},
		{f.admin(), `{"record": "` + *fake.Result + `"}`, []string{"does not count", `"alice" holds neither admin nor setup`}},
		{f.admin(), `{"record": "` + *far.Result + `"}`, []string{`is run by node "another-node", not this node`}},
	} {
		f.Refused(f.call(c.caller, "stop", c.in), c.want...)
	}
	if f.count() != before {
		t.Errorf("a refused stop wrote")
	}
}

// TestStatusListsOfferedRunners: the node's status lists the runners its
// release holds, each with the version its --version says, "unknown" for
// one that does not answer it (E9).
func TestStatusListsOfferedRunners(t *testing.T) {
	f := newFix(t)
	mute := filepath.Join(f.Release, "ocx-runner-claude")
	if err := os.WriteFile(mute, []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Not executable: not offered.
	if err := os.WriteFile(filepath.Join(f.Release, "ocx-runner-codex"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := f.N.Status(f.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []messages.RunnerOffer{{Name: "claude", Version: messages.VersionUnknown}, {Name: "native", Version: "stand-in checkin none"}}
	if fmt.Sprint(st.Runners) != fmt.Sprint(want) {
		t.Errorf("runners %v, want %v", st.Runners, want)
	}
	if err := st.Validate(); err != nil {
		t.Errorf("the status does not validate: %v", err)
	}
}
