package setup

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/node/plantest"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// fakeEffects records, in order, the effects a plan runs, and fails the
// one named in Fail (plantest).
type fakeEffects struct{ plantest.Effects }

type fakeInit struct{ *fakeEffects }

func (f fakeInit) makeRoot() error                                { return f.Do("makeRoot") }
func (f fakeInit) useWAL(_ context.Context, name string) error    { return f.Do("wal " + name) }
func (f fakeInit) provision(_ context.Context, name string) error { return f.Do("provision " + name) }
func (f fakeInit) writeConfig([]byte) error                       { return f.Do("writeConfig") }
func (f fakeInit) reread(*node.Answer) error                      { return f.Do("reread") }

// TestInitPlan is init's plan: the agents root, each repository's WAL and
// node user, and node.json last; a repository that fails leaves node.json
// unwritten.
func TestInitPlan(t *testing.T) {
	cfg := &messages.NodeConfig{User: "ocx", Projects: map[string]messages.NodeProject{
		"demo": {Repository: "/srv/demo.fossil", URL: "http://127.0.0.1:8080/"},
		"alt":  {Repository: "/srv/alt.fossil", URL: "http://127.0.0.1:8081/"},
	}}
	f := initFacts{Agents: "/agents", NodeJSON: "/agents/node.json", Password: "/agents/ocx/password", Config: cfg, Data: []byte("{}")}
	fx := fakeInit{&fakeEffects{plantest.Effects{Fail: "provision demo"}}}
	p := initPlan(f, fx)
	want := []string{"make /agents and write /agents/node.json:\n{}",
		"switch /srv/alt.fossil to write-ahead logging", `provision the node user "ocx" on /srv/alt.fossil (capabilities ` + fossilio.AgentCaps + `, password in /agents/ocx/password)`,
		"switch /srv/demo.fossil to write-ahead logging", `provision the node user "ocx" on /srv/demo.fossil (capabilities ` + fossilio.AgentCaps + `, password in /agents/ocx/password)`}
	if !slices.Equal(p.Texts(), want) {
		t.Errorf("texts:\n%s", strings.Join(p.Texts(), "\n"))
	}
	_, real := plantest.Run(t, p)
	if want := []string{"makeRoot", "wal alt", "provision alt", "wal demo", "provision demo"}; !slices.Equal(fx.Calls, want) || real.OK() {
		t.Errorf("ran %q, stopped %v", fx.Calls, real.Stopped)
	}
}

type fakeNode struct{ *fakeEffects }

func (f fakeNode) setUser(_ context.Context, p node.Project, user, password string) error {
	return f.Do("setUser " + p.Name + " " + user + " " + password)
}
func (f fakeNode) withdraw(_ context.Context, p node.Project, user string) error {
	return f.Do("withdraw " + p.Name + " " + user)
}
func (f fakeNode) writeConfig(data []byte) error { return f.Do("writeConfig") }
func (f fakeNode) reread(*node.Answer) error     { return f.Do("reread") }

