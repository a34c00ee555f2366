package actors

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// The launch's shape (contracts 1): what the daemon decides about a
// session it spawns, before the host makes it run. The reaper's Spawn reads
// the host (the release's runners, the node's files, the record) and runs
// one spawn; these say what is refused and what the spawn is.

// RunnerRefusal refuses an llm launch whose runner the release directory
// dir does not offer (E9: a launch note written by hand, or for a release
// other than the one the tools checked), naming it; nil for any other
// launch. offered is what the release holds (unixhost.OfferedRunners).
func RunnerRefusal(l protocol.LaunchSpec, dir string, offered []string) error {
	if l.Kind != messages.LLM || slices.Contains(offered, l.Runner) {
		return nil
	}
	return fmt.Errorf("runner %q is not offered by this node: its release %s holds no executable %s%s", l.Runner, dir, host.RunnerPrefix, l.Runner)
}

// SessionSpawn is the spawn of launch l's `workspace serve KEY --root
// AGENTS --launch HASH` in workspace ws (contracts 1): prog is the release
// dir's workspace program, agents the agents root, sb the launch's
// sandbox, first the record's first post or change (D47). The environment
// is exactly the contract's. The cgroup is the caller's to add.
func SessionSpawn(l protocol.LaunchSpec, ws host.Workspace, agents, dir, prog string, sb messages.Sandbox, first string) host.SpawnSpec {
	key := ws.Key
	return host.SpawnSpec{
		Path: prog,
		Args: []string{prog, "serve", key.String(), "--root", agents, "--launch", l.Hash},
		Env: []string{"HOME=" + ws.Dir, "PATH=" + strings.Join(sb.Path, ":"), "USER=" + key.Login,
			"LOGNAME=" + key.Login, "LANG=C.UTF-8", host.MCPSocketEnv + "=" + host.MCPSocketInside,
			host.SyncSocketEnv + "=" + host.SyncSocketInside, protocol.RecordFirstEnv + "=" + first},
		Dir:     ws.Tree,
		Log:     ws.Log,
		Sandbox: &host.SandboxSpec{Sandbox: sb, Workspace: ws.Dir, Release: dir, MCPDir: ws.MCPDir},
	}
}
