package workspaces

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/listening"
	"github.com/ocx-go/ocx/host/procs"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
)

// SessionStartInput is what `ocx session start` takes.
type SessionStartInput struct {
	Workspace string // LOGIN/PROJECT
	Kind      string // mechanical or llm
	Command   []string
	Runner    string
	Model     string
	Lifetime  string // completes or stays
	// Record is the session's own record: a thread (any of its posts) or a
	// ticket (its id), full or a prefix of at least 10 digits; empty means
	// the workspace's record.
	Record string
	// Release is current (the default) or previous.
	Release string
	// Hears are the users whose posts wake the session: logins, or ["*"]
	// for every user; empty hears nobody. nil is the default: every user
	// holding admin or setup now, written out in the definition (D27).
	Hears []string
	// Checkins are the branches whose check-ins the session is given
	// (seed 001 E7); empty for none.
	Checkins []string
	// Wall is the longest the session runs (a record's budget.wall); empty
	// sets no limit.
	Wall string
	// Tokens is what an llm session's model may read and write (a
	// record's budget.tokens, D50); 0 sets no limit.
	Tokens uint64
	// Disk is the size of the workspace's own file system while the
	// session runs (limits.disk, D82); empty: node.json's
	// session_limits.disk.
	Disk string
	// Branch is the branch of the workspace a start makes when there is
	// none (seed 000 migration row 1, D57); empty means trunk. A workspace
	// that exists keeps its own.
	Branch string
	DryRun bool
}

// DefaultStartBranch is the branch of a workspace a start makes.
const DefaultStartBranch = "trunk"

// ownRecord is a session's own record: a thread's root post or a ticket.
type ownRecord struct {
	Kind messages.ListenKind // thread or ticket
	ID   string              // the root post's hash or the ticket's id
}

// note returns where a note on this record goes, as login.
func (o ownRecord) note(login, text string) fossilio.NoteWrite {
	if o.Kind == messages.ListenTicket {
		return fossilio.NoteWrite{Login: login, Ticket: o.ID, Text: text}
	}
	return fossilio.NoteWrite{Login: login, Thread: o.ID, ReplyTo: o.ID, Text: text}
}

// resolveRecord finds a session's own record from what the caller typed: a
// post names its thread, anything else must be a ticket's id or a prefix of
// one.
func resolveRecord(ctx context.Context, r *fossilio.Repo, s string) (ownRecord, error) {
	info, err := r.Info(ctx, s)
	if err == nil {
		if info.Kind != fossilio.KindPost {
			return ownRecord{}, fmt.Errorf("record: %s is a %s, not a forum post or a ticket", info.Hash, info.Kind)
		}
		return ownRecord{Kind: messages.ListenThread, ID: info.Root}, nil
	}
	if !errors.Is(err, fossilio.ErrNotFound) {
		return ownRecord{}, fmt.Errorf("record: %w", err)
	}
	changes, terr := r.TicketChanges(ctx, s)
	if terr != nil || len(changes) == 0 {
		return ownRecord{}, fmt.Errorf("record: %q names no forum post and no ticket of %s", s, r.ProjectName())
	}
	return ownRecord{Kind: messages.ListenTicket, ID: changes[0].Ticket}, nil
}

// SessionStart starts a session (seed 002, "start a session"): the session
// definition and the launch note, as the caller, on the session's own record;
// the own record written into the listening index; the launch handed to the
// daemon (started if none runs); then a bounded wait for its outcome (D12):
// the session's process in the table, or the daemon's refusal or end note.
// The daemon alone decides a refusal; checks that need no process table are
// made before anything is written.
//
// A second start restarts (D33): when the daemon runs a session in the
// workspace, it is stopped first (`stop LOGIN PROJECT`, as SessionStop
// does) and its end note awaited, at most the node's stop wait, before
// anything is written; past the bound the start stops, writing nothing. A
// session at a terminal, or a process the table cannot read, refuses the
// start before anything is written, naming it.
func (n Actions) SessionStart(ctx context.Context, in SessionStartInput) *node.Answer {
	a := node.NewAnswer("session start", in.DryRun)
	key, err := messages.ParseWorkspaceKey(in.Workspace)
	if err != nil {
		return a.Stop(fmt.Errorf("workspace: %w", err))
	}
	def, err := startDefinition(in)
	if err != nil {
		return a.Stop(err)
	}
	release, err := n.startRelease(in.Release, def)
	if err != nil {
		return a.Stop(err)
	}
	p, ws, err := n.projectWorkspace(key)
	if err != nil {
		return a.Stop(err)
	}
	if err := node.OnHost(ws); err != nil {
		if made, err := n.addForStart(ctx, a, key, in, err); !made {
			return a.Stop(err)
		}
	}
	if err := diskRefusal(def, ws); err != nil {
		return a.Stop(err)
	}
	r, err := n.privilegedRepo(ctx, p)
	if err != nil {
		return a.Stop(err)
	}
	defer r.Close()
	f, err := n.startFacts(ctx, a, r, p, ws, key, def, in.Record)
	if err != nil {
		return a.Stop(err)
	}
	f.Release = release
	code, err := r.ProjectCode(ctx)
	if err != nil {
		return a.Stop(err)
	}
	run := &startRun{n: n, r: r, p: p, code: code, ws: ws, key: key, held: f.Held, own: f.Own}
	return a.Stop(node.Execute(ctx, a, startPlan(f, run)))
}

