// Package node opens an agents root as a Node (its node.json, projects,
// repositories and release) and holds the actions on the node itself
// (logins, the hook, the console's install, the daemon's status, posts,
// the status) with the one plan executor and answer that workspaces,
// tools and node/setup (init, and the nodes on other hosts) build on.
package node
