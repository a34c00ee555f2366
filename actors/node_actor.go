package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ocx-go/ocx/messages/protocol"
)

// nodeProps makes the props of the root actor. Its children are the workspace
// actors, started on demand. An actor of the tree that fails is stopped and
// logged, never restarted: a restart would begin from a stale state, and a
// restart loop is what the daemon must never fall into.
func nodeProps(deps Deps, cfg Config) *actor.Props {
	t := newTree(deps, cfg)
	return t.props(func() actor.Actor { return &shell{tree: t, core: newNodeCore(cfg)} }, actor.WithGuardian(t.strategy))
}

// stopStrategy stops a failed child and logs why.
func stopStrategy(log *slog.Logger) actor.SupervisorStrategy {
	return actor.NewOneForOneStrategy(0, 0, func(reason any) actor.Directive {
		log.Error("an actor failed; it is stopped, not restarted", slog.Any("reason", reason))
		return actor.StopDirective
	})
}

// minLevel passes on the records at or above its level only.
type minLevel struct {
	slog.Handler
	level slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.level}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.level}
}

// NewSystem makes an actor system whose own log lines (protoactor's) go to
// logger at Warn and above, so that its start-up and dead-letter chatter stays
// out of the daemon's log unless something is wrong.
func NewSystem(logger *slog.Logger, opts ...actor.ConfigOption) *actor.ActorSystem {
	all := append([]actor.ConfigOption{actor.WithLoggerFactory(func(sys *actor.ActorSystem) *slog.Logger {
		return slog.New(minLevel{logger.Handler(), slog.LevelWarn}).With(slog.String("component", "protoactor"), slog.String("system", sys.ID))
	})}, opts...)
	return actor.NewActorSystem(all...)
}

// nodeName is the root actor's name in its system.
const nodeName = "node"

// NodePID is the address the root actor has in sys once StartNode spawned
// it: known before, so that whoever sends to the node (the pipe's reader,
// the run engine) can be built with its address and handed to the node
// among its dependencies.
func NodePID(sys *actor.ActorSystem) *actor.PID { return actor.NewPID(sys.Address(), nodeName) }

// StartNode checks the dependencies and spawns the root actor, at NodePID.
// The wiring then sends it a Boot or a Restore before any line or exit.
func StartNode(sys *actor.ActorSystem, deps Deps, cfg Config) (*actor.PID, error) {
	if err := deps.Validate(); err != nil {
		return nil, err
	}
	pid, err := sys.Root.SpawnNamed(nodeProps(deps, cfg), nodeName)
	if err != nil {
		return nil, fmt.Errorf("actors: spawn the node: %w", err)
	}
	return pid, nil
}

// Snapshot asks the node for the daemon's state once every actor has settled.
func Snapshot(sys *actor.ActorSystem, node *actor.PID, timeout time.Duration) (protocol.Handoff, error) {
	res, err := sys.Root.RequestFuture(node, protocol.SnapshotRequest{}, timeout).Result()
	if err != nil {
		return protocol.Handoff{}, fmt.Errorf("actors: snapshot: %w", err)
	}
	h, ok := res.(protocol.Handoff)
	if !ok {
		return protocol.Handoff{}, fmt.Errorf("actors: snapshot: answered %T", res)
	}
	return h, nil
}

// errStopTimeout says the tree did not stop in time.
var errStopTimeout = errors.New("actors: the actor tree did not stop in time")

// StopNode poisons the root (after the messages already queued) and waits, up
// to protoactor's ten seconds, for it and its children to stop. It stops no
// process: sessions outlive the daemon.
func StopNode(sys *actor.ActorSystem, node *actor.PID) error {
	if err := sys.Root.PoisonFuture(node).Wait(); err != nil {
		return fmt.Errorf("%w: %w", errStopTimeout, err)
	}
	return nil
}
