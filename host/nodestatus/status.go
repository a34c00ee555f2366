package nodestatus

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/ocx-go/ocx/messages/strictjson"

	"golang.org/x/sync/errgroup"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/listening"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/host/usage"
	"github.com/ocx-go/ocx/messages"
)

// Facts are what a status reads beyond the layout, node.json and the
// agents root's files.
type Facts interface {
	// Repo is the project's repository, open, for a caller that closes it
	// (a fossilio Lend when it is kept open).
	Repo(project string) (*fossilio.Repo, error)
	// Index is the record index of the repository r, which Repo gave.
	Index(r *fossilio.Repo) *record.Index
	// Procs is the process table and what ends it (nothing for a table
	// its owner keeps open).
	Procs() (host.ProcTable, func(), error)
	// Daemon is the daemon's status (whether it runs, its release, its
	// last re-exec).
	Daemon() (*messages.DaemonStatus, error)
	// Runners are the runners the node's release offers, with their
	// versions.
	Runners(ctx context.Context) []messages.RunnerOffer
}

// Node is one agents root as a status reads it.
type Node struct {
	Layout host.Layout
	Config *messages.NodeConfig
	// Log receives what is left out of a status, and why.
	Log *slog.Logger
	// Passed is told of each entry a status passes over; Refusals logs,
	// once, each file below the agents root not read (docs/trust.md).
	Passed   *record.PassedLog
	Refusals *unixhost.RefusalLog
	Facts    Facts
}