// TestNodeAddPlan is `node add`'s plan: the user made on each repository
// this node serves, then node.json listing it with the pokes' secret; a
// project served from another host said and kept; a user of a repository
// that is no remote node of it refused.
func TestNodeAddPlan(t *testing.T) {
	cfg := messages.NodeConfig{User: "ocx", Projects: map[string]messages.NodeProject{
		"demo": {Repository: "/srv/demo.fossil", URL: "http://127.0.0.1:8080/"},
		"far":  {Repository: "/srv/far.fossil", URL: "http://127.0.0.1:8081/", OtherHost: true},
	}}
	projects := []node.Project{{Name: "demo", NodeProject: cfg.Projects["demo"]}, {Name: "far", NodeProject: cfg.Projects["far"]}}
	in := NodeAddInput{User: "laptop", Password: "pw", Poke: "https://laptop.example/", DryRun: true}
	f := nodeAddFacts{In: in, Config: cfg, Projects: projects, Users: map[string]string{}, Secret: strings.Repeat("s", 32), Made: true, NodeJSON: "/agents/node.json"}
	fx := fakeNode{&fakeEffects{}}
	p, err := nodeAddPlan(f, fx)
	if err != nil {
		t.Fatal(err)
	}
	dry, real := plantest.Run(t, p)
	if len(dry.Log) != 3 || dry.Log[0] != `would make "laptop" a user of demo with capabilities `+fossilio.AgentCaps+" and the password given" ||
		dry.Log[1] != "far is served from another host: its server's node lists its remote nodes" ||
		!strings.HasPrefix(dry.Log[2], `would list "laptop" as a remote node in /agents/node.json:`) || !strings.Contains(dry.Log[2], `"poke": "https://laptop.example/"`) {
		t.Errorf("dry run:\n%s", strings.Join(dry.Log, "\n"))
	}
	if want := []string{"setUser demo laptop pw", "writeConfig", "reread"}; !slices.Equal(fx.Calls, want) || !real.OK() || !strings.Contains(real.Log[len(real.Log)-1], "made the secret") {
		t.Errorf("real run ran %q, logged %q, stopped %v", fx.Calls, real.Log, real.Stopped)
	}
	f.Users["demo"] = "v"
	if _, err := nodeAddPlan(f, fx); err == nil || !strings.Contains(err.Error(), `"laptop" is already a user of demo (capabilities "v") and not a remote node`) {
		t.Errorf("a user of the repository: %v", err)
	}
	np := cfg.Projects["demo"]
	np.RemoteNodes = []messages.RemoteNode{{User: "laptop"}}
	f.Projects[0].NodeProject = np
	if _, err := nodeAddPlan(f, fx); err != nil {
		t.Errorf("a remote node added again: %v", err)
	}
	if err := checkNodeAdd(NodeAddInput{User: "laptop", Password: "pw", PokeSecret: "x"}, "ocx"); err == nil || !strings.Contains(err.Error(), "given without --poke") {
		t.Errorf("a secret without a poke: %v", err)
	}
	if err := checkNodeAdd(NodeAddInput{User: "ocx", Password: "pw"}, "ocx"); err == nil || !strings.Contains(err.Error(), "this node's own") {
		t.Errorf("the node's own user: %v", err)
	}
}

type fakeOtherHost struct{ *fakeEffects }

func (f fakeOtherHost) makeRoot() error { return f.Do("makeRoot") }
func (f fakeOtherHost) clone(_ context.Context, _ *node.Answer, p node.Project) error {
	return f.Do("clone " + p.Name)
}
func (f fakeOtherHost) writeConfig([]byte) error { return f.Do("writeConfig") }

// TestOtherHostPlan is init on another host: the agents root and the
// password, each project's clone, node.json last; a clone that fails
// leaves node.json unwritten.
func TestOtherHostPlan(t *testing.T) {
	in := OtherHostInput{NodeUser: "laptop", Password: "pw", Projects: []InitProject{
		{Name: "demo", Repository: "/nowhere/demo.fossil", URL: "https://server.example/demo"},
		{Name: "alt", Repository: "/nowhere/alt.fossil", URL: "https://server.example/alt"},
	}}
	if err := checkOtherHost(in); err != nil {
		t.Fatal(err)
	}
	cfg, err := otherHostConfig(in)
	if err != nil {
		t.Fatal(err)
	}
	f := otherHostFacts{Agents: "/agents", NodeJSON: "/agents/node.json", Password: "/agents/laptop/password", Config: cfg}
	fx := fakeOtherHost{&fakeEffects{plantest.Effects{Fail: "clone demo"}}}
	p, err := otherHostPlan(f, fx)
	if err != nil {
		t.Fatal(err)
	}
	texts := p.Texts()
	if len(texts) != 3 || !strings.HasPrefix(texts[0], "make /agents, keep the node user's password in /agents/laptop/password (mode 0600), and write /agents/node.json:\n") ||
		texts[1] != "clone https://server.example/alt as laptop into /nowhere/alt.fossil, and have the server vouch for what it holds" {
		t.Errorf("texts:\n%s", strings.Join(texts, "\n"))
	}
	if _, real := plantest.Run(t, p); real.OK() || !slices.Equal(fx.Calls, []string{"makeRoot", "clone alt", "clone demo"}) {
		t.Errorf("ran %q, stopped %v", fx.Calls, real.Stopped)
	}
	in.Pull = &messages.NodePull{Listen: "127.0.0.1:9000"}
	if err := checkOtherHost(in); err == nil || !strings.Contains(err.Error(), "--poke-listen needs --poke-secret-file") {
		t.Errorf("a listener without a secret: %v", err)
	}
}

