package node_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/node/nodetest"
	"github.com/ocx-go/ocx/cmd/internal/node/setup"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

func TestInitWritesNodeJSONAndProvisionsTheNodeUser(t *testing.T) {
	f := newFix(t)
	data, err := os.ReadFile(filepath.Join(f.Agents, "node.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := messages.DecodeNodeConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != setup.DefaultNodeUser || cfg.Projects["demo"].Repository != f.Srv.Repo || cfg.Projects["demo"].URL != f.Srv.URL {
		t.Errorf("node.json: %s", data)
	}
	st, err := os.Stat(filepath.Join(f.Agents, "ocx", "password"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the node user's password file: %v %v", st, err)
	}
	caps, err := f.Repo().EffectiveCaps(f.Ctx, "ocx")
	if err != nil {
		t.Fatal(err)
	}
	if caps != sortedCaps(fossilio.AgentCaps) {
		t.Errorf("the node user's capabilities are %q, want %q", caps, fossilio.AgentCaps)
	}
	if mode, err := f.Srv.Fossil("sql", "-R", f.Srv.Repo, "PRAGMA journal_mode"); err != nil || strings.TrimSpace(mode) != "'wal'" {
		t.Errorf("after init the repository's journal mode is %q (%v); want write-ahead logging", mode, err)
	}
	// Again, the same: nothing changes and nothing is refused.
	f.OK(setup.Init(f.Ctx, f.Agents, setup.InitInput{Projects: []setup.InitProject{{Name: "demo", Repository: f.Srv.Repo, URL: f.Srv.URL}}}, node.Options{Release: f.Release}))
	// Another node user, or the project moved: refused, node.json unchanged.
	f.Refused(setup.Init(f.Ctx, f.Agents, setup.InitInput{NodeUser: "other"}, node.Options{Release: f.Release}), `node.json names "ocx"`)
	f.Refused(setup.Init(f.Ctx, f.Agents, setup.InitInput{Projects: []setup.InitProject{{Name: "demo", Repository: f.Srv.Repo, URL: "http://127.0.0.1:1/"}}}, node.Options{Release: f.Release}), "node.json has demo")
	after, _ := os.ReadFile(filepath.Join(f.Agents, "node.json"))
	if string(after) != string(data) {
		t.Errorf("node.json changed after refusals:\n%s", after)
	}
}

func TestInitRefusesBadInputAndWritesNothing(t *testing.T) {
	f := newFix(t)
	fresh := filepath.Join(t.TempDir(), "agents")
	for _, tc := range []struct {
		in   setup.InitInput
		want string
	}{
		{setup.InitInput{}, "give at least one --project"},
		{setup.InitInput{NodeUser: "../x", Projects: []setup.InitProject{{Name: "demo", Repository: f.Srv.Repo, URL: f.Srv.URL}}}, `node user: login: "../x"`},
		{setup.InitInput{NodeUser: "ocxd", Projects: []setup.InitProject{{Name: "demo", Repository: f.Srv.Repo, URL: f.Srv.URL}}}, "ocxd"},
		{setup.InitInput{Projects: []setup.InitProject{{Name: "other", Repository: f.Srv.Repo, URL: f.Srv.URL}}}, `holds project "demo", not "other"`},
		{setup.InitInput{Projects: []setup.InitProject{{Name: "demo", Repository: f.Srv.Repo, URL: "ftp://x/"}}}, "not an http"},
		{setup.InitInput{Projects: []setup.InitProject{{Name: "demo", Repository: f.Srv.Repo, URL: "http://u:p@127.0.0.1/"}}}, "holds credentials"},
		{setup.InitInput{Projects: []setup.InitProject{{Name: "nope", Repository: filepath.Join(t.TempDir(), "nope.fossil"), URL: f.Srv.URL}}}, "nope.fossil"},
	} {
		f.Refused(setup.Init(f.Ctx, fresh, tc.in, node.Options{Release: f.Release}), tc.want)
	}
	if nodetest.Exists(fresh) {
		t.Errorf("refused inits made %s", fresh)
	}
	if _, err := setup.ParseInitProject("demo=/x/demo.fossil"); err == nil || !strings.Contains(err.Error(), "NAME=REPOSITORY,URL") {
		t.Errorf("ParseInitProject without a URL: %v", err)
	}
}

func TestLoginAddWithdrawRotate(t *testing.T) {
	f := newFix(t)
	r := f.Repo()
	f.OK(f.N.LoginAdd(f.Ctx, agent, false))
	pwFile := filepath.Join(f.Agents, agent, "password")
	pw1, err := fossilio.ReadPasswordFile(pwFile)
	if err != nil {
		t.Fatal(err)
	}
	if caps, _ := r.EffectiveCaps(f.Ctx, agent); caps != sortedCaps(fossilio.AgentCaps) {
		t.Errorf("capabilities after add: %q", caps)
	}
	// The password works over sync: a post as the agent is accepted.
	c := &fossilio.Client{URL: f.Srv.URL, Login: agent, Password: pw1, ProjectCode: f.Srv.ProjectCode}
	if _, err := c.NewThread(f.Ctx, "hello", "from the agent"); err != nil {
		t.Fatalf("the agent's password does not work: %v", err)
	}

	f.OK(f.N.LoginWithdraw(f.Ctx, agent, false))
	if u, _ := r.User(f.Ctx, agent); u.Caps != "" {
		t.Errorf("capabilities after withdraw: %q", u.Caps)
	}
	if _, err := c.NewThread(f.Ctx, "hello", "again"); err == nil {
		t.Errorf("a withdrawn login could still post")
	}
	f.OK(f.N.LoginAdd(f.Ctx, agent, false))
	if u, _ := r.User(f.Ctx, agent); u.Caps != fossilio.AgentCaps {
		t.Errorf("capabilities after adding again: %q", u.Caps)
	}

	f.OK(f.N.LoginRotate(f.Ctx, agent, false))
	pw2, err := fossilio.ReadPasswordFile(pwFile)
	if err != nil || pw2 == pw1 {
		t.Fatalf("rotate kept the password (%v)", err)
	}
	if _, err := c.NewThread(f.Ctx, "hello", "with the old password"); err == nil {
		t.Errorf("the old password still works after a rotation")
	}
	c.Password = pw2
	if _, err := c.NewThread(f.Ctx, "hello", "with the new password"); err != nil {
		t.Errorf("the new password does not work: %v", err)
	}
}

func TestLoginRefusals(t *testing.T) {
	f := newFix(t)
	before := f.Posts()
	for _, tc := range []struct {
		login string
		want  []string
	}{
		{"../x", []string{`login: "../x" is not a login`}},
		{"ocxd.lock", []string{"ocxd"}},
		{"hook.log", []string{`"hook.log" names one of the agents root's own files`}},
		{"nobody", []string{"nobody"}},
		{"admin", []string{`"admin" is already a user of demo`, "not an agent login of this node"}},
		{person, []string{`"alice" is already a user of demo`}},
		{"ocx", []string{"is the node user"}},
	} {
		f.Refused(f.N.LoginAdd(f.Ctx, tc.login, false), tc.want...)
	}
	f.Refused(f.N.LoginWithdraw(f.Ctx, "never-added", false), "not an agent login of this node")
	f.Refused(f.N.LoginRotate(f.Ctx, "admin", false), "not an agent login of this node")
	if nodetest.Exists(filepath.Join(f.Agents, "..", "x")) || nodetest.Exists(filepath.Join(f.Agents, "hook.log", "password")) {
		t.Errorf("a refused login left files behind")
	}
	if u, _ := f.Repo().User(f.Ctx, "admin"); !strings.Contains(u.Caps, "s") {
		t.Errorf("refusing admin changed its capabilities to %q", u.Caps)
	}
	if f.Posts() != before {
		t.Errorf("refusals wrote on the record")
	}
	// A dry run says what it would do and does nothing.
	a := f.OK(f.N.LoginAdd(f.Ctx, "agent-dry", true))
	if !a.DryRun || !strings.Contains(strings.Join(a.Log, "\n"), "would provision") {
		t.Errorf("dry run log: %q", a.Log)
	}
	if _, err := f.Repo().User(f.Ctx, "agent-dry"); err == nil || nodetest.Exists(filepath.Join(f.Agents, "agent-dry")) {
		t.Errorf("a dry run provisioned the login")
	}
}

func TestAnswerShape(t *testing.T) {
	f := newFix(t)
	a := f.N.LoginAdd(f.Ctx, "../x", false)
	var b strings.Builder
	if err := a.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(b.String()), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"tool", "dry_run", "log", "result", "stopped"} {
		if _, ok := got[k]; !ok {
			t.Errorf("the answer lacks %q: %s", k, b.String())
		}
	}
	if got["tool"] != "login add" || got["result"] != nil || !strings.Contains(got["stopped"].(string), "login") {
		t.Errorf("answer: %s", b.String())
	}
}

func sortedCaps(s string) string {
	b := []byte(s)
	for i := range b {
		for j := i + 1; j < len(b); j++ {
			if b[j] < b[i] {
				b[i], b[j] = b[j], b[i]
			}
		}
	}
	return string(b)
}
