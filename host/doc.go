// Package host names the effects OCX has on the operating system: the
// process table, spawning, watching and signalling processes, runs and
// their sandbox, the clock, and the agents root's layout (its lock, its
// named pipes, its socket, its files). It holds the small interfaces the
// daemon's parts use, the value types they exchange, and the pure logic
// (layout, parsers, the bwrap command, the node-files rule).
//
// host/unixhost implements the interfaces on Linux and holds the module's
// system calls; host/hosttest fakes some of them. The other subpackages
// are pieces of host I/O each with one use: nodesock (both sides of the
// daemon's socket), relay (a sandbox's loopback TCP to a node's unix
// socket), syncfwd (a session's sync socket), runhold (a run's watcher,
// `ocx run hold`), runs (what the run engine needs beside the actors) and
// usage (a session's use of the node, kept in its files).
package host
