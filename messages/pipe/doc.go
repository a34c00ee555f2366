// Package pipe reads and writes the lines of OCX's named pipes: the
// daemon's pipe AGENTS/ocxd (post, stop, reexec, runs check, run start,
// budget) and a session's wake pipe, each line at most PIPE_BUF bytes.
package pipe
