package setup

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// fakeEffects records, in order, the effects a plan runs, and fails the
// one named in fail.
type fakeEffects struct {
	calls []string
	fail  string
}

func (f *fakeEffects) do(call string) error {
	f.calls = append(f.calls, call)
	if call == f.fail {
		return errors.New(call + " failed")
	}
	return nil
}

// runPlan runs a plan as a dry run and as a real run.
func runPlan(t *testing.T, p node.Plan) (dry, real *node.Answer) {
	t.Helper()
	dry = node.NewAnswer("test", true)
	if err := node.Execute(context.Background(), dry, p); err != nil {
		t.Fatalf("a dry run failed: %v", err)
	}
	real = node.NewAnswer("test", false)
	real.Stop(node.Execute(context.Background(), real, p))
	return dry, real
}

type fakeInit struct{ *fakeEffects }

func (f fakeInit) makeRoot() error                                { return f.do("makeRoot") }
func (f fakeInit) useWAL(_ context.Context, name string) error    { return f.do("wal " + name) }
func (f fakeInit) provision(_ context.Context, name string) error { return f.do("provision " + name) }
func (f fakeInit) writeConfig([]byte) error                       { return f.do("writeConfig") }
func (f fakeInit) reread(*node.Answer) error                      { return f.do("reread") }

// TestInitPlan is init's plan: the agents root, each repository's WAL and
// node user, and node.json last; a repository that fails leaves node.json
// unwritten.
func TestInitPlan(t *testing.T) {
	cfg := &messages.NodeConfig{User: "ocx", Projects: map[string]messages.NodeProject{
		"demo": {Repository: "/srv/demo.fossil", URL: "http://127.0.0.1:8080/"},
		"alt":  {Repository: "/srv/alt.fossil", URL: "http://127.0.0.1:8081/"},
	}}
	f := initFacts{Agents: "/agents", NodeJSON: "/agents/node.json", Password: "/agents/ocx/password", Config: cfg, Data: []byte("{}")}
	fx := fakeInit{&fakeEffects{fail: "provision demo"}}
	p := initPlan(f, fx)
	want := []string{"make /agents and write /agents/node.json:\n{}",
		"switch /srv/alt.fossil to write-ahead logging", `provision the node user "ocx" on /srv/alt.fossil (capabilities ` + fossilio.AgentCaps + `, password in /agents/ocx/password)`,
		"switch /srv/demo.fossil to write-ahead logging", `provision the node user "ocx" on /srv/demo.fossil (capabilities ` + fossilio.AgentCaps + `, password in /agents/ocx/password)`}
	if !slices.Equal(p.Texts(), want) {
		t.Errorf("texts:\n%s", strings.Join(p.Texts(), "\n"))
	}
	_, real := runPlan(t, p)
	if want := []string{"makeRoot", "wal alt", "provision alt", "wal demo", "provision demo"}; !slices.Equal(fx.calls, want) || real.OK() {
		t.Errorf("ran %q, stopped %v", fx.calls, real.Stopped)
	}
}
