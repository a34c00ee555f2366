package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/cmd/internal/runengine"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/noderepos"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/listening"
	"github.com/ocx-go/ocx/host/procs"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// records is the daemon's side of Fossil: it classifies posted artifacts
// (actors.Classifier), answers branch listeners (actors.CheckinReader) and
// writes the daemon's notes as the node user (actors.NoteWriter). Each
// repository of node.json is opened once and indexed incrementally.
type records struct {
	*noderepos.Repos
	cfg      *messages.NodeConfig
	layout   host.Layout
	releases *procs.Releases
	fossil   *fossilio.Fossil
	log      *slog.Logger
	now      func() time.Time

	// mu guards procReleases.
	mu sync.Mutex
	// procReleases are the release directories of the processes found at
	// start, for ResolveLaunch.
	procReleases map[protocol.ProcID]string
	// argv gives a process's command line as the process table last read
	// it, for a refusal note's holder.
	argv func(protocol.ProcID) ([]string, bool)
	// scan reads the processes naming a workspace, for a refusal note.
	scan func(context.Context, messages.WorkspaceKey) ([]protocol.ProcInfo, error)
	// runs reads seed 004's runs on the record.
	runs *runengine.Record
	// kickTriggers asks the run engine for a pass over a repository's
	// triggers (D101); set once the engine is made.
	kickTriggers func(repository string)
	// forgetSpawned removes a session's spawned record once its end note
	// is on the record (D76); nil forgets nothing.
	forgetSpawned func(messages.WorkspaceKey, string) error
}

// recordHost is what the records read of the host: the process table, for
// a refusal note's holder, and what the host can give a run. Either may be
// nil (a test's records).
type recordHost struct {
	procs   *procs.Table
	support func() host.RunSupport
	// forgetSpawned removes a spawned record (the reaper's).
	forgetSpawned func(messages.WorkspaceKey, string) error
}

func newRecords(repos *noderepos.Repos, layout host.Layout, rel *procs.Releases, log *slog.Logger, h recordHost) *records {
	cfg := repos.Config()
	r := &records{Repos: repos, cfg: cfg, layout: layout, releases: rel, log: log, now: time.Now,
		fossil:       &fossilio.Fossil{Home: layout.Root(), User: cfg.User, Dir: layout.Root()},
		procReleases: map[protocol.ProcID]string{}, runs: runengine.NewRecord(cfg, layout, repos, h.support, log), forgetSpawned: h.forgetSpawned}
	if h.procs != nil {
		r.argv, r.scan = h.procs.ArgvOf, h.procs.Scan
	}
	return r
}

// setFound keeps the release directories of the processes found at start,
// and of the sessions a daemon before spawned (their spawned records, D76)
// where the process table says none.
func (r *records) setFound(dirs map[protocol.ProcID]string, spawned []protocol.Spawned) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if dirs == nil {
		dirs = map[protocol.ProcID]string{}
	}
	for _, s := range spawned {
		if _, ok := dirs[s.Proc]; !ok && s.Release != "" {
			dirs[s.Proc] = s.Release
		}
	}
	r.procReleases = dirs
}

// Classify says what a posted artifact is to the daemon (actors.Classifier).
func (r *records) Classify(ctx context.Context, repository, hash string) (actors.Classification, error) {
	project, ok := r.ByPath(repository)
	if !ok {
		return actors.Classification{Nothing: fmt.Sprintf("%s is not a repository of this node (node.json)", repository)}, nil
	}
	x, err := r.Index(project)
	if err != nil {
		return actors.Classification{}, err
	}
	// The index has most often just read it, in the refresh that also
	// brings its record up to date for the verdict; the whole
	// classification is current to that one read (Pin).
	ctx, err = x.Idx.Pin(ctx)
	if err != nil {
		return actors.Classification{}, fmt.Errorf("classify %s of %s: %w", hash, repository, err)
	}
	info, e, _, err := x.Idx.Artifact(ctx, hash)
	if err != nil {
		return actors.Classification{}, fmt.Errorf("classify %s of %s: %w", hash, repository, err)
	}
	c, err := r.classify(ctx, x, hash, info, e)
	switch info.Kind {
	case fossilio.KindPost, fossilio.KindTicketChange, fossilio.KindCheckin:
		// What the node's session runs may be given: the node asks the
		// run engine for their deliveries once the artifact's own event
		// is routed (seed 004, section 9).
		c.Arrival = true
		// What may fire the node's triggers, or end one (D101).
		if kick := r.kickTriggers; kick != nil {
			kick(repository)
		}
	}
	return c, err
}

