package actors

import (
	"bytes"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
	"github.com/ocx-go/ocx/messages/protocol"
)

// nodePhase is where the node stands with respect to a re-exec.
type nodePhase int

const (
	// nodeRunning: lines are acted on as they come.
	nodeRunning nodePhase = iota
	// nodePausing: a re-exec was asked; lines are kept for the new image while
	// the inputs pause and classifications in flight finish.
	nodePausing
	// nodeCollecting: every workspace is asked for its state, frozen.
	nodeCollecting
	// nodeExecing: the exec was asked; only its failure comes back.
	nodeExecing
)

// nodeCore decides for the root of the tree: it reads the pipe's lines (a
// duplicate post is handled once), classifies posts and hands launch notes and
// check-ins to workspaces, starting them on demand; it hands each child's
// exit to the workspace the reaper spawned it for; it adopts the sessions found at start; and it runs the
// re-exec: pause the inputs, gather every actor's settled state, exec with it,
// and on failure resume everything as it was.
type nodeCore struct {
	base
	cfg         Config
	recent      *recentSet
	classifying map[string]bool
	// order are the posts being classified, in the order their lines were
	// read; early, the classifications that came back before one read
	// before them: each is acted on in the order of the lines, which is the
	// server's (the hook hands them so), whatever order the classifications
	// end in, so that the runs reach their actors, and the node starts
	// them, in the server's order (seed 004 section 10; D72).
	order      []string
	early      map[string]protocol.ArtifactClassified
	workspaces map[messages.WorkspaceKey]bool
	// runs are the run actors started (seed 004), by run hash; nil until
	// the first.
	runs map[string]bool
	// sched decides when each run has its turns: its user's slot and its
	// started (D86).
	sched  *runSchedule
	phase  nodePhase
	paused bool
	// resuming says a ResumeInputs is in flight; a new pause waits for it,
	// since the two run on goroutines of their own and could cross.
	resuming    bool
	pauseWanted bool
	deferred    []pipe.Line
	remainder   []byte
	collect     *collection
	seq         int
}

// newNodeCore makes the root's core.
func newNodeCore(cfg Config) *nodeCore {
	cfg = cfg.withDefaults()
	c := &nodeCore{
		cfg:         cfg,
		recent:      newRecentSet(cfg.RecentHashes, nil),
		classifying: map[string]bool{},
		workspaces:  map[messages.WorkspaceKey]bool{},
		sched:       newRunSchedule(cfg),
	}
	return c
}

// Start does nothing: a Boot or a Restore comes first.
func (c *nodeCore) Start(time.Time) []protocol.DaemonEffect { return nil }

// Step takes one message.
func (c *nodeCore) Step(now time.Time, msg protocol.DaemonMessage) []protocol.DaemonEffect {
	c.settle(msg)
	switch m := msg.(type) {
	case protocol.LineRead:
		c.lineRead(m)
	case protocol.ArtifactClassified:
		c.classifiedInOrder(m)
	case protocol.LaunchSeen:
		c.recent.add(m.Hash)
	case protocol.RefusalWritten:
		if m.Err != nil {
			c.log(slog.LevelError, "refusal note not written", slog.String(KeyLaunch, m.Launch), errAttr(m.Err))
		}
	case protocol.ProcessExited:
		c.exited(m)
	case protocol.RunRouted:
		c.routeRun(m)
	case protocol.RunsChecked:
		c.runsChecked(m)
	case protocol.RunTurnRequested, protocol.RunTurnDone, protocol.RunTimerFired:
		c.out = append(c.out, c.sched.Step(now, m)...)
	case protocol.RunsFound:
		// A project's runs in care, found once its record is fresh, as
		// Boot's are: their actors restored, and what waits for their
		// sessions read.
		c.foundRuns(m.Runs)
		c.readDeliveries("")
	case protocol.DeliveriesRead:
		c.deliveriesRead(m)
	case protocol.RunStartChecked:
		c.runStartChecked(m)
	case protocol.Boot:
		c.boot(m)
	case protocol.LaunchResolved:
		c.launchResolved(m)
	case protocol.Restore:
		c.restore(m.Handoff)
		c.lookAtQueues(m.Listeners)
		c.foundRuns(m.Runs)
		c.readDeliveries("")
	case protocol.SnapshotRequest:
		c.snapshotRequest(m)
	case protocol.InputsPaused:
		c.inputsPaused(m)
	case protocol.InputsResumed:
		c.inputsResumed(m)
	case protocol.ExecFailed:
		c.execFailed(m)
	case protocol.StateCollected:
		c.collected(m)
	case protocol.ChildStopped:
		c.childStopped(m)
	default:
		c.log(slog.LevelWarn, "message not for the node ignored", slog.String(keyMessage, msg.String()))
	}
	c.advance()
	return c.take()
}

