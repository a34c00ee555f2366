package node

import (
	"fmt"
	"os"

	"github.com/ocx-go/ocx/cmd/internal/daemonclient"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// ProcTable reads the process table of this agents root; the caller closes
// it.
func (n *Node) ProcTable() (*unixhost.ProcTable, error) { return n.procTable() }

// DaemonStatus says whether the agents root's daemon runs (the holder of
// AGENTS/ocxd.lock), the release its program belongs to (/proc/PID/exe),
// and its last re-exec's outcome (AGENTS/ocxd.reexec).
func (n *Node) DaemonStatus() (*messages.DaemonStatus, error) {
	d := &messages.DaemonStatus{}
	pid := n.daemon // the daemon itself asks: it holds the lock
	if pid == 0 {
		var err error
		if pid, err = daemonclient.PID(n.Layout); err != nil {
			return nil, fmt.Errorf("daemon status: %w", err)
		}
	}
	if pid > 0 {
		d.Running, d.PID = true, pid
		t := n.procs
		if t == nil {
			var err error
			if t, err = n.procTable(); err != nil {
				t = nil
			} else {
				defer t.Close()
			}
		}
		if t != nil {
			if _, rel, err := t.Executable(pid); err == nil {
				d.Release = rel
			}
		}
	}
	if o, err := daemonclient.ReadReexec(n.Layout); err == nil {
		d.Reexec = o
	}
	d.ConfinedOnly = n.Config.ConfinedOnly
	return d, nil
}

// HostReadOnly is seed 000's read-only list adapted to this host: the
// paths it lacks left out. A release's sandbox check starts from it.
func HostReadOnly() []string {
	var out []string
	for _, p := range seedReadOnly {
		if _, err := os.Lstat(p); err == nil { // trust:outside the host's own system paths (seed 000), not below the agents root
			out = append(out, p)
		}
	}
	return out
}
