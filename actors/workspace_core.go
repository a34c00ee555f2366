package actors

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// wsSession is what a workspace knows of one of its session actors.
type wsSession struct {
	launch protocol.LaunchSpec
	child  bool
	ended  bool
}

// wsLaunch is a launch in flight: its process-table scan, then its spawn.
// maxEarlyExits bounds the exits kept while a spawn is in flight; only the
// reaper's exits of this workspace's children reach it, so one is the most
// that comes.
const maxEarlyExits = 16

type wsLaunch struct {
	launch   protocol.LaunchSpec
	spawning bool
	// early are exits of no session here that came while spawning: the
	// child's, when it came before the spawn's result, is among them.
	early []protocol.ProcessExited
}

// wsReserve is a branch listener's reservation: scanning, then granted.
type wsReserve struct {
	branch  string
	granted bool
}

// workspaceCore decides for one workspace (login × project): it refuses or
// launches, at most one launch at a time and never while a session of its own
// runs or any process names the workspace (fail closed when the process table
// cannot be read). Every launch note it takes gets exactly one outcome: a
// session, or a refusal note. It routes stops and exits to its sessions and
// check-ins to its branch listeners, and holds the workspace for a listener's
// CI launch.
type workspaceCore struct {
	base
	key messages.WorkspaceKey
	// The maps are nil until first needed: most workspaces of a node are idle
	// most of the time, with no session, listener or deferred listener, and
	// an idle workspace actor should cost little more than protoactor's own.
	sessions   map[protocol.ProcID]*wsSession
	branches   map[string]bool
	inflight   *wsLaunch
	reserve    *wsReserve
	stopQueued bool
	deferred   map[string]bool
	launches   recentSet
	collect    *collection
	// stopping are the session actors asked to stop whose end the shell
	// has not reported yet.
	stopping map[protocol.ActorAddr]bool
	// collectAsk is the node's request number the answer goes to.
	collectAsk int
	// restored is the hand-off part Start starts the children of, nil once
	// started (or for a new workspace).
	restored *protocol.WorkspaceState
}

// newWorkspaceCore makes the core of a workspace, new (st holds only its key)
// or restored from a hand-off.
func newWorkspaceCore(cfg Config, st protocol.WorkspaceState) *workspaceCore {
	cfg = cfg.withDefaults()
	c := &workspaceCore{key: st.Workspace, launches: recentSet{max: cfg.RecentLaunches}}
	for _, l := range st.Launches {
		c.launches.add(l)
	}
	for _, b := range st.Deferred {
		c.deferTo(b)
	}
	if len(st.Sessions) > 0 || len(st.Branches) > 0 {
		restored := st
		c.restored = &restored
	}
	return c
}

// Start starts the restored session and branch-listener actors.
func (c *workspaceCore) Start(time.Time) []protocol.DaemonEffect {
	if c.restored == nil {
		return nil
	}
	for _, s := range c.restored.Sessions {
		c.addSession(s.Proc, &wsSession{launch: s.Launch, child: s.Child, ended: s.Ended})
		c.out = append(c.out, protocol.StartActor{Addr: protocol.SessionAddr(c.key, s.Proc), Session: &s})
	}
	for _, b := range c.restored.Branches {
		c.addBranch(b.Branch)
		c.out = append(c.out, protocol.StartActor{Addr: protocol.BranchAddr(c.key, b.Branch), Branch: &b})
	}
	c.restored = nil
	return c.take()
}

// addSession, addBranch and deferTo write the maps that stay nil until then.
func (c *workspaceCore) addSession(p protocol.ProcID, s *wsSession) {
	if c.sessions == nil {
		c.sessions = map[protocol.ProcID]*wsSession{}
	}
	c.sessions[p] = s
}

func (c *workspaceCore) addBranch(b string) {
	if c.branches == nil {
		c.branches = map[string]bool{}
	}
	c.branches[b] = true
}

func (c *workspaceCore) deferTo(b string) {
	if c.deferred == nil {
		c.deferred = map[string]bool{}
	}
	c.deferred[b] = true
}

// busy returns the sessions of the daemon's that still run here.
func (c *workspaceCore) busy() []protocol.ProcID {
	var ps []protocol.ProcID
	for p, s := range c.sessions {
		if !s.ended {
			ps = append(ps, p)
		}
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].PID < ps[j].PID })
	return ps
}