func (c *nodeCore) lineRead(m protocol.LineRead) {
	if c.phase == nodeRunning {
		c.dispatch(m.Line)
		return
	}
	if _, ok := m.Line.(pipe.ReexecLine); ok {
		c.log(slog.LevelInfo, "re-exec already under way")
		return
	}
	// Read after `reexec`: the new image acts on it.
	if m.Line != nil {
		c.deferred = append(c.deferred, m.Line)
	}
}

func (c *nodeCore) runsChecked(m protocol.RunsChecked) {
	if m.Err != nil {
		c.log(slog.LevelError, "the node's runs could not be checked", errAttr(m.Err))
	}
	for _, r := range m.Lost {
		c.routeRun(r)
	}
	c.log(slog.LevelInfo, fmt.Sprintf("the node's runs are checked: %d found lost", len(m.Lost)))
}

// readDeliveries asks what the session runs of repository (every one when
// "") are to be given, when the node has a run's actor to give it to: once
// an artifact of it arrived, and once at start for what arrived while no
// daemon ran (seed 004, section 9).
func (c *nodeCore) readDeliveries(repository string) {
	if len(c.runs) > 0 {
		c.emit(protocol.ReadDeliveries{Repository: repository})
	}
}

func (c *nodeCore) deliveriesRead(m protocol.DeliveriesRead) {
	if m.Err != nil {
		c.log(slog.LevelWarn, "the sessions' deliveries cannot be read; they are read again at the next arrival", errAttr(m.Err))
	}
	for _, r := range m.Routed {
		c.routeRun(r)
	}
}

func (c *nodeCore) runStartChecked(m protocol.RunStartChecked) {
	switch {
	case m.Err != nil:
		c.log(slog.LevelError, "a start of a manual run could not be checked", slog.String(KeyRun, m.Run), errAttr(m.Err))
	case m.Nothing != "":
		c.log(slog.LevelWarn, "a start of a manual run that starts nothing: "+m.Nothing, slog.String(KeyRun, m.Run))
	}
	for _, r := range m.Routed {
		c.routeRun(r)
	}
}

// launchResolved adopts a session found at start whose launch note
// describes it.
func (c *nodeCore) launchResolved(m protocol.LaunchResolved) {
	if m.Gone {
		c.goneResolved(m)
		return
	}
	if m.Err != nil || m.Launch == nil {
		err := m.Err
		if err == nil {
			err = fmt.Errorf("no launch note")
		}
		c.log(slog.LevelWarn, "a session found at start is not adopted: its launch note cannot be read; its end will not be recorded", wsAttr(m.Proc.Workspace), pidAttr(m.Proc.Proc), errAttr(err))
		return
	}
	if err := m.Launch.Validate(); err != nil || m.Launch.Workspace != m.Proc.Workspace || m.Launch.Hash != m.Proc.Launch {
		if err == nil {
			err = fmt.Errorf("launch note %s of %s does not match the process's %s of %s", m.Launch.Hash, m.Launch.Workspace, m.Proc.Launch, m.Proc.Workspace)
		}
		c.log(slog.LevelWarn, "a session found at start is not adopted: its launch note does not describe it; its end will not be recorded", wsAttr(m.Proc.Workspace), pidAttr(m.Proc.Proc), errAttr(err))
		return
	}
	c.recent.add(m.Launch.Hash)
	c.tellWorkspace(m.Proc.Workspace, protocol.AdoptSession{Proc: m.Proc, Launch: *m.Launch})
}

// goneResolved hands a session that ended while no daemon ran to its
// workspace, whose session actor writes its end (D76); one whose launch
// note cannot be read is left, its spawned record kept for the next start.
func (c *nodeCore) goneResolved(m protocol.LaunchResolved) {
	err := m.Err
	switch {
	case err != nil:
	case m.Launch == nil:
		err = fmt.Errorf("no launch note")
	default:
		err = m.Launch.Validate()
		if err == nil && (m.Launch.Workspace != m.Proc.Workspace || m.Launch.Hash != m.Proc.Launch) {
			err = fmt.Errorf("launch note %s of %s does not match the spawned record's %s of %s", m.Launch.Hash, m.Launch.Workspace, m.Proc.Launch, m.Proc.Workspace)
		}
	}
	if err != nil {
		c.log(slog.LevelWarn, "a session that ended while no daemon ran: its launch note cannot be read, so its end is not written; a later start tries again", wsAttr(m.Proc.Workspace), pidAttr(m.Proc.Proc), errAttr(err))
		return
	}
	c.recent.add(m.Launch.Hash)
	c.tellWorkspace(m.Proc.Workspace, protocol.AdoptSession{Proc: m.Proc, Launch: *m.Launch, Gone: true})
}

