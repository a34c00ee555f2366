// Package setup makes a node and keeps what ties it to other hosts (D72):
// `ocx init` (the agents root, node.json and the node user on each
// repository; with --other-host, a node on another host and its clones),
// and `ocx node add`, `remove` and `password` (the nodes on other hosts
// node.json lists; a run user's password on a node on another host).
// Each is a plan run by node's executor; a running daemon is then told
// to read node.json again.
package setup
