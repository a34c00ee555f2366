package tools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ocx-go/ocx/messages/wire"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host/runs"
	"github.com/ocx-go/ocx/messages/pipe"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// OCX's run tool (seed 004, sections 3, 8 and 10): `ocx run post`, `stop`,
// `start`, `check` and `status`. Posts and stops are written as the caller
// (D10), over sync, then the backoffice hands them to the daemon through
// the hook; a start, which table 3 has no kind for, is the pipe line `run
// start REPOSITORY HASH USER`, sent once the caller is authenticated over
// sync; the check is the pipe line `runs check`.

// RunInput is what the run tool's actions take.
type RunInput struct {
	// Project is the repository; empty when the node has one.
	Project string
	// Message is a run message's JSON (RunPost).
	Message []byte
	// To is the post to reply to, or the ticket to add a change to
	// (RunPost); empty for a new thread.
	To string
	// Run is the run's hash, or a prefix of it (stop, start, status).
	Run string
	// Pattern names the pattern run/NAME the run is made from (RunPost,
	// D84): Message is then the caller's fields over it, and the run is
	// written in full.
	Pattern string
	// Objective, with a pattern, is set over the message's objective.
	Objective string
	DryRun    bool
}

// RunState is one run as the record and the node's care say (ocx run
// status): runmsg.RunState, which a runs ask's answer carries.
type RunState = runmsg.RunState

// runRecord reads every run engine message of the repository that
// decodes, in the server's order, each from its first version: from the
// daemon's run log when the node is the daemon's (node.RunMsgs).
func (n actions) runRecord(ctx context.Context, r *fossilio.Repo) ([]record.RunMsg, error) {
	all, err := n.node.RunMsgs(ctx, r)
	if err != nil {
		return nil, err
	}
	return record.DecodedRuns(all), nil
}

// care fills in whether the node keeps the run in its care, and whether
// its process runs (runs.Care).
func (n actions) care(st *RunState) { runs.Care(n.node.Layout, st) }

// runOf finds the run a hash or prefix names, with its state.
func (n actions) runOf(ctx context.Context, r *fossilio.Repo, field, hash string) (RunState, record.RunMsg, []record.RunMsg, error) {
	info, err := node.ResolveField(ctx, r, field, hash)
	if err != nil {
		return RunState{}, record.RunMsg{}, nil, err
	}
	msgs, err := n.runRecord(ctx, r)
	if err != nil {
		return RunState{}, record.RunMsg{}, nil, err
	}
	st, m, err := record.RunStateOf(ctx, r, msgs, field, info)
	if err != nil {
		return RunState{}, record.RunMsg{}, nil, err
	}
	n.care(&st)
	return st, m, msgs, nil
}

// decodeRunInput reads a run message for `ocx run post`: a run, as
// runmsg.DecodeMessage reads it, refused naming the field.
func decodeRunInput(raw []byte) (*runmsg.Run, error) {
	if len(strings.TrimSpace(string(raw))) == 0 {
		return nil, errors.New("input: empty; give a run message's JSON ({\"ocx\": 1, \"kind\": \"run\", ...})")
	}
	msg, err := runmsg.DecodeMessage(raw)
	if err != nil {
		return nil, err
	}
	run, ok := msg.(*runmsg.Run)
	if !ok {
		return nil, fmt.Errorf("kind: %q is not a run; `ocx run post` posts runs (a stop is `ocx run stop`)", msg.Kind())
	}
	return run, nil
}

// runTitle is a new thread's title for a run: its objective's first line,
// bounded.
func runTitle(objective string) string {
	t, _, _ := strings.Cut(strings.TrimSpace(objective), "\n")
	if r := []rune(t); len(r) > 80 {
		t = string(r[:79]) + "…"
	}
	return t
}

// RunPost posts a run message as the caller: a new thread titled from its
// objective, or a reply to in.To (a post, or a change to a ticket). With
// in.Pattern the message is the caller's fields over that pattern, and
// the run is written in full (runPostPattern).
func (n actions) RunPost(ctx context.Context, in RunInput) *node.Answer {
	a := node.NewAnswer("run post", in.DryRun)
	if in.Pattern != "" {
		return n.runPostPattern(ctx, a, in)
	}
	run, err := decodeRunInput(in.Message)
	if err != nil {
		return a.Stop(err)
	}
	// The message as given, checked: the block written is the caller's own
	// bytes, so what was checked is what the record holds.
	text := "```json\n" + strings.TrimSpace(string(in.Message)) + "\n```\n"
	if in.To != "" {
		return retool(n.node.Post(ctx, node.PostInput{Project: in.Project, To: in.To, Text: text, DryRun: in.DryRun}), a)
	}
	return retool(n.node.Thread(ctx, node.PostInput{Project: in.Project, Title: runTitle(run.Objective), Text: text, DryRun: in.DryRun}), a)
}