// classify says what an artifact x's index read is.
func (r *records) classify(ctx context.Context, x *noderepos.Index, hash string, info fossilio.Info, e record.Entry) (actors.Classification, error) {
	switch info.Kind {
	case fossilio.KindCheckin:
		c, err := r.checkin(ctx, x, info)
		if err != nil {
			return actors.Classification{}, err
		}
		return actors.Classification{Checkin: c}, nil
	case fossilio.KindPost, fossilio.KindTicketChange:
	default:
		return actors.Classification{Nothing: "a " + info.Kind.String()}, nil
	}
	// A seed 004 message (a run, stop, started or ended) is the run
	// engine's; the session design's notes go on below.
	if c, handled, err := r.runs.Classify(ctx, x, hash); handled || err != nil {
		return c, err
	}
	v, err := x.Idx.LaunchVerdict(ctx, e)
	if err != nil {
		return actors.Classification{}, err
	}
	switch {
	case v.Spec != nil && v.Spec.IsCI() && e.Sender == r.cfg.User:
		// A CI launch note is the node user's own, written by a branch
		// listener that launches it itself: its one path into the daemon,
		// so the hook's hand-over of it is nothing more to do.
		return actors.Classification{Nothing: "a CI launch note, launched by its branch listener"}, nil
	case v.Spec != nil:
		l := *v.Spec
		if dir, err := r.releases.Dir(l.Release); err == nil {
			l.ReleaseDir, l.ReleaseName = dir, r.releases.Name(dir)
		}
		return actors.Classification{Launch: &l}, nil
	case v.Refuse != nil:
		return actors.Classification{Refused: v.Refuse}, nil
	case v.Ignore != "":
		r.log.Warn("a launch note the daemon does not act on: "+v.Ignore, slog.String(actors.KeyLaunch, hash))
		return actors.Classification{Nothing: v.Ignore}, nil
	}
	if e.Err != nil {
		r.log.Warn("a post whose note does not read is not acted on", slog.String(actors.KeyHash, hash), slog.String("sender", e.Sender), actors.ErrAttr(e.Err))
	}
	return actors.Classification{Nothing: v.Nothing}, nil
}

// ResolveLaunch reads the launch note a `workspace serve` found at start
// serves (actors.Classifier); its release is the one it runs.
func (r *records) ResolveLaunch(ctx context.Context, p protocol.ProcInfo) (protocol.LaunchSpec, error) {
	x, err := r.Index(p.Workspace.Project)
	if err != nil {
		return protocol.LaunchSpec{}, err
	}
	l, err := r.launchAt(ctx, x, p.Launch)
	if err != nil {
		return protocol.LaunchSpec{}, fmt.Errorf("the launch note %s of %s: %w", p.Launch, p.Proc, err)
	}
	r.mu.Lock()
	if dir, ok := r.procReleases[p.Proc]; ok {
		l.ReleaseDir, l.ReleaseName = dir, r.releases.Name(dir)
	}
	r.mu.Unlock()
	return l, nil
}

// launchAt reads the launch note at hash as the daemon launched it (what
// it describes, the release resolved: a session that runs, or a CI launch
// just written); anything but a launch is an error saying why.
func (r *records) launchAt(ctx context.Context, x *noderepos.Index, hash string) (protocol.LaunchSpec, error) {
	e, err := record.At(ctx, x.Repo, hash)
	if err != nil {
		return protocol.LaunchSpec{}, err
	}
	v, err := x.Idx.Described(ctx, e)
	switch {
	case err != nil:
		return protocol.LaunchSpec{}, err
	case v.Refuse != nil:
		return protocol.LaunchSpec{}, errors.New(v.Refuse.Reason)
	case v.Ignore != "":
		return protocol.LaunchSpec{}, errors.New(v.Ignore)
	case v.Spec == nil:
		return protocol.LaunchSpec{}, fmt.Errorf("%s is not a launch note: %s", hash, v.Nothing)
	}
	l := *v.Spec
	if dir, err := r.releases.Dir(l.Release); err == nil {
		l.ReleaseDir, l.ReleaseName = dir, r.releases.Name(dir)
	}
	return l, nil
}

