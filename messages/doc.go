// Package messages is what OCX writes and reads on the record and beside
// it: the notes and definitions on the record as fenced JSON blocks, seed
// 004's run message with its layers and values, protocol v1's record and
// verdicts, the status JSON, the host files (node.json, binding.json, the
// usage files) and the name rules. It parses, validates and renders; it
// does no I/O.
//
// Every reader takes its JSON in two passes (fill.go): strictjson.Parse,
// then Fill, one reader for every type, driven by the struct's json tags and
// by why, max and ocx; Validate comes last, and every error names the field
// at fault. Below it are messages/strictjson (the strict reader and its
// errors) and messages/modelapi (the model APIs' usage and bounds); above it,
// importing it, messages/protocol (the actors' messages and effects),
// messages/wire (the socket's asks and replies), messages/pipe (the
// lines of the daemon's pipe and of a session's wake pipe) and
// messages/toolio (the tools' input).
package messages
