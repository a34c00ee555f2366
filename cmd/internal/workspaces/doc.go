// Package workspaces holds a node's workspace, session and listener actions
// (add, terminate, gc; start, stop, restart; listen): what the ocx command
// line, the console and the tools call on a node's workspaces.
package workspaces

import "github.com/ocx-go/ocx/cmd/internal/node"

// Actions are the workspace, session and listener actions on one node.
type Actions struct{ *node.Node }

// Of is the actions on n.
func Of(n *node.Node) Actions { return Actions{n} }