// Status derives the node's state from the record (workspace definitions,
// terminated notes, launch notes, listen notes), the workspace directories
// and the process table.
func (n Node) Status(ctx context.Context) (*messages.NodeState, error) {
	st := &messages.NodeState{
		Hooks: []messages.HookStatus{}, Logins: []messages.LoginStatus{}, Workspaces: []messages.WorkspaceStatus{},
		Sessions: []messages.SessionStatus{}, Listeners: []messages.Listener{},
	}
	t, done, err := n.Facts.Procs()
	if err != nil {
		return nil, err
	}
	defer done()
	// The process table is read while the record is: they wait on the
	// kernel and on SQLite, and the record's readers below need the table
	// only from the workspaces on.
	scan := startScan(t)
	defer scan.wait()

	repos, err := n.openRepos()
	defer closeRepos(repos)
	if err != nil {
		return nil, err
	}
	for _, p := range n.Config.ProjectNames() {
		hs, err := repos[p].Hook(ctx)
		if err != nil {
			return nil, fmt.Errorf("hook of %s: %w", p, err)
		}
		st.Hooks = append(st.Hooks, Hook(n.Layout, p, n.Config.Projects[p].Repository, hs))
	}
	logins, err := PasswordLogins(n.Layout.Root())
	if err != nil {
		return nil, err
	}
	if err := n.loginStatuses(ctx, st, logins, repos); err != nil {
		return nil, err
	}
	table, err := scan.wait()
	if err != nil {
		return nil, fmt.Errorf("status: read the process table: %w", err)
	}
	// Each project's record is read once for the whole status (Pin), after
	// the scan: every answer below is current to the same receipt, and the
	// record is at least as new as the processes it is matched with.
	idxs := map[string]*record.Index{}
	byWorkspace := table.ByWorkspace()
	for _, p := range n.Config.ProjectNames() {
		x := n.Facts.Index(repos[p])
		if ctx, err = x.Pin(ctx); err != nil {
			return nil, err
		}
		idxs[p] = x
		if err := n.projectStatus(ctx, st, byWorkspace, p, x); err != nil {
			return nil, err
		}
	}
	st.Restrictions = slices.Clone(EnforcedRestrictions)
	st.Runners = n.Facts.Runners(ctx)
	st.SessionLimits = SessionLimits(n.Layout, n.Config)

	n.sessionStatuses(ctx, st, table, repos, idxs)
	sort.Slice(st.Sessions, func(i, j int) bool { return st.Sessions[i].PID < st.Sessions[j].PID })
	st.LookAlikes, st.LookAlikesLeftOut = lookAlikes(table)
	// The daemon and its last re-exec (docs/releases.md): a lock that
	// cannot be read leaves the daemon out of the state, logged, rather
	// than failing the whole status.
	if d, err := n.Facts.Daemon(); err != nil {
		n.Log.Warn("status: the daemon's status is left out: " + err.Error())
	} else {
		st.Daemon = d
	}
	// An entry the record gave that the status cannot carry (a branch
	// named so no branch may be, a note's field) costs only itself, once
	// logged (issue 22 item 5).
	for _, err := range st.Prune() {
		n.Passed.Note("status entry "+FirstLine(err.Error()), err.Error())
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	return st, nil
}

// pendingScan is a read of the process table under way.
type pendingScan struct {
	done  chan struct{}
	table host.Table
	err   error
}

func startScan(t host.ProcTable) *pendingScan {
	s := &pendingScan{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.table, s.err = t.Scan()
	}()
	return s
}

// wait returns the scan's table once it is read; it may be called again.
func (s *pendingScan) wait() (host.Table, error) {
	<-s.done
	return s.table, s.err
}

// openRepos opens each project's repository; those opened are returned
// even with an error, for the caller to close (closeRepos).
func (n Node) openRepos() (map[string]*fossilio.Repo, error) {
	repos := map[string]*fossilio.Repo{}
	for _, p := range n.Config.ProjectNames() {
		r, err := n.Facts.Repo(p)
		if err != nil {
			return repos, err
		}
		repos[p] = r
	}
	return repos, nil
}

func closeRepos(repos map[string]*fossilio.Repo) {
	for _, r := range repos {
		r.Close()
	}
}

// Hook is the status of project's wake hook: the repository's setting st,
// and the hook's own mark.
func Hook(layout host.Layout, project, repository string, st fossilio.HookSetting) messages.HookStatus {
	h := messages.HookStatus{Project: project, Repository: repository, Installed: st.Installed, Newest: uint64(max(st.Newest, 0))}
	if m, ok := hookMark(layout, project); ok {
		h.Mark = &m
	}
	if !st.HeldUntil.IsZero() {
		h.HeldUntil = &st.HeldUntil
	}
	return h
}

// hookMark reads the hook's mark of a project: the newest receipt it
// handled (Fossil's own list can skip a receipt after a quiet day,
// docs/fossil.md §4, so the hook keeps its own).
func hookMark(layout host.Layout, project string) (uint64, bool) {
	v, _, ok := host.ReadHookMark(func() ([]byte, error) {
		return unixhost.Below(layout.Root()).ReadFile(layout.HookMark(project), unixhost.SmallFile)
	})
	return uint64(v), ok && v <= strictjson.MaxSafeInt
}

// loginStatuses adds each agent login's accounts on the projects to st:
// each project's users read in one query, however many logins there are.
// A project served from another host lists none: the server tells such a
// node no user's capabilities but a login's own, asked as it (D81).
func (n Node) loginStatuses(ctx context.Context, st *messages.NodeState, logins []string, repos map[string]*fossilio.Repo) error {
	caps := map[string]map[string]string{} // by project, by login
	for _, p := range n.Config.ProjectNames() {
		if n.Config.Projects[p].OtherHost {
			continue
		}
		us, err := repos[p].Users(ctx)
		if err != nil {
			return fmt.Errorf("status: %w", err)
		}
		caps[p] = make(map[string]string, len(us))
		for _, u := range us {
			caps[p][u.Login] = u.Caps
		}
	}
	for _, login := range logins {
		if login == n.Config.User {
			continue
		}
		ls := messages.LoginStatus{Login: login, Accounts: []messages.AccountStatus{}}
		for _, p := range n.Config.ProjectNames() {
			if c, ok := caps[p][login]; ok {
				ls.Accounts = append(ls.Accounts, messages.AccountStatus{Project: p, Capabilities: c})
			}
		}
		st.Logins = append(st.Logins, ls)
	}
	return nil
}

// projectStatus adds project p's workspaces, listeners, verdicts and
// reviewers' queues to st.
func (n Node) projectStatus(ctx context.Context, st *messages.NodeState, table *host.ByWorkspace, p string, idx *record.Index) error {
	defs, err := idx.Workspaces(ctx)
	if err != nil {
		return err
	}
	for _, k := range sortedKeys(defs) {
		ws, err := n.workspaceStatus(ctx, idx, table, k, defs[k])
		if err != nil {
			return err
		}
		st.Workspaces = append(st.Workspaces, ws)
	}
	ls, err := record.ListenersOn(ctx, idx)
	if err != nil {
		return err
	}
	st.Listeners = append(st.Listeners, ls...)
	vs, err := record.StatusVerdicts(ctx, idx, p, n.Passed)
	if err != nil {
		return err
	}
	st.Verdicts = append(st.Verdicts, vs...)
	rs, err := record.Reviews(ctx, idx, p)
	if err != nil {
		return err
	}
	st.Reviews = append(st.Reviews, rs...)
	return nil
}

// sortedKeys are the keys of defs, sorted by login, then project.
func sortedKeys(defs map[messages.WorkspaceKey]*record.Workspace) []messages.WorkspaceKey {
	keys := make([]messages.WorkspaceKey, 0, len(defs))
	for k := range defs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b messages.WorkspaceKey) int {
		return cmp.Or(cmp.Compare(a.Login, b.Login), cmp.Compare(a.Project, b.Project))
	})
	return keys
}