// Step takes one message.
func (c *workspaceCore) Step(now time.Time, msg protocol.DaemonMessage) []protocol.DaemonEffect {
	c.settle(msg)
	switch m := msg.(type) {
	case protocol.LaunchRequested:
		c.launch(m.Launch, false)
	case protocol.LaunchCI:
		c.launch(m.Launch, true)
	case protocol.WorkspaceScanned:
		c.scanned(m)
	case protocol.SessionSpawned:
		c.spawned(m)
	case protocol.RefusalWritten:
		if m.Err != nil {
			c.log(slog.LevelError, "refusal note not written", wsAttr(c.key), slog.String(KeyLaunch, m.Launch), errAttr(m.Err))
		}
	case protocol.ProcessSignaled:
		if m.Err != nil {
			c.log(slog.LevelWarn, "signal not sent", pidAttr(m.Proc), slog.String("signal", m.Signal), errAttr(m.Err))
		}
	case protocol.StopWorkspace:
		c.stop()
	case protocol.BudgetSpent:
		c.budgetSpent(m)
	case protocol.AdoptSession:
		c.adopt(m)
	case protocol.ProcessExited:
		c.exited(m)
	case protocol.SessionEnded:
		c.sessionEnded(m)
	case protocol.SessionFinished:
		if _, ok := c.sessions[m.Proc]; ok {
			delete(c.sessions, m.Proc)
			addr := protocol.SessionAddr(c.key, m.Proc)
			c.out = append(c.out, protocol.StopActor{Addr: addr})
			if c.stopping == nil {
				c.stopping = map[protocol.ActorAddr]bool{}
			}
			c.stopping[addr] = true
			c.forgetChild(addr)
		}
	case protocol.CheckinArrived:
		if !c.branches[m.Branch] {
			c.addBranch(m.Branch)
			st := protocol.BranchState{Workspace: c.key, Branch: m.Branch, Listener: m.Listener, Phase: protocol.BranchIdle}
			c.startChild(protocol.StartActor{Addr: protocol.BranchAddr(c.key, m.Branch), Branch: &st})
		}
		c.tellChild(protocol.BranchAddr(c.key, m.Branch), m)
	case protocol.ReserveWorkspace:
		c.reserveFor(m.Branch)
	case protocol.ReleaseWorkspace:
		if c.reserve != nil && c.reserve.branch == m.Branch {
			c.reserve = nil
			c.freed()
		}
	case protocol.ChildStopped:
		c.childStopped(m.Addr)
	case protocol.CollectState:
		c.startCollect(m)
	case protocol.StateCollected:
		c.collected(m)
	case protocol.ResumeWork:
		for _, a := range c.children() {
			c.tellChild(a, m)
		}
	default:
		c.log(slog.LevelWarn, "message not for a workspace ignored", slog.String(keyMessage, msg.String()))
	}
	return c.finishStep()
}

func (c *workspaceCore) finishStep() []protocol.DaemonEffect {
	c.maybeReply()
	return c.take()
}

// launch decides on a launch note: refuse at once if anything of the
// daemon's holds the workspace, else scan the process table.
func (c *workspaceCore) launch(l protocol.LaunchSpec, fromListener bool) {
	if c.launches.has(l.Hash) {
		c.log(slog.LevelInfo, "launch note already handled", wsAttr(c.key), slog.String(KeyLaunch, l.Hash))
		if fromListener && c.branches[l.Branch] {
			// The listener waits for an outcome; the launch reached us first
			// from the hook, and its outcome went to the listener then, but it
			// may have ignored it while still writing the note.
			c.replayOutcome(l)
		}
		return
	}
	c.launches.add(l.Hash)
	if fromListener {
		c.tell(protocol.NodeAddr(), protocol.LaunchSeen{Hash: l.Hash})
	}
	// A CI launch of the branch that holds the workspace ends its
	// reservation, whatever becomes of the launch.
	if c.reserve != nil && c.reserve.granted && l.IsCI() && l.Branch == c.reserve.branch {
		c.reserve = nil
	}
	if c.refuseIfBusy(l) {
		return
	}
	if c.inflight != nil {
		c.refuse(l, nil, protocol.RefusedBusy, fmt.Sprintf("another launch (%s) is starting in workspace %s", c.inflight.launch.Hash, c.key), true)
		return
	}
	if c.reserve != nil {
		c.refuse(l, nil, protocol.RefusedBusy, fmt.Sprintf("workspace %s is held for a CI launch on branch %q", c.key, c.reserve.branch), true)
		return
	}
	c.inflight = &wsLaunch{launch: l}
	c.emit(protocol.ScanWorkspace{Workspace: c.key, Purpose: protocol.ScanForLaunch, For: l.Hash})
}

