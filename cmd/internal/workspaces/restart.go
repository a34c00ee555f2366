package workspaces

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/fossilio/remote"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
)

// SessionRestartInput is what `ocx session restart` takes.
type SessionRestartInput struct {
	// Release is current (the default) or previous.
	Release string
	// Project restricts the restart to one project; empty means every
	// project of the node.
	Project string
	// Only, when not nil, restricts the restart to the sessions a dry run
	// listed: each workspace with the start it showed. A workspace whose
	// latest start is another by now is left alone, saying so.
	Only   []node.RestartPick
	DryRun bool
}

// restartFacts is what the record and the host say of one workspace whose
// record shows a start, for decideRestart.
type restartFacts struct {
	Key messages.WorkspaceKey
	// Shown is the start a confirming restart's list showed, "" when the
	// restart takes every session; Start is the latest start now.
	Shown, Start string
	// Terminated is the terminated note ending the workspace, "" if none.
	Terminated string
	// Verdict is the daemon's verdict (record.Index.WouldLaunch) on a
	// launch note repeating the start, as the caller would write it.
	Verdict record.Verdict
	// Caps are the login's capabilities on the project ("" once
	// withdrawn); NoAccount when the project has no such user.
	Caps      string
	NoAccount bool
	OnHost    bool // the workspace's binding.json is on the host
	// Named is what the process table says of the workspace.
	Named host.Verdict
	// End is the daemon's end note of the start, nil while there is none.
	End *messages.EndNote
	// Received is when the node received the start; Boot when the host
	// booted (zero when it cannot be read).
	Received, Boot time.Time
}

// decideRestart says whether a restart launches the session again, and
// why (D33): a `stays` session whose start counts and ended (its end note
// on the record, or launched before the host booted: it went down with the
// host), no process naming its workspace, the workspace not terminated,
// and its login not withdrawn. A session whose latest start has no end
// note yet is in flight or running, and is left alone: so pressing twice
// restarts it once. A pure function: every fact is read before.
func decideRestart(f restartFacts) (bool, string) {
	switch {
	case f.Shown != "" && f.Shown != f.Start:
		return false, fmt.Sprintf("its latest start is %s now, not the %s the list showed: look again", fossilio.Short(f.Start), fossilio.Short(f.Shown))
	case f.Terminated != "":
		return false, fmt.Sprintf("its workspace was terminated (%s)", fossilio.Short(f.Terminated))
	case f.Verdict.Ignore != "":
		return false, "a launch repeating it would not count: " + f.Verdict.Ignore
	case f.Verdict.Refuse != nil:
		return false, "a launch repeating it would be refused: " + f.Verdict.Refuse.Reason
	case f.Verdict.Spec == nil:
		return false, "a launch repeating it would not be a launch: " + f.Verdict.Nothing
	case f.Verdict.Spec.Lifetime != messages.Stays:
		return false, fmt.Sprintf("a %s session is never restarted: it ends by itself, on its report", f.Verdict.Spec.Lifetime)
	case f.NoAccount:
		return false, fmt.Sprintf("its login %s has no account on %s", f.Key.Login, f.Key.Project)
	case f.Caps == "":
		return false, fmt.Sprintf("its login %s was withdrawn from %s: it holds no capabilities there", f.Key.Login, f.Key.Project)
	case !f.OnHost:
		return false, fmt.Sprintf("workspace %s is not on the host; `ocx workspace add` makes it again from its definition", f.Key)
	case f.Named.Named == host.Yes:
		return false, fmt.Sprintf("it runs: %s", f.Named)
	case f.Named.Named != host.No:
		return false, fmt.Sprintf("the process table cannot say whether it runs (%s)", f.Named)
	case f.End != nil:
		return true, "it ended: " + f.End.StatusString()
	case !f.Boot.IsZero() && !f.Received.IsZero() && f.Received.Before(f.Boot):
		return true, fmt.Sprintf("it has no end note, and was launched before the host booted (%s): it went down with the host", f.Boot.Format(time.RFC3339))
	}
	return false, fmt.Sprintf("its latest start %s has no end note yet: its launch is in flight, or its session is ending", fossilio.Short(f.Start))
}

// loginCaps are login's own capabilities on p, and whether p holds no
// such user: read in the node's repository r; on a project served from
// another host, asked of the server as the login, with the password this
// node keeps for it (D81): a login the server does not take, or whose
// password this node does not keep, has no account to restart with.
func (n Actions) loginCaps(ctx context.Context, r *fossilio.Repo, p node.Project, login string) (string, bool, error) {
	if !p.OtherHost {
		u, err := r.User(ctx, login)
		switch {
		case errors.Is(err, fossilio.ErrNoSuchUser):
			return "", true, nil
		case err != nil:
			return "", false, err
		}
		return u.Caps, false, nil
	}
	pw, err := n.node.Password(login)
	if err != nil {
		return "", true, nil
	}
	v, err := n.node.ServerViewer(ctx, p, node.Caller{Login: login, Password: pw})
	if errors.Is(err, remote.ErrRefused) {
		return "", true, nil
	}
	if err != nil {
		return "", false, err
	}
	return v.Caps, false, nil
}

