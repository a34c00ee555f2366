package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/ocx-go/ocx/messages"
)

// BranchProps makes the props of a branch listener beginning in state st,
// spawned on its own. In the tree a workspace spawns its listeners with one
// props for all its children (shell.spawn).
func BranchProps(deps Deps, cfg Config, st messages.BranchState) *actor.Props {
	t := newTree(deps, cfg)
	return t.props(func() actor.Actor { return &shell{tree: t, core: NewBranchCore(cfg, st)} })
}
