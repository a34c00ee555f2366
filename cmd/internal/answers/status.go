package answers

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"sync"

	"github.com/ocx-go/ocx/actors"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/noderepos"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/nodesock"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// status answers a status ask from the daemon's live record: the node's
// actions' own Status (node.Status), given the daemon's open repositories
// and the record indexes it keeps, so that only what arrived since the
// last receipt is read. node.json is read again for each ask and compared
// with what the daemon read: a node changed since is refused, and the
// caller reads the record itself.
type status struct {
	// mu keeps one status at a time: they share the process table.
	mu       sync.Mutex
	procs    *unixhost.ProcTable
	layout   host.Layout
	nodeJSON []byte
	repos    *noderepos.Repos
	log      *slog.Logger
}

func newStatus(layout host.Layout, cfg *messages.NodeConfig, repos *noderepos.Repos, log *slog.Logger) (*status, error) {
	data, err := unixhost.Below(layout.Root()).ReadFile(layout.NodeJSON(), unixhost.NodeFile)
	if err != nil {
		return nil, err
	}
	procs, err := unixhost.NewProcTable(unixhost.ProcOptions{Layout: layout, ReleaseRoot: cfg.Release, Daemon: os.Getpid()})
	if err != nil {
		return nil, err
	}
	if err := procs.Watch(); err != nil {
		log.Info("the socket's status scans the whole process table: the kernel's process events are not available", actors.ErrAttr(err))
	}
	return &status{layout: layout, nodeJSON: data, repos: repos, procs: procs, log: log}, nil
}

func (s *status) close() { s.procs.Close() }

func (s *status) answer(ctx context.Context) *messages.Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, n, refusal := s.node()
	if refusal != nil {
		return refusal
	}
	st, err := n.Status(ctx)
	if err != nil {
		return nodesock.Refusal("the status: %v", err)
	}
	r.State = st
	r.Receipts = map[string]messages.Receipt{}
	for _, p := range n.Config.ProjectNames() {
		if x, err := s.repos.Index(p); err == nil {
			r.Receipts[p] = messages.Receipt{Rcvid: uint64(max(x.Idx.Mark(), 0))}
		}
	}
	return r
}

// node opens the node an answer is read through, over the daemon's open
// repositories, record indexes and process table, and the reply it fills.
// A node of its own for each answer, so that what it passes over is told
// to this caller, whose log says it once, as its own read would. node.json
// changed since the daemon read it is a refusal: the caller then reads the
// record itself.
func (s *status) node() (*messages.Reply, *node.Node, *messages.Reply) {
	data, err := unixhost.Below(s.layout.Root()).ReadFile(s.layout.NodeJSON(), unixhost.NodeFile)
	if err != nil {
		return nil, nil, nodesock.Refusal("read node.json: %v", err)
	}
	if !bytes.Equal(data, s.nodeJSON) {
		return nil, nil, nodesock.Refusal("node.json changed since the daemon read it; restart the daemon to read it again")
	}
	r := messages.NewReply()
	passed := record.NewPassedSink(func(what, why string) { r.Passed = append(r.Passed, messages.PassedOver{What: what, Why: why}) })
	n, err := node.Open(s.layout.Root(), node.Options{Log: s.log, Records: liveRecords{s.repos}, Procs: s.procs, Passed: passed, Daemon: os.Getpid()})
	if err != nil {
		return nil, nil, nodesock.Refusal("open the node: %v", err)
	}
	return r, n, nil
}

// liveRecords are the daemon's repositories as the node's actions read
// them.
type liveRecords struct{ repos *noderepos.Repos }

func (l liveRecords) Repo(project string) (*fossilio.Repo, error) {
	x, err := l.repos.Index(project)
	if err != nil {
		return nil, err
	}
	return x.Repo.Lend(), nil
}

func (l liveRecords) Index(r *fossilio.Repo) *record.Index {
	x, err := l.repos.IndexAt(r.Path())
	if err != nil {
		return nil
	}
	return x.Idx
}
