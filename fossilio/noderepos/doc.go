// Package noderepos holds the repositories of node.json as the daemon reads
// them: each opened once and its record indexed incrementally.
package noderepos
