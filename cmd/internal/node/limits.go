package node

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// SessionLimits is what the node holds each session to (D46): node.json's
// session_limits, the defaults filled in, and where the cgroups holding
// them are made on this host, or why none can be; and the size of each
// workspace's own file system, or why this host makes none (D82).
func (n *Node) SessionLimits() *messages.SessionLimitsStatus {
	mem, err := unixhost.MemTotal()
	if err != nil {
		mem = 0
	}
	lim, err := host.SessionLimits(n.Config.SessionLimits, mem)
	if err != nil {
		// node.json was validated as it was read: a size it took reads.
		return &messages.SessionLimitsStatus{NotApplied: err.Error()}
	}
	s := &messages.SessionLimitsStatus{Memory: lim.Memory, Processes: lim.Processes}
	// Each workspace's own file system (D82), or why this host makes none.
	if disk, err := host.NodeDisk(n.Config.SessionLimits); err == nil && disk > 0 {
		s.Disk, s.DiskNotApplied = disk, unixhost.DiskWhy()
	}
	cg := unixhost.HostCgroups()
	if why := cg.Why(); why != "" {
		s.NotApplied = why
		return s
	}
	h := cg.Hierarchies()
	var dirs []string
	for _, d := range h.Dirs() {
		dirs = append(dirs, filepath.Join(d, n.Layout.CgroupNode()))
	}
	s.Cgroups = fmt.Sprintf("v%d %s", h.Version, strings.Join(dirs, " "))
	return s
}
