package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/ocx-go/ocx/messages"
)

// SessionProps makes the props of a session actor beginning in state st (a
// child just spawned, a process adopted at start, or a hand-off's session).
func SessionProps(deps Deps, cfg Config, st messages.SessionState) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return newShell(messages.SessionAddr(st.Workspace, st.Proc), &deps, cfg, func() core { return NewSessionCore(cfg, st) })
	}, actor.WithSupervisor(stopStrategy(deps.Logger)))
}