// refuseIfBusy refuses a launch while a session of the daemon's runs here.
func (c *workspaceCore) refuseIfBusy(l protocol.LaunchSpec) bool {
	ps := c.busy()
	if len(ps) == 0 {
		return false
	}
	holders := make([]protocol.ProcInfo, len(ps))
	words := make([]string, len(ps))
	for i, p := range ps {
		s := c.sessions[p]
		holders[i] = protocol.ProcInfo{Proc: p, Workspace: c.key, Verb: "serve", Launch: s.launch.Hash, StartedBy: c.origin(s)}
		words[i] = fmt.Sprintf("pid %d (launch %s)", p.PID, s.launch.Hash)
	}
	c.refuse(l, holders, protocol.RefusedBusy, fmt.Sprintf("a session already runs in workspace %s: %s", c.key, strings.Join(words, ", ")), true)
	return true
}

func (c *workspaceCore) origin(s *wsSession) messages.Origin {
	if s.child {
		return messages.OriginDaemon
	}
	return messages.OriginOrphan
}

// replayOutcome answers a listener's duplicate LaunchCI with what became of
// the launch, as far as this workspace still knows it.
func (c *workspaceCore) replayOutcome(l protocol.LaunchSpec) {
	for p, s := range c.sessions {
		if s.launch.Hash == l.Hash && !s.ended {
			c.tellChild(protocol.BranchAddr(c.key, l.Branch), protocol.LaunchOutcome{Launch: s.launch, Proc: p})
			return
		}
	}
	if c.inflight != nil && c.inflight.launch.Hash == l.Hash {
		return // its outcome will go to the listener when it comes
	}
	c.tellChild(protocol.BranchAddr(c.key, l.Branch), protocol.LaunchOutcome{Launch: l, Refused: "the launch note was already handled"})
}

// refuse writes the one refusal note of a launch note, why its kind (a
// protocol.Refused word). own says the refusal is for something of the
// daemon's, which ends by itself: a CI launch refused for it is deferred,
// and its listener told when the workspace is free.
func (c *workspaceCore) refuse(l protocol.LaunchSpec, holders []protocol.ProcInfo, why, reason string, own bool) {
	c.log(slog.LevelInfo, "launch refused: "+reason, wsAttr(c.key), slog.String(KeyLaunch, l.Hash))
	c.emit(protocol.WriteRefusal{Launch: l, Holders: holders, Reason: reason, Why: why})
	if l.IsCI() && c.branches[l.Branch] {
		c.tellChild(protocol.BranchAddr(c.key, l.Branch), protocol.LaunchOutcome{Launch: l, Refused: reason})
		if own {
			c.deferTo(l.Branch)
		}
	}
}

func (c *workspaceCore) scanned(m protocol.WorkspaceScanned) {
	switch m.Purpose {
	case protocol.ScanForLaunch:
		if c.inflight == nil || c.inflight.spawning || c.inflight.launch.Hash != m.For {
			c.log(slog.LevelWarn, "stale scan result ignored", wsAttr(c.key))
			return
		}
		l := c.inflight.launch
		// A session found at start may have been adopted during the scan.
		if len(c.busy()) > 0 {
			c.inflight = nil
			c.refuseIfBusy(l)
			return
		}
		switch {
		case m.Err != nil:
			c.inflight = nil
			c.refuse(l, nil, protocol.RefusedHost, fmt.Sprintf("the process table could not be read, so whether a process names workspace %s is unknown: %v", c.key, m.Err), false)
			c.freed()
		case len(m.Procs) > 0:
			c.inflight = nil
			c.refuse(l, m.Procs, protocol.RefusedBusy, fmt.Sprintf("a process already names workspace %s: %s", c.key, holderWords(m.Procs)), false)
			c.freed()
		default:
			c.inflight.spawning = true
			c.emit(protocol.SpawnSession{Launch: l})
		}
	case protocol.ScanForReserve:
		if c.reserve == nil || c.reserve.granted || c.reserve.branch != m.For {
			return
		}
		b := c.reserve.branch
		switch {
		case len(c.busy()) > 0:
			c.reserve = nil
			c.deferTo(b)
			c.tellChild(protocol.BranchAddr(c.key, b), protocol.ReservationRefused{Branch: b, Why: "a session runs in the workspace"})
		case m.Err != nil:
			c.reserve = nil
			c.tellChild(protocol.BranchAddr(c.key, b), protocol.ReservationRefused{Branch: b, Why: "the process table could not be read: " + m.Err.Error()})
			c.freed()
		case len(m.Procs) > 0:
			c.reserve = nil
			c.tellChild(protocol.BranchAddr(c.key, b), protocol.ReservationRefused{Branch: b, Why: "a process names the workspace: " + holderWords(m.Procs)})
			c.freed()
		default:
			c.reserve.granted = true
			c.tellChild(protocol.BranchAddr(c.key, b), protocol.ReservationGranted{Branch: b})
		}
	case protocol.ScanForStop:
		if m.Err != nil {
			c.log(slog.LevelError, "cannot read the process table to stop the workspace", wsAttr(c.key), errAttr(m.Err))
			return
		}
		if len(m.Procs) == 0 {
			c.log(slog.LevelInfo, "stop: no process names the workspace", wsAttr(c.key))
		}
		for _, p := range m.Procs {
			c.emit(protocol.SignalProcess{Proc: p.Proc, Signal: protocol.SigTERM})
		}
	}
}

