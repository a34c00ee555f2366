package node

import (
	"context"
	"sort"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/nodestatus"
	"github.com/ocx-go/ocx/host/procs"
	"github.com/ocx-go/ocx/messages"
)

// TurnFile is the file a session holds while a turn runs (contracts 6).
func TurnFile(ws host.Workspace) string { return nodestatus.TurnFile(ws) }

// Status derives the node's state (seed 000's "Status (JSON)",
// docs/design/state.schema.json) from the record (workspace definitions,
// terminated notes, launch notes, listen notes), the workspace directories
// and the process table: nodestatus's, over this node's facts.
func (n *Node) Status(ctx context.Context) (*messages.NodeState, error) {
	return n.statusNode().Status(ctx)
}

// statusNode is this node as nodestatus reads it.
func (n *Node) statusNode() nodestatus.Node {
	return nodestatus.Node{Layout: n.Layout, Config: n.Config, Log: n.Log, Passed: n.passed, Refusals: n.refusals, Facts: statusFacts{n}}
}

// statusFacts are the node's facts a status reads: its repositories and
// record indexes (the daemon's when it is the daemon's node), its process
// table (the caller's when it keeps one open), its daemon and release.
type statusFacts struct{ n *Node }

func (f statusFacts) Repo(project string) (*fossilio.Repo, error) {
	p, err := f.n.Project(project)
	if err != nil {
		return nil, err
	}
	return f.n.OpenProjectRepo(p)
}

func (f statusFacts) Index(r *fossilio.Repo) *record.Index { return f.n.Index(r) }

func (f statusFacts) Procs() (host.ProcTable, func(), error) {
	if f.n.procs != nil {
		return f.n.procs, func() {}, nil
	}
	t, err := f.n.procTable()
	if err != nil {
		return nil, nil, err
	}
	return t, func() { t.Close() }, nil
}

func (f statusFacts) Daemon() (*messages.DaemonStatus, error) { return f.n.DaemonStatus() }

func (f statusFacts) Runners(ctx context.Context) []messages.RunnerOffer {
	return procs.RunnerOffers(ctx, f.n.Release)
}

func sortKeys(keys []messages.WorkspaceKey) {
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Login != keys[j].Login {
			return keys[i].Login < keys[j].Login
		}
		return keys[i].Project < keys[j].Project
	})
}

// EnforcedRestrictions are the restrictions of E10 this node can run an
// agent under (nodestatus.EnforcedRestrictions).
var EnforcedRestrictions = nodestatus.EnforcedRestrictions

// FirstLine is s's first line, trimmed: what a one-line message or log
// entry keeps of a longer text.
func FirstLine(s string) string { return nodestatus.FirstLine(s) }
