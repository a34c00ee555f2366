package procs

import (
	"fmt"
	"path/filepath"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
)

// Releases resolves a launch's release (current or previous) to its
// directory, and names a directory as an end note does.
type Releases struct {
	root string // node.json's release root; "" for a developer's build
	self string // the directory of the running executable, links followed
}

// NewReleases are the releases of root (node.json's release root, "" for a
// developer's build), self the running executable's directory.
func NewReleases(root, self string) *Releases { return &Releases{root: root, self: self} }

// Root is node.json's release root; "" for a developer's build.
func (rl *Releases) Root() string { return rl.root }

// Dir is the directory of release (current or previous), links followed.
func (rl *Releases) Dir(release string) (string, error) {
	if release == "" {
		release = messages.ReleaseCurrent
	}
	if rl.root == "" {
		if release != messages.ReleaseCurrent {
			return "", fmt.Errorf("release %q: this node has no release root (node.json), so only its own build runs", release)
		}
		return rl.self, nil
	}
	d, err := filepath.EvalSymlinks(filepath.Join(rl.root, release))
	if err != nil {
		return "", fmt.Errorf("release %q of %s: %w", release, rl.root, err)
	}
	return d, nil
}

// Name is what an end note calls the release in dir: its name under
// releases/, or the directory itself for a developer's build.
func (rl *Releases) Name(dir string) string {
	if dir == "" {
		return "unknown"
	}
	return host.ReleaseOf(filepath.Join(dir, "workspace"), rl.root)
}
