// Package messages is OCX's vocabulary: the daemon pipe's lines, the notes and
// definitions written on the record as fenced JSON blocks, the status JSON, and the
// name rules every part shares. It only parses, validates and renders; it does no I/O.
package messages