// checkin is a check-in with the branch listeners that name its branch: the
// workspaces whose listening index holds branch-NAME, each resolved to its
// latest listen note (an unlisten means none) and the newest session
// definition on that note's record.
func (r *records) checkin(ctx context.Context, x *noderepos.Index, info fossilio.Info) (*protocol.CheckinSpec, error) {
	c := &protocol.CheckinSpec{Hash: info.Hash, Repository: x.Path, Branch: info.Branch}
	file, err := messages.ListeningFileName(messages.ListenBranch, info.Branch)
	if err != nil {
		return c, nil
	}
	logins, err := r.listeningLogins(x.Project, file)
	if err != nil || len(logins) == 0 {
		return c, err
	}
	for _, login := range logins {
		l, ok, err := r.branchListener(ctx, x, messages.WorkspaceKey{Login: login, Project: x.Project}, info.Branch)
		if err != nil {
			return nil, err
		}
		if ok {
			c.Listeners = append(c.Listeners, l)
		}
	}
	return c, nil
}

// branchListener resolves key's listener on branch: its latest listen note
// sent by its agent login (an unlisten: none) and the newest session
// definition on that note's record, whose lifetime and result it takes.
func (r *records) branchListener(ctx context.Context, x *noderepos.Index, key messages.WorkspaceKey, branch string) (protocol.BranchListener, bool, error) {
	l, ok, err := x.Idx.BranchListen(ctx, key, branch)
	if err != nil || !ok || !l.On {
		return protocol.BranchListener{}, false, err
	}
	_, def, err := x.Idx.NewestDefinitions(ctx, key, l.Entry.Record)
	if err != nil {
		return protocol.BranchListener{}, false, err
	}
	if def == nil {
		r.log.Warn("a branch listener's record holds no session definition that counts; its check-ins launch nothing",
			slog.String(actors.KeyWorkspace, key.String()), slog.String(actors.KeyBranch, branch), slog.String("record", l.Entry.Record))
		return protocol.BranchListener{}, false, nil
	}
	d := def.Note.(*messages.SessionDefinition)
	return protocol.BranchListener{Workspace: key, Repository: x.Path, Record: l.Entry.Record,
		ListenNote: l.Entry.Hash, Lifetime: d.Lifetime, Result: d.Result}, true, nil
}

// Listeners finds every branch listener of the node when the daemon starts
// or re-execs (D42): each workspace whose listening index holds a branch's
// file, resolved as a check-in's listeners are. A repository that cannot be
// read is logged and left out: its listeners look again at their next
// check-in.
func (r *records) Listeners(ctx context.Context) []protocol.ListenedBranch {
	var out []protocol.ListenedBranch
	projects := make([]string, 0, len(r.cfg.Projects))
	for name := range r.cfg.Projects {
		projects = append(projects, name)
	}
	slices.Sort(projects)
	for _, project := range projects {
		found, err := r.projectListeners(ctx, project)
		if err != nil {
			r.log.Warn("the branch listeners of a project cannot be read at start; their queues wait for a check-in", slog.String("project", project), actors.ErrAttr(err))
			continue
		}
		out = append(out, found...)
	}
	return out
}

