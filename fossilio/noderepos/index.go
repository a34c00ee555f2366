package noderepos

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/messages"
)

// Index is one repository of the node as the daemon reads it: the
// repository opened once, and the record's index (record.Index), kept up to
// date incrementally from the receipts the repository made since the last
// look. Its fields are set when it is opened and never change.
type Index struct {
	Project string
	Path    string
	URL     string
	// OtherHost: this node is not the server's node of the repository
	// (node.json's other_host).
	OtherHost bool
	Repo      *fossilio.Repo
	Idx       *record.Index

	mu   sync.Mutex
	code string // the project code, read once

	// runLog is the repository's run engine messages (seed 004).
	runLog record.RunLog
}

func newIndex(project string, p messages.NodeProject, nodeUser string, opts *fossilio.Options) (*Index, error) {
	r, err := fossilio.OpenNode(p.Repository, opts)
	if err != nil {
		return nil, fmt.Errorf("open the repository of %s: %w", project, err)
	}
	x := &Index{Project: project, Path: p.Repository, URL: p.URL, OtherHost: p.OtherHost, Repo: r}
	// The run engine's messages are read from what the index reads: each
	// artifact once (TestLaunchNoteReadOnce).
	x.Idx = record.NewIndex(r, nodeUser, x.runLog.Add)
	return x, nil
}

// ProjectCode reads the repository's project code once.
func (x *Index) ProjectCode(ctx context.Context) (string, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.code != "" {
		return x.code, nil
	}
	c, err := x.Repo.ProjectCode(ctx)
	if err != nil {
		return "", fmt.Errorf("read the project code of %s: %w", x.Path, err)
	}
	x.code = c
	return c, nil
}

func (x *Index) close() error { return x.Repo.Close() }

// Repos are the repositories of node.json as the daemon reads them:
// each opened once, the first time it is asked for, and indexed
// incrementally. The records, the reaper, the run engine and the hook
// watch share them.
type Repos struct {
	cfg *messages.NodeConfig
	log *slog.Logger

	mu    sync.Mutex
	repos map[string]*Index // by project
	// passed logs, once, each artifact a reader of the record passed over
	// because its bytes do not read (issue 22 item 5).
	passed *record.PassedLog
	// paths maps a repository path, as written and resolved, to its project.
	paths map[string]string
	// ContentRead, when set (a test's, before the first Index), is told of
	// each artifact read (fossilio.Options.ContentRead).
	ContentRead func(hash string)
	// ReadBegun, when set (a test's, before the first Index), is told of
	// each read transaction (fossilio.Options.ReadBegun).
	ReadBegun func(op string)
	// puller pulls the clones of the projects served from another host
	// (D72); nil on a node that serves none.
	puller Puller
	// ownHook is SetOwnHook's; nil before it.
	ownHook atomic.Pointer[OwnHook]
}

// Puller pulls a node on another host's clones (remote.Puller): Kick asks
// for a pull of a project beside the caller, Pull waits for one begun
// after the call.
type Puller interface {
	Kick(project, why string)
	Pull(ctx context.Context, project string) error
}

// SetPuller gives the repositories their puller, before they are used.
func (r *Repos) SetPuller(p Puller) { r.puller = p }

// Backoffice is what makes a write to x's record seen at once: on the
// server's node, the daemon's own hook work when it takes it (SetOwnHook,
// D96), else its repository's backoffice, which runs the hook (D11); on
// another host, a pull of its clone, which the hook's work follows (D72).
// fossil runs the backoffice.
func (r *Repos) Backoffice(x *Index, fossil *fossilio.Fossil) func(context.Context) error {
	if x.OtherHost && r.puller != nil {
		return func(context.Context) error {
			r.puller.Kick(x.Project, "a write of the node's")
			return nil
		}
	}
	backoffice := (&fossilio.Admin{Repository: x.Path, Fossil: fossil}).Backoffice
	return func(ctx context.Context) error {
		if own := r.ownHook.Load(); own != nil {
			if done, err := (*own)(ctx, x); done && err == nil {
				return nil
			}
		}
		return backoffice(ctx)
	}
}

