package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
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
	ok, err := x.repo.Privileged(ctx, sender)
	return err == nil && ok
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
		if claim, meant := launchClaim(e); meant {
			return r.refuse(ctx, x, e, claim.Login, fmt.Sprintf("post %s does not read as one launch note: %v", short(hash), e.noteErr)), nil
		}
		if e.noteErr != nil {
			r.log.Warn("a post whose note does not read is not acted on", slog.String(actors.KeyHash, hash), slog.String("sender", e.sender), errAttr(e.noteErr))
		}
		return actors.Artifact{Nothing: "a " + info.Kind.String() + " that is not a launch note"}, nil
	}
	v, err := r.resolveLaunch(ctx, x, e, n)
	if err != nil {
		return actors.Artifact{}, err
	}
	switch {
	case v.ignore != "":
		r.log.Warn("a launch note the daemon does not act on: "+v.ignore, slog.String(actors.KeyLaunch, hash), slog.String(actors.KeyWorkspace, n.Key().String()))
		return actors.Artifact{Nothing: v.ignore}, nil
	case v.refuse != "":
		return r.refuse(ctx, x, e, n.Login, v.refuse), nil
	}
	return actors.Artifact{Launch: &v.spec}, nil
}

// launchClaim is the launch a post that does not read as one note was
// meant as: its first block that says it is a launch note.
func launchClaim(e defEntry) (messages.Claim, bool) {
	if e.noteErr == nil {
		return messages.Claim{}, false
	}
	for _, c := range e.claims {
		if c.Kind == messages.KindLaunch {
			return c, true
		}
	}
	return messages.Claim{}, false
}

// refuse is the record model's verdict on a launch note that cannot be
// launched: answered with a refusal note when its sender counts (a user
// holding admin or setup, or the node user), so the person who asked reads
// why; only logged, at warn with the exact reason, when anyone else sent it,
// since a note for that would let anyone make the node write (D7).
func (r *records) refuse(ctx context.Context, x *repoIndex, e defEntry, login, reason string) actors.Artifact {
	if e.sender != r.cfg.User && !privileged(ctx, x, e.sender) {
		why := fmt.Sprintf("launch note %s was sent by %q, who holds neither admin nor setup and is not the node user (D7), and would be refused anyway: %s", short(e.hash), e.sender, reason)
		r.log.Warn("a launch note the daemon does not act on: "+why, slog.String(actors.KeyLaunch, e.hash))
		return actors.Artifact{Nothing: why}
	}
	if messages.ValidateLogin(login) != nil {
		login = ""
	}
	return actors.Artifact{Refused: &messages.LaunchRefused{Hash: e.hash, Repository: x.path,
		Workspace: messages.WorkspaceKey{Login: login, Project: x.project}, Reason: reason}}
}

// launchVerdict is the record model's word on a launch note (D7): launch
// spec, ignore it (its sender does not count: logged only), or refuse it
// (its sender counts, so a refusal note says why).
type launchVerdict struct {
	spec   messages.LaunchSpec
	ignore string
	refuse string
}

// resolveLaunch reads what a launch note names: the session definition on
// the same record, the workspace definition (both sent by a user holding
// admin or setup, D7), the sandbox, the release, and for a CI launch its
// check-in's branch. A note whose sender does not count is to be ignored; one
// that counts but names what cannot be launched is to be refused, saying why.
func (r *records) resolveLaunch(ctx context.Context, x *repoIndex, e defEntry, n *messages.LaunchNote) (launchVerdict, error) {
	if e.sender != r.cfg.User && !privileged(ctx, x, e.sender) {
		return launchVerdict{ignore: fmt.Sprintf("launch note %s was sent by %q, who holds neither admin nor setup and is not the node user (D7)", e.hash, e.sender)}, nil
	}
	refuse := func(format string, args ...any) (launchVerdict, error) {
		return launchVerdict{refuse: fmt.Sprintf(format, args...)}, nil
	}
	if n.Project != x.project {
		return refuse("launch note %s names project %q but is in the repository of %q", short(e.hash), n.Project, x.project)
	}
	sd, err := x.noteAt(ctx, n.Session)
	if err != nil {
		return refuse("its session definition %s: %v", short(n.Session), err)
	}
	def, ok := sd.note.(*messages.SessionDefinition)
	switch {
	case !ok:
		return refuse("%s, named as its session definition, holds a %s note, not a session definition", short(n.Session), sd.note.NoteKind())
	case sd.record != e.record || sd.ticket != e.ticket:
		return refuse("its session definition %s is not on the launch's record %s", short(n.Session), short(e.record))
	case !privileged(ctx, x, sd.sender):
		return refuse("its session definition %s was sent by %q, who holds neither admin nor setup, so it does not count (D7)", short(n.Session), sd.sender)
	}
	wd, err := x.noteAt(ctx, n.Workspace)
	if err != nil {
		return refuse("its workspace definition %s: %v", short(n.Workspace), err)
	}
	wdef, ok := wd.note.(*messages.WorkspaceDefinition)
	switch {
	case !ok:
		return refuse("%s, named as its workspace definition, holds a %s note, not a workspace definition", short(n.Workspace), wd.note.NoteKind())
	case wdef.Key() != n.Key():
		return refuse("it is for %s, but the workspace definition %s defines %s", n.Key(), short(n.Workspace), wdef.Key())
	case !privileged(ctx, x, wd.sender):
		return refuse("its workspace definition %s was sent by %q, who holds neither admin nor setup, so it does not count (D7)", short(n.Workspace), wd.sender)
	}
	if t, err := r.terminatedAfter(ctx, x, wd); err != nil {
		return launchVerdict{}, err
	} else if t != "" {
		return refuse("workspace %s was terminated (%s)", n.Key(), short(t))
	}
	sandbox, err := json.Marshal(wdef.Sandbox)
	if err != nil {
		return launchVerdict{}, fmt.Errorf("launch note %s: encode the sandbox: %w", e.hash, err)
	}
	l := messages.LaunchSpec{Hash: e.hash, Repository: x.path, Workspace: n.Key(), Record: e.record,
		Kind: def.Kind, Lifetime: def.Lifetime, Release: n.Release, Sandbox: sandbox, Hears: def.Hears}
	if dir, err := r.releases.dir(n.Release); err == nil {
		l.ReleaseDir = dir
	}
	if n.Checkin != "" {
		ci, err := x.repo.Info(ctx, n.Checkin)
		if err != nil || ci.Kind != fossilio.KindCheckin {
			return refuse("%s is not a check-in of %s", short(n.Checkin), x.project)
		}
		l.Checkin, l.Branch = ci.Hash, ci.Branch
	}
	if err := l.Validate(); err != nil {
		return refuse("%v", err)
	}
	return launchVerdict{spec: l}, nil
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
	v, err := r.resolveLaunch(ctx, x, e, n)
	if err != nil {
		return messages.LaunchSpec{}, err
	}
	if why := v.ignore + v.refuse; why != "" {
		return messages.LaunchSpec{}, errors.New(why)
	}
	l := v.spec
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
