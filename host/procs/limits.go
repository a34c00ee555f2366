package procs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// Limits is actors.Limits on the host's cgroups (D46): each session
// the daemon spawns is put in its workspace's cgroup
// (host.Layout.SessionCgroup) before its first instruction, holding the
// node's session limits. A cgroup is found by its name, so a daemon
// started again, or a re-exec's new image, follows the sessions it finds.
type Limits struct {
	layout host.Layout
	cg     *unixhost.Cgroups
	// limits are node.json's session_limits, the defaults filled in.
	limits host.CgroupLimits
}

// closeWait bounds how long a close waits for what a session left in its
// cgroup to be gone.
const closeWait = 5 * time.Second

// NewLimits is the node's session limits on the host's cgroups, or nil
// and why when none can be made.
func NewLimits(layout host.Layout, cfg *messages.NodeConfig) (*Limits, string, error) {
	cg := unixhost.HostCgroups()
	mem, err := unixhost.MemTotal()
	if err != nil {
		mem = 0 // no memory default: the host's size is unknown
	}
	lim, err := host.SessionLimits(cfg.SessionLimits, mem)
	if err != nil {
		return nil, "", err
	}
	if why := cg.Why(); why != "" {
		return nil, why, nil
	}
	return &Limits{layout: layout, cg: cg, limits: lim}, "", nil
}

// Spec is the cgroup a session of workspace w is spawned in.
func (c *Limits) Spec(w messages.WorkspaceKey) (string, host.CgroupLimits) {
	return c.layout.SessionCgroup(w), c.limits
}

// Watch returns once the session's cgroup has gone past a limit.
func (c *Limits) Watch(ctx context.Context, w messages.WorkspaceKey, p protocol.ProcID) (string, string, error) {
	g, err := c.cg.Open(c.layout.SessionCgroup(w))
	if err != nil {
		return "", "", fmt.Errorf("session %s has no cgroup (started before the node made them, or at a terminal): %w", p, err)
	}
	ev, err := g.Wait(ctx, func(e host.CgroupEvents) bool { return e.Limit() != "" })
	if err != nil {
		return "", "", err
	}
	return ev.Limit(), ev.Words(g.Limits()), nil
}

// Close reads the cgroup of a session that ended (its MCP server's
// counts with its own), ends what it left running in its sandbox (bwrap's
// init waits for it all), then its MCP server's cgroup below (the server
// ends on its own once the sandbox is gone, D80; what is left after
// closeWait is killed), and removes it. A session without one closes with
// nothing.
func (c *Limits) Close(ctx context.Context, w messages.WorkspaceKey, p protocol.ProcID) (string, string, error) {
	g, err := c.cg.Open(c.layout.SessionCgroup(w))
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", nil
	}
	if err != nil {
		return "", "", err
	}
	ev, rerr := g.Events()
	kerr := g.Kill(closeWait)
	berr := g.EndBelow(closeWait)
	return ev.Limit(), ev.Words(g.Limits()), errors.Join(rerr, kerr, berr, g.Remove(closeWait))
}

// JoinServer puts this process, the node's server for the session of
// workspace w (`ocx mcp serve`: its MCP server, model proxy and sync
// socket), in the cgroup below the session's (host.MCPCgroupName, D80),
// so that the session's limits hold what its sandbox makes the server
// hold, and its counts say it. It returns the cgroup's name; "" and no
// error where the node makes no cgroups; an error when the session has
// none (gone already, or started without one).
func JoinServer(layout host.Layout, w messages.WorkspaceKey) (string, error) {
	cg := unixhost.HostCgroups()
	if cg.Why() != "" {
		return "", nil
	}
	g, err := cg.Open(layout.SessionCgroup(w))
	if err != nil {
		return "", err
	}
	c, err := g.Child(host.MCPCgroupName)
	if err != nil {
		return "", err
	}
	return c.Name(), c.Join(os.Getpid())
}

// Sweep removes the node's cgroups that hold no process: left by sessions
// that ended while no daemon ran.
func (c *Limits) Sweep() ([]string, error) { return c.cg.Sweep(c.layout.CgroupNode()) }

// Words are the limits and the cgroups that hold them, for the log.
func (c *Limits) Words() (limits, cgroups string) {
	h := c.cg.Hierarchies()
	return c.limits.String(), fmt.Sprintf("v%d below %s", h.Version, strings.Join(h.Dirs(), ", "))
}
