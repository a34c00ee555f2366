package answers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ocx-go/ocx/messages/wire"

	"github.com/ocx-go/ocx/actors"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/noderepos"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/daemonclient"
	"github.com/ocx-go/ocx/host/nodesock"
	"github.com/ocx-go/ocx/host/nodestatus"
	"github.com/ocx-go/ocx/host/procs"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// status answers a status ask from the daemon's live record: the node's
// status as nodestatus derives it, over the daemon's open repositories and
// the record indexes it keeps, so that only what arrived since the last
// receipt is read. (A node.json changed since the daemon read it is
// refused, as for every ask: Socket.sameNode.)
//
// The process table is the daemon's own (D88): the one it checks launches
// and adopts sessions with, following the kernel's process events once.
//
// The status is kept between asks (D70): an ask answered while nothing it
// is derived from changed gets the kept reply. What it is derived from is
// counted by the kernel's events: the process table's (ProcTable.Changes),
// the directories it reads (DirWatch) and each repository's writes
// (fossilio.Changes). Where one of them cannot count, every ask derives.
type status struct {
	// mu keeps one status at a time: they share the kept one.
	mu     sync.Mutex
	procs  *unixhost.ProcTable
	layout host.Layout
	cfg    *messages.NodeConfig
	repos  *noderepos.Repos
	log    *slog.Logger
	// dirs and writes count the changes a kept status is checked
	// against; dirs is nil when the directories cannot be watched.
	dirs   *unixhost.DirWatch
	writes map[string]*fossilio.Changes
	kept   *keptStatus
}

// keptStatus is the last status derived, and the counts it is current to.
type keptStatus struct {
	counts statusCounts
	reply  *wire.Reply
	state  *messages.NodeState
}

// refused is a refusal with no status.
func refused(format string, args ...any) (*wire.Reply, *messages.NodeState) {
	return nodesock.Refusal(format, args...), nil
}

// statusCounts are the counts of changes a status was derived after.
type statusCounts struct {
	procs, dirs uint64
	writes      string // each project's count, in order
}

// newStatus answers status asks over procs, the daemon's process table,
// which the daemon closes.
func newStatus(layout host.Layout, cfg *messages.NodeConfig, repos *noderepos.Repos, procs *unixhost.ProcTable, log *slog.Logger) *status {
	s := &status{layout: layout, cfg: cfg, repos: repos, procs: procs, log: log, writes: map[string]*fossilio.Changes{}}
	var err error
	if s.dirs, err = unixhost.NewDirWatch(); err != nil {
		log.Info("the socket derives each status anew: the directories it reads cannot be watched", actors.ErrAttr(err))
	}
	for _, p := range cfg.ProjectNames() {
		x, err := repos.Index(p)
		if err != nil {
			continue // counted as no count: each status derives
		}
		c, err := x.Repo.Changes()
		if err != nil {
			log.Info("the socket derives each status anew: a repository's writes cannot be counted", slog.String("project", p), actors.ErrAttr(err))
			continue
		}
		s.writes[p] = c
	}
	return s
}

func (s *status) close() {
	if s.dirs != nil {
		s.dirs.Close()
	}
	for _, c := range s.writes {
		c.Close()
	}
}

func (s *status) answer(ctx context.Context) *wire.Reply {
	r, _ := s.current(ctx)
	return r
}

// current is the status's reply and the status itself: the kept ones
// while nothing they are derived from changed, else derived anew. A
// refusal has no status (nil). Neither may be changed: they are kept.
func (s *status) current(ctx context.Context) (*wire.Reply, *messages.NodeState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The counts are read before the status is derived: a change made
	// while it is derived moves them, and the next ask derives again.
	counts, counted := s.counts(ctx)
	if counted && s.kept != nil && s.kept.counts == counts {
		s.log.Debug("ocxd.sock: the kept status answers")
		return s.kept.reply, s.kept.state
	}
	s.kept = nil
	s.log.Debug("ocxd.sock: the status is derived", slog.Bool("counted", counted))
	r := wire.NewReply()
	n, release, err := s.statusNode(r)
	if err != nil {
		return refused("open the node: %v", err)
	}
	st, err := n.Status(ctx)
	if err != nil {
		return refused("the status: %v", err)
	}
	// The document follows the reply's line as `ocx status --json` prints
	// it: a caller that prints it copies it.
	doc, err := st.Encode()
	if err != nil {
		return refused("the status: %v", err)
	}
	r.Doc, r.StateDoc = len(doc), doc
	r.Receipts = map[string]wire.Receipt{}
	for _, p := range s.cfg.ProjectNames() {
		if x, err := s.repos.Index(p); err == nil {
			r.Receipts[p] = wire.Receipt{Rcvid: uint64(max(x.Idx.Mark(), 0))}
		}
	}
	line, err := json.Marshal(r)
	if err != nil {
		return refused("the reply does not encode: %v", err)
	}
	r.Line = append(append(line, '\n'), doc...)
	// A directory watched only now may have changed while it was read:
	// the status is kept from the next derivation on.
	if counted && !s.watchFor(release, st) {
		k := *r
		k.KeepMemory = true
		s.kept = &keptStatus{counts: counts, reply: &k, state: st}
	}
	return r, st
}

// counts reads the counts of changes; counted is false when one of them
// cannot be read.
func (s *status) counts(ctx context.Context) (c statusCounts, counted bool) {
	if s.dirs == nil {
		return c, false
	}
	var ok bool
	if c.procs, ok = s.procs.Changes(); !ok {
		return c, false
	}
	var b strings.Builder
	for _, p := range s.cfg.ProjectNames() {
		w := s.writes[p]
		if w == nil {
			return c, false
		}
		n, err := w.Count(ctx)
		if err != nil {
			return c, false
		}
		fmt.Fprintf(&b, "%s=%d;", p, n)
	}
	c.writes = b.String()
	// The directories last: an event of the process table's reads (none)
	// or of the repositories' (none) could not move it.
	c.dirs = s.dirs.Changes()
	return c, true
}

