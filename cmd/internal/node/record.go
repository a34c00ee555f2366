package node

import (
	"context"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/messages"
)

// The node's actions read the record through the one model the daemon and
// the session read it through (fossilio/record): which notes count (D7),
// the workspaces' definitions and terminations, the listeners, the daemon's
// replies to a launch.

// Workspace is a workspace as its record says it: its latest definition
// that counts, and whether a terminated note ends it.
type Workspace struct {
	Key        messages.WorkspaceKey
	Definition *messages.WorkspaceDefinition
	Hash       string // the post holding the definition
	Record     string // the workspace's record: the thread's root
	Terminated string // the terminated note's post, "" when none
}

// Index is the record model of a repository the node has open.
func (n *Node) Index(r *fossilio.Repo) *record.Index {
	if n.records != nil {
		if x := n.records.Index(r); x != nil {
			return x
		}
	}
	return record.NewIndex(r, n.Config.User)
}

// RunRecords are Records that also keep each repository's run engine
// messages (the daemon's run log, read from what its index reads).
type RunRecords interface {
	Records
	// Runs are the run engine messages of the repository r, which Repo
	// gave, brought up to date; ok is false when none are kept of r.
	Runs(ctx context.Context, r *fossilio.Repo) (msgs []record.RunMsg, ok bool, err error)
}

// RunMsgs are the run engine messages of the repository r, in the
// server's order: the kept run log's when the node's Records keep one,
// else read from every receipt.
func (n *Node) RunMsgs(ctx context.Context, r *fossilio.Repo) ([]record.RunMsg, error) {
	if rr, ok := n.records.(RunRecords); ok {
		if msgs, ok, err := rr.Runs(ctx, r); ok || err != nil {
			return msgs, err
		}
	}
	return record.ReadRuns(ctx, r, r.Path())
}

// Defined returns each workspace defined on the record (record.Index's
// Workspaces).
func Defined(ctx context.Context, idx *record.Index) (map[messages.WorkspaceKey]*Workspace, error) {
	ws, err := idx.Workspaces(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[messages.WorkspaceKey]*Workspace, len(ws))
	for k, w := range ws {
		out[k] = &Workspace{Key: k, Definition: w.Definition, Hash: w.Entry.Hash, Record: w.Entry.Record, Terminated: w.Terminated}
	}
	return out, nil
}

// SortedKeys are the keys of defs that keep lets through (all when keep
// is nil), sorted.
func SortedKeys(defs map[messages.WorkspaceKey]*Workspace, keep func(messages.WorkspaceKey) bool) []messages.WorkspaceKey {
	var keys []messages.WorkspaceKey
	for k := range defs {
		if keep == nil || keep(k) {
			keys = append(keys, k)
		}
	}
	sortKeys(keys)
	return keys
}

// listeners returns the listeners the record states (record.ListenersOn).
func listeners(ctx context.Context, idx *record.Index) ([]messages.Listener, error) {
	return record.ListenersOn(ctx, idx)
}

// RepliesTo returns the node user's notes of kind T answering a launch
// note (its refusals, its end notes), in the server's order.
func RepliesTo[T messages.Note](ctx context.Context, idx *record.Index, launch string) ([]T, error) {
	rs, err := idx.Replies(ctx, launch)
	if err != nil {
		return nil, err
	}
	var out []T
	for _, e := range rs {
		if t, ok := e.Note.(T); ok {
			out = append(out, t)
		}
	}
	return out, nil
}