func holderWords(ps []protocol.ProcInfo) string {
	ws := make([]string, len(ps))
	for i, p := range ps {
		ws[i] = fmt.Sprintf("pid %d started by %s", p.Proc.PID, p.StartedBy)
		if p.Command != "" {
			ws[i] += " (" + p.Command + ")"
		}
	}
	return strings.Join(ws, ", ")
}

// exited hands a child's exit to the session that runs it. The reaper
// reports an exit only after the spawn returned, but the spawn's result
// comes back by this workspace's own effect while the exit comes by the
// node, so the exit of the child being spawned can come first: it is kept
// with the launch in flight (there is one at a time) until the result
// names the child.
func (c *workspaceCore) exited(m protocol.ProcessExited) {
	for p, s := range c.sessions {
		if p.Matches(m.Proc) && !s.ended {
			c.tellChild(protocol.SessionAddr(c.key, p), m)
			return
		}
	}
	if c.inflight != nil && c.inflight.spawning && len(c.inflight.early) < maxEarlyExits {
		for _, e := range c.inflight.early {
			if e.Proc == m.Proc {
				return // the reaper's exit again: kept once
			}
		}
		c.inflight.early = append(c.inflight.early, m)
		return
	}
	c.log(slog.LevelInfo, "exit of a process no session here runs", wsAttr(c.key), pidAttr(m.Proc))
}

func (c *workspaceCore) spawned(m protocol.SessionSpawned) {
	if c.inflight == nil || !c.inflight.spawning || c.inflight.launch.Hash != m.Launch {
		c.log(slog.LevelError, "spawn result for no launch in flight", wsAttr(c.key), slog.String(KeyLaunch, m.Launch))
		return
	}
	l, early := c.inflight.launch, c.inflight.early
	c.inflight = nil
	if m.Err != nil {
		for _, e := range early {
			c.log(slog.LevelInfo, "exit of a process no session here runs", wsAttr(c.key), pidAttr(e.Proc))
		}
		c.stopQueued = false
		c.refuse(l, nil, protocol.RefusedHost, "the session could not be started: "+m.Err.Error(), false)
		c.freed()
		return
	}
	c.log(slog.LevelInfo, "session launched", wsAttr(c.key), slog.String(KeyLaunch, l.Hash), pidAttr(m.Proc))
	c.addSession(m.Proc, &wsSession{launch: l, child: true})
	st := protocol.SessionState{Workspace: c.key, Proc: m.Proc, Child: true, Launch: l, StartedAt: m.At}
	addr := protocol.SessionAddr(c.key, m.Proc)
	c.startChild(protocol.StartActor{Addr: addr, Session: &st})
	for _, e := range early {
		if e.Proc.Matches(m.Proc) {
			c.tellChild(addr, e)
		} else {
			c.log(slog.LevelInfo, "exit of a process no session here runs", wsAttr(c.key), pidAttr(e.Proc))
		}
	}
	if l.IsCI() && c.branches[l.Branch] {
		c.tellChild(protocol.BranchAddr(c.key, l.Branch), protocol.LaunchOutcome{Launch: l, Proc: m.Proc})
	}
	if c.stopQueued {
		c.stopQueued = false
		c.tellChild(addr, protocol.StopSession{})
	}
}

