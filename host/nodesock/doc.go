// Package nodesock is both sides of the daemon's socket, AGENTS/ocxd.sock
// (D66): one ask and one reply per connection, each a JSON line, served
// to the node's own user alone, and asked with every failure an error to
// fall back on.
package nodesock
