package daemon

import (
	"context"
	"fmt"
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
	return &repoIndex{project: project, path: p.Repository, url: p.URL, otherHost: p.OtherHost, repo: r, idx: record.NewIndex(r, nodeUser)}, nil
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
