// Package host names every effect OCX has on the operating system: the process
// table, spawning, reaping, signals, the lock, the named pipes, the agents root
// and the sandbox. It holds the small interfaces the actors use, the value types
// they exchange, and the pure logic (layout, parsers, the bwrap command, the
// node-files rule); host/unixhost implements the interfaces (and is the one
// home of the module's OS calls), host/hosttest fakes them.
package host
