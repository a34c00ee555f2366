// Package session is the session process, `workspace serve|run|start`: it
// holds a workspace's wake pipe, answers each post it is woken for with one
// turn (a command, or a runner with its model), or runs a check-in's CI
// command and tags it, and writes as the agent login.
// docs/session.md describes what it reads, writes and exits with.
package session