// workspaceStatus describes workspace k, defined by w on the record.
func (n Node) workspaceStatus(ctx context.Context, idx *record.Index, table *host.ByWorkspace, k messages.WorkspaceKey, w *record.Workspace) (messages.WorkspaceStatus, error) {
	ws := messages.WorkspaceStatus{Login: k.Login, Project: k.Project, Record: w.Entry.Record, Branch: w.Definition.Branch}
	paths, _ := n.Layout.Workspace(k)
	switch {
	case table.Naming(k).Named != host.No:
		ws.State = messages.WorkspaceActive
	case w.Terminated != "":
		ws.State = messages.WorkspaceTerminated
	case unixhost.Exists(paths.Binding):
		ws.State = messages.WorkspaceIdle
	default:
		ws.State = messages.WorkspaceMissing
	}
	// The response to the v1 record its last session ran (D51).
	end, err := record.LastSessionEnd(ctx, idx, k)
	if err != nil {
		return ws, err
	}
	if end != nil {
		ws.Response = end.Response
	}
	return ws, nil
}

// sessionStatuses adds each session process of the table to st.
func (n Node) sessionStatuses(ctx context.Context, st *messages.NodeState, table host.Table, repos map[string]*fossilio.Repo, idxs map[string]*record.Index) {
	current := n.currentRelease()
	// The agents root is opened once for every session's files: a root
	// that does not open reads each session as idle, hearing no one.
	root, err := unixhost.OpenRoot(n.Layout.Root())
	if err != nil {
		n.Log.Warn("status: the sessions' files are not read: " + err.Error())
	} else {
		defer root.Close()
	}
	type job struct {
		proc host.Process
		nm   host.Naming
	}
	var jobs []job
	for _, proc := range table.Procs {
		for _, nm := range proc.Names {
			if nm.Unsure || (nm.Verb != host.VerbServe && nm.Verb != host.VerbRun && nm.Verb != host.VerbStart) {
				continue
			}
			if repos[nm.Key.Project] != nil {
				jobs = append(jobs, job{proc, nm})
			}
		}
	}
	// Each session's files are read apart, waiting on the kernel: in
	// parallel (up to 4 at once), each status in its place.
	out := make([]messages.SessionStatus, len(jobs))
	var g errgroup.Group
	g.SetLimit(min(runtime.GOMAXPROCS(0), 4))
	for i, j := range jobs {
		g.Go(func() error {
			out[i] = n.sessionStatus(ctx, root, repos[j.nm.Key.Project], idxs[j.nm.Key.Project], j.nm.Key, j.nm, j.proc, current)
			return nil
		})
	}
	g.Wait()
	for _, s := range out {
		if s.Record != "" {
			st.Sessions = append(st.Sessions, s)
		}
	}
}

// sessionStatus describes one session process.
func (n Node) sessionStatus(ctx context.Context, root *unixhost.Root, r *fossilio.Repo, idx *record.Index, k messages.WorkspaceKey, nm host.Naming, proc host.Process, current string) messages.SessionStatus {
	s := messages.SessionStatus{
		Login: k.Login, Project: k.Project, Launch: nm.Launch,
		PID: proc.ID.PID, StartTime: proc.ID.Start,
		StartedBy: messages.Origin(proc.Origin), State: messages.SessionIdle,
		Listening: proc.Listening == host.Yes, Release: proc.Release,
	}
	if s.StartedBy == "" {
		s.StartedBy = messages.OriginTerminal
	}
	if s.Release == "" {
		s.Release = "unknown"
	}
	s.Older = current != "" && proc.Release != "" && proc.Release != current
	ws, _ := n.Layout.Workspace(k)
	// The turn file is the session's to write: what it says of its own state
	// is all it can lie about, and it is read through no link (a link or a
	// pipe there reads as idle).
	if root != nil {
		if err := root.IsRegular(TurnFile(ws)); err == nil {
			s.State = messages.SessionWorking
		} else {
			n.Refusals.Absent(err)
		}
		// Whom it hears, as the daemon wrote it for the hook when it
		// started it.
		if h, ok, err := listening.ReadHears(root, ws); err == nil && ok {
			s.Hears = h
		}
	}
	// The session's own record is where its launch note is; a session
	// without one (at a terminal) works on its workspace's record.
	if messages.ValidateHash(nm.Launch) == nil {
		// A launch note the index holds says its record; any other post is
		// read.
		if e, ok, err := idx.Launch(ctx, k, nm.Launch); err == nil && ok {
			s.Record = e.Record
		} else if info, err := r.Info(ctx, nm.Launch); err == nil {
			switch info.Kind {
			case fossilio.KindPost:
				s.Record = info.Root
			case fossilio.KindTicketChange:
				s.Record = info.Ticket
			}
		}
	} else {
		s.Launch = ""
	}
	if s.Record == "" {
		if b, err := n.BoundWorkspace(ctx, r, ws); err == nil {
			s.Record = b.Home
		}
	}
	if root != nil {
		s.Usage = n.sessionUsage(root, ws, s.Launch)
	}
	return s
}

