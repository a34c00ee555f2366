// Package unixhost implements host's interfaces on Linux, for real: the
// process table read from /proc and followed through the proc connector,
// children spawned with pidfds, the flock, named pipes, writes beneath the
// agents root that follow no symbolic link, bwrap, and the clock. It is also
// the one home of the module's OS calls (one flock helper, one pidfd signal,
// one atomic write, and the small calls the commands make); no other package
// imports syscall or x/sys (TestOSCallsOnlyInUnixhost).
package unixhost