// startDefinition is the session definition a start posts, checked.
func startDefinition(in SessionStartInput) (*messages.SessionDefinition, error) {
	def := &messages.SessionDefinition{
		Kind: messages.SessionKind(in.Kind), Command: in.Command, Runner: in.Runner, Model: in.Model,
		Lifetime: messages.Lifetime(in.Lifetime), Hears: in.Hears, Checkins: in.Checkins,
	}
	if in.Wall != "" || in.Tokens > 0 || in.Disk != "" {
		def.Limits = &messages.SessionLimits{Wall: in.Wall, Tokens: in.Tokens, Disk: in.Disk}
	}
	if _, err := def.Encode(); err != nil {
		return nil, err
	}
	return def, nil
}

// diskRefusal refuses a limits.disk the node cannot give the workspace
// (D82), naming why, before anything is written: the daemon would refuse
// its launch for the same reason.
func diskRefusal(def *messages.SessionDefinition, ws host.Workspace) error {
	if def.Disk() == "" {
		return nil
	}
	if why := unixhost.DiskWhy(); why != "" {
		return fmt.Errorf("limits.disk is not provided by this node: %s", why)
	}
	if !unixhost.Exists(ws.Disk) {
		return fmt.Errorf("limits.disk %s cannot be provided: workspace %s was made without a disk of its own (before node.json's session_limits.disk); terminate it and add it again", def.Disk(), ws.Key)
	}
	return nil
}

// startRelease is the release a start names; an llm session's runner must
// be offered by it (E9: refused before anything is written).
func (n Actions) startRelease(in string, def *messages.SessionDefinition) (string, error) {
	release, err := n.launchRelease(in)
	if err != nil || def.Kind != messages.LLM {
		return release, err
	}
	dir := n.node.Release
	if release == messages.ReleasePrevious {
		dir = filepath.Join(n.node.Config.Release, messages.ReleasePrevious)
	}
	return release, procs.RequireOffered(dir, def.Runner)
}

// projectWorkspace is workspace key's project and its paths on the host.
func (n Actions) projectWorkspace(key messages.WorkspaceKey) (node.Project, host.Workspace, error) {
	p, err := n.node.Project(key.Project)
	if err != nil {
		return node.Project{}, host.Workspace{}, fmt.Errorf("workspace: %w", err)
	}
	ws, err := n.node.WorkspacePaths(key)
	return p, ws, err
}

// addForStart makes the project workspace a start needs when it is not on
// the host (seed 000 migration row 1, D57), as `workspace add` makes it:
// its definition, the template's sandbox, on a thread of its own. made
// says the start goes on; a dry run stops after saying what add would do,
// with a nil error when add would make it.
func (n Actions) addForStart(ctx context.Context, a *node.Answer, key messages.WorkspaceKey, in SessionStartInput, missing error) (made bool, err error) {
	branch := in.Branch
	if branch == "" {
		branch = DefaultStartBranch
	}
	if in.DryRun {
		a.Would("make workspace %s first, as `ocx workspace add --login %s --project %s --branch %s` does: it is not on the host (%v); the start is checked once it is made", key, key.Login, key.Project, branch, missing)
	} else {
		a.Logf("workspace %s is not on the host (%v): making it, as `ocx workspace add --login %s --project %s --branch %s` does", key, missing, key.Login, key.Project, branch)
	}
	add := n.WorkspaceAdd(ctx, WorkspaceAddInput{Login: key.Login, Project: key.Project, Branch: branch, DryRun: in.DryRun})
	for _, l := range add.Log {
		a.Logf("workspace add: %s", l)
	}
	switch {
	case !add.OK() && in.DryRun:
		return false, fmt.Errorf("workspace %s does not exist on the host (%v), and `workspace add` would refuse it: %s", key, missing, *add.Stopped)
	case !add.OK():
		return false, fmt.Errorf("workspace %s does not exist on the host (%v), and `workspace add` refused to make it: %s", key, missing, *add.Stopped)
	}
	return !in.DryRun, nil
}

