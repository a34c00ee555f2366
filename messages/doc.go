// Package messages is what OCX writes and reads on the record and beside
// it: the notes and definitions on the record as fenced JSON blocks
// (protocol v1's response among them), the verdicts' tags, the status
// JSON, the host files (node.json, binding.json, the usage files, a
// session's hears and checkins), the limits and sizes runs and sessions
// share, the model meter's ledger and the name rules. It parses, validates
// and renders; it does no I/O.
//
// Every reader takes its JSON in two passes (fill.go): strictjson.Parse,
// then Fill, one reader for every type, driven by the struct's json tags and
// by why, max and ocx; Validate comes last, and every error names the field
// at fault. Below it are messages/strictjson (the strict reader and its
// errors) and messages/modelapi (the model APIs' usage and bounds). Above
// it, importing it and never imported by it: messages/runmsg (seed 004's
// run messages and protocol v1's record), messages/toolio (the tools'
// input), messages/pipe (the lines of the daemon's pipe and of a session's
// wake pipe), messages/wire (the socket's asks and replies) and
// messages/protocol (the actors' messages and effects).
package messages