func (c *nodeCore) snapshotRequest(m protocol.SnapshotRequest) {
	if c.collect != nil {
		c.collect.requests = append(c.collect.requests, m.Request)
		return
	}
	c.beginCollect(false, []int{m.Request})
}

func (c *nodeCore) inputsPaused(m protocol.InputsPaused) {
	if c.phase != nodePausing {
		return
	}
	if m.Err != nil {
		c.log(slog.LevelError, "re-exec failed: the inputs could not be paused; still running the old image", errAttr(m.Err))
		c.resume()
		return
	}
	c.paused = true
	c.remainder = append([]byte(nil), m.Remainder...)
}

func (c *nodeCore) inputsResumed(m protocol.InputsResumed) {
	c.resuming = false
	if m.Err != nil {
		c.log(slog.LevelError, "the inputs could not be resumed", errAttr(m.Err))
	}
	if c.pauseWanted && c.phase == nodePausing {
		c.pauseWanted = false
		c.emit(protocol.PauseInputs{})
	}
}

func (c *nodeCore) execFailed(m protocol.ExecFailed) {
	if c.phase != nodeExecing {
		return
	}
	c.log(slog.LevelError, "re-exec failed; still running the old image", errAttr(m.Err))
	for _, w := range c.workspaceList() {
		c.tellWorkspace(w, protocol.ResumeWork{})
	}
	c.resume()
}

// childStopped forgets a run's or a workspace's actor that stopped
// unexpectedly.
func (c *nodeCore) childStopped(m protocol.ChildStopped) {
	if m.Addr.Kind == protocol.ActorRun && c.runs[m.Addr.Run] {
		c.log(slog.LevelError, "a run's actor stopped unexpectedly; its ended may not be written", runAttr(m.Addr.Run))
		delete(c.runs, m.Addr.Run)
		return
	}
	if m.Addr.Kind != protocol.ActorWorkspace || !c.workspaces[m.Addr.Workspace] {
		return
	}
	c.log(slog.LevelError, "workspace actor stopped unexpectedly; the ends of its sessions will not be recorded", wsAttr(m.Addr.Workspace))
	delete(c.workspaces, m.Addr.Workspace)
	if c.collect != nil {
		c.collect.forget(m.Addr)
		delete(c.collect.parts, m.Addr.Workspace)
	}
}

func (c *nodeCore) dispatch(l pipe.Line) {
	switch l := l.(type) {
	case pipe.PostLine:
		if c.recent.has(l.Hash) || c.classifying[l.Hash] {
			c.log(slog.LevelDebug, "post already handled", slog.String(KeyHash, l.Hash))
			return
		}
		c.classifying[l.Hash] = true
		c.order = append(c.order, l.Hash)
		c.emit(protocol.ClassifyArtifact{Repository: l.Repository, Hash: l.Hash})
	case pipe.StopLine:
		w := l.Key()
		c.tellWorkspace(w, protocol.StopWorkspace{Workspace: w})
	case pipe.BudgetLine:
		w := l.Key()
		c.tellWorkspace(w, protocol.BudgetSpent{Workspace: w, Launch: l.Launch, Limit: l.Limit, Used: l.Used})
	case pipe.ReexecLine:
		c.reexec()
	case pipe.RunsCheckLine:
		c.emit(protocol.CheckRuns{})
	case pipe.RunStartLine:
		c.emit(protocol.StartRun{Repository: l.Repository, Run: l.Hash, By: l.By})
	default:
		c.log(slog.LevelWarn, "a pipe line the node does not act on", slog.String(keyMessage, fmt.Sprint(l)))
	}
}

