// Package otherhosts is the daemon's parts for nodes on other hosts
// (D72): on a node that serves a project from another host, the puller
// and the pokes it takes; on the server's node, the poker.
package otherhosts

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/cmd/internal/hook"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/noderepos"
	"github.com/ocx-go/ocx/fossilio/remote"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/metrics"
	runeng "github.com/ocx-go/ocx/host/runs"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// Parts are the daemon's parts for nodes on other hosts (D72). On a node that
// serves a project from another host: the puller, which pulls its clone
// as the node user on a timer, when poked and when asked, has the server
// vouch for what came, and then does the hook's work on it, as the
// server's node does on a receipt; and the pokes it takes. On the
// server's node: the poker, which pokes the remote nodes when something
// arrives.
type Parts struct {
	Puller *Puller
	pokes  *remote.Pokes
	Poker  *remote.Poker
	// hookLog is the hook's log the puller's hook work writes to.
	hookLog io.Closer

	h     Host
	mu    sync.Mutex
	fresh map[string]bool
	once  sync.Once
}

// Host is what the parts for nodes on other hosts need of the
// daemon. The run engine and the pipe's reader are made after these
// parts, so they are reached through functions called only once the
// parts start.
type Host struct {
	Layout host.Layout
	Config *messages.NodeConfig
	Log    *slog.Logger
	Repos  *noderepos.Repos
	// RunsFresh has the run engine find the runs in care on a project's
	// fresh clone (runengine.Engine.Fresh).
	RunsFresh func(ctx context.Context, project string)
	// CheckRuns hands the node a `runs check` line.
	CheckRuns func()
	// Metrics are the daemon's, into which each pull is observed.
	Metrics *metrics.Set
}

// Open builds the parts node.json asks for. A pull's parts that
// cannot be made (the node user's password does not read, the address for
// pokes is taken) are logged: the node then acts on nothing the server
// has not vouched for, which is nothing new.
func Open(d Host) *Parts {
	rp := &Parts{h: d, fresh: map[string]bool{}, Poker: remote.NewPoker(d.Log)}
	keepers := map[string]*remote.Keeper{}
	for _, name := range d.Config.ProjectNames() {
		p := d.Config.Projects[name]
		if !p.OtherHost {
			continue
		}
		keepers[name] = &remote.Keeper{Project: name, Clone: p.Repository, Log: d.Log,
			Fossil: &fossilio.Fossil{Home: d.Layout.Root(), User: d.Config.User, Dir: d.Layout.Root()},
			Client: &remote.Client{URL: p.URL, Login: d.Config.User, Password: d.nodePassword}}
	}
	if len(keepers) == 0 {
		return rp
	}
	// The file of passwords is checked at start, and again before each
	// read (runs.ReadPasswords): a wrong owner or mode is said now.
	if _, err := runeng.ReadPasswords(filepath.Join(d.Layout.Root(), runeng.PasswordsFileName)); err != nil && !errors.Is(err, runeng.ErrNoPasswordsFile) {
		d.Log.Error("the file of passwords is not trusted: each run that takes a password is refused, naming why, until it is mended", actors.ErrAttr(err))
	}
	f, err := unixhost.OpenLog(d.Layout.HookLog(), unixhost.LogText)
	if err != nil {
		d.Log.Error("the hook's log does not open; the pull does the hook's work without one", actors.ErrAttr(err))
	} else {
		rp.hookLog = f
	}
	rp.Puller = newPuller(keepers, d.Config.PullEvery(), d.Log)
	rp.Puller.Pulled = d.Metrics.Pulled
	d.Metrics.PullsOf(slices.Sorted(maps.Keys(keepers)))
	rp.Puller.After = d.afterPull(f)
	rp.Puller.Fresh = func(project string) {
		// The runs in care left waiting at start, found before anything
		// else is judged on the fresh clone (also in afterPull, for a
		// first pull that brought something: before its hook's work).
		d.RunsFresh(context.Background(), project)
		rp.mu.Lock()
		rp.fresh[project] = true
		rp.mu.Unlock()
		// What the node found in its care at start may now be judged on a
		// fresh record (seed 004 section 10): the check a `runs check`
		// makes.
		d.Log.Info("the clone of a project served from another host is fresh: the node's runs are checked", slog.String("project", project))
		d.CheckRuns()
	}
	d.Repos.SetPuller(rp.Puller)
	return rp
}

// IsFresh says whether a project's record is fresh: the server's node's
// always, another host's once its clone was pulled since the start.
func (rp *Parts) IsFresh(cfg *messages.NodeConfig) func(project string) bool {
	return func(project string) bool {
		if !cfg.Projects[project].OtherHost {
			return true
		}
		rp.mu.Lock()
		defer rp.mu.Unlock()
		return rp.fresh[project]
	}
}

// Start begins the pulls and takes the pokes, once the pipe is read (the
// hook's work hands the daemon its lines there).
func (rp *Parts) Start() {
	d := rp.h
	if rp.Puller == nil {
		return
	}
	rp.Puller.Start()
	if d.Config.Pull == nil || d.Config.Pull.Listen == "" {
		return
	}
	pokes, err := remote.ListenPokes(d.Config.Pull.Listen, d.Config.Pull.Secret, rp.Puller, d.Log)
	if err != nil {
		d.Log.Error("no pokes are taken: the node pulls on its timer alone", actors.ErrAttr(err))
		return
	}
	rp.pokes = pokes
}

// Stop ends the pokes, the pulls and the pokes of remote nodes.
func (rp *Parts) Stop() {
	if rp == nil {
		return
	}
	rp.once.Do(func() {
		rp.pokes.Close()
		rp.Puller.Stop()
		rp.Poker.Close()
		if rp.hookLog != nil {
			rp.hookLog.Close()
		}
	})
}

// nodePassword is the node user's password, kept in AGENTS/USER/password.
func (d Host) nodePassword() (string, error) {
	p, err := d.Layout.Password(d.Config.User)
	if err != nil {
		return "", err
	}
	return fossilio.ReadPasswordFrom(unixhost.Below(d.Layout.Root()), p)
}

// afterPull is the hook's work on a clone after a pull: what arrived in
// it, as the server vouched for it, wakes the sessions, reaches the
// daemon's actors, and so on, as a receipt on the server's node does.
func (d Host) afterPull(logFile *unixhost.LogFile) func(ctx context.Context, project string, p remote.Pulled) {
	log := slog.New(slog.DiscardHandler)
	if logFile != nil {
		log = slog.New(logFile.Handler(nil))
	}
	return func(ctx context.Context, project string, p remote.Pulled) {
		// The node's runs in care are found on the fresh clone before
		// the lines of what it brought reach the node (Engine.Fresh).
		d.RunsFresh(ctx, project)
		if p.Vouched+p.Unknown == 0 {
			return
		}
		o := hook.Options{Agents: d.Layout.Root(), Repo: d.Config.Projects[project].Repository, Config: d.Config,
			Open: d.Repos.RepoAt, Index: d.Repos.RecordAt, ByDaemon: true, Hashes: []string{}, Log: log}
		if _, err := hook.Done(ctx, o); err != nil {
			d.Log.Error("the hook's work after a pull", slog.String("project", project), actors.ErrAttr(err))
		}
	}
}
