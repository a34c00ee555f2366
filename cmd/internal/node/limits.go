package node

import (
	"github.com/ocx-go/ocx/host/nodestatus"
	"github.com/ocx-go/ocx/messages"
)

// SessionLimits is what the node holds each session to (D46, D82):
// nodestatus.SessionLimits.
func (n *Node) SessionLimits() *messages.SessionLimitsStatus {
	return nodestatus.SessionLimits(n.Layout, n.Config)
}
