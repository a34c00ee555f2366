package node

import (
	"os"

	"github.com/ocx-go/ocx/messages"
)

// seedReadOnly is seed 000's read-only list, before it is adapted to this
// host (paths this host lacks are left out) and the release is added.
var seedReadOnly = []string{
	"/usr", "/lib", "/lib64", "/bin", "/sbin",
	"/etc/ssl", "/etc/pki", "/etc/ca-certificates", "/etc/resolv.conf", "/etc/hosts",
	"/etc/nsswitch.conf", "/etc/passwd", "/etc/group", "/opt",
}

// DefaultSandbox is the workspace template's sandbox: seed 000's read-only
// list adapted to this host, the release read-only and first on PATH, the
// workspace's own directory read-write, and no network: a session reaches
// its project's server through the node's sync socket (D49), an llm
// session its model through model.sock, so a sandbox needs the network
// only for what its agent's own tools reach beyond the node, which its
// definition then says.
func (n *Node) DefaultSandbox(wsDir string) messages.Sandbox {
	sb := messages.Sandbox{Network: false, ReadWrite: []string{wsDir}, Homes: []string{}}
	for _, p := range seedReadOnly {
		if _, err := os.Lstat(p); err == nil {
			sb.ReadOnly = append(sb.ReadOnly, p)
		}
	}
	sb.ReadOnly = append(sb.ReadOnly, n.Release)
	sb.Path = []string{n.Release}
	// What node.json adds to every sandbox the node proposes (D48): the
	// agent CLIs' install, say, and its bin on PATH.
	if add := n.Config.Sandbox; add != nil {
		sb.ReadOnly = append(sb.ReadOnly, add.ReadOnly...)
		sb.Path = append(sb.Path, add.Path...)
	}
	sb.Path = append(sb.Path, "/usr/local/bin", "/usr/bin", "/bin")
	return sb
}
