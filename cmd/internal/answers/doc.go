// Package answers is the daemon's side of its socket, AGENTS/ocxd.sock
// (D66): it answers each ask (hook, status, runs, page, pull) on the
// daemon's own config, open repositories and process table. The hook's
// ask is the hook's work (cmd/internal/hook), whose posts are handed to
// the actor tree in the daemon's process, not written into its pipe
// (D88); status and runs are the CLI's own answers, given through a
// node.Node of the socket's; a page is the console's, rendered in the
// daemon; a pull is handed to the daemon's pull for a node on another
// host (D72). So ocxd links the CLI's node actions and the console
// through this package (issue 40 item 1 is to answer them from the tree).
package answers