// classifiedInOrder acts on a classification once every post read before
// it has been acted on.
func (c *nodeCore) classifiedInOrder(m protocol.ArtifactClassified) {
	if !c.classifying[m.Hash] {
		c.classified(m)
		return
	}
	if c.early == nil {
		c.early = map[string]protocol.ArtifactClassified{}
	}
	c.early[m.Hash] = m
	for len(c.order) > 0 {
		next, ok := c.early[c.order[0]]
		if !ok {
			return
		}
		delete(c.early, c.order[0])
		c.order = c.order[1:]
		c.classified(next)
	}
	if len(c.order) == 0 {
		c.order, c.early = nil, nil
	}
}

func (c *nodeCore) classified(m protocol.ArtifactClassified) {
	delete(c.classifying, m.Hash)
	defer func() {
		// After the artifact's own event: a run it brings is no session
		// yet, and a stop it brings reaches its run first.
		if m.Arrival {
			c.readDeliveries(m.Repository)
		}
	}()
	if m.Err != nil {
		// Not remembered: a later post of the same hash tries again.
		c.log(slog.LevelWarn, "cannot classify a post", slog.String(KeyHash, m.Hash), errAttr(m.Err))
		return
	}
	c.recent.add(m.Hash)
	switch {
	case m.Launch != nil:
		if err := m.Launch.Validate(); err != nil {
			c.log(slog.LevelWarn, "a launch note the daemon cannot act on", slog.String(KeyHash, m.Hash), errAttr(err))
			return
		}
		c.tellWorkspace(m.Launch.Workspace, protocol.LaunchRequested{Launch: *m.Launch})
	case m.Refused != nil:
		// A launch note is answered once: the hash is remembered above, so
		// the hook's line and the tool's for one note write one refusal.
		c.log(slog.LevelWarn, "a launch note is refused: "+m.Refused.Reason, slog.String(KeyHash, m.Hash), wsAttr(m.Refused.Workspace))
		c.emit(protocol.WriteRefusal{Launch: protocol.LaunchSpec{Hash: m.Refused.Hash, Repository: m.Refused.Repository, Workspace: m.Refused.Workspace}, Reason: m.Refused.Reason, Why: protocol.RefusedRecord})
	case m.Run != nil:
		if a, ok := m.Run.Event.(protocol.RunArrived); ok && a.InOrder {
			c.sched.InOrder(m.Run.Run, a.Facts.Project, a.Facts.At)
		}
		c.routeRun(*m.Run)
	case m.Checkin != nil:
		for _, l := range m.Checkin.Listeners {
			c.tellWorkspace(l.Workspace, protocol.CheckinArrived{Checkin: m.Checkin.Hash, Branch: m.Checkin.Branch, Listener: l})
		}
		if len(m.Checkin.Listeners) == 0 {
			c.log(slog.LevelDebug, "a check-in on a branch nobody listens to", slog.String(KeyHash, m.Hash))
		}
	default:
		c.log(slog.LevelDebug, "nothing to do: "+m.Nothing, slog.String(KeyHash, m.Hash))
	}
}

// exited hands a child's exit to the workspace the reaper spawned it for.
// The workspace's core orders it after its spawn's result.
func (c *nodeCore) exited(m protocol.ProcessExited) {
	if m.Workspace == (messages.WorkspaceKey{}) {
		c.log(slog.LevelWarn, "exit of a child spawned for no workspace dropped", pidAttr(m.Proc))
		return
	}
	c.tellWorkspace(m.Workspace, m)
}

func (c *nodeCore) boot(m protocol.Boot) {
	for _, p := range m.Found {
		if p.Verb == "serve" && p.Launch != "" {
			c.emit(protocol.ResolveLaunch{Proc: p})
			continue
		}
		c.log(slog.LevelInfo, "found a process naming a workspace; the daemon never starts or adopts a terminal session", wsAttr(p.Workspace), pidAttr(p.Proc), slog.String("verb", p.Verb))
	}
	c.foundGone(m.Spawned, m.Found)
	c.lookAtQueues(m.Listeners)
	c.foundRuns(m.Runs)
	c.readDeliveries("")
}

// foundGone takes the sessions a daemon before spawned whose end note is
// not on the record (D76): one whose process runs on (the process the
// record names, or a `workspace serve` of its launch) is found and adopted
// as any is; every other ended while no daemon ran, and its launch is read
// so that its end is written. Each launch is taken once.
func (c *nodeCore) foundGone(spawned []protocol.Spawned, found []protocol.ProcInfo) {
	seen := map[string]bool{}
	for _, s := range spawned {
		if seen[s.Launch] {
			continue
		}
		seen[s.Launch] = true
		if p, runs := runsOn(s, found); runs {
			if p.Verb != "serve" {
				c.log(slog.LevelInfo, "a session the daemon spawned has no `workspace serve` now, but its process runs on; its end is written by the start after it is gone", wsAttr(s.Workspace), pidAttr(s.Proc), slog.String(KeyLaunch, s.Launch))
			}
			continue
		}
		c.log(slog.LevelInfo, "a session ended while no daemon ran; its end is written now", wsAttr(s.Workspace), pidAttr(s.Proc), slog.String(KeyLaunch, s.Launch))
		c.emit(protocol.ResolveLaunch{Proc: protocol.ProcInfo{Proc: s.Proc, Workspace: s.Workspace, Launch: s.Launch, StartedBy: messages.OriginDaemon}, Gone: true})
	}
}