// restartPlan is one session a restart launches again.
type restartPlan struct {
	p      node.Project
	r      *fossilio.Repo
	key    messages.WorkspaceKey
	own    ownRecord
	launch *messages.LaunchNote
	out    int // its index in the answer's sessions
}

// SessionRestart restarts the stopped sessions (seed 002, "restart stopped
// sessions"; seed 000: never by itself, a button on the current or the
// previous release). For each workspace whose record shows a start that
// decideRestart lets through, it writes, as the caller, a launch note on
// the session's own record naming the same session definition and the
// chosen release, hands every launch to the daemon, and waits a bounded
// time for each outcome. The daemon's refusals still decide. The answer
// lists each session restarted and each left alone, with why; it stops
// when a launch it wrote started no session.
func (n Actions) SessionRestart(ctx context.Context, in SessionRestartInput) *node.Answer {
	a := node.NewAnswer("session restart", in.DryRun)
	a.Sessions = []node.SessionOutcome{}
	release, err := n.launchRelease(in.Release)
	if err != nil {
		return a.Stop(err)
	}
	projects, only, err := n.restartScope(in)
	if err != nil {
		return a.Stop(err)
	}
	if err := n.node.RequireCaller(); err != nil {
		return a.Stop(err)
	}
	rs := &restartScan{only: only, release: release, codes: map[string]string{}}
	if rs.boot, err = unixhost.BootTime(); err != nil {
		a.Logf("%v: a start without an end note counts as in flight", err)
	}
	if rs.tab, err = n.scan(); err != nil {
		return a.Stop(err)
	}
	for _, p := range projects {
		r, err := n.privilegedRepo(ctx, p)
		if err != nil {
			return a.Stop(err)
		}
		defer r.Close()
		if err := n.restartProject(ctx, a, rs, r, p); err != nil {
			return a.Stop(err)
		}
	}
	if in.DryRun || len(rs.plans) == 0 {
		restartListed(a, rs.plans, release)
		return a
	}
	return a.Stop(n.restart(ctx, a, rs.plans, rs.codes))
}

// restartScope is the projects a restart looks at and, for a confirming
// restart, the start its list showed of each workspace (nil: every one).
func (n Actions) restartScope(in SessionRestartInput) ([]node.Project, map[messages.WorkspaceKey]string, error) {
	projects := n.node.Projects()
	if in.Project != "" {
		p, err := n.node.Project(in.Project)
		if err != nil {
			return nil, nil, fmt.Errorf("project: %w", err)
		}
		projects = []node.Project{p}
	}
	if in.Only == nil {
		return projects, nil, nil
	}
	only := map[messages.WorkspaceKey]string{}
	for _, pick := range in.Only {
		k, err := messages.ParseWorkspaceKey(pick.Workspace)
		if err != nil {
			return nil, nil, fmt.Errorf("the list: %w", err)
		}
		if err := messages.ValidateHash(pick.Start); err != nil {
			return nil, nil, fmt.Errorf("the list: the start of %s: %w", k, err)
		}
		only[k] = pick.Start
	}
	return projects, only, nil
}

// restartScan is what a restart gathers over the projects: the sessions it
// launches again, and each project's code for the launch notes.
type restartScan struct {
	only    map[messages.WorkspaceKey]string
	release string
	boot    time.Time
	tab     host.Table
	plans   []restartPlan
	codes   map[string]string
}

