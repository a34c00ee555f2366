// Package messages is OCX's vocabulary, shared by every part: the actors'
// protocol (the daemon pipe's lines, the actors' messages and effects),
// the notes and definitions written on the record as fenced JSON blocks,
// seed 004's run message with its layers and values, the socket's asks
// and replies, the status JSON, the tools' input and output, the model
// APIs' usage decoders, the host files node.json and binding.json, and the
// name rules. It parses, validates and renders; it does no I/O.
//
// Every reader takes its JSON in two passes (Fill.go): strictjson.Parse, then
// Fill, one reader for every type, driven by the struct's json tags and by why,
// max and ocx; Validate comes last, and every error names the field at fault.
package messages
