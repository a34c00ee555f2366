package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/ocx-go/ocx/messages"
)

// WorkspaceProps makes the props of a workspace actor beginning in state st
// (only its key for a new one), spawned on its own. In the tree a node
// spawns its workspaces with one props for all of them (shell.spawn). Its
// children are its session actors and its branch listeners; one that fails
// is stopped, never restarted.
func WorkspaceProps(deps Deps, cfg Config, st messages.WorkspaceState) *actor.Props {
	t := newTree(deps, cfg)
	return t.props(func() actor.Actor { return &shell{tree: t, core: NewWorkspaceCore(cfg, st)} })
}