// retool gives a sub-action's answer the tool's name.
func retool(sub, a *node.Answer) *node.Answer {
	sub.Tool = a.Tool
	return sub
}

// RunStop posts a stop where the run is, as the caller (table 3), refused
// before anything is written when the caller holds neither admin nor
// setup (the stop would be ignored), the run is not found, or it ended.
func (n actions) RunStop(ctx context.Context, in RunInput) *node.Answer {
	a := node.NewAnswer("run stop", in.DryRun)
	p, r, err := n.toolRepoIn(in.Project)
	if err != nil {
		return a.Stop(err)
	}
	defer r.Close()
	if err := n.node.RequirePrivileged(ctx, r, p); err != nil {
		return a.Stop(fmt.Errorf("%w; a stop by such a user is ignored (seed 004, section 3)", err))
	}
	st, m, _, err := n.runOf(ctx, r, "run", in.Run)
	if err != nil {
		return a.Stop(err)
	}
	if st.Ended != "" {
		return a.Stop(fmt.Errorf("run: %s has ended (%s, ended %s); a stop changes nothing", st.Run, st.Outcome, st.Ended))
	}
	block, err := (&runmsg.RunStop{Node: st.Node, Run: st.Run}).Encode()
	if err != nil {
		return a.Stop(err)
	}
	text := string(block) // the canonical block, fenced
	a.Logf("run %s is %s, for node %q", st.Run, st.State, st.Node)
	if m.Ticket {
		return mergeAll(a, n.node.Post(ctx, node.PostInput{Project: p.Name, To: m.Record, Text: text, DryRun: in.DryRun}))
	}
	return mergeAll(a, n.node.Post(ctx, node.PostInput{Project: p.Name, To: st.Run, Text: text, DryRun: in.DryRun}))
}

// mergeAll adds a sub-action's log, result and stop to a.
func mergeAll(a, sub *node.Answer) *node.Answer {
	merge(a, sub)
	return a
}

// toolRepoIn is toolRepo on a named project.
func (n actions) toolRepoIn(name string) (node.Project, *fossilio.Repo, error) {
	c := n
	c.project = name
	return c.toolRepo()
}

// RunStart starts a manual run that waits (seed 004, section 8): the
// caller authenticated over sync (the run fetched as them), holding admin
// or setup; then the pipe line `run start REPOSITORY HASH USER` to the
// daemon, which checks the standing and section 11 again. It waits for
// started or ended on the record, and says which.
func (n actions) RunStart(ctx context.Context, in RunInput) *node.Answer {
	a := node.NewAnswer("run start", in.DryRun)
	p, r, err := n.toolRepoIn(in.Project)
	if err != nil {
		return a.Stop(err)
	}
	defer r.Close()
	if err := n.node.RequirePrivileged(ctx, r, p); err != nil {
		return a.Stop(fmt.Errorf("%w; only such a user starts a manual run (seed 004, section 8)", err))
	}
	st, _, _, err := n.runOf(ctx, r, "run", in.Run)
	if err != nil {
		return a.Stop(err)
	}
	if err := runStartRefusal(st, n.node.Config.User); err != nil {
		return a.Stop(err)
	}
	// The caller's password, checked by the server: the run fetched over
	// sync as them. The pipe line carries only the login.
	code, err := r.ProjectCode(ctx)
	if err != nil {
		return a.Stop(err)
	}
	c := &fossilio.Client{URL: p.URL, Login: n.node.Caller.Login, Password: n.node.Caller.Password, Cookie: n.node.Caller.Cookie, ProjectCode: code, Now: n.node.Now}
	if _, err := c.Fetch(ctx, st.Run); err != nil {
		return a.Stop(fmt.Errorf("caller: %q is not authenticated by the server: %w", n.node.Caller.Login, err))
	}
	a.Logf("%q authenticated by the server, holding admin or setup on %s", n.node.Caller.Login, p.Name)
	line := pipe.RunStartLine{Repository: p.Repository, Hash: st.Run, By: n.node.Caller.Login}
	if err := line.Validate(); err != nil {
		return a.Stop(err)
	}
	return node.Executed(ctx, a, runStartPlan(line, runStartRun{n: n, r: r}), nil)
}