func (r *records) projectListeners(ctx context.Context, project string) ([]protocol.ListenedBranch, error) {
	x, err := r.Index(project)
	if err != nil {
		return nil, err
	}
	var out []protocol.ListenedBranch
	err = r.eachWorkspace(project, func(root *unixhost.Root, ws host.Workspace) error {
		key := ws.Key
		index, bad, err := listening.ReadIndex(root, ws)
		if err != nil {
			r.log.Warn("a listening index cannot be read at start; its branch listeners wait", slog.String(actors.KeyWorkspace, key.String()), actors.ErrAttr(err))
			return nil
		}
		for _, err := range bad {
			r.log.Warn("a listening file is passed over", slog.String(actors.KeyWorkspace, key.String()), actors.ErrAttr(err))
		}
		for _, name := range slices.Sorted(maps.Keys(index)) {
			le := index[name]
			if le.Kind != messages.ListenBranch {
				continue
			}
			l, ok, err := r.branchListener(ctx, x, key, le.Names)
			if err != nil {
				return err
			}
			if ok {
				out = append(out, protocol.ListenedBranch{Branch: le.Names, Listener: l})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// listeningLogins lists the logins whose workspace of project has the
// listening file name.
func (r *records) listeningLogins(project, name string) ([]string, error) {
	var out []string
	err := r.eachWorkspace(project, func(root *unixhost.Root, ws host.Workspace) error {
		p, err := ws.Listening(name)
		if err != nil {
			return nil
		}
		if _, ok, err := listening.Lookup(root, ws, name); err == nil && ok {
			out = append(out, ws.Key.Login)
		} else if err != nil {
			r.log.Warn("a listening file is passed over", slog.String(actors.KeyWorkspace, ws.Key.String()), slog.String("file", p), actors.ErrAttr(err))
		}
		return nil
	})
	return out, err
}

// eachWorkspace calls f with the workspace of project of each agent login
// the agents root holds (a directory named by a login, not the node
// user's), in the root's order, and the agents root opened; f's error ends
// the walk.
func (r *records) eachWorkspace(project string, f func(*unixhost.Root, host.Workspace) error) error {
	entries, err := unixhost.Below(r.layout.Root()).ReadDir(r.layout.Root())
	if err != nil {
		return fmt.Errorf("list the agents root: %w", err)
	}
	root, err := unixhost.OpenRoot(r.layout.Root())
	if err != nil {
		return err
	}
	defer root.Close()
	for _, e := range entries {
		if !e.IsDir() || messages.ValidateLogin(e.Name()) != nil || e.Name() == r.cfg.User {
			continue
		}
		ws, err := r.layout.Workspace(messages.WorkspaceKey{Login: e.Name(), Project: project})
		if err != nil {
			continue
		}
		if err := f(root, ws); err != nil {
			return err
		}
	}
	return nil
}

// Queue is the listener's queue (D5, D42), derived from the record
// (record.Queue): the check-ins on the branch received after the listen
// note without its login's result, and those it may never judge.
func (r *records) Queue(ctx context.Context, l protocol.BranchListener, branch string) (actors.Queue, error) {
	project, ok := r.ByPath(l.Repository)
	if !ok {
		return actors.Queue{}, fmt.Errorf("%s is not a repository of this node", l.Repository)
	}
	x, err := r.Index(project)
	if err != nil {
		return actors.Queue{}, err
	}
	qs, err := record.Queue(ctx, x.Repo, l.Result, l.Workspace.Login, branch, l.ListenNote)
	if err != nil {
		return actors.Queue{}, err
	}
	var q actors.Queue
	for _, c := range qs {
		switch {
		case c.Skip != "":
			q.Skipped = append(q.Skipped, protocol.SkippedCheckin{Checkin: c.Checkin, Why: c.Skip})
		case c.Waits:
			q.Waiting = append(q.Waiting, c.Checkin)
		}
	}
	return q, nil
}

// RunResult is the result the launch's login left on its check-in: its
// `ci` tag's value, or a reviewer's verdict (record.RunResult).
func (r *records) RunResult(ctx context.Context, l protocol.LaunchSpec) (string, bool, error) {
	project, ok := r.ByPath(l.Repository)
	if !ok {
		return "", false, fmt.Errorf("%s is not a repository of this node", l.Repository)
	}
	x, err := r.Index(project)
	if err != nil {
		return "", false, err
	}
	ci, err := x.Repo.Info(ctx, l.Checkin)
	if err != nil {
		return "", false, fmt.Errorf("read %s: %w", l.Checkin, err)
	}
	tags, err := x.Repo.CheckinTags(ctx, l.Checkin)
	if err != nil {
		return "", false, fmt.Errorf("read the tags of %s: %w", l.Checkin, err)
	}
	v, found := record.RunResult(l.Result, l.Workspace.Login, ci, tags)
	return v, found, nil
}
