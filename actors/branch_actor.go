package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/ocx-go/ocx/messages"
)

// BranchProps makes the props of a branch listener beginning in state st.
func BranchProps(deps Deps, cfg Config, st messages.BranchState) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return newShell(messages.BranchAddr(st.Workspace, st.Branch), &deps, cfg, func() core { return NewBranchCore(cfg, st) })
	}, actor.WithSupervisor(stopStrategy(deps.Logger)))
}
