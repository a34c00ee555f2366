// Package nodesock serves the daemon's socket, AGENTS/ocxd.sock (D66): to
// each connection of the node's own user, one ask read as a JSON line and
// one reply written as a JSON line.
package nodesock
