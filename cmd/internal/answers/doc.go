// Package answers is the daemon's side of its socket, AGENTS/ocxd.sock
// (D66): it answers each ask (hook, status, runs, page, pull) on the
// daemon's own config, open repositories and process table. The hook's
// ask is the hook's work (cmd/internal/hook), whose posts are handed to
// the actor tree in the daemon's process, not written into its pipe
// (D88); the status is host/nodestatus's and the runs host/runs's, the
// readings the CLI makes too; a page read by GET is consolepage's,
// rendered from the status derived here; a pull is handed to the daemon's
// pull for a node on another host (D72). No CLI action is linked through
// it; the asks are still answered beside the actor tree, not by it
// (issue 40 item 1).
package answers
