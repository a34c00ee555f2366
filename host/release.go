package host

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/ocx-go/ocx/messages"
)

// ReleaseRoot computes the paths of a release root (docs/releases.md) from
// its absolute path, as Layout does for the agents root; it touches no
// file. Every link it names is relative, so the root can be moved whole:
//
//	ROOT/releases/CHECKIN/   every program of one check-in (ReleasePrograms)
//	ROOT/current             -> releases/CHECKIN
//	ROOT/previous            -> releases/CHECKIN
//	ROOT/staged/CHECKIN      -> ../releases/CHECKIN
//	ROOT/staged/next         -> CHECKIN (the check-in staged last)
//	ROOT/undo/CHECKIN        -> ../releases/OTHER (previous before CHECKIN was accepted)
type ReleaseRoot struct {
	root string
}

// NewReleaseRoot returns the release root at root, which must be absolute.
func NewReleaseRoot(root string) (ReleaseRoot, error) {
	if root == "" || !filepath.IsAbs(root) {
		return ReleaseRoot{}, fmt.Errorf("host: release root %q is not an absolute path", root)
	}
	return ReleaseRoot{root: filepath.Clean(root)}, nil
}

// The names of the root's links.
const (
	LinkCurrent  = messages.ReleaseCurrent
	linkPrevious = messages.ReleasePrevious
	LinkNext     = "next"
)

// Root is the release root, cleaned.
func (r ReleaseRoot) Root() string { return r.root }

// Releases is ROOT/releases, which holds one directory per check-in.
func (r ReleaseRoot) Releases() string { return filepath.Join(r.root, "releases") }

// Release is ROOT/releases/ID.
func (r ReleaseRoot) Release(id string) string { return filepath.Join(r.root, "releases", id) }

// Current is ROOT/current, the release the node runs.
func (r ReleaseRoot) Current() string { return filepath.Join(r.root, LinkCurrent) }

// Previous is ROOT/previous, the release current was before.
func (r ReleaseRoot) Previous() string { return filepath.Join(r.root, linkPrevious) }

// StagedDir is ROOT/staged.
func (r ReleaseRoot) StagedDir() string { return filepath.Join(r.root, "staged") }

// Staged is ROOT/staged/ID, the link that says ID is staged.
func (r ReleaseRoot) Staged(id string) string { return filepath.Join(r.root, "staged", id) }

// Next is ROOT/staged/next, which names the check-in staged last.
func (r ReleaseRoot) Next() string { return filepath.Join(r.root, "staged", LinkNext) }

// UndoDir is ROOT/undo.
func (r ReleaseRoot) UndoDir() string { return filepath.Join(r.root, "undo") }

// Undo is ROOT/undo/ID: what previous named before release ID was
// accepted, which a rollback of ID, should its daemon not run, puts back
// (D73). It links as staged/ID does (StagedTarget); absent when previous
// named nothing, or nothing was accepted over it.
func (r ReleaseRoot) Undo(id string) string { return filepath.Join(r.root, "undo", id) }

// RootTarget is what current and previous hold for release id.
func RootTarget(id string) string { return "releases/" + id }

// StagedTarget is what staged/ID holds.
func StagedTarget(id string) string { return "../releases/" + id }

// NextTarget is what staged/next holds: the staged link's own name.
func NextTarget(id string) string { return id }

// ReleaseOfTarget reads the release a link's target names: ID for
// releases/ID, ../releases/ID or a bare ID (staged/next's); false for
// anything else (an absolute path, a deeper one).
func ReleaseOfTarget(target string) (string, bool) {
	t := strings.TrimPrefix(strings.TrimPrefix(target, "../"), "releases/")
	if t == "" || strings.Contains(t, "/") || t == "." || t == ".." {
		return "", false
	}
	return t, true
}

// ReleasePrograms are the programs every release holds: a node runs ocx
// (the tools and the hook) and ocxd, a sandbox runs workspace.
var ReleasePrograms = []string{"ocx", "ocxd", "workspace"}

// HookProgram is the small after-receive hook (D66) a release holds
// beside its programs from issue 24 on: it hands the hook's work to the
// daemon's socket. A release without it runs `ocx hook` instead.
const HookProgram = "ocx-hook"

// ConsoleProgram is the small console CGI (D71) a release holds beside its
// programs: it asks the daemon for a page and falls back on `ocx
// console`. A release without it runs `ocx console` for every request.
const ConsoleProgram = "ocx-console"

// RunnerPrefix starts the name of an llm session's runner (D9), which a
// release holds beside its programs when it has one.
const RunnerPrefix = "ocx-runner-"

// IsReleaseProgram says whether a file of that name belongs in a release:
// one of ReleasePrograms, or a runner.
func IsReleaseProgram(name string) bool {
	for _, p := range ReleasePrograms {
		if name == p {
			return true
		}
	}
	if name == HookProgram || name == ConsoleProgram {
		return true
	}
	r, ok := strings.CutPrefix(name, RunnerPrefix)
	return ok && r != "" && !strings.ContainsAny(r, "/ ")
}

// ValidateCheckin checks the name of a release: a check-in's full hash.
func ValidateCheckin(id string) error {
	if err := messages.ValidateHash(id); err != nil {
		return fmt.Errorf("release %q: a release is named by its check-in's full hash: %w", id, err)
	}
	return nil
}

// ProbeTimeout bounds each program a release's host checks run, and the
// daemon's own probe of the ocxd it is about to exec: one bound for both, so
// that a release whose ocxd the daemon would give up on is refused by the
// checks, before any link changes, not after.
const ProbeTimeout = 10 * time.Second
