package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/ocx-go/ocx/messages"
)

// SessionProps makes the props of a session actor beginning in state st (a
// child just spawned, a process adopted at start, or a hand-off's session),
// spawned on its own. In the tree a workspace spawns its sessions with one
// props for all its children (shell.spawn).
func SessionProps(deps Deps, cfg Config, st messages.SessionState) *actor.Props {
	t := newTree(deps, cfg)
	return t.props(func() actor.Actor { return &shell{tree: t, core: NewSessionCore(cfg, st)} })
}
