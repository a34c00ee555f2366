package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/messages"
)

// repoIndex is one repository of the node as the daemon reads it: the
// repository opened once, and the record's index (record.Index), kept up to
// date incrementally from the receipts the repository made since the last
// look.
type repoIndex struct {
	project string
	path    string
	url     string
	// otherHost: this node is not the server's node of the repository
	// (node.json's other_host).
	otherHost bool
	repo      *fossilio.Repo
	idx       *record.Index

	mu   sync.Mutex
	code string // the project code, read once

	// runLog is the repository's run engine messages (seed 004).
	runLog record.RunLog
}

func newRepoIndex(project string, p messages.NodeProject, nodeUser string, opts *fossilio.Options) (*repoIndex, error) {
	r, err := fossilio.OpenNode(p.Repository, opts)
	if err != nil {
		return nil, fmt.Errorf("open the repository of %s: %w", project, err)
	}
	x := &repoIndex{project: project, path: p.Repository, url: p.URL, otherHost: p.OtherHost, repo: r}
	// The run engine's messages are read from what the index reads: each
	// artifact once (TestLaunchNoteReadOnce).
	x.idx = record.NewIndex(r, nodeUser, x.runLog.Add)
	return x, nil
}

// projectCode reads the repository's project code once.
func (x *repoIndex) projectCode(ctx context.Context) (string, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.code != "" {
		return x.code, nil
	}
	c, err := x.repo.ProjectCode(ctx)
	if err != nil {
		return "", fmt.Errorf("read the project code of %s: %w", x.path, err)
	}
	x.code = c
	return c, nil
}

func (x *repoIndex) close() error { return x.repo.Close() }

// nodeRepos are the repositories of node.json as the daemon reads them:
// each opened once, the first time it is asked for, and indexed
// incrementally. The records, the reaper and the hook watch share them.
type nodeRepos struct {
	cfg *messages.NodeConfig
	log *slog.Logger

	mu    sync.Mutex
	repos map[string]*repoIndex // by project
	// passed logs, once, each artifact a reader of the record passed over
	// because its bytes do not read (issue 22 item 5).
	passed *record.PassedLog
	// paths maps a repository path, as written and resolved, to its project.
	paths map[string]string
	// contentRead, when set (a test's), is told of each artifact read
	// (fossilio.Options.ContentRead).
	contentRead func(hash string)
}

func newNodeRepos(cfg *messages.NodeConfig, log *slog.Logger) *nodeRepos {
	r := &nodeRepos{cfg: cfg, log: log, repos: map[string]*repoIndex{}, paths: map[string]string{}}
	for name, p := range cfg.Projects {
		r.paths[filepath.Clean(p.Repository)] = name
		if res, err := filepath.EvalSymlinks(p.Repository); err == nil {
			r.paths[res] = name
		}
	}
	return r
}

// index returns the index of a project's repository, opening it the first
// time.
func (r *nodeRepos) index(project string) (*repoIndex, error) {
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
	opts.ContentRead = r.contentRead
	x, err := newRepoIndex(project, p, r.cfg.User, opts)
	if err != nil {
		return nil, err
	}
	r.repos[project] = x
	return x, nil
}

// byPath finds the project of a repository path as a pipe line gives it.
func (r *nodeRepos) byPath(repo string) (string, bool) {
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

// indexAt is the index of the node repository at path.
func (r *nodeRepos) indexAt(path string) (*repoIndex, error) {
	project, ok := r.byPath(path)
	if !ok {
		return nil, fmt.Errorf("%s is not a repository of this node", path)
	}
	return r.index(project)
}

// repoAt is the open reader of the node repository at path.
func (r *nodeRepos) repoAt(path string) (*fossilio.Repo, error) {
	x, err := r.indexAt(path)
	if err != nil {
		return nil, err
	}
	return x.repo, nil
}

func (r *nodeRepos) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.repos {
		x.close()
	}
	r.repos = map[string]*repoIndex{}
}
