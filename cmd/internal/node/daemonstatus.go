package node

import (
	"os"

	"github.com/ocx-go/ocx/host/daemonclient"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// ProcTable reads the process table of this agents root; the caller closes
// it.
func (n *Node) ProcTable() (*unixhost.ProcTable, error) { return n.procTable() }

// DaemonStatus says whether the agents root's daemon runs (the holder of
// AGENTS/ocxd.lock), the release its program belongs to (/proc/PID/exe),
// and its last re-exec's outcome (AGENTS/ocxd.reexec): daemonclient.Status.
func (n *Node) DaemonStatus() (*messages.DaemonStatus, error) {
	// n.daemon: the daemon itself asks, and it holds the lock.
	return daemonclient.Status(n.Layout, n.Config, n.daemon, n.executableRelease)
}

// executableRelease is the release the program of process pid belongs
// to, read by the node's process table; "" when unknown.
func (n *Node) executableRelease(pid int) string {
	t := n.procs
	if t == nil {
		var err error
		if t, err = n.procTable(); err != nil {
			return ""
		}
		defer t.Close()
	}
	if _, rel, err := t.Executable(pid); err == nil {
		return rel
	}
	return ""
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
