// Package workspaces holds a node's workspace, session and listener actions
// (add, terminate, gc; start, stop, restart; listen): what the ocx command
// line, the console and the tools call on a node's workspaces.
package workspaces

import "github.com/ocx-go/ocx/cmd/internal/node"

// Actions are the workspace, session and listener actions on one node.
// They hold the node they read and write through, and are not it: none of
// the node's methods is theirs.
type Actions struct{ node *node.Node }

// Of is the actions on n.
func Of(n *node.Node) Actions { return Actions{n} }