// restartProject decides, for each workspace of project p whose record
// shows a start, whether the restart launches it again (decideRestart),
// adding each to the answer's sessions and each launch to rs.plans.
func (n Actions) restartProject(ctx context.Context, a *node.Answer, rs *restartScan, r *fossilio.Repo, p node.Project) error {
	idx := n.node.Index(r)
	defs, err := node.Defined(ctx, idx)
	if err != nil {
		return err
	}
	picked := func(k messages.WorkspaceKey) bool {
		_, ok := rs.only[k]
		return rs.only == nil || ok
	}
	for _, k := range node.SortedKeys(defs, picked) {
		start, ok, err := idx.LatestStart(ctx, k)
		if err != nil {
			return err
		}
		if !ok {
			if rs.only != nil {
				a.Sessions = append(a.Sessions, node.SessionOutcome{Workspace: k.String(), Start: rs.only[k], Outcome: node.OutcomeLeftAlone, Why: "its record shows no start any more"})
			}
			continue
		}
		plan, facts, err := n.restartFacts(ctx, r, idx, rs.tab, p, defs[k], start)
		if err != nil {
			return err
		}
		facts.Boot, facts.Shown = rs.boot, rs.only[k]
		out := node.SessionOutcome{Workspace: k.String(), Record: start.Record, Start: start.Hash}
		restart, why := decideRestart(facts)
		out.Why = why
		if !restart {
			out.Outcome = node.OutcomeLeftAlone
			a.Sessions = append(a.Sessions, out)
			continue
		}
		out.Outcome, out.Release = node.OutcomeWouldRestart, rs.release
		plan.launch.Release = rs.release
		plan.out = len(a.Sessions)
		a.Sessions = append(a.Sessions, out)
		rs.plans = append(rs.plans, plan)
		if rs.codes[p.Name] == "" {
			if rs.codes[p.Name], err = r.ProjectCode(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// restartListed logs what a dry run (or a restart with nothing to launch)
// found: each session and why, and the command restarting exactly these.
func restartListed(a *node.Answer, plans []restartPlan, release string) {
	for _, o := range a.Sessions {
		a.Logf("%s", o)
	}
	if len(a.Sessions) == 0 {
		a.Logf("no workspace's record shows a start of a session")
	}
	if a.DryRun && len(plans) > 0 {
		picks := make([]string, len(plans))
		for i, pl := range plans {
			picks[i] = a.Sessions[pl.out].Pick().String()
		}
		a.Logf("to restart exactly these: ocx session restart --release %s --only %s", release, strings.Join(picks, ","))
	}
}

// restartFacts reads what decideRestart needs of workspace w, whose latest
// start is start, and the launch a restart would write.
func (n Actions) restartFacts(ctx context.Context, r *fossilio.Repo, idx *record.Index, tab host.Table, p node.Project, w *node.Workspace, start record.Entry) (restartPlan, restartFacts, error) {
	k := w.Key
	f := restartFacts{Key: k, Start: start.Hash, Terminated: w.Terminated, Named: tab.Naming(k)}
	prior, ok := start.Note.(*messages.LaunchNote)
	if !ok {
		return restartPlan{}, f, fmt.Errorf("start %s of %s holds no launch note", start.Hash, k)
	}
	// The launch names the workspace's definition as the host holds it,
	// as `session start` names it; the record's newest when it is gone.
	wsDef := w.Hash
	paths, err := n.node.WorkspacePaths(k)
	if err != nil {
		return restartPlan{}, f, err
	}
	if b, err := n.node.BoundWorkspace(ctx, r, paths); err == nil {
		f.OnHost, wsDef = true, b.Workspace
	} else if !errors.Is(err, fs.ErrNotExist) {
		return restartPlan{}, f, err
	}
	next := &messages.LaunchNote{Login: k.Login, Project: k.Project, Workspace: wsDef, Session: prior.Session, Release: messages.ReleaseCurrent}
	if f.Verdict, err = idx.WouldLaunch(ctx, n.node.Caller.Login, start, next); err != nil {
		return restartPlan{}, f, err
	}
	if f.Caps, f.NoAccount, err = n.loginCaps(ctx, r, p, k.Login); err != nil {
		return restartPlan{}, f, err
	}
	ends, err := node.RepliesTo[*messages.EndNote](ctx, idx, start.Hash)
	if err != nil {
		return restartPlan{}, f, err
	}
	if len(ends) > 0 {
		f.End = ends[0]
	} else {
		info, err := r.Info(ctx, start.Hash)
		if err != nil {
			return restartPlan{}, f, err
		}
		f.Received = info.Received
	}
	own := ownRecord{Kind: messages.ListenThread, ID: start.Record}
	if start.Ticket {
		own.Kind = messages.ListenTicket
	}
	return restartPlan{p: p, r: r, key: k, own: own, launch: next}, f, nil
}

// restart writes each plan's launch note as the caller, hands them all to
// the daemon and waits, at most the node's outcome wait, for each one's
// outcome; it fails when one started no session.
func (n Actions) restart(ctx context.Context, a *node.Answer, plans []restartPlan, codes map[string]string) error {
	waiting, lines, written, err := n.writeLaunches(ctx, a, plans, codes)
	if err != nil {
		return err
	}
	var handErr error
	if len(lines) > 0 {
		handErr = n.node.EnsureAndSend(ctx, a, lines...)
	}
	for _, p := range written {
		n.node.Backoffice(ctx, a, p)
	}
	if handErr != nil {
		// A launch note on the record is the daemon's to launch, whoever
		// hands it over (the hook does too): what it made of each is
		// awaited all the same, so that the answer says it (D74).
		a.Logf("could not hand the launches to the daemon (%v); the hook hands them over on its next run", handErr)
	}
	if err := n.awaitRestarts(ctx, a, waiting); err != nil {
		return err
	}
	var failed []string
	for _, o := range a.Sessions {
		a.Logf("%s", o)
		if o.Outcome == node.OutcomeNotRestarted {
			failed = append(failed, o.Workspace)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d sessions to restart did not start again: %s", len(failed), len(plans), strings.Join(failed, ", "))
	}
	return nil
}

// pendingRestart is a launch a restart wrote and awaits, with the index
// of what the node received from it on.
type pendingRestart struct {
	plan restartPlan
	idx  *record.Index
}

// failRestart marks a session of the answer not restarted, saying why.
func failRestart(a *node.Answer, pl restartPlan, why string) {
	o := &a.Sessions[pl.out]
	o.Outcome, o.Why = node.OutcomeNotRestarted, why
}

// writeLaunches writes each plan's listening index and then posts its
// launch note; it returns the launches to await, the lines handing them to the
// daemon, and the projects written to. A launch note that does not encode
// stops the restart.
func (n Actions) writeLaunches(ctx context.Context, a *node.Answer, plans []restartPlan, codes map[string]string) ([]pendingRestart, []pipe.Line, map[string]node.Project, error) {
	var lines []pipe.Line
	written := map[string]node.Project{}
	var waiting []pendingRestart
	for _, pl := range plans {
		o := &a.Sessions[pl.out]
		block, err := pl.launch.Encode()
		if err != nil {
			return nil, nil, nil, err
		}
		text := fmt.Sprintf("Restart of the session %s in workspace `%s` (%s), on release %s.\n\n%s", fossilio.Short(pl.launch.Session), pl.key, o.Why, pl.launch.Release, block)
		// The host's write first (D74): a host that cannot write the
		// listening index (a full disk) leaves the record as it was.
		paths, err := n.node.WorkspacePaths(pl.key)
		if err == nil {
			err = n.setListening(ctx, paths, pl.own.Kind, pl.own.ID, 0, true)
		}
		if err != nil {
			failRestart(a, pl, fmt.Sprintf("its listening index could not be written, so no launch note was posted: %v", err))
			continue
		}
		hash, err := n.node.Writer(pl.p, codes[pl.p.Name]).WriteNote(ctx, pl.own.note(n.node.Caller.Login, text))
		if err != nil {
			failRestart(a, pl, fmt.Sprintf("the launch note could not be posted: %v", err))
			continue
		}
		o.Launch = hash
		written[pl.p.Name] = pl.p
		a.Logf("posted the launch note of %s as %q at %s on %s %s", pl.key, n.node.Caller.Login, hash, pl.own.Kind, pl.own.ID)
		info, err := pl.r.Info(ctx, hash)
		if err != nil {
			failRestart(a, pl, fmt.Sprintf("its launch note %s does not read back: %v", hash, err))
			continue
		}
		lines = append(lines, pipe.PostLine{Repository: pl.p.Repository, Hash: hash})
		waiting = append(waiting, pendingRestart{plan: pl, idx: record.NewIndexAfter(pl.r, n.node.Config.User, info.Receipt-1)})
	}
	return waiting, lines, written, nil
}

// awaitRestarts waits, at most the node's outcome wait, for the outcome of
// each launch, marking each session restarted or not.
func (n Actions) awaitRestarts(ctx context.Context, a *node.Answer, waiting []pendingRestart) error {
	deadline := time.Now().Add(n.node.OutcomeWait())
	for len(waiting) > 0 {
		tab, err := n.scan()
		if err != nil {
			return err
		}
		var still []pendingRestart
		for _, w := range waiting {
			o := &a.Sessions[w.plan.out]
			got, err := outcomeOf(ctx, w.idx, tab, w.plan.key, o.Launch)
			if err != nil {
				return err
			}
			switch {
			case got.Started != nil:
				o.Outcome = node.OutcomeRestarted
				o.Why += fmt.Sprintf("; the daemon started it again: pid %d", got.Started.ID.PID)
			case got.decided():
				failRestart(a, w.plan, got.err().Error())
			default:
				still = append(still, w)
			}
		}
		if waiting = still; len(waiting) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			for _, w := range waiting {
				failRestart(a, w.plan, fmt.Sprintf("no outcome of its launch %s within %s: no session process in the table and no refusal or end note; see `ocx status` and %s", a.Sessions[w.plan.out].Launch, n.node.OutcomeWait(), n.node.Layout.Log()))
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}
