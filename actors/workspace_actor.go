package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/ocx-go/ocx/messages"
)

// WorkspaceProps makes the props of a workspace actor beginning in state st
// (only its key for a new one). Its children are its session actors and its
// branch listeners; one that fails is stopped, never restarted.
func WorkspaceProps(deps Deps, cfg Config, st messages.WorkspaceState) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return newShell(messages.WorkspaceAddr(st.Workspace), &deps, cfg, func() core { return NewWorkspaceCore(cfg, st) })
	}, actor.WithSupervisor(stopStrategy(deps.Logger)))
}