// runStartRefusal says why run st may not be started by hand on the node
// whose user is self; nil when it may.
func runStartRefusal(st RunState, self string) error {
	switch {
	case st.Node != self:
		return fmt.Errorf("run: %s is for node %q, not this node (%q); start it there", st.Run, st.Node, self)
	case !st.Manual:
		return fmt.Errorf("run: %s is not a manual run (process.manual is false): the node starts it when it arrives", st.Run)
	case st.Ended != "":
		return fmt.Errorf("run: %s has ended (%s, ended %s)", st.Run, st.Outcome, st.Ended)
	case st.Started != "":
		return fmt.Errorf("run: %s has started already (started %s)", st.Run, st.Started)
	case st.Stopped != "":
		return fmt.Errorf("run: %s was stopped (%s); its ended follows", st.Run, st.Stopped)
	case st.State != "waiting":
		return fmt.Errorf("run: %s does not wait for a start (%s)", st.Run, st.State)
	}
	return nil
}

// runStartEffects are the effects a manual start's plan runs.
type runStartEffects interface {
	// send gives the daemon a line, starting it if none runs.
	send(ctx context.Context, a *node.Answer, line pipe.Line) error
	// awaitStarted waits for the run's started (or its ended).
	awaitStarted(ctx context.Context, a *node.Answer, run string) error
}

// runStartPlan is a manual start's plan (seed 004, section 8): the line
// handed to the daemon, then its started awaited.
func runStartPlan(line pipe.RunStartLine, fx runStartEffects) node.Plan {
	var plan node.Plan
	plan.Add(fmt.Sprintf("hand `%s` to the daemon, which starts run %s", line, line.Hash), func(ctx context.Context, a *node.Answer) error {
		return fx.send(ctx, a, line)
	})
	plan.Add("", func(ctx context.Context, a *node.Answer) error { return fx.awaitStarted(ctx, a, line.Hash) })
	return plan
}

// runStartRun is runStartEffects on this node.
type runStartRun struct {
	n actions
	r *fossilio.Repo
}

func (s runStartRun) send(ctx context.Context, a *node.Answer, line pipe.Line) error {
	return s.n.node.EnsureAndSend(ctx, a, line)
}

