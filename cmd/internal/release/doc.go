// Package release is the node's release manager (docs/releases.md, D32,
// D34): it stages, accepts and rolls back the releases of a release root,
// checking each on this host before a link changes.
package release