// startFacts is what a start read of the record and the host, for
// startPlan.
type startFacts struct {
	Key     messages.WorkspaceKey
	Caller  string
	Release string
	// Workspace is the workspace definition's hash the launch names.
	Workspace string
	Own       ownRecord
	// DefText is the session definition's post.
	DefText    string
	ListenPath string
	Repository string
	// Held is the session the daemon runs in the workspace now, which a
	// second start stops first (D33); nil when none.
	Held     *daemonSession
	StopWait time.Duration
}

// startFacts reads what a start needs of the record and the host, and
// refuses what the record refuses, before anything is written.
func (n Actions) startFacts(ctx context.Context, a *node.Answer, r *fossilio.Repo, p node.Project, ws host.Workspace, key messages.WorkspaceKey, def *messages.SessionDefinition, record string) (startFacts, error) {
	f := startFacts{Key: key, Caller: n.node.Caller.Login, Repository: p.Repository, StopWait: n.node.StopWait()}
	b, err := n.node.BoundWorkspace(ctx, r, ws)
	if err != nil {
		return f, fmt.Errorf("workspace %s does not exist on the host (%v); `ocx workspace add` makes it", key, err)
	}
	if _, err := r.Info(ctx, b.Workspace); err != nil {
		return f, fmt.Errorf("workspace %s: its definition %s is not on the record: %v", key, b.Workspace, err)
	}
	f.Workspace = b.Workspace
	// Whom it hears is written out on the record (protocol v1 E8): by
	// default, every user holding admin or setup now.
	if def.Hears == nil {
		if def.Hears, err = listening.ResolveHears(ctx, r, nil); err != nil {
			return f, err
		}
		a.Logf("the session hears every user holding admin or setup now: %s", strings.Join(def.Hears, ", "))
	}
	defBlock, err := def.Encode()
	if err != nil {
		return f, err
	}
	f.DefText = fmt.Sprintf("Session of workspace `%s`: %s.\n\n%s", key, def, defBlock)
	f.Own = ownRecord{Kind: messages.ListenThread, ID: b.Home}
	if record != "" {
		if f.Own, err = resolveRecord(ctx, r, record); err != nil {
			return f, err
		}
	}
	if f.ListenPath, err = listeningPath(ws, f.Own.Kind, f.Own.ID); err != nil {
		return f, err
	}
	if err := n.oneRun(ctx, r, key, f.Own); err != nil {
		return f, err
	}
	// A second start restarts (seed 002, D33): a session the daemon runs
	// in the workspace is stopped first and its end awaited; one at a
	// terminal is never stopped this way, and refuses the start.
	f.Held, err = n.holder(key)
	return f, err
}

// oneRun refuses a start on a protocol v1 record whose agent has had its
// run (D76, record.Index.OneRun: seed 001 E4, one process for the whole
// run; E5, one response), before anything is written or stopped: the
// daemon would refuse its launch note, and a second run would end with no
// response of its own. What the rule reads is what the node received
// since the record.
func (n Actions) oneRun(ctx context.Context, r *fossilio.Repo, key messages.WorkspaceKey, own ownRecord) error {
	if own.Kind != messages.ListenThread {
		return nil
	}
	info, err := r.Info(ctx, own.ID)
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	why, err := record.NewIndexAfter(r, n.node.Config.User, info.Receipt-1).OneRun(ctx, key, own.ID, nil)
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	if why != "" {
		return fmt.Errorf("record: %s; nothing written", why)
	}
	return nil
}