// stop stops the daemon's sessions here; with none, it TERMs every process
// that names the workspace (a terminal session). Nothing waits for the end.
func (c *workspaceCore) stop() {
	if ps := c.busy(); len(ps) > 0 {
		for _, p := range ps {
			c.tellChild(protocol.SessionAddr(c.key, p), protocol.StopSession{})
		}
		return
	}
	if c.inflight != nil {
		c.stopQueued = true // the session being launched is stopped once it runs
	}
	c.emit(protocol.ScanWorkspace{Workspace: c.key, Purpose: protocol.ScanForStop})
}

// budgetSpent hands a model proxy's word that a session's budget is spent
// to the running session serving that launch (D50); one for a launch the
// workspace no longer runs (its server said it again as it ended) goes
// nowhere.
func (c *workspaceCore) budgetSpent(m protocol.BudgetSpent) {
	for p, s := range c.sessions {
		if s.launch.Hash == m.Launch && !s.ended {
			c.tellChild(protocol.SessionAddr(c.key, p), m)
			return
		}
	}
	c.log(slog.LevelInfo, "a budget spent by a launch no session here runs", wsAttr(c.key), slog.String(KeyLaunch, m.Launch))
}

// adopt starts the session actor of a process found at start; or of a
// session that ended while no daemon ran (Gone, D76), which holds the
// workspace no more: it only writes its end.
func (c *workspaceCore) adopt(m protocol.AdoptSession) {
	if _, ok := c.sessions[m.Proc.Proc]; ok {
		return
	}
	for _, s := range c.sessions {
		if s.launch.Hash == m.Launch.Hash {
			c.log(slog.LevelInfo, "a session of this launch is known already", wsAttr(c.key), slog.String(KeyLaunch, m.Launch.Hash), pidAttr(m.Proc.Proc))
			return
		}
	}
	c.launches.add(m.Launch.Hash)
	c.addSession(m.Proc.Proc, &wsSession{launch: m.Launch, ended: m.Gone})
	st := protocol.SessionState{Workspace: c.key, Proc: m.Proc.Proc, Launch: m.Launch, StartedAt: m.Proc.Started, FoundGone: m.Gone}
	c.startChild(protocol.StartActor{Addr: protocol.SessionAddr(c.key, m.Proc.Proc), Session: &st})
}

func (c *workspaceCore) sessionEnded(m protocol.SessionEnded) {
	s, ok := c.sessions[m.Proc]
	if !ok || s.ended {
		return
	}
	s.ended = true
	ended := &protocol.EndedRun{Proc: m.Proc, Launch: m.Launch, LeftResult: m.LeftResult}
	for _, b := range c.branchList() {
		c.tellChild(protocol.BranchAddr(c.key, b), protocol.WorkspaceFreed{Ended: ended})
	}
	c.deferred = nil
}

// freed tells the deferred listeners once nothing of the daemon's holds the
// workspace.
func (c *workspaceCore) freed() {
	if len(c.busy()) > 0 || c.inflight != nil || c.reserve != nil || len(c.deferred) == 0 {
		return
	}
	var bs []string
	for b := range c.deferred {
		bs = append(bs, b)
	}
	sort.Strings(bs)
	c.deferred = nil
	for _, b := range bs {
		if c.branches[b] {
			c.tellChild(protocol.BranchAddr(c.key, b), protocol.WorkspaceFreed{})
		}
	}
}

func (c *workspaceCore) reserveFor(b string) {
	var why string
	switch {
	case len(c.busy()) > 0:
		why = "a session runs in the workspace"
	case c.inflight != nil:
		why = "a launch is starting"
	case c.reserve != nil:
		why = fmt.Sprintf("it is held for branch %q", c.reserve.branch)
	}
	if why != "" {
		c.deferTo(b)
		c.tellChild(protocol.BranchAddr(c.key, b), protocol.ReservationRefused{Branch: b, Why: why})
		return
	}
	c.reserve = &wsReserve{branch: b}
	c.emit(protocol.ScanWorkspace{Workspace: c.key, Purpose: protocol.ScanForReserve, For: b})
}

func (c *workspaceCore) childStopped(a protocol.ActorAddr) {
	if c.stopping[a] {
		delete(c.stopping, a) // the stop it asked for
		return
	}
	switch a.Kind {
	case protocol.ActorSession:
		if _, ok := c.sessions[a.Proc]; !ok {
			return
		}
		c.log(slog.LevelError, "session actor stopped unexpectedly; its end will not be recorded", wsAttr(c.key), pidAttr(a.Proc))
		delete(c.sessions, a.Proc)
	case protocol.ActorBranch:
		if !c.branches[a.Branch] {
			return
		}
		c.log(slog.LevelError, "branch listener stopped unexpectedly", wsAttr(c.key), slog.String(KeyBranch, a.Branch))
		delete(c.branches, a.Branch)
		delete(c.deferred, a.Branch)
		if c.reserve != nil && c.reserve.branch == a.Branch {
			c.reserve = nil
			c.freed()
		}
	default:
		return
	}
	c.forgetChild(a)
}

