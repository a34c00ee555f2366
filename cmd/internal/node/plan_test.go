package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
	"pgregory.net/rapid"
)

// fakeEffects records, in order, the effects a plan runs, and fails the
// one named in fail. It is the effects of every plan here, without a host.
type fakeEffects struct {
	calls []string
	fail  string
	posts int
}

func (f *fakeEffects) do(call string) error {
	f.calls = append(f.calls, call)
	if call == f.fail || strings.HasPrefix(call, f.fail+" ") && f.fail != "" {
		return errors.New(call + " failed")
	}
	return nil
}

func (f *fakeEffects) hash() string {
	f.posts++
	return strings.Repeat(fmt.Sprint(f.posts), 64)
}

func (f *fakeEffects) post(_ context.Context, text string) (string, error) {
	first, _, _ := strings.Cut(text, "\n")
	return f.hash(), f.do("post " + first)
}

// runPlan runs a plan as a dry run and as a real run.
func runPlan(t *testing.T, p Plan) (dry, real *Answer) {
	t.Helper()
	dry = NewAnswer("test", true)
	if err := Execute(context.Background(), dry, p); err != nil {
		t.Fatalf("a dry run failed: %v", err)
	}
	real = NewAnswer("test", false)
	real.Stop(Execute(context.Background(), real, p))
	return dry, real
}

// TestExecute is the one executor: a dry run logs each step's text and the
// facts, and runs nothing; a real run runs the effects in order, stops at
// the first that fails, and runs the deferred steps it reached at the end.
func TestExecute(t *testing.T) {
	var ran []string
	step := func(name string, err error) func(context.Context, *Answer) error {
		return func(context.Context, *Answer) error {
			ran = append(ran, name)
			return err
		}
	}
	var p Plan
	p.Add("do one", step("one", nil))
	p.Say("a fact")
	p.Deferred(func(context.Context, *Answer) { ran = append(ran, "later") })
	p.Add("", step("silent", nil))
	p.Add("do two", step("two", errors.New("two failed")))
	p.Add("do three", step("three", nil))
	dry, real := runPlan(t, p)
	if want := []string{"would do one", "a fact", "would do two", "would do three"}; !slices.Equal(dry.Log, want) {
		t.Errorf("dry run logs %q, want %q", dry.Log, want)
	}
	if want := []string{"one", "silent", "two", "later"}; !slices.Equal(ran, want) {
		t.Errorf("real run ran %q, want %q", ran, want)
	}
	if real.OK() || *real.Stopped != "two failed" {
		t.Errorf("real run stopped %v, want two failed", real.Stopped)
	}
	if want := []string{"do one", "do two", "do three"}; !slices.Equal(p.Texts(), want) {
		t.Errorf("texts %q, want %q", p.Texts(), want)
	}
}

type fakeLogin struct{ *fakeEffects }

func (f fakeLogin) keepPassword() error { return f.do("keepPassword") }
func (f fakeLogin) provision(_ context.Context, login, project string) error {
	return f.do("provision " + login + " " + project)
}
func (f fakeLogin) withdraw(_ context.Context, login, project string) error {
	if project == "gone" {
		f.calls = append(f.calls, "withdraw "+project)
		return fossilio.ErrNoSuchUser
	}
	return f.do("withdraw " + login + " " + project)
}
func (f fakeLogin) rotate(context.Context, *Answer, string) (string, error) {
	return "pw", f.do("rotate")
}
func (f fakeLogin) remember(_ context.Context, k messages.WorkspaceKey, _, password string) string {
	f.calls = append(f.calls, "remember "+k.String()+" "+password)
	return "remembered"
}