// listeningPath is where the listening index keeps a listener's file.
func listeningPath(ws host.Workspace, kind messages.ListenKind, names string) (string, error) {
	file, err := messages.ListeningFileName(kind, names)
	if err != nil {
		return "", err
	}
	return ws.Listening(file)
}

// startEffects are the effects a start's plan runs, on the record, the
// host and the daemon.
type startEffects interface {
	// stopHeld stops the session the daemon runs and awaits its end.
	stopHeld(ctx context.Context, a *node.Answer) error
	// post writes a note as the caller on the session's own record.
	post(ctx context.Context, text string) (string, error)
	// listen writes the own record into the listening index; added says
	// it was not there before.
	listen(ctx context.Context) (added bool, err error)
	// unlisten removes the own record from the listening index again.
	unlisten(ctx context.Context) error
	// hand gives the daemon a line, then runs the backoffice.
	hand(ctx context.Context, a *node.Answer, line pipe.Line) error
	// awaitOutcome waits for what the daemon made of a launch.
	awaitOutcome(ctx context.Context, a *node.Answer, launch string) error
}

// startPlan is a session start's plan (seed 002, D33, D74): first the
// host's write, the own record into the listening index, so that a host
// that cannot write (a full disk) refuses the start with nothing done;
// then stop the session the daemon runs there, if one does; post the
// definition, then the launch note naming it, on the own record; hand the launch to the daemon
// and await its outcome. A step that fails after another was done stops
// the start saying each step done (a launch note on the record is the
// daemon's to launch, whoever hands it over, so a failed hand-off still
// awaits the outcome); one that fails before the launch note takes the
// own record out of the index again when the start put it there.
func startPlan(f startFacts, fx startEffects) node.Plan {
	var plan node.Plan
	var done []string
	var defHash, launchHash string
	added := false
	// stopped is why a step failed, with what the start did before it.
	stopped := func(err error) error {
		if len(done) == 0 {
			return fmt.Errorf("%w; nothing was done", err)
		}
		return fmt.Errorf("%w; done before it stopped: %s", err, strings.Join(done, "; "))
	}
	plan.Add(fmt.Sprintf("write %s", f.ListenPath), func(ctx context.Context, a *node.Answer) error {
		var err error
		if added, err = fx.listen(ctx); err != nil {
			return stopped(err)
		}
		a.Logf("wrote %s", f.ListenPath)
		if added {
			done = append(done, "wrote "+f.ListenPath)
		}
		return nil
	})
	plan.Deferred(func(ctx context.Context, a *node.Answer) {
		if launchHash != "" || !added {
			return
		}
		if err := fx.unlisten(ctx); err != nil {
			a.Logf("the start stopped before its launch note, and %s could not be removed again: %v", f.ListenPath, err)
			return
		}
		a.Logf("the start stopped before its launch note: removed %s again", f.ListenPath)
	})
	if f.Held != nil {
		plan.Add(fmt.Sprintf("hand `%s` to the daemon, which runs the session of launch %s in %s (%s), and wait at most %s for its end note", pipe.StopLine{Login: f.Key.Login, Project: f.Key.Project}, f.Held.Launch, f.Key, f.Held, f.StopWait), func(ctx context.Context, a *node.Answer) error {
			if err := fx.stopHeld(ctx, a); err != nil {
				return stopped(err)
			}
			done = append(done, fmt.Sprintf("stopped the session of launch %s", f.Held.Launch))
			return nil
		})
	}
	plan.Add(fmt.Sprintf("post as %q on %s %s:\n%s", f.Caller, f.Own.Kind, f.Own.ID, f.DefText), func(ctx context.Context, a *node.Answer) error {
		var err error
		if defHash, err = fx.post(ctx, f.DefText); err != nil {
			return stopped(fmt.Errorf("post the session definition: %w", err))
		}
		a.Logf("posted the session definition as %q at %s on %s %s", f.Caller, defHash, f.Own.Kind, f.Own.ID)
		done = append(done, fmt.Sprintf("posted the session definition %s (no launch names it)", defHash))
		return nil
	})
	plan.Add(fmt.Sprintf("post the launch note (release %s) on the same record and hand `post %s LAUNCH` to the daemon", f.Release, f.Repository), func(ctx context.Context, a *node.Answer) error {
		launch := &messages.LaunchNote{Login: f.Key.Login, Project: f.Key.Project, Workspace: f.Workspace, Session: defHash, Release: f.Release}
		block, err := launch.Encode()
		if err != nil {
			return stopped(err)
		}
		if launchHash, err = fx.post(ctx, fmt.Sprintf("Launch of the session %s in workspace `%s`.\n\n%s", defHash[:fossilio.MinPrefix], f.Key, block)); err != nil {
			launchHash = ""
			return stopped(fmt.Errorf("post the launch note: %w", err))
		}
		a.Logf("posted the launch note as %q at %s", f.Caller, launchHash)
		a.SetResult(launchHash)
		done = append(done, fmt.Sprintf("posted the launch note %s, which is the daemon's to launch", launchHash))
		return nil
	})
	plan.Add("", func(ctx context.Context, a *node.Answer) error {
		if err := fx.hand(ctx, a, pipe.PostLine{Repository: f.Repository, Hash: launchHash}); err != nil {
			// The launch is on the record: the hook hands it over too, so
			// what the daemon made of it is awaited all the same.
			a.Logf("could not hand the launch to the daemon (%v); the hook hands it over on its next run", err)
		}
		if err := fx.awaitOutcome(ctx, a, launchHash); err != nil {
			return stopped(err)
		}
		return nil
	})
	return plan
}

