// Package unixhost implements host's interfaces on Linux, for real: the
// process table read from /proc and followed through the proc connector,
// children spawned with pidfds, the flock, named pipes, writes beneath the
// agents root that follow no symbolic link, bwrap, and the clock.
package unixhost
