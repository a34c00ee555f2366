package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
)

// records is the daemon's side of Fossil: it classifies posted artifacts
// (actors.Classifier), answers branch listeners (actors.CheckinReader) and
// writes the daemon's notes as the node user (actors.NoteWriter). Each
// repository of node.json is opened once and indexed incrementally.
type records struct {
	cfg      *messages.NodeConfig
	layout   host.Layout
	releases *releases
	fossil   *fossilio.Fossil
	log      *slog.Logger
	now      func() time.Time

	mu    sync.Mutex
	repos map[string]*repoIndex // by project
	// paths maps a repository path, as written and resolved, to its project.
	paths map[string]string
	// procReleases are the release directories of the processes found at
	// start, for ResolveLaunch.
	procReleases map[messages.ProcID]string
	// argv gives a process's command line as the process table last read
	// it, for a refusal note's holder.
	argv func(messages.ProcID) ([]string, bool)
	// scan reads the processes naming a workspace, for a refusal note.
	scan func(context.Context, messages.WorkspaceKey) ([]messages.ProcInfo, error)
}

func newRecords(cfg *messages.NodeConfig, layout host.Layout, rel *releases, log *slog.Logger) *records {
	r := &records{cfg: cfg, layout: layout, releases: rel, log: log, now: time.Now,
		fossil: &fossilio.Fossil{Home: layout.Root(), User: cfg.User, Dir: layout.Root()},
		repos:  map[string]*repoIndex{}, paths: map[string]string{}, procReleases: map[messages.ProcID]string{}}
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
func (r *records) index(project string) (*repoIndex, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if x, ok := r.repos[project]; ok {
		return x, nil
	}
	p, ok := r.cfg.Projects[project]
	if !ok {
		return nil, fmt.Errorf("project %q is not a repository of this node", project)
	}
	x, err := newRepoIndex(project, p)
	if err != nil {
		return nil, err
	}
	r.repos[project] = x
	return x, nil
}

// byPath finds the project of a repository path as a pipe line gives it.
func (r *records) byPath(repo string) (string, bool) {
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

func (r *records) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.repos {
		x.close()
	}
	r.repos = map[string]*repoIndex{}
}

// privileged says whether a sender holds admin or setup on the repository
// now (D7). A sender that cannot be read does not count.
func privileged(ctx context.Context, x *repoIndex, sender string) bool {
	if sender == "" {
		return false
	}
	caps, err := x.repo.EffectiveCaps(ctx, sender)
	return err == nil && strings.ContainsAny(caps, "as")
}

// Classify says what a posted artifact is to the daemon (actors.Classifier).
func (r *records) Classify(ctx context.Context, repository, hash string) (actors.Artifact, error) {
	project, ok := r.byPath(repository)
	if !ok {
		return actors.Artifact{Nothing: fmt.Sprintf("%s is not a repository of this node (node.json)", repository)}, nil
	}
	x, err := r.index(project)
	if err != nil {
		return actors.Artifact{}, err
	}
	info, err := x.repo.Info(ctx, hash)
	if err != nil {
		return actors.Artifact{}, fmt.Errorf("classify %s of %s: %w", hash, repository, err)
	}
	switch info.Kind {
	case fossilio.KindCheckin:
		c, err := r.checkin(ctx, x, info)
		if err != nil {
			return actors.Artifact{}, err
		}
		return actors.Artifact{Checkin: c}, nil
	case fossilio.KindPost, fossilio.KindTicketChange:
	default:
		return actors.Artifact{Nothing: "a " + info.Kind.String()}, nil
	}
	e, ok, err := x.entry(ctx, info)
	if err != nil {
		return actors.Artifact{}, err
	}
	n, isLaunch := e.note.(*messages.LaunchNote)
	if !ok || !isLaunch {
		return actors.Artifact{Nothing: "a " + info.Kind.String() + " that is not a launch note"}, nil
	}
	l, why, err := r.resolveLaunch(ctx, x, e, n)
	if err != nil {
		return actors.Artifact{}, err
	}
	if why != "" {
		r.log.Warn("a launch note the daemon does not act on: "+why, slog.String(actors.KeyLaunch, hash), slog.String(actors.KeyWorkspace, n.Key().String()))
		return actors.Artifact{Nothing: why}, nil
	}
	return actors.Artifact{Launch: &l}, nil
}

// resolveLaunch reads what a launch note names: the session definition on
// the same record, the workspace definition (both sent by a user holding
// admin or setup, D7), the sandbox, the release, and for a CI launch its
// check-in's branch. A note that does not count comes back with why.
func (r *records) resolveLaunch(ctx context.Context, x *repoIndex, e defEntry, n *messages.LaunchNote) (messages.LaunchSpec, string, error) {
	var none messages.LaunchSpec
	if e.sender != r.cfg.User && !privileged(ctx, x, e.sender) {
		return none, fmt.Sprintf("launch note %s was sent by %q, who holds neither admin nor setup and is not the node user (D7)", e.hash, e.sender), nil
	}
	if n.Project != x.project {
		return none, fmt.Sprintf("launch note %s names project %q but is in the repository of %q", e.hash, n.Project, x.project), nil
	}
	sd, err := x.noteAt(ctx, n.Session)
	if err != nil {
		return none, fmt.Sprintf("launch note %s: its session definition %s: %v", e.hash, n.Session, err), nil
	}
	def, ok := sd.note.(*messages.SessionDefinition)
	switch {
	case !ok:
		return none, fmt.Sprintf("launch note %s: %s is not a session definition", e.hash, n.Session), nil
	case sd.record != e.record || sd.ticket != e.ticket:
		return none, fmt.Sprintf("launch note %s: its session definition %s is not on the launch's record %s", e.hash, n.Session, e.record), nil
	case !privileged(ctx, x, sd.sender):
		return none, fmt.Sprintf("launch note %s: its session definition %s was sent by %q, who holds neither admin nor setup (D7)", e.hash, n.Session, sd.sender), nil
	}
	wd, err := x.noteAt(ctx, n.Workspace)
	if err != nil {
		return none, fmt.Sprintf("launch note %s: its workspace definition %s: %v", e.hash, n.Workspace, err), nil
	}
	wdef, ok := wd.note.(*messages.WorkspaceDefinition)
	switch {
	case !ok:
		return none, fmt.Sprintf("launch note %s: %s is not a workspace definition", e.hash, n.Workspace), nil
	case wdef.Key() != n.Key():
		return none, fmt.Sprintf("launch note %s is for %s, but the workspace definition %s defines %s", e.hash, n.Key(), n.Workspace, wdef.Key()), nil
	case !privileged(ctx, x, wd.sender):
		return none, fmt.Sprintf("launch note %s: its workspace definition %s was sent by %q, who holds neither admin nor setup (D7)", e.hash, n.Workspace, wd.sender), nil
	}
	if t, err := r.terminatedAfter(ctx, x, wd); err != nil {
		return none, "", err
	} else if t != "" {
		return none, fmt.Sprintf("launch note %s: workspace %s was terminated (%s)", e.hash, n.Key(), t), nil
	}
	sandbox, err := json.Marshal(wdef.Sandbox)
	if err != nil {
		return none, "", fmt.Errorf("launch note %s: encode the sandbox: %w", e.hash, err)
	}
	l := messages.LaunchSpec{Hash: e.hash, Repository: x.path, Workspace: n.Key(), Record: e.record,
		Kind: def.Kind, Lifetime: def.Lifetime, Release: n.Release, Sandbox: sandbox}
	if dir, err := r.releases.dir(n.Release); err == nil {
		l.ReleaseDir = dir
	}
	if n.Checkin != "" {
		ci, err := x.repo.Info(ctx, n.Checkin)
		if err != nil || ci.Kind != fossilio.KindCheckin {
			return none, fmt.Sprintf("launch note %s: %s is not a check-in of %s", e.hash, n.Checkin, x.project), nil
		}
		l.Checkin, l.Branch = ci.Hash, ci.Branch
	}
	if err := l.Validate(); err != nil {
		return none, fmt.Sprintf("launch note %s: %v", e.hash, err), nil
	}
	return l, "", nil
}

// terminatedAfter returns the terminated note, sent by a user holding admin
// or setup on the workspace's record after its definition, if there is one.
func (r *records) terminatedAfter(ctx context.Context, x *repoIndex, wd defEntry) (string, error) {
	def := wd.note.(*messages.WorkspaceDefinition)
	x.mu.Lock()
	err := x.refresh(ctx, r.cfg.User)
	ts := append([]defEntry(nil), x.terminated[def.Key()]...)
	x.mu.Unlock()
	if err != nil {
		return "", err
	}
	for _, t := range ts {
		after := t.rcvid > wd.rcvid || t.rcvid == wd.rcvid && t.rid > wd.rid
		if after && t.record == wd.record && privileged(ctx, x, t.sender) {
			return t.hash, nil
		}
	}
	return "", nil
}

// ResolveLaunch reads the launch note a `workspace serve` found at start
// serves (actors.Classifier); its release is the one it runs.
func (r *records) ResolveLaunch(ctx context.Context, p messages.ProcInfo) (messages.LaunchSpec, error) {
	x, err := r.index(p.Workspace.Project)
	if err != nil {
		return messages.LaunchSpec{}, err
	}
	e, err := x.noteAt(ctx, p.Launch)
	if err != nil {
		return messages.LaunchSpec{}, fmt.Errorf("read the launch note %s of %s: %w", p.Launch, p.Proc, err)
	}
	n, ok := e.note.(*messages.LaunchNote)
	if !ok {
		return messages.LaunchSpec{}, fmt.Errorf("%s, which %s serves, is not a launch note", p.Launch, p.Proc)
	}
	l, why, err := r.resolveLaunch(ctx, x, e, n)
	if err != nil {
		return messages.LaunchSpec{}, err
	}
	if why != "" {
		return messages.LaunchSpec{}, errors.New(why)
	}
	r.mu.Lock()
	if dir, ok := r.procReleases[p.Proc]; ok {
		l.ReleaseDir = dir
	}
	r.mu.Unlock()
	return l, nil
}

// checkin is a check-in with the branch listeners that name its branch: the
// workspaces whose listening index holds branch-NAME, each resolved to its
// latest listen note (an unlisten means none) and the newest session
// definition on that note's record.
func (r *records) checkin(ctx context.Context, x *repoIndex, info fossilio.Info) (*messages.CheckinSpec, error) {
	c := &messages.CheckinSpec{Hash: info.Hash, Repository: x.path, Branch: info.Branch}
	file, err := host.BranchRecord(info.Branch)
	if err != nil {
		return c, nil
	}
	logins, err := r.listeningLogins(x.project, file)
	if err != nil || len(logins) == 0 {
		return c, err
	}
	x.mu.Lock()
	err = x.refresh(ctx, r.cfg.User)
	type found struct {
		login string
		le    listenEntry
		defs  []defEntry
	}
	var fs []found
	for _, login := range logins {
		le, ok := x.listens[listenKey{login, info.Branch}]
		if !ok || !le.on {
			continue
		}
		fs = append(fs, found{login, le, append([]defEntry(nil), x.sessionDefs[le.record]...)})
	}
	x.mu.Unlock()
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		key := messages.WorkspaceKey{Login: f.login, Project: x.project}
		def := newestPrivileged(ctx, x, f.defs)
		if def == nil {
			r.log.Warn("a branch listener's record holds no session definition that counts; its check-ins launch nothing",
				slog.String(actors.KeyWorkspace, key.String()), slog.String(actors.KeyBranch, info.Branch), slog.String("record", f.le.record))
			continue
		}
		c.Listeners = append(c.Listeners, messages.BranchListener{Workspace: key, Repository: x.path, Record: f.le.record,
			ListenNote: f.le.hash, Lifetime: def.note.(*messages.SessionDefinition).Lifetime})
	}
	return c, nil
}

