// Package wire is what crosses the daemon's socket and the console's
// receipt page: the asks and replies, one strict JSON line each, and the
// receipts a server's node answers a node on another host.
package wire
