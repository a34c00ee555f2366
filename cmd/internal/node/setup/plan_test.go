package setup

import (
	"context"
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

type fakeNodeAdd struct{ *fakeEffects }

func (f fakeNodeAdd) setUser(_ context.Context, p node.Project, user, password string) error {
	return f.Do("setUser " + p.Name + " " + user + " " + password)
}
func (f fakeNodeAdd) writeConfig(data []byte) error { return f.Do("writeConfig") }
func (f fakeNodeAdd) reread(*node.Answer) error     { return f.Do("reread") }

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
	fx := fakeNodeAdd{&fakeEffects{}}
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