// awaitStarted waits, at most the outcome wait, for the run's started or
// its ended on the record.
func (s runStartRun) awaitStarted(ctx context.Context, a *node.Answer, run string) error {
	deadline := time.Now().Add(s.n.node.OutcomeWait())
	for {
		now, _, _, err := s.n.runOf(ctx, s.r, "run", run)
		if err != nil {
			return err
		}
		switch {
		case now.Ended != "" && now.Started == "":
			return fmt.Errorf("run: %s ended %s before it started: %s", run, now.Outcome, now.Note)
		case now.Started != "":
			a.Logf("run %s started: %s, written by %q", run, now.Started, now.Node)
			a.SetResult(now.Started)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("run: %s neither started nor ended within %s; the daemon's log says why (the start may still come)", run, s.n.node.OutcomeWait())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// RunStatus lists the runs of the project (or the one named) as the record
// and the node's care say: the daemon's answer from its live run log when
// it gives one (a runs ask, D66), else read here (ReadRunStatus).
func (n actions) RunStatus(ctx context.Context, in RunInput) ([]RunState, error) {
	p, err := n.node.DefaultProject(in.Project)
	if err != nil {
		return nil, err
	}
	sts, why := n.liveRuns(ctx, p.Name, in.Run)
	if why == "" {
		return sts, nil
	}
	n.node.Log.Debug("run status: read from the repository: " + why)
	in.Project = p.Name
	return n.ReadRunStatus(ctx, in)
}

// liveRuns are project's runs (or the one named by run, a hash or its
// prefix) as the daemon's live run log gives them on its socket (a runs
// ask). why, when not empty, says why the daemon gave none (no daemon, a
// refusal, an answer that does not read, a run named so an ask cannot
// carry it): the caller then reads the record itself.
func (n actions) liveRuns(ctx context.Context, project, run string) (sts []RunState, why string) {
	a := wire.NewAsk(wire.AskRuns)
	a.Project, a.Run = project, run
	if err := a.Validate(); err != nil {
		return nil, err.Error()
	}
	r, err := n.node.AskDaemon(ctx, a)
	switch {
	case err != nil:
		return nil, err.Error()
	case r.Runs == nil:
		return nil, "the daemon's reply holds no runs"
	}
	return *r.Runs, ""
}

// ReadRunStatus is RunStatus read from the repository by this process
// (runs.Status): the fallback without the daemon's answer.
func (n actions) ReadRunStatus(ctx context.Context, in RunInput) ([]RunState, error) {
	_, r, err := n.node.ProjectRepo(in.Project)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return runs.Status(ctx, n.node.Layout, r, func(ctx context.Context) ([]record.RunMsg, error) { return n.node.RunMsgs(ctx, r) }, in.Run)
}

// RunCheck is the node's check of its runs (seed 004, section 10's last
// paragraph; seed 002 "check the node's runs"): it hands `runs check` to
// the daemon, starting it when none runs (its start checks too), and
// waits for ended on each run the check is to end lost: this node's runs
// whose started counts, whose ended does not, and which are not in its
// care with a live process. The result is the last ended; the log names
// each.
func (n actions) RunCheck(ctx context.Context, in RunInput) *node.Answer {
	a := node.NewAnswer("run check", in.DryRun)
	var want []RunState
	var repos []*fossilio.Repo
	defer func() {
		for _, r := range repos {
			r.Close()
		}
	}()
	var lost []pendingRun
	for _, p := range n.node.Projects() {
		if in.Project != "" && p.Name != in.Project {
			continue
		}
		r, err := n.node.OpenProjectRepo(p)
		if err != nil {
			return a.Stop(err)
		}
		repos = append(repos, r)
		msgs, err := n.runRecord(ctx, r)
		if err != nil {
			return a.Stop(err)
		}
		for _, st := range record.RunStates(ctx, r, msgs) {
			if st.Node != n.node.Config.User || st.Started == "" || st.Ended != "" {
				continue
			}
			n.care(&st)
			if st.InCare && st.Alive {
				continue
			}
			lost = append(lost, pendingRun{r, st})
			want = append(want, st)
		}
	}
	return node.Executed(ctx, a, runCheckPlan(want, runCheckRun{n: n, lost: lost}), nil)
}

// runCheckEffects are the effects a check of the node's runs runs.
type runCheckEffects interface {
	// send gives the daemon a line, starting it if none runs.
	send(ctx context.Context, a *node.Answer, line pipe.Line) error
	// awaitEnded waits for the ended of each run found lost.
	awaitEnded(ctx context.Context, a *node.Answer) error
}

// runCheckPlan is a check's plan (seed 004, section 10): each run to end
// lost said in both runs, `runs check` handed to the daemon, then each
// one's ended awaited.
func runCheckPlan(lost []RunState, fx runCheckEffects) node.Plan {
	var plan node.Plan
	for _, st := range lost {
		text := fmt.Sprintf("find run %s lost (started %s, no ended, in care %v, its process alive %v)", st.Run, st.Started, st.InCare, st.Alive)
		plan.Add(text, func(_ context.Context, a *node.Answer) error {
			a.Logf("%s", text)
			return nil
		})
	}
	plan.Add("hand `runs check` to the daemon", func(ctx context.Context, a *node.Answer) error {
		return fx.send(ctx, a, pipe.RunsCheckLine{})
	})
	plan.Add("", func(ctx context.Context, a *node.Answer) error {
		if len(lost) == 0 {
			a.Logf("no run of this node is to end lost")
			return nil
		}
		return fx.awaitEnded(ctx, a)
	})
	return plan
}

// pendingRun is a run found lost, with the repository it is read from.
type pendingRun struct {
	r  *fossilio.Repo
	st RunState
}

// runCheckRun is runCheckEffects on this node, lost the runs it found.
type runCheckRun struct {
	n    actions
	lost []pendingRun
}

func (c runCheckRun) send(ctx context.Context, a *node.Answer, line pipe.Line) error {
	return c.n.node.EnsureAndSend(ctx, a, line)
}

// awaitEnded waits, at most the outcome wait for them all, for the ended
// of each run found lost; the answer's result is the last.
func (c runCheckRun) awaitEnded(ctx context.Context, a *node.Answer) error {
	deadline := time.Now().Add(c.n.node.OutcomeWait())
	for _, l := range c.lost {
		for {
			msgs, err := c.n.runRecord(ctx, l.r)
			if err != nil {
				return err
			}
			i := slices.IndexFunc(record.RunStates(ctx, l.r, msgs), func(s RunState) bool { return s.Run == l.st.Run && s.Ended != "" })
			if i >= 0 {
				e := record.RunStates(ctx, l.r, msgs)[i]
				a.Logf("ended %s run %s: %s (%s)", e.Outcome, e.Run, e.Note, e.Ended)
				a.SetResult(e.Ended)
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("run %s: no ended within %s; the daemon's log says why", l.st.Run, c.n.node.OutcomeWait())
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}