// runsOn is the process found at start that is s's session still: the
// process s names (its PID and start time), or a `workspace serve` of its
// launch in its workspace.
func runsOn(s protocol.Spawned, found []protocol.ProcInfo) (protocol.ProcInfo, bool) {
	for _, p := range found {
		if p.Proc == s.Proc || (p.Workspace == s.Workspace && p.Verb == "serve" && p.Launch == s.Launch) {
			return p, true
		}
	}
	return protocol.ProcInfo{}, false
}

// foundRuns starts the actors of the runs the wiring found in the node's
// care, or lost, when the daemon starts or a re-exec's new image does.
func (c *nodeCore) foundRuns(runs []protocol.RunActorState) {
	for _, st := range runs {
		if st.InCare && st.StartedCounts && st.Facts.Slot != "" {
			// Its started counts: it holds its user's slot until it
			// leaves the node's care.
			c.sched.Hold(st.Facts.Slot, st.Facts.Hash)
		}
		r := protocol.RunRouted{Run: st.Facts.Hash, Start: &st}
		if st.Lost != "" {
			r.Event = protocol.RunNotInCare{Note: st.Lost}
		}
		c.routeRun(r)
	}
}

// routeRun hands a run's event to its actor, one per run hash, starting it
// on demand: from the state the event brings, or in state none. A run's
// actor stays once its run ended, taking anything and doing nothing, so a
// late stop or a second arrival changes nothing.
func (c *nodeCore) routeRun(r protocol.RunRouted) {
	if r.Run == "" {
		c.log(slog.LevelWarn, "a run event naming no run dropped", slog.String(keyMessage, r.String()))
		return
	}
	addr := protocol.RunAddr(r.Run)
	if !c.runs[r.Run] {
		if c.runs == nil {
			c.runs = map[string]bool{}
		}
		c.runs[r.Run] = true
		c.out = append(c.out, protocol.StartActor{Addr: addr, Run: r.Start})
	}
	if r.Event != nil {
		c.tell(addr, r.Event)
	}
}

// lookAtQueues has each `completes` branch listener found at start look at
// what waits on its branch (D42): its queue is derived from the record, so a
// check-in that arrived while no daemon ran is found, and one with a result
// is not. A listener of a `stays` session launches nothing and is left out.
func (c *nodeCore) lookAtQueues(ls []protocol.ListenedBranch) {
	for _, l := range ls {
		if l.Listener.Lifetime != messages.Completes {
			continue
		}
		c.tellWorkspace(l.Listener.Workspace, protocol.CheckinArrived{Branch: l.Branch, Listener: l.Listener})
	}
}

// tellWorkspace sends to a workspace, starting its actor on demand. During a
// collection the workspace is asked again after this message: an answer it
// gave or will give to an earlier request may predate what the message
// makes it do.
func (c *nodeCore) tellWorkspace(w messages.WorkspaceKey, m protocol.DaemonMessage) {
	addr := protocol.WorkspaceAddr(w)
	if !c.workspaces[w] {
		c.workspaces[w] = true
		c.out = append(c.out, protocol.StartActor{Addr: addr, Workspace: &protocol.WorkspaceState{Workspace: w}})
	}
	c.tell(addr, m)
	if c.collect != nil {
		c.tell(addr, c.collect.ask(addr))
	}
}

func (c *nodeCore) workspaceList() []messages.WorkspaceKey {
	ws := make([]messages.WorkspaceKey, 0, len(c.workspaces))
	for w := range c.workspaces {
		ws = append(ws, w)
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].String() < ws[j].String() })
	return ws
}

// ---- re-exec ----

func (c *nodeCore) reexec() {
	if c.phase != nodeRunning {
		c.log(slog.LevelInfo, "re-exec already under way")
		return
	}
	c.log(slog.LevelInfo, "re-exec: pausing the inputs")
	c.phase = nodePausing
	c.paused = false
	if c.resuming {
		c.pauseWanted = true // once the inputs have resumed from the last one
		return
	}
	c.emit(protocol.PauseInputs{})
}