// sessionUsage is a running session's use of the node so far (D50): the
// node's count of its model, which its proxy keeps outside the sandbox,
// and the session's own account of its turns, read through no link and
// believed of that session alone; nil when neither is there for its
// launch.
func (n Node) sessionUsage(root *unixhost.Root, ws host.Workspace, launch string) *messages.SessionUsage {
	u, _, err := usage.Read(root, ws, launch)
	if err != nil && !n.Refusals.Absent(err) {
		n.Log.Warn("a session's usage does not read", slog.String("workspace", ws.Key.String()), slog.String("error", err.Error()))
	}
	return u
}

// currentRelease names the current release as the process table names a
// process's: the directory under releases/ the current link leads to; ""
// without a release root.
func (n Node) currentRelease() string {
	if n.Config.Release == "" {
		return ""
	}
	dir, err := filepath.EvalSymlinks(filepath.Join(n.Config.Release, "current"))
	if err != nil {
		return ""
	}
	return filepath.Base(dir)
}

// lookAlikes lists the processes whose command lines name a workspace
// they are no session of (D45), by PID: one entry per workspace claimed,
// the first messages.MaxLookAlikeClaims of each, each process whole or
// not at all, messages.MaxLookAlikes entries in all (D78). leftOut counts
// the processes left out.
func lookAlikes(t host.Table) (out []messages.LookAlikeStatus, leftOut int) {
	ls := slices.Clone(t.LookAlikes)
	slices.SortStableFunc(ls, func(a, b host.LookAlike) int { return cmp.Compare(a.ID.PID, b.ID.PID) })
	for i, l := range ls {
		names := l.Names[:min(len(l.Names), messages.MaxLookAlikeClaims)]
		if len(out)+len(names) > messages.MaxLookAlikes {
			return out, len(ls) - i
		}
		cmd := messages.ClipText(messages.CleanText(strings.Join(l.Argv, " ")), lookAlikeCommandLen)
		if cmd == "" {
			cmd = "(unread)"
		}
		why := messages.ClipText(messages.CleanText(l.Why), messages.MaxShortLen)
		claims := 0
		if len(l.Names) > 1 {
			claims = len(l.Names)
		}
		for _, nm := range names {
			out = append(out, messages.LookAlikeStatus{Login: nm.Key.Login, Project: nm.Key.Project,
				PID: l.ID.PID, StartTime: l.ID.Start, Command: cmd, Why: why, Claims: claims})
		}
	}
	return out, 0
}

// lookAlikeCommandLen bounds a look-alike's command line in the status.
const lookAlikeCommandLen = 256

// EnforcedRestrictions are the restrictions of E10 this node can run an
// agent under (D37, D39), as create accepts them and the status lists them:
// no_password (the clone forgets its password; the session's own replies
// and notes, and the agent's writes, go through the tools on its MCP
// socket, as its user), branch (push refuses a check-in on another branch)
// and own_thread (post refuses a to outside the record's thread), both of
// which hold because, without a password, the tools are the only way out.
var EnforcedRestrictions = []string{"no_password", "branch", "own_thread"}

// TurnFile is the file a session holds while a turn runs (contracts 6).
func TurnFile(ws host.Workspace) string { return filepath.Join(ws.Session, "turn") }

// FirstLine is s's first line, trimmed: what a one-line message or log
// entry keeps of a longer text.
func FirstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