// TestLoginPlans are the login plans: add provisions each project after
// the password's directory, saying a fresh password only when the node
// keeps none; withdraw passes over a project without the account; rotate
// gives the new password to each workspace's clone.
func TestLoginPlans(t *testing.T) {
	fx := fakeLogin{&fakeEffects{fail: "provision agent-1 b"}}
	p := loginAddPlan("agent-1", []string{"a", "b"}, "/agents/agent-1/password", false, fx)
	if want := []string{`provision "agent-1" on a with capabilities ` + fossilio.AgentCaps, `provision "agent-1" on b with capabilities ` + fossilio.AgentCaps,
		"keep a fresh password in /agents/agent-1/password (mode 0600)"}; !slices.Equal(p.Texts(), want) {
		t.Errorf("add texts %q", p.Texts())
	}
	if _, real := runPlan(t, p); real.OK() || !slices.Equal(fx.calls, []string{"keepPassword", "provision agent-1 a", "provision agent-1 b"}) {
		t.Errorf("add ran %q, stopped %v", fx.calls, real.Stopped)
	}
	if texts := loginAddPlan("agent-1", []string{"a"}, "/pw", true, fx).Texts(); len(texts) != 1 {
		t.Errorf("an add again keeps the password: %q", texts)
	}

	fx = fakeLogin{&fakeEffects{}}
	_, real := runPlan(t, loginWithdrawPlan("agent-1", []string{"gone", "a"}, fx))
	if want := []string{`"agent-1" has no account on gone`, `took every capability from "agent-1" on a`}; !slices.Equal(real.Log, want) {
		t.Errorf("withdraw logs %q", real.Log)
	}

	fx = fakeLogin{&fakeEffects{}}
	k := testKey()
	p = loginRotatePlan("agent-1", 2, "/pw", []messages.WorkspaceKey{k}, fx)
	dry, real := runPlan(t, p)
	if len(dry.Log) != 2 || dry.Log[0] != `would give "agent-1" a fresh password on 2 repositories and keep it in /pw` {
		t.Errorf("rotate dry run %q", dry.Log)
	}
	if !slices.Equal(fx.calls, []string{"rotate", "remember agent-1/demo pw"}) || real.Log[len(real.Log)-1] != "remembered" {
		t.Errorf("rotate ran %q, logged %q", fx.calls, real.Log)
	}
}

// TestExecuteProperties drives the executor through random plans: a dry
// run states each fact and says each named step, in order, and runs no
// effect; a real run runs the effects in order up to the first that
// fails, then the deferred ones it reached, last first.
func TestExecuteProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		kinds := rapid.SliceOf(rapid.SampledFrom([]string{"step", "silent", "fail", "say", "defer"})).Draw(t, "steps")
		var plan Plan
		var ran []string
		var wantDry, wantRan, later []string
		failed := false
		for i, k := range kinds {
			name := fmt.Sprintf("%s%d", k, i)
			effect := func(err error) func(context.Context, *Answer) error {
				return func(context.Context, *Answer) error {
					ran = append(ran, name)
					return err
				}
			}
			switch k {
			case "say":
				plan.Say("%s", name)
				wantDry = append(wantDry, name)
			case "defer":
				plan.Deferred(func(context.Context, *Answer) { ran = append(ran, name) })
				if !failed {
					later = append([]string{name}, later...)
				}
			case "silent":
				plan.Add("", effect(nil))
			default:
				var err error
				if k == "fail" {
					err = errors.New(name)
				}
				plan.Add(name, effect(err))
				wantDry = append(wantDry, "would "+name)
			}
			if !failed && k != "say" && k != "defer" {
				wantRan = append(wantRan, name)
				failed = k == "fail"
			}
		}
		dry := NewAnswer("test", true)
		if err := Execute(context.Background(), dry, plan); err != nil || len(ran) != 0 {
			t.Fatalf("a dry run ran %q, err %v", ran, err)
		}
		if !slices.Equal(dry.Log, wantDry) && !(len(dry.Log) == 0 && len(wantDry) == 0) {
			t.Fatalf("a dry run logs %q, want %q", dry.Log, wantDry)
		}
		real := NewAnswer("test", false)
		err := Execute(context.Background(), real, plan)
		if want := append(wantRan, later...); !slices.Equal(ran, want) && !(len(ran) == 0 && len(want) == 0) {
			t.Fatalf("a real run ran %q, want %q", ran, want)
		}
		if (err != nil) != failed {
			t.Fatalf("a real run returned %v; a step failed: %v", err, failed)
		}
	})
}

