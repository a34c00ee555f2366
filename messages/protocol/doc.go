// Package protocol is the daemon's actors' vocabulary: the messages they
// receive, the effects their cores return, the hand-off a re-exec carries,
// the launch specs, the spawned and run-care files, and the run engine's
// facts and positions, built on messages' notes and names.
package protocol