// ---- children and collection ----

func (c *workspaceCore) branchList() []string {
	var bs []string
	for b := range c.branches {
		bs = append(bs, b)
	}
	sort.Strings(bs)
	return bs
}

func (c *workspaceCore) children() []protocol.ActorAddr {
	var as []protocol.ActorAddr
	ps := make([]protocol.ProcID, 0, len(c.sessions))
	for p := range c.sessions {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].PID < ps[j].PID })
	for _, p := range ps {
		as = append(as, protocol.SessionAddr(c.key, p))
	}
	for _, b := range c.branchList() {
		as = append(as, protocol.BranchAddr(c.key, b))
	}
	return as
}

// startChild starts a child; during a collection it is asked for its state too.
func (c *workspaceCore) startChild(s protocol.StartActor) {
	c.out = append(c.out, s)
	if c.collect != nil {
		c.tell(s.Addr, c.collect.ask(s.Addr))
	}
}

// tellChild tells a child; during a collection it is asked again after this
// message, since an answer it gave or will give to an earlier request may
// predate what the message makes it do.
func (c *workspaceCore) tellChild(a protocol.ActorAddr, m protocol.DaemonMessage) {
	c.tell(a, m)
	if c.collect != nil {
		c.tell(a, c.collect.ask(a))
	}
}

func (c *workspaceCore) forgetChild(a protocol.ActorAddr) {
	if c.collect == nil {
		return
	}
	c.collect.forget(a)
	delete(c.collect.sessions, a.Proc)
	if a.Kind == protocol.ActorBranch {
		delete(c.collect.branches, a.Branch)
	}
}

func (c *workspaceCore) startCollect(m protocol.CollectState) {
	c.collect = newCollection(m.Seq, m.Freeze)
	c.collectAsk = m.Ask
	for _, a := range c.children() {
		c.tell(a, c.collect.ask(a))
	}
}

func (c *workspaceCore) collected(m protocol.StateCollected) {
	if c.collect == nil || !c.collect.answer(m) {
		return
	}
	switch {
	case m.Session != nil:
		c.collect.sessions[m.Session.Proc] = *m.Session
	case m.Branch != nil:
		c.collect.branches[m.Branch.Branch] = *m.Branch
	case m.From.Kind == protocol.ActorSession:
		delete(c.collect.sessions, m.From.Proc)
	}
}

// Quiescent reports whether the workspace waits for no result: no launch, no
// reservation scan, no stop scan, no refusal note or signal in flight, and no
// child still stopping (so that a hand-off or a shutdown never races with a
// stop under way).
func (c *workspaceCore) Quiescent() bool {
	return c.awaiting == 0 && c.inflight == nil && (c.reserve == nil || c.reserve.granted) && len(c.stopping) == 0
}

func (c *workspaceCore) maybeReply() {
	if c.collect == nil || len(c.collect.waiting) > 0 || !c.Quiescent() {
		return
	}
	st := c.State()
	for _, p := range sortedProcs(c.collect.sessions) {
		s := c.collect.sessions[p]
		if s.Ended && s.EndWritten {
			continue
		}
		st.Sessions = append(st.Sessions, s)
	}
	for _, b := range c.branchList() {
		if bs, ok := c.collect.branches[b]; ok {
			st.Branches = append(st.Branches, bs)
		}
	}
	c.tell(protocol.NodeAddr(), protocol.StateCollected{Seq: c.collect.seq, Ask: c.collectAsk, From: c.addr(), Workspace: &st})
	c.collect = nil
}

// State is the workspace's own part of a hand-off, without its children's.
func (c *workspaceCore) State() protocol.WorkspaceState {
	st := protocol.WorkspaceState{Workspace: c.key, Launches: c.launches.list()}
	for b := range c.deferred {
		st.Deferred = append(st.Deferred, b)
	}
	sort.Strings(st.Deferred)
	return st
}

func sortedProcs(m map[protocol.ProcID]protocol.SessionState) []protocol.ProcID {
	ps := make([]protocol.ProcID, 0, len(m))
	for p := range m {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].PID < ps[j].PID })
	return ps
}

func (c *workspaceCore) addr() protocol.ActorAddr { return protocol.WorkspaceAddr(c.key) }