// advance moves a re-exec or a snapshot on when what it waits for is done.
func (c *nodeCore) advance() {
	c.maybeFinish()
	if c.phase == nodePausing && c.paused && c.awaiting == 0 && c.collect == nil {
		c.log(slog.LevelInfo, "re-exec: gathering the actors' state")
		c.phase = nodeCollecting
		c.beginCollect(true, nil)
		c.maybeFinish()
	}
}

func (c *nodeCore) beginCollect(freeze bool, requests []int) {
	c.seq++
	c.collect = newCollection(c.seq, freeze)
	c.collect.requests = requests
	for _, w := range c.workspaceList() {
		addr := protocol.WorkspaceAddr(w)
		c.tell(addr, c.collect.ask(addr))
	}
}

func (c *nodeCore) collected(m protocol.StateCollected) {
	if c.collect == nil || m.Workspace == nil || !c.collect.answer(m) {
		return
	}
	c.collect.parts[m.Workspace.Workspace] = *m.Workspace
}

func (c *nodeCore) maybeFinish() {
	if c.collect == nil || len(c.collect.waiting) > 0 || c.awaiting > 0 {
		return
	}
	h := c.handoff()
	for _, r := range c.collect.requests {
		c.out = append(c.out, protocol.ReplySnapshot{Request: r, Handoff: h})
	}
	freeze := c.collect.freeze
	c.collect = nil
	if freeze {
		c.phase = nodeExecing
		c.emit(protocol.ExecRelease{Handoff: h})
	}
}

// handoff builds the hand-off from the node's state and the collected parts.
func (c *nodeCore) handoff() protocol.Handoff {
	h := protocol.Handoff{
		OCX:           protocol.HandoffKind,
		Version:       protocol.HandoffVersion,
		Recent:        c.recent.list(),
		Pending:       []string{},
		Held:          []protocol.ProcessExited{},
		PipeRemainder: append([]byte(nil), c.remainder...),
		Workspaces:    []protocol.WorkspaceState{},
	}
	for _, l := range c.deferred {
		if b, err := l.Encode(); err == nil {
			h.Pending = append(h.Pending, string(bytes.TrimSuffix(b, []byte("\n"))))
		}
	}
	for _, w := range c.workspaceList() {
		if p, ok := c.collect.parts[w]; ok {
			h.Workspaces = append(h.Workspaces, p)
		}
	}
	if len(h.PipeRemainder) == 0 {
		h.PipeRemainder = nil
	}
	return h
}

// resume goes back to running after a failed re-exec: the lines kept for the
// new image are acted on, in order, then the inputs restart.
func (c *nodeCore) resume() {
	c.phase = nodeRunning
	c.paused = false
	lines := c.deferred
	c.deferred = nil
	for _, l := range lines {
		c.dispatch(l)
	}
	rem := c.remainder
	c.remainder = nil
	c.resuming = true
	c.emit(protocol.ResumeInputs{Remainder: rem})
}

// restore starts from a hand-off: the recent hashes, each workspace with its
// sessions and listeners, the exits held back for the exec (each to the
// workspace whose session it ends), then the lines the old image kept, in
// order.
func (c *nodeCore) restore(h protocol.Handoff) {
	for _, r := range h.Recent {
		c.recent.add(r)
	}
	for _, w := range h.Workspaces {
		c.workspaces[w.Workspace] = true
		c.out = append(c.out, protocol.StartActor{Addr: protocol.WorkspaceAddr(w.Workspace), Workspace: &w})
	}
	// An image before this one wrote no workspace with a held exit.
	children := h.ChildWorkspaces()
	for _, e := range h.Held {
		if e.Workspace == (messages.WorkspaceKey{}) {
			e.Workspace = children[e.Proc]
		}
		c.exited(e)
	}
	for i, p := range h.Pending {
		l, err := pipe.Parse([]byte(p))
		if err != nil {
			c.log(slog.LevelError, fmt.Sprintf("a pending line of the hand-off cannot be read (#%d)", i), errAttr(err))
			continue
		}
		c.dispatch(l)
	}
}

// Quiescent reports whether the node waits for no result.
func (c *nodeCore) Quiescent() bool { return c.awaiting == 0 }

func (c *nodeCore) addr() protocol.ActorAddr { return protocol.NodeAddr() }
