// Package messages is OCX's vocabulary: the daemon pipe's lines, the notes and
// definitions written on the record as fenced JSON blocks, the status JSON, and the
// name rules every part shares. It only parses, validates and renders; it does no I/O.
//
// Every reader takes its JSON in two passes (fill.go): parseStrict, then fill,
// one reader for every type, driven by the struct's json tags and by why,
// max and ocx; Validate comes last, and every error names the field at fault.
package messages
