// Package tools holds the protocol v1 tools (create, post, audit, push,
// stop) and the run tool, as every front end of a node calls them.
package tools

import (
	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/workspaces"
)

// actions are the tools on one node, as one caller on one project. They
// hold the node and its workspace actions, which a tool calls, and are
// neither: no method of theirs is the tools'.
type actions struct {
	node *node.Node
	ws   workspaces.Actions
	// project is the project a tool call acts on ("" for the node's one
	// project), set by CallIn on its copy of the node.
	project string
}

// Of is the tools on n.
func Of(n *node.Node) actions { return actions{node: n, ws: workspaces.Of(n)} }