func testKey() messages.WorkspaceKey { return messages.WorkspaceKey{Login: "agent-1", Project: "demo"} }

type fakeHook struct{ *fakeEffects }

func (f fakeHook) install(_ context.Context, p Project, command string, mark bool) error {
	return f.do(fmt.Sprintf("install %s %s mark %v", p.Name, command, mark))
}

// TestHookInstallPlan is a hook install: the hook on each repository the
// node serves, the mark set only on a fresh install, a project served
// from another host said in both runs.
func TestHookInstallPlan(t *testing.T) {
	f := hookFacts{Command: "'ocx-hook' --repo %R", Installed: map[string]bool{"b": true}, Projects: []Project{
		{Name: "a", NodeProject: messages.NodeProject{Repository: "/srv/a.fossil"}},
		{Name: "far", NodeProject: messages.NodeProject{Repository: "/srv/far.fossil", OtherHost: true}},
		{Name: "b", NodeProject: messages.NodeProject{Repository: "/srv/b.fossil"}},
	}}
	fx := fakeHook{&fakeEffects{}}
	dry, real := runPlan(t, hookInstallPlan(f, fx))
	far := "far is served from another host: the hook's work follows each pull of its clone (D72), and the server's node installs the server's hook"
	if want := []string{"would install the after-receive hook on /srv/a.fossil: " + f.Command, far, "would install the after-receive hook on /srv/b.fossil: " + f.Command}; !slices.Equal(dry.Log, want) {
		t.Errorf("dry run %q", dry.Log)
	}
	if want := []string{"installed the after-receive hook on /srv/a.fossil: " + f.Command, far, "replaced the after-receive hook on /srv/b.fossil: " + f.Command}; !real.OK() || !slices.Equal(real.Log, want) {
		t.Errorf("real run logged %q, stopped %v", real.Log, real.Stopped)
	}
	if want := []string{"install a " + f.Command + " mark true", "install b " + f.Command + " mark false"}; !slices.Equal(fx.calls, want) {
		t.Errorf("ran %q", fx.calls)
	}
}

type fakeAdopt struct {
	*fakeEffects
	admin string // the project on whose server the login holds admin
}

func (f fakeAdopt) privileged(_ context.Context, p Project, login, password string) (bool, error) {
	return p.Name == f.admin, f.do("login " + p.Name + " " + login + " " + password)
}
func (f fakeAdopt) keepPassword(pwFile, password string) error {
	return f.do("keep " + pwFile + " " + password)
}

// TestAdoptPlan is an agent login's adoption on a node on another host:
// each server logged in to as the login, then its password kept; a
// server where it holds admin or setup refuses it, nothing kept.
func TestAdoptPlan(t *testing.T) {
	projects := []Project{{Name: "a", NodeProject: messages.NodeProject{URL: "https://s/a"}}, {Name: "b", NodeProject: messages.NodeProject{URL: "https://s/b"}}}
	fx := fakeAdopt{fakeEffects: &fakeEffects{}}
	dry, real := runPlan(t, adoptPlan("agent-1", "pw", "/pw", projects, fx))
	if want := []string{`would log in to https://s/a as "agent-1", and check that it holds neither admin nor setup there`,
		`would log in to https://s/b as "agent-1", and check that it holds neither admin nor setup there`,
		"would keep its password in /pw (mode 0600)"}; !slices.Equal(dry.Log, want) {
		t.Errorf("dry run %q", dry.Log)
	}
	if want := []string{"login a agent-1 pw", "login b agent-1 pw", "keep /pw pw"}; !real.OK() || !slices.Equal(fx.calls, want) {
		t.Errorf("real run ran %q, stopped %v", fx.calls, real.Stopped)
	}
	fx = fakeAdopt{fakeEffects: &fakeEffects{}, admin: "b"}
	if _, real := runPlan(t, adoptPlan("agent-1", "pw", "/pw", projects, fx)); real.OK() || *real.Stopped != `login "agent-1" holds admin or setup on b: an agent login never does (E2)` || len(fx.calls) != 2 {
		t.Errorf("an admin on b: ran %q, stopped %v", fx.calls, real.Stopped)
	}
}
