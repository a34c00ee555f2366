// Package procs is the daemon's view of the processes it runs: the process
// table as the actors ask it, the cgroups holding the sessions' limits, and
// the release directories their programs come from.
package procs