// startRun is startEffects on this node.
type startRun struct {
	n    Actions
	r    *fossilio.Repo
	p    node.Project
	ws   host.Workspace
	key  messages.WorkspaceKey
	held *daemonSession
	own  ownRecord
	code string
}

func (s *startRun) stopHeld(ctx context.Context, a *node.Answer) error {
	return s.n.stopAndAwaitEnd(ctx, a, s.r, s.key, s.held)
}

func (s *startRun) post(ctx context.Context, text string) (string, error) {
	return s.n.node.Writer(s.p, s.code).WriteNote(ctx, s.own.note(s.n.node.Caller.Login, text))
}

func (s *startRun) listen(ctx context.Context) (bool, error) {
	root, err := unixhost.OpenRoot(s.n.node.Agents)
	if err != nil {
		return false, err
	}
	defer root.Close()
	file, err := messages.ListeningFileName(s.own.Kind, s.own.ID)
	if err != nil {
		return false, err
	}
	_, had, _ := listening.Lookup(root, s.ws, file)
	return !had, listening.Set(ctx, root, s.ws, s.own.Kind, s.own.ID, 0, true)
}

func (s *startRun) unlisten(ctx context.Context) error {
	return s.n.setListening(ctx, s.ws, s.own.Kind, s.own.ID, 0, false)
}

func (s *startRun) hand(ctx context.Context, a *node.Answer, line pipe.Line) error {
	err := s.n.node.EnsureAndSend(ctx, a, line)
	s.n.node.Backoffice(ctx, a, s.p)
	return err
}

func (s *startRun) awaitOutcome(ctx context.Context, a *node.Answer, launch string) error {
	return s.n.awaitOutcome(ctx, a, s.r, s.key, launch)
}

// setListening writes (on) or removes a listener's file in the listening
// index, under the index's lock (listening.Set): the note is on the node by
// now, so a rebuild that meets this change ends as the notes say (D21).
// after is the listen note's receipt (0 for the session's own record).
func (n Actions) setListening(ctx context.Context, ws host.Workspace, kind messages.ListenKind, names string, after int64, on bool) error {
	root, err := unixhost.OpenRoot(n.node.Agents)
	if err != nil {
		return err
	}
	defer root.Close()
	return listening.Set(ctx, root, ws, kind, names, after, on)
}

