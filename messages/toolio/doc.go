// Package toolio reads the input of protocol v1's tools (seed 001 E8:
// create, post, audit, push, stop): one strict JSON object each, a key the
// tool does not know refused, every error naming the field at fault.
package toolio