// OwnHook does the hook's work for x in the daemon, after a write of the
// daemon's own, in place of the backoffice the write would run for it;
// done is false when it did not take the work (the backoffice runs then,
// as it does after an error).
type OwnHook func(ctx context.Context, x *Index) (done bool, err error)

// SetOwnHook gives the repositories the daemon's own hook work (D96),
// which the writes' backoffice (Backoffice) tries first from then on; it
// may be called beside writes.
func (r *Repos) SetOwnHook(f OwnHook) { r.ownHook.Store(&f) }

// PullNow brings x's clone up to date with the server before it returns,
// on a node on another host; on the server's node the repository is the
// record itself, and it returns at once.
func (r *Repos) PullNow(ctx context.Context, x *Index) error {
	if !x.OtherHost {
		return nil
	}
	if r.puller == nil {
		return fmt.Errorf("project %s is served from another host, and this node pulls nothing", x.Project)
	}
	return r.puller.Pull(ctx, x.Project)
}

// New readies the repositories of cfg; none is opened yet.
func New(cfg *messages.NodeConfig, log *slog.Logger) *Repos {
	r := &Repos{cfg: cfg, log: log, repos: map[string]*Index{}, paths: map[string]string{}}
	for name, p := range cfg.Projects {
		r.paths[filepath.Clean(p.Repository)] = name
		if res, err := filepath.EvalSymlinks(p.Repository); err == nil {
			r.paths[res] = name
		}
	}
	return r
}

// Config is the node.json the repositories are of.
func (r *Repos) Config() *messages.NodeConfig { return r.cfg }

// Index returns the index of a project's repository, opening it the first
// time.
func (r *Repos) Index(project string) (*Index, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if x, ok := r.repos[project]; ok {
		return x, nil
	}
	p, ok := r.cfg.Projects[project]
	if !ok {
		return nil, fmt.Errorf("project %q is not a repository of this node", project)
	}
	if r.passed == nil {
		r.passed = record.NewPassedLog(r.log)
	}
	opts := r.passed.Options()
	opts.ContentRead, opts.ReadBegun = r.ContentRead, r.ReadBegun
	x, err := newIndex(project, p, r.cfg.User, opts)
	if err != nil {
		return nil, err
	}
	r.repos[project] = x
	return x, nil
}

// ByPath finds the project of a repository path as a pipe line gives it.
func (r *Repos) ByPath(repo string) (string, bool) {
	if p, ok := r.paths[filepath.Clean(repo)]; ok {
		return p, true
	}
	if res, err := filepath.EvalSymlinks(repo); err == nil {
		if p, ok := r.paths[res]; ok {
			return p, true
		}
	}
	return "", false
}

// IndexAt is the index of the node repository at path.
func (r *Repos) IndexAt(path string) (*Index, error) {
	project, ok := r.ByPath(path)
	if !ok {
		return nil, fmt.Errorf("%s is not a repository of this node", path)
	}
	return r.Index(project)
}

// RecordAt is the live index of the node repository at path.
func (r *Repos) RecordAt(path string) (*record.Index, error) {
	x, err := r.IndexAt(path)
	if err != nil {
		return nil, err
	}
	return x.Idx, nil
}

// RepoAt is the open reader of the node repository at path.
func (r *Repos) RepoAt(path string) (*fossilio.Repo, error) {
	x, err := r.IndexAt(path)
	if err != nil {
		return nil, err
	}
	return x.Repo, nil
}

// Close closes every repository opened; a later Index opens it again.
func (r *Repos) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.repos {
		x.close()
	}
	r.repos = map[string]*Index{}
}

// Runs returns the repository's run engine messages, brought up to date.
// The index reads each artifact once and tells the run log of it (New),
// so the run engine's messages come from the index's own refresh.
func (x *Index) Runs(ctx context.Context) ([]record.RunMsg, error) {
	if err := x.Idx.Refresh(ctx); err != nil {
		return nil, err
	}
	return x.runLog.Msgs(), nil
}

// PrivilegedOnce answers "holds admin or setup" for users, each read once.
func (x *Index) PrivilegedOnce(ctx context.Context) record.PrivilegedFunc {
	return record.PrivilegedOnce(ctx, x.Repo)
}