// awaitOutcome waits, at most the node's outcome wait, for what the daemon
// made of a launch: the session's process in the table (started), or a
// refusal or end note replying to the launch (stopped, saying why).
func (n Actions) awaitOutcome(ctx context.Context, a *node.Answer, r *fossilio.Repo, key messages.WorkspaceKey, launch string) error {
	info, err := r.Info(ctx, launch)
	if err != nil {
		return fmt.Errorf("read the launch note back: %w", err)
	}
	idx := record.NewIndexAfter(r, n.node.Config.User, info.Receipt-1)
	deadline := time.Now().Add(n.node.OutcomeWait())
	for {
		tab, err := n.scan()
		if err != nil {
			return err
		}
		o, err := outcomeOf(ctx, idx, tab, key, launch)
		if err != nil {
			return err
		}
		if o.decided() {
			switch {
			case o.Started != nil:
				a.Logf("the daemon started the session: pid %d (start time %d), %s", o.Started.ID.PID, o.Started.ID.Start, o.Started.Origin)
			case o.ranToItsEnd():
				a.Logf("the daemon started the session, which has already ended as it should: %s (pid %d)", o.End.StatusString(), o.End.PID)
			}
			return o.err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no outcome of launch %s within %s: no session process in the table and no refusal or end note; see `ocx status` and %s", launch, n.node.OutcomeWait(), n.node.Layout.Log())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// launchOutcome is what the daemon made of a launch so far: its session's
// process in the table, or its refusal or end note; none of them while it
// is undecided.
type launchOutcome struct {
	Started *host.Process
	Refusal *messages.RefusalNote
	End     *messages.EndNote
}

func (o launchOutcome) decided() bool { return o.Started != nil || o.Refusal != nil || o.End != nil }

// ranToItsEnd says the session ended before it was seen running, the way
// a session ends when it has done its work: exit 0 (D17: a completes
// session's report written, a CI tag written), with no budget. A session
// that fast is a short job done, not a start that failed.
func (o launchOutcome) ranToItsEnd() bool {
	e := o.End
	return o.Started == nil && o.Refusal == nil && e != nil && e.Status == messages.EndExited &&
		e.ExitCode != nil && *e.ExitCode == 0 && e.Budget == ""
}

// err says why a decided launch started no session; nil when it did.
func (o launchOutcome) err() error {
	switch {
	case o.Started != nil:
		return nil
	case o.Refusal != nil:
		return fmt.Errorf("the daemon refused the launch: %s", o.Refusal.Reason)
	case o.ranToItsEnd():
		return nil
	case o.End != nil:
		return fmt.Errorf("the session ended at once (%s): %s", o.End.Status, o.End.Note)
	}
	return nil
}

// outcomeOf looks once for a launch's outcome, in the process table tab
// and the daemon's replies on the record.
func outcomeOf(ctx context.Context, idx *record.Index, tab host.Table, key messages.WorkspaceKey, launch string) (launchOutcome, error) {
	if proc, ok := servingIn(tab, key, launch); ok {
		return launchOutcome{Started: &proc}, nil
	}
	refusals, err := node.RepliesTo[*messages.RefusalNote](ctx, idx, launch)
	if err != nil {
		return launchOutcome{}, err
	}
	if len(refusals) > 0 {
		return launchOutcome{Refusal: refusals[0]}, nil
	}
	ends, err := node.RepliesTo[*messages.EndNote](ctx, idx, launch)
	if err != nil {
		return launchOutcome{}, err
	}
	if len(ends) > 0 {
		return launchOutcome{End: ends[0]}, nil
	}
	return launchOutcome{}, nil
}

// scan reads the process table of this agents root once.
func (n Actions) scan() (host.Table, error) {
	t, err := n.node.ProcTable()
	if err != nil {
		return host.Table{}, err
	}
	defer t.Close()
	tab, err := t.Scan()
	if err != nil {
		return host.Table{}, fmt.Errorf("read the process table: %w", err)
	}
	return tab, nil
}

// servingIn finds the `workspace serve` process of a launch in tab.
func servingIn(tab host.Table, key messages.WorkspaceKey, launch string) (host.Process, bool) {
	for _, proc := range tab.Procs {
		for _, nm := range proc.Names {
			if nm.Verb == host.VerbServe && nm.Key == key && nm.Launch == launch {
				return proc, true
			}
		}
	}
	return host.Process{}, false
}

// SessionStop stops a workspace's session (seed 002, "stop a session"):
// `stop LOGIN PROJECT` to the daemon, started if none runs, which sends TERM
// to the session's process group and records its end. Refused when no
// process names the workspace. Nothing waits for the end.
func (n Actions) SessionStop(ctx context.Context, keyText string, dry bool) *node.Answer {
	a := node.NewAnswer("session stop", dry)
	key, err := messages.ParseWorkspaceKey(keyText)
	if err != nil {
		return a.Stop(fmt.Errorf("workspace: %w", err))
	}
	if _, err := n.node.Project(key.Project); err != nil {
		return a.Stop(fmt.Errorf("workspace: %w", err))
	}
	v, err := n.node.Naming(key)
	if err != nil {
		return a.Stop(err)
	}
	plan, err := stopPlan(key, v, daemonRun{n.node})
	return node.Executed(ctx, a, plan, err)
}

// daemonEffects hand the daemon its lines.
type daemonEffects interface {
	// send gives the daemon lines, starting it if none runs.
	send(ctx context.Context, a *node.Answer, lines ...pipe.Line) error
}

// daemonRun is daemonEffects on this node.
type daemonRun struct{ n *node.Node }

func (d daemonRun) send(ctx context.Context, a *node.Answer, lines ...pipe.Line) error {
	return d.n.EnsureAndSend(ctx, a, lines...)
}

// stopPlan is a stop's plan for what names workspace key (v): refused
// when nothing does; else `stop LOGIN PROJECT` handed to the daemon.
func stopPlan(key messages.WorkspaceKey, v host.Verdict, fx daemonEffects) (node.Plan, error) {
	var plan node.Plan
	if v.Named == host.No {
		return plan, fmt.Errorf("no session runs in workspace %s: no process names it%s", key, v.Ignored())
	}
	line := pipe.StopLine{Login: key.Login, Project: key.Project}
	plan.Add(fmt.Sprintf("hand `%s` to the daemon (%s)", line, v), func(ctx context.Context, a *node.Answer) error {
		if err := fx.send(ctx, a, line); err != nil {
			return err
		}
		a.Logf("the daemon sends TERM to the session and records its end on the record")
		return nil
	})
	return plan, nil
}

// Ended returns the end note the daemon wrote for a launch, or nil while
// there is none.
func (n Actions) Ended(ctx context.Context, project, launch string) (*messages.EndNote, error) {
	r, err := n.openProject(project)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	info, err := r.Info(ctx, launch)
	if err != nil {
		return nil, err
	}
	ends, err := node.RepliesTo[*messages.EndNote](ctx, record.NewIndexAfter(r, n.node.Config.User, info.Receipt-1), info.Hash)
	if err != nil {
		return nil, err
	}
	if len(ends) > 0 {
		return ends[0], nil
	}
	return nil, nil
}

// openProject opens the node's repository of the named project.
func (n Actions) openProject(name string) (*fossilio.Repo, error) {
	p, err := n.node.Project(name)
	if err != nil {
		return nil, err
	}
	return n.node.OpenProjectRepo(p)
}

// launchRelease is the release a launch asks for: current (the default) or
// previous, which needs a release root with a previous release.
func (n Actions) launchRelease(release string) (string, error) {
	if release == "" {
		release = messages.ReleaseCurrent
	}
	if release != messages.ReleaseCurrent && release != messages.ReleasePrevious {
		return "", fmt.Errorf("release: %q is not current or previous", release)
	}
	if release == messages.ReleasePrevious {
		if n.node.Config.Release == "" {
			return "", errors.New("release: this node has no release root, so no previous release")
		}
		if _, err := os.Stat(filepath.Join(n.node.Config.Release, "previous")); err != nil {
			return "", fmt.Errorf("release: %s has no previous release", n.node.Config.Release)
		}
	}
	return release, nil
}

// daemonSession is a session the daemon runs in a workspace: its
// `workspace serve` process and the launch note it serves.
type daemonSession struct {
	Proc   host.Process
	Launch string
}

func (d *daemonSession) String() string {
	return fmt.Sprintf("pid %d, `%s`, %s", d.Proc.ID.PID, strings.Join(d.Proc.Argv, " "), originText(d.Proc.Origin))
}

// originText says how a process was started, as a refusal says it.
func originText(o messages.Origin) string {
	switch o {
	case messages.OriginDaemon:
		return "started by the daemon"
	case messages.OriginOrphan:
		return "started by a daemon no longer running"
	}
	return "started at a terminal"
}

// holder reads the process table for what holds workspace k now (holderOf).
func (n Actions) holder(k messages.WorkspaceKey) (*daemonSession, error) {
	tab, err := n.scan()
	if err != nil {
		return nil, err
	}
	return holderOf(tab, k)
}

// holderOf says what holds workspace k in the process table, for a second
// start (D33): nil when no process names it; the session the daemon runs
// there (a `workspace serve` with its launch, which a daemon started, and
// nothing else beside it but its sandbox), which a start may stop; or an
// error saying why a start may not replace what is there: a session at a
// terminal (`workspace run|start`, or any process naming the workspace
// that no daemon started), named by its PID and command line; a process
// the table could not read; a session starting or ending (its sandbox
// alone names the workspace).
func holderOf(tab host.Table, k messages.WorkspaceKey) (*daemonSession, error) {
	v := tab.Naming(k)
	switch v.Named {
	case host.No:
		return nil, nil
	case host.Unknown:
		return nil, fmt.Errorf("the process table cannot say what holds workspace %s (%s): a start would stop nothing it cannot see; refused, nothing written", k, v)
	}
	var serve *daemonSession
	var terminal []string
	for _, p := range tab.Procs {
		named, unsure := p.NamesKey(k)
		if unsure && !named {
			return nil, fmt.Errorf("process %d may name workspace %s under a root that cannot be matched, or from where the table cannot tell (`%s`%s); refused, nothing written%s", p.ID.PID, k, strings.Join(p.Argv, " "), partialText(p), v.Ignored())
		}
		if !named {
			continue
		}
		atTerminal := p.Origin != messages.OriginDaemon && p.Origin != messages.OriginOrphan
		for _, nm := range p.Names {
			if nm.Key != k || nm.Unsure {
				continue
			}
			switch {
			case nm.Verb == host.VerbRun || nm.Verb == host.VerbStart:
				atTerminal = true
			case nm.Verb == host.VerbServe && nm.Launch != "" && !atTerminal && serve == nil:
				serve = &daemonSession{Proc: p, Launch: nm.Launch}
			}
		}
		if atTerminal {
			terminal = append(terminal, fmt.Sprintf("pid %d, `%s`, %s", p.ID.PID, strings.Join(p.Argv, " "), originText(p.Origin)))
		}
	}
	switch {
	case len(terminal) > 0:
		return nil, fmt.Errorf("a session at a terminal holds workspace %s (%s): a start never stops it; stop it where it runs, or with `ocx session stop %s`, then start again; nothing written%s", k, strings.Join(terminal, "; "), k, v.Ignored())
	case serve == nil:
		return nil, fmt.Errorf("a session is starting or ending in workspace %s (%s, and no `workspace serve` yet or any more): try again in a moment; nothing written", k, v)
	case messages.ValidateHash(serve.Launch) != nil:
		return nil, fmt.Errorf("the session in workspace %s (%s) serves %q, which is not a launch note's hash; refused, nothing written", k, serve, serve.Launch)
	}
	return serve, nil
}

// partialText is what the table could not read of p, as a clause.
func partialText(p host.Process) string {
	if p.Partial == "" {
		return ""
	}
	return ": " + p.Partial
}

// stopAndAwaitEnd stops the session the daemon runs in workspace key, as
// SessionStop does, and waits at most the node's stop wait for the daemon's
// end note of the launch it serves; past the bound it says so, and the
// caller writes nothing more.
func (n Actions) stopAndAwaitEnd(ctx context.Context, a *node.Answer, r *fossilio.Repo, key messages.WorkspaceKey, held *daemonSession) error {
	info, err := r.Info(ctx, held.Launch)
	if err != nil {
		return fmt.Errorf("the session in workspace %s (%s) serves launch %s, which the record of %s does not hold (%v): not stopped, nothing written", key, held, held.Launch, r.ProjectName(), err)
	}
	a.Logf("a session runs in workspace %s: launch %s, %s; a second start restarts it: stop it first", key, held.Launch, held)
	if err := n.node.EnsureAndSend(ctx, a, pipe.StopLine{Login: key.Login, Project: key.Project}); err != nil {
		return fmt.Errorf("stop the session of launch %s: %w; nothing written", held.Launch, err)
	}
	idx := record.NewIndexAfter(r, n.node.Config.User, info.Receipt-1)
	deadline := time.Now().Add(n.node.StopWait())
	for {
		ends, err := node.RepliesTo[*messages.EndNote](ctx, idx, info.Hash)
		if err != nil {
			return err
		}
		if len(ends) > 0 {
			a.Logf("the session of launch %s ended: %s", held.Launch, ends[0].StatusString())
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the session of launch %s (%s) was told to stop, but no end note of it is on the record after %s; nothing more written: see `ocx status` and %s", held.Launch, held, n.node.StopWait(), n.node.Layout.Log())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