// listeningLogins lists the logins whose workspace of project has the
// listening file name.
func (r *records) listeningLogins(project, name string) ([]string, error) {
	entries, err := os.ReadDir(r.layout.Root())
	if err != nil {
		return nil, fmt.Errorf("list the agents root: %w", err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() || host.ValidLogin(e.Name()) != nil || e.Name() == r.cfg.User {
			continue
		}
		ws, err := r.layout.Workspace(host.Key{Login: e.Name(), Project: project})
		if err != nil {
			continue
		}
		p, err := ws.Listening(name)
		if err != nil {
			continue
		}
		if _, err := os.Lstat(p); err == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// newestPrivileged is the newest entry sent by a user holding admin or setup.
func newestPrivileged(ctx context.Context, x *repoIndex, es []defEntry) *defEntry {
	for i := len(es) - 1; i >= 0; i-- {
		if privileged(ctx, x, es[i].sender) {
			return &es[i]
		}
	}
	return nil
}

// NewestUntested is the newest check-in on the branch received after the
// listen note with no `ci` tag sent by the listener's login (D5).
func (r *records) NewestUntested(ctx context.Context, l messages.BranchListener, branch string) (string, error) {
	project, ok := r.byPath(l.Repository)
	if !ok {
		return "", fmt.Errorf("%s is not a repository of this node", l.Repository)
	}
	x, err := r.index(project)
	if err != nil {
		return "", err
	}
	cs, err := x.repo.CheckinsOnBranch(ctx, branch, l.ListenNote)
	if err != nil {
		return "", fmt.Errorf("list the check-ins on %q after %s: %w", branch, l.ListenNote, err)
	}
	for i := len(cs) - 1; i >= 0; i-- {
		tested, err := r.tested(ctx, x, cs[i].Hash, l.Workspace.Login)
		if err != nil {
			return "", err
		}
		if !tested {
			return cs[i].Hash, nil
		}
	}
	return "", nil
}

// tested says whether a check-in carries a `ci` tag sent by login.
func (r *records) tested(ctx context.Context, x *repoIndex, checkin, login string) (bool, error) {
	_, found, err := r.result(ctx, x, checkin, login)
	return found, err
}

func (r *records) result(ctx context.Context, x *repoIndex, checkin, login string) (string, bool, error) {
	tags, err := x.repo.CheckinTags(ctx, checkin)
	if err != nil {
		return "", false, fmt.Errorf("read the tags of %s: %w", checkin, err)
	}
	t, found := fossilio.LatestTag(tags, "ci", login)
	if !found || t.Op == fossilio.TagCancel {
		return "", false, nil
	}
	return t.Value, true, nil
}

// RunResult is the `ci` tag value the launch's login left on its check-in.
func (r *records) RunResult(ctx context.Context, l messages.LaunchSpec) (string, bool, error) {
	project, ok := r.byPath(l.Repository)
	if !ok {
		return "", false, fmt.Errorf("%s is not a repository of this node", l.Repository)
	}
	x, err := r.index(project)
	if err != nil {
		return "", false, err
	}
	return r.result(ctx, x, l.Checkin, l.Workspace.Login)
}