// TestNodeRemovePlan is `node remove`'s plan: the user withdrawn on each
// repository listing it as a remote node, then node.json without it;
// refused when none lists it.
func TestNodeRemovePlan(t *testing.T) {
	cfg := messages.NodeConfig{User: "ocx", Projects: map[string]messages.NodeProject{
		"demo": {Repository: "/srv/demo.fossil", URL: "http://127.0.0.1:8080/", RemoteNodes: []messages.RemoteNode{{User: "laptop"}, {User: "desk"}}},
		"alt":  {Repository: "/srv/alt.fossil", URL: "http://127.0.0.1:8081/"},
	}}
	projects := []node.Project{{Name: "alt", NodeProject: cfg.Projects["alt"]}, {Name: "demo", NodeProject: cfg.Projects["demo"]}}
	fx := fakeNode{&fakeEffects{}}
	p, err := nodeRemovePlan("laptop", cfg, projects, "/agents/node.json", fx)
	if err != nil {
		t.Fatal(err)
	}
	dry, real := plantest.Run(t, p)
	if want := []string{`would take every capability from "laptop" on demo`, `would unlist "laptop" in /agents/node.json`}; !slices.Equal(dry.Log, want) {
		t.Errorf("dry run %q", dry.Log)
	}
	if want := []string{"withdraw demo laptop", "writeConfig", "reread"}; !real.OK() || !slices.Equal(fx.Calls, want) {
		t.Errorf("real run ran %q, stopped %v", fx.Calls, real.Stopped)
	}
	if got := cfg.Projects["demo"].RemoteNodes; len(got) != 2 {
		t.Errorf("the plan changed its caller's config: %v", got)
	}
	if _, err := nodeRemovePlan("nobody", cfg, projects, "/agents/node.json", fx); err == nil || err.Error() != `node user: "nobody" is not a remote node of this node` {
		t.Errorf("not a remote node: %v", err)
	}
}

type fakePassword struct{ *fakeEffects }

func (f fakePassword) checkLogin(_ context.Context, p node.Project, user, password string) error {
	return f.Do("login " + p.Name + " " + user + " " + password)
}
func (f fakePassword) keep(path string, data []byte) error {
	return f.Do(fmt.Sprintf("keep %s %d", path, strings.Count(string(data), "\n")))
}

// TestPasswordPlan is `node password`'s plan: the password checked on
// each server, then the file written whole with the users it held; a
// wrong password on one server writes nothing.
func TestPasswordPlan(t *testing.T) {
	served := []node.Project{{Name: "demo", NodeProject: messages.NodeProject{URL: "https://s/demo"}}}
	held := map[string]string{"bob": "bob-pw-1"}
	fx := fakePassword{&fakeEffects{}}
	p, err := passwordPlan("carol", "carol-pw-1", "/agents/run-passwords", served, held, fx)
	if err != nil {
		t.Fatal(err)
	}
	dry, real := plantest.Run(t, p)
	if want := []string{`would log in to https://s/demo as "carol" with the password given`,
		`would keep "carol"'s password in /agents/run-passwords (mode 0600), with the 1 other users' it holds`}; !slices.Equal(dry.Log, want) {
		t.Errorf("dry run %q", dry.Log)
	}
	if want := []string{"login demo carol carol-pw-1", "keep /agents/run-passwords 2"}; !real.OK() || !slices.Equal(fx.Calls, want) ||
		real.Log[1] != `kept "carol"'s password in /agents/run-passwords: passwords for 2 users (bob, carol)` {
		t.Errorf("real run ran %q, logged %q, stopped %v", fx.Calls, real.Log, real.Stopped)
	}
	if len(held) != 1 {
		t.Errorf("the plan changed the passwords it was given: %v", held)
	}
	fx = fakePassword{&fakeEffects{plantest.Effects{Fail: "login"}}}
	p, _ = passwordPlan("carol", "carol-pw-1", "/agents/run-passwords", served, held, fx)
	if _, real := plantest.Run(t, p); real.OK() || !strings.HasSuffix(*real.Stopped, "; nothing written") || len(fx.Calls) != 1 {
		t.Errorf("a wrong password: ran %q, stopped %v", fx.Calls, real.Stopped)
	}
}
