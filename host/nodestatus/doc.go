// Package nodestatus derives a node's status (seed 000's "Status (JSON)",
// docs/design/state.schema.json) from the facts it reads: the layout and
// node.json, the repositories and their record indexes, the process table,
// the agents root's files. `ocx status` reads it through the CLI's node,
// the daemon's socket through its own open repositories and table.
package nodestatus
