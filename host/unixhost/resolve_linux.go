package unixhost

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ocx-go/ocx/host"
)

// Resolve follows every link in the absolute path p. The part of p that does
// not exist yet is kept as written below its longest existing ancestor, once
// that is resolved: bwrap would fail on it, but the node-files rule can
// still say where it would lead. Any other error is returned, so that a path
// that cannot be followed is refused rather than guessed.
func Resolve(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("unixhost: resolve %q: not an absolute path", p)
	}
	p = filepath.Clean(p)
	rest := ""
	for cur := p; ; {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) || cur == "/" {
			return "", fmt.Errorf("unixhost: resolve %s: %w", p, err)
		}
		if _, lerr := os.Lstat(cur); lerr == nil {
			// cur exists, so it is a link (or leads through one) to nothing;
			// where it leads could be made later, so it is refused now.
			return "", fmt.Errorf("unixhost: resolve %s: %s is a link that leads nowhere: %w", p, cur, err)
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = filepath.Dir(cur)
	}
}

// Present says why nothing is at p once links are followed (what bwrap
// would bind from there), or nil: host.CheckRunReadOnly's stat.
func Present(p string) error {
	_, err := os.Stat(p)
	return err
}

// NodeFilesOf resolves the node's own files for host.NodeFiles: the
// repositories, the agents root, the release root, the release the session
// runs and its workspace.
func NodeFilesOf(repositories []string, agents, releaseRoot, release, workspace string) (host.NodeFiles, error) {
	return ResolveNodeFiles(host.NodeFiles{Repositories: repositories, Agents: agents, ReleaseRoot: releaseRoot,
		Release: release, Workspace: workspace})
}

// ResolveNodeFiles resolves every path of u, the node's own files as the
// node names them, for host.NodeFiles' checks (a run's: its repository, its
// run state directory, its release root and its file of passwords, with the
// run's release and workspace).
func ResolveNodeFiles(u host.NodeFiles) (host.NodeFiles, error) {
	n := u
	n.Repositories = nil
	var err error
	for _, r := range u.Repositories {
		rr, err := Resolve(r)
		if err != nil {
			return n, err
		}
		n.Repositories = append(n.Repositories, rr)
	}
	for _, f := range []struct {
		dst *string
		src string
	}{{&n.Agents, u.Agents}, {&n.ReleaseRoot, u.ReleaseRoot}, {&n.Release, u.Release}, {&n.Workspace, u.Workspace},
		{&n.State, u.State}, {&n.Passwords, u.Passwords}} {
		if f.src == "" {
			continue
		}
		if *f.dst, err = Resolve(f.src); err != nil {
			return n, err
		}
	}
	return n, nil
}
