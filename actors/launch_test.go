package actors

import (
	"slices"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// TestRunnerRefusal: an llm launch on a runner its release does not hold
// is refused naming it; any other launch is not the runner's to refuse.
func TestRunnerRefusal(t *testing.T) {
	llm := protocol.LaunchSpec{Kind: messages.LLM, Runner: "codex"}
	if err := RunnerRefusal(llm, "/rel", []string{"claude", "codex"}); err != nil {
		t.Errorf("offered: %v", err)
	}
	err := RunnerRefusal(llm, "/rel", []string{"claude"})
	if err == nil || !strings.Contains(err.Error(), `runner "codex" is not offered`) || !strings.Contains(err.Error(), "/rel") {
		t.Errorf("not offered: %v", err)
	}
	if err := RunnerRefusal(protocol.LaunchSpec{Kind: messages.Mechanical}, "/rel", nil); err != nil {
		t.Errorf("a mechanical launch: %v", err)
	}
}

// TestSessionSpawn: the spawn of `workspace serve` is the contract's
// (contracts 1): its argv, exactly its environment, its directory, log and
// sandbox.
func TestSessionSpawn(t *testing.T) {
	layout, err := host.NewLayout("/srv/agents")
	if err != nil {
		t.Fatal(err)
	}
	key := messages.WorkspaceKey{Login: "ada", Project: "demo"}
	ws, err := layout.Workspace(key)
	if err != nil {
		t.Fatal(err)
	}
	l := protocol.LaunchSpec{Workspace: key, Hash: "abc123"}
	sb := messages.Sandbox{Path: []string{"/usr/bin", "/bin"}}
	s := SessionSpawn(l, ws, "/srv/agents", "/rel", "/rel/workspace", sb, "f1rst")
	if want := []string{"/rel/workspace", "serve", key.String(), "--root", "/srv/agents", "--launch", "abc123"}; s.Path != "/rel/workspace" || !slices.Equal(s.Args, want) {
		t.Errorf("argv %s %q, want %q", s.Path, s.Args, want)
	}
	want := []string{"HOME=" + ws.Dir, "PATH=/usr/bin:/bin", "USER=ada", "LOGNAME=ada", "LANG=C.UTF-8",
		host.MCPSocketEnv + "=" + host.MCPSocketInside, host.SyncSocketEnv + "=" + host.SyncSocketInside, protocol.RecordFirstEnv + "=f1rst"}
	if !slices.Equal(s.Env, want) {
		t.Errorf("env %q, want %q", s.Env, want)
	}
	if s.Dir != ws.Tree || s.Log != ws.Log || s.Sandbox == nil || s.Sandbox.Workspace != ws.Dir || s.Sandbox.Release != "/rel" || s.Sandbox.MCPDir != ws.MCPDir || s.Cgroup != "" {
		t.Errorf("spawn %+v", s)
	}
}