// watchFor watches the directories status st was read from, and those
// where a change would add to it: the agents root, each login's
// directories, each workspace's own, its session's, its held and MCP
// directories, and the release's (release, its directory); it says whether one was watched only
// now (or cannot be: it is not there, and its parent's watch sees it
// made).
func (s *status) watchFor(release string, st *messages.NodeState) (added bool) {
	root := s.layout.Root()
	add := func(dir string, rule unixhost.DirRule) {
		a, err := s.dirs.Add(dir, rule)
		added = added || a
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			// Watched no further: the status is not kept.
			added = true
		}
	}
	add(root, unixhost.DirRule{Ignore: rootNoise})
	keys := map[messages.WorkspaceKey]bool{}
	logins := map[string]bool{}
	entries, err := unixhost.Below(root).ReadDir(root)
	if err != nil {
		return true
	}
	for _, e := range entries {
		if e.IsDir() && messages.ValidateLogin(e.Name()) == nil {
			logins[e.Name()] = true
		}
	}
	for _, w := range st.Workspaces {
		keys[messages.WorkspaceKey{Login: w.Login, Project: w.Project}] = true
	}
	for _, x := range st.Sessions {
		keys[messages.WorkspaceKey{Login: x.Login, Project: x.Project}] = true
	}
	for _, l := range st.LookAlikes {
		keys[messages.WorkspaceKey{Login: l.Login, Project: l.Project}] = true
	}
	for k := range keys {
		logins[k.Login] = true
	}
	for l := range logins {
		dir := filepath.Join(root, l)
		add(dir, unixhost.DirRule{})
		add(filepath.Join(dir, "projects"), unixhost.DirRule{})
		add(filepath.Join(dir, "held"), unixhost.DirRule{})
		add(filepath.Join(dir, "mcp"), unixhost.DirRule{Ignore: logNoise})
	}
	for k := range keys {
		ws, err := s.layout.Workspace(k)
		if err != nil {
			continue
		}
		add(ws.Dir, unixhost.DirRule{})
		add(ws.Session, unixhost.DirRule{Ignore: sessionNoise, Opens: wakeOpens})
		add(ws.Held, unixhost.DirRule{Ignore: heldNoise})
		add(ws.MCPDir, unixhost.DirRule{})
	}
	if rel := s.cfg.Release; rel != "" {
		add(rel, unixhost.DirRule{})
		add(filepath.Join(rel, "releases"), unixhost.DirRule{})
	}
	if release != "" {
		if dir, err := filepath.EvalSymlinks(release); err == nil {
			add(dir, unixhost.DirRule{})
		}
	}
	return added
}

// What is written all the time and read by no status: the daemon's and
// the hook's logs and the daemon's pipe in the agents root, the MCP
// servers' logs, a session's log, the ledger of posts a session was woken
// for (D77).
var (
	rootNoise = func(name string) bool {
		switch name {
		case "ocxd.log", "hook.log", "ocxd", host.SocketName:
			return true
		}
		return false
	}
	logNoise     = func(name string) bool { return strings.HasSuffix(name, ".log") }
	sessionNoise = func(name string) bool { return name == "log" }
	heldNoise    = func(name string) bool { return name == "woken" }
	wakeOpens    = map[string]bool{"wake": true}
)

// statusNode is the node a status is derived from: the daemon's layout,
// config, open repositories, record indexes and process table, and its
// release's directory (daemonclient.Release). Each status has its own
// logs of what it passes over, told to this caller in r, whose log says
// it once, as its own read would.
func (s *status) statusNode(r *wire.Reply) (nodestatus.Node, string, error) {
	release, err := daemonclient.Release(s.cfg)
	if err != nil {
		return nodestatus.Node{}, "", err
	}
	passed := record.NewPassedSink(func(what, why string) { r.Passed = append(r.Passed, wire.PassedOver{What: what, Why: why}) })
	return nodestatus.Node{Layout: s.layout, Config: s.cfg, Log: s.log, Passed: passed, Refusals: unixhost.NewRefusalLog(s.log),
		Facts: daemonFacts{liveRecords{s.repos}, s.cfg, s.layout, s.procs, release}}, release, nil
}

// daemonFacts are the facts a status reads in the daemon: its open
// repositories and record indexes, its process table, itself.
type daemonFacts struct {
	liveRecords
	cfg     *messages.NodeConfig
	layout  host.Layout
	procs   *unixhost.ProcTable
	release string
}

// Index is the record index the daemon keeps of r, or one made for this
// status when it keeps none.
func (f daemonFacts) Index(r *fossilio.Repo) *record.Index {
	if x := f.liveRecords.Index(r); x != nil {
		return x
	}
	return record.NewIndex(r, f.cfg.User)
}

// Procs is the daemon's own table, which the daemon closes.
func (f daemonFacts) Procs() (host.ProcTable, func(), error) { return f.procs, func() {}, nil }

// Daemon is this daemon: it holds the lock while it answers.
func (f daemonFacts) Daemon() (*messages.DaemonStatus, error) {
	return daemonclient.Status(f.layout, f.cfg, os.Getpid(), func(pid int) string {
		if _, rel, err := f.procs.Executable(pid); err == nil {
			return rel
		}
		return ""
	})
}

func (f daemonFacts) Runners(ctx context.Context) []messages.RunnerOffer {
	return procs.RunnerOffers(ctx, f.release)
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
