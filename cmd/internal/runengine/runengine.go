package runengine

import (
	"context"
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
	"github.com/ocx-go/ocx/fossilio/noderepos"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/runhold"
	runeng "github.com/ocx-go/ocx/host/runs"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// Engine carries out the effects of seed 004's runs (actors.RunHost):
// what the node keeps of the runs in its care (a file each under
// AGENTS/ocxd.runs), their preparation (a runeng.Preparer), their started and
// ended written as the node user where the run is, their processes started
// in their holders with STDIN, STDOUT and STDERR pipes, and their kept
// logs. A run is found by its hash on the record; its process's exit comes
// back to the node as a RunRouted, so it is routed by the run, not by a
// workspace.
type Engine struct {
	cfg    *messages.NodeConfig
	layout host.Layout
	root   *unixhost.Root
	repos  *noderepos.Repos
	record *Record
	fossil *fossilio.Fossil
	// writeNote, signal, support and release are the daemon's (Deps).
	writeNote   func(ctx context.Context, x *noderepos.Index, hash, text, kind string, backoffice bool) error
	signal      func(ctx context.Context, p protocol.ProcID, group bool, sig string) error
	support     func() host.RunSupport
	release     func(release string) (string, error)
	releaseRoot string
	log         *slog.Logger
	// send hands the node a run process's exit, which its holder's watch
	// learns of (an input, as the reaper's exits are).
	send func(protocol.DaemonMessage)
	now  func() time.Time

	ctx    context.Context
	cancel context.CancelFunc

	mu   sync.Mutex
	runs map[string]*engineRun
	// deliverMu orders the sessions' deliveries (rundeliver.go).
	deliverMu sync.Mutex
	// trigMu orders the triggers' passes (runtrigger.go, D101); trig is
	// their core, trigTimer the next schedule's timer.
	trigMu sync.Mutex
	trig   *actors.TriggerCore
	// trigKick wakes the passes' worker (KickTriggers), trigPending
	// the repositories it is to read; trigDone waits for it at Close.
	trigOnce    sync.Once
	trigKick    chan struct{}
	trigPendMu  sync.Mutex
	trigPending map[string]bool
	trigDone    sync.WaitGroup
	trigTimer   func() bool
	clock       host.Clock
	// bg runs the backoffice beside a launch.
	bg *fossilio.Beside
	// fresh says whether a project's record is fresh: on another host,
	// once its clone was pulled since the daemon started (D72); nil:
	// always.
	fresh func(project string) bool
	// waiting are the projects whose runs in care Boot left for their
	// record to be fresh (Fresh finds them then).
	waiting map[string]bool
	// testDelay is Deps.Delay.
	testDelay func(point string)
	// doubt are the writes (kind and run) that failed on another host:
	// the server may hold one whose answer was lost, so the next try
	// pulls first and writes none when it is there.
	doubt map[string]bool
}

// Deps are what the engine is built with: the node, its repositories, and
// what it asks of the rest of the daemon. Every field is needed.
type Deps struct {
	Config *messages.NodeConfig
	Layout host.Layout
	Root   *unixhost.Root
	Repos  *noderepos.Repos
	// Fossil runs fossil as the node user (the records').
	Fossil *fossilio.Fossil
	// WriteNote writes a note of the node user as a reply where the run
	// is, running the repository's backoffice after it unless backoffice
	// is false (the records').
	WriteNote func(ctx context.Context, x *noderepos.Index, hash, text, kind string, backoffice bool) error
	// Signal signals a process (the reaper's).
	Signal func(ctx context.Context, p protocol.ProcID, group bool, sig string) error
	// Support is what the host can give a run (seed 004, refusal row 8).
	Support func() host.RunSupport
	// Release is the directory of a release (current or previous), links
	// followed; ReleaseRoot is node.json's release root.
	Release     func(release string) (string, error)
	ReleaseRoot string
	Log         *slog.Logger
	// Send hands the node a message.
	Send func(protocol.DaemonMessage)
	// Fresh, when set, says whether a project's record is fresh enough to
	// find runs lost on (D72); nil: every record is.
	Fresh func(project string) bool
	// Clock is what the triggers' schedules read (D101); nil: the
	// system's.
	Clock host.Clock
	// Delay, when set, is the integration tests' widening of a window at
	// a named point (the daemon's OCXD_TEST_REEXEC_DELAY; "runs-found":
	// the runs restored, adopted, not yet handed to the node).
	Delay func(point string)
}

// engineRun is what the engine knows of one run: its message, where it is,
// its preparation and its processes.
type engineRun struct {
	hash     string
	x        *noderepos.Index
	msg      record.RunMsg
	run      *runmsg.Run
	prepared *runeng.Prepared
	procs    map[int]*runProc
	// endPreparing ends its preparation in flight (a stop, D99); nil
	// when none is.
	endPreparing context.CancelFunc
}

// runProc is one process of a run, in its holder: launched by this
// daemon, or found alive at start (adopted).
type runProc struct {
	id      protocol.ProcID
	adopted bool
	// socket is its holder's: its deliveries are typed in there; "" once
	// the holder is gone.
	socket string
	stderr *runeng.Tail
	stdout *runeng.Tail
	exit   protocol.RunProcessExited
}

// New is the run engine of d.
func New(d Deps) *Engine {
	if d.Clock == nil {
		d.Clock = unixhost.Clock{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Engine{cfg: d.Config, layout: d.Layout, root: d.Root, repos: d.Repos, fossil: d.Fossil,
		record:    NewRecord(d.Config, d.Layout, d.Repos, d.Support, d.Log),
		writeNote: d.WriteNote, signal: d.Signal, support: d.Support, release: d.Release, releaseRoot: d.ReleaseRoot,
		send: d.Send, log: d.Log, bg: fossilio.NewBeside(d.Log), now: time.Now, ctx: ctx, cancel: cancel,
		runs: map[string]*engineRun{}, trig: actors.NewTriggerCore(), clock: d.Clock, fresh: d.Fresh, waiting: map[string]bool{}, doubt: map[string]bool{}, testDelay: d.Delay}
}

// delay is the tests' widening at point (Deps.Delay); nothing in use.
func (e *Engine) delay(point string) {
	if e.testDelay != nil {
		e.testDelay(point)
	}
}

// Close ends the watches of processes found at start; the processes live on.
func (e *Engine) Close() {
	e.cancel()
	e.trigMu.Lock()
	if e.trigTimer != nil {
		e.trigTimer()
	}
	e.trigMu.Unlock()
	e.trigDone.Wait()
	e.bg.Wait()
}

// careDir is where the node keeps its runs in care (host.Layout.RunCare).
func (e *Engine) careDir() string { return e.layout.RunCare() }

// workRoot is $$root$$, under which the node makes its runs' workspaces
// (seed 004, table 2): AGENTS/ocxd.work, of the ocxd.* family too.
func (e *Engine) workRoot() string { return filepath.Join(e.layout.Root(), "ocxd.work") }

// preparer is the Preparer of a run of the repository x: the node's layers
// on this host; on the server's node its password step sets a fresh
// password in x's repository, on another host it reads the file of
// passwords.
func (e *Engine) preparer(x *noderepos.Index) runeng.Preparer {
	var repos []string
	for _, name := range e.cfg.ProjectNames() {
		repos = append(repos, e.cfg.Projects[name].Repository)
	}
	l := &runeng.Layers{
		Fossil:     e.fossil.Exe,
		Repository: x.Path,
		Files:      host.NodeFiles{Repositories: repos, Agents: e.layout.Root(), ReleaseRoot: e.releaseRoot, State: e.careDir()},
		Support:    e.support(),
		DiskDir:    e.careDir(),
		RunCgroup:  e.layout.RunCgroup,
	}
	if x.OtherHost {
		// Not the server's node: the password step reads the file of
		// passwords, and sets nothing on the server.
		l.Repository = ""
		l.Passwords = e.passwordsFile()
		l.Files.Passwords = l.Passwords
		if code, err := x.ProjectCode(e.ctx); err == nil {
			l.ProjectCode = code
		}
	}
	return l
}

// passwordsFile is the node's file of passwords (seed 004, section 4), read
// on a node that is not the server's.
func (e *Engine) passwordsFile() string {
	return filepath.Join(e.layout.Root(), runeng.PasswordsFileName)
}

func (e *Engine) carePath(hash string) (string, error) { return e.layout.RunCareFile(hash) }

func (e *Engine) writeCare(c protocol.RunCare) error {
	p, err := e.carePath(c.Run)
	if err != nil {
		return err
	}
	if err := e.root.MkdirAll(e.careDir(), 0o700); err != nil {
		return err
	}
	b, err := c.Encode()
	if err != nil {
		return err
	}
	return e.root.WriteFile(p, b, 0o600)
}

func (e *Engine) readCare(hash string) (protocol.RunCare, bool, error) {
	p, err := e.carePath(hash)
	if err != nil {
		return protocol.RunCare{}, false, err
	}
	b, err := e.root.ReadFile(p, unixhost.SmallFile)
	if errors.Is(err, os.ErrNotExist) {
		return protocol.RunCare{}, false, nil
	}
	if err != nil {
		return protocol.RunCare{}, false, err
	}
	c, err := protocol.DecodeRunCare(b)
	if err != nil {
		return protocol.RunCare{}, false, fmt.Errorf("%s: %w", p, err)
	}
	return c, true, nil
}

// caresByHash is what the node keeps of each run in its care, by hash.
func (e *Engine) caresByHash() (map[string]protocol.RunCare, error) {
	cares, err := e.cares()
	if err != nil {
		return nil, err
	}
	byHash := make(map[string]protocol.RunCare, len(cares))
	for _, c := range cares {
		byHash[c.Run] = c
	}
	return byHash, nil
}

// cares lists the runs in the node's care, as their files say.
func (e *Engine) cares() ([]protocol.RunCare, error) {
	entries, err := e.root.ReadDir(e.careDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []protocol.RunCare
	for _, d := range entries {
		h, ok := strings.CutSuffix(d.Name(), ".json")
		if !ok || messages.ValidateHash(h) != nil {
			continue
		}
		c, ok, err := e.readCare(h)
		if err != nil {
			e.log.Warn("a run's care file cannot be read", slog.String(actors.KeyRun, h), actors.ErrAttr(err))
			continue
		}
		if ok {
			out = append(out, c)
		}
	}
	return out, nil
}

// find returns the run with this hash, read from the record once.
func (e *Engine) find(ctx context.Context, hash string) (*engineRun, error) {
	e.mu.Lock()
	r, ok := e.runs[hash]
	e.mu.Unlock()
	if ok {
		return r, nil
	}
	for _, name := range e.cfg.ProjectNames() {
		x, err := e.repos.Index(name)
		if err != nil {
			return nil, err
		}
		msgs, err := x.Runs(ctx)
		if err != nil {
			return nil, err
		}
		i := record.IndexRun(msgs, hash)
		if i < 0 {
			continue
		}
		r := &engineRun{hash: hash, x: x, msg: msgs[i], procs: map[int]*runProc{}}
		r.run, _ = msgs[i].Msg.(*runmsg.Run)
		e.mu.Lock()
		if old, ok := e.runs[hash]; ok {
			r = old
		} else {
			e.runs[hash] = r
		}
		e.mu.Unlock()
		return r, nil
	}
	return nil, fmt.Errorf("run %s is on no repository of this node", hash)
}

// Care records the run in the node's care, or takes it out.
func (e *Engine) Care(ctx context.Context, hash string, in bool) error {
	if !in {
		p, err := e.carePath(hash)
		if err != nil {
			return err
		}
		if err := e.root.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		// Its holder's files: the record holds what a reader needs.
		hf := e.heldFiles(hash)
		for _, f := range []string{hf.spec, hf.status, hf.stdout, hf.stderr, hf.log, hf.socket} {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				e.log.Warn("a file of the run's holder is left", slog.String(actors.KeyRun, hash), actors.ErrAttr(err))
			}
		}
		// Its workspace's own file system, if it asked limits.disk (D82):
		// unmounted and its room given back to the host.
		if err := e.removeDisk(ctx, hash); err != nil {
			return err
		}
		e.log.Info("run released from the node's care", slog.String(actors.KeyRun, hash))
		return nil
	}
	r, err := e.find(ctx, hash)
	if err != nil {
		return err
	}
	if _, ok, _ := e.readCare(hash); ok {
		return nil // in care already: a run prepared again after a start
	}
	e.log.Info("run taken into the node's care", slog.String(actors.KeyRun, hash))
	return e.writeCare(protocol.RunCare{Run: hash, Repository: r.x.Path, Since: e.now().UTC()})
}

// removeDisk removes run hash's disk (D82), if it has one.
func (e *Engine) removeDisk(ctx context.Context, hash string) error {
	img, err := e.layout.RunDisk(hash)
	if err != nil {
		return err
	}
	if !unixhost.Exists(img) {
		return nil
	}
	if err := unixhost.RemoveDisk(ctx, img); err != nil {
		return fmt.Errorf("the run's disk: %w", err)
	}
	e.log.Info("the run's disk is removed", slog.String(actors.KeyRun, hash), slog.String("disk", img))
	return nil
}

// sweepDisks removes the disks of runs no longer in the node's care: a
// daemon that ended between a run's release and its disk's removal left
// them (D82).
func (e *Engine) sweepDisks(ctx context.Context) {
	entries, err := e.root.ReadDir(e.careDir())
	if err != nil {
		return
	}
	for _, d := range entries {
		h, ok := strings.CutSuffix(d.Name(), "."+host.DiskName)
		if !ok || messages.ValidateHash(h) != nil {
			continue
		}
		if _, in, err := e.readCare(h); err != nil || in {
			continue
		}
		if err := e.removeDisk(ctx, h); err != nil {
			e.log.Warn("the disk of a run no longer in care is left", slog.String(actors.KeyRun, h), actors.ErrAttr(err))
		}
	}
}

// Prepare makes layers 2 to 4 through the node's layers (runs.Layers),
// which check what they make against the host too: row 9 (a sandbox path
// reaching the node's own files) and row 8 in the host's terms.
func (e *Engine) Prepare(ctx context.Context, hash string) protocol.RunPrepared {
	r, err := e.find(ctx, hash)
	if err != nil {
		return protocol.RunPrepared{Failed: "the run cannot be read: " + err.Error()}
	}
	if r.run == nil {
		return protocol.RunPrepared{Failed: "the run does not read"}
	}
	rel, _ := e.release(messages.ReleaseCurrent)
	if err := e.root.MkdirAll(e.workRoot(), 0o700); err != nil {
		return protocol.RunPrepared{Failed: "the node's run root cannot be made: " + err.Error()}
	}
	nv := runeng.NodeValues{Root: e.workRoot(), Project: r.x.Project, Node: e.cfg.User, Server: r.x.URL, Release: rel}
	// A stop ends the preparation (RunEndPreparing): a command step's
	// process group is ended (D99).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e.mu.Lock()
	r.endPreparing = cancel
	e.mu.Unlock()
	p, err := e.preparer(r.x).Prepare(ctx, r.run, hash, nv)
	e.mu.Lock()
	r.endPreparing = nil
	e.mu.Unlock()
	e.keepStepLogs(r, hash, p)
	if err != nil {
		return protocol.RunPrepared{Failed: err.Error()}
	}
	e.mu.Lock()
	r.prepared = &p
	e.mu.Unlock()
	return protocol.RunPrepared{Values: p.Values}
}

// keepStepLogs writes what the run's command steps printed (D99), as a
// process's kept logs are (section 8.2): each step's end in
// $$workspace$$/step-N.log, and a reply where the run is, before its
// started or its ended refused. A reply that cannot be written is logged,
// not tried again: the step's end is in its file, and a refusal's note
// names the step and its exit.
func (e *Engine) keepStepLogs(r *engineRun, hash string, p runeng.Prepared) {
	for _, s := range p.Steps {
		if s.Total == 0 {
			continue // as a stream that printed nothing leaves no kept log
		}
		if p.Workspace != "" {
			name := filepath.Join(p.Workspace, fmt.Sprintf("step-%d.log", s.Step))
			if err := e.root.WriteFile(name, s.End, 0o600); err != nil {
				e.log.Warn("a command step's log file is not written", slog.String(actors.KeyRun, hash), actors.ErrAttr(err))
			}
		}
		// The engine's context: a stop ended the preparation's.
		if err := e.writeNote(e.ctx, r.x, hash, runeng.StepLogText(hash, s), "command step", true); err != nil {
			e.log.Warn("a command step's output is not posted", slog.String(actors.KeyRun, hash), slog.Int("step", s.Step), actors.ErrAttr(err))
		}
	}
}

// Write writes started, ended or the kept logs where the run is.
func (e *Engine) Write(ctx context.Context, eff protocol.DaemonEffect) error {
	switch eff := eff.(type) {
	case protocol.RunWriteStarted:
		return e.writeReport(ctx, eff.Run, runmsg.MsgStarted, func(r *engineRun) (runmsg.Message, string) {
			s := &runmsg.RunStarted{Node: e.cfg.User, Run: eff.Run, Values: eff.Values}
			if s.Values == nil {
				s.Values = runmsg.RunValues{}
			}
			if r.run != nil && r.run.Limits != nil {
				s.Limits = *r.run.Limits
			}
			return s, fmt.Sprintf("The node started run %s.", fossilio.Short(eff.Run))
		})
	case protocol.RunWriteEnded:
		return e.writeReport(ctx, eff.Run, runmsg.MsgEnded, func(*engineRun) (runmsg.Message, string) {
			m := &runmsg.RunEnded{Node: e.cfg.User, Run: eff.Run, Outcome: eff.Outcome, Exit: eff.Exit, Note: eff.Note}
			line := fmt.Sprintf("Run %s ended: %s", fossilio.Short(eff.Run), eff.Outcome)
			if eff.Exit != nil {
				line += fmt.Sprintf(", exit %d", *eff.Exit)
			}
			if eff.Note != "" {
				line += ": " + eff.Note
			}
			return m, line + "."
		})
	case protocol.RunKeepLogs:
		return e.keepLogs(ctx, eff)
	}
	return fmt.Errorf("not a write of a run: %s", eff)
}

// writeReport writes the node's started or ended of a run, once: a retry,
// or a daemon started again, finds the one on the record and writes none.
func (e *Engine) writeReport(ctx context.Context, hash string, kind runmsg.MessageKind, build func(*engineRun) (runmsg.Message, string)) error {
	r, err := e.find(ctx, hash)
	if err != nil {
		return err
	}
	// On another host the record is the node's clone: after a write that
	// failed, the server may hold it all the same (its answer was lost),
	// so the clone is pulled before it is read (D72).
	key := string(kind) + " " + hash
	if e.doubted(key) {
		if err := e.repos.PullNow(ctx, r.x); err != nil {
			// Waited out as the server's absence: the write is never made
			// before the node knows the server lacks it.
			return fmt.Errorf("%s of run %s: %w: the node's clone cannot be pulled to see whether the server has it: %w", kind, hash, protocol.ErrUnreachable, err)
		}
	}
	return e.settle(key, r.x, e.writeReportOnce(ctx, r, hash, kind, build))
}

// doubted says a write of key failed on another host: the server may hold
// it all the same, so the clone is pulled and read before it is written.
func (e *Engine) doubted(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.doubt[key]
}

// settle keeps, after a write of key, whether it is in doubt (it failed on
// another host) and says a failure the server was not there for as such
// (protocol.ErrUnreachable), which the run's core waits out.
func (e *Engine) settle(key string, x *noderepos.Index, err error) error {
	if fossilio.Unreachable(err) {
		err = fmt.Errorf("%w: %w", protocol.ErrUnreachable, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil && x.OtherHost {
		e.doubt[key] = true
	} else {
		delete(e.doubt, key)
	}
	return err
}

func (e *Engine) writeReportOnce(ctx context.Context, r *engineRun, hash string, kind runmsg.MessageKind, build func(*engineRun) (runmsg.Message, string)) error {
	msgs, err := r.x.Runs(ctx)
	if err != nil {
		return err
	}
	st := record.StandingOf(msgs, r.msg, r.x.PrivilegedOnce(ctx))
	if (kind == runmsg.MsgStarted && st.StartedCounts) || (kind == runmsg.MsgEnded && st.EndedCounts) {
		e.log.Info("the run's "+string(kind)+" is on the record already", slog.String(actors.KeyRun, hash))
		return nil
	}
	m, line := build(r)
	block, err := m.Encode()
	if err != nil {
		return fmt.Errorf("%s of run %s: %w", kind, hash, err)
	}
	if kind != runmsg.MsgStarted {
		return e.writeNote(ctx, r.x, hash, line+"\n\n"+string(block), string(kind), true)
	}
	// Started must be on the record before the launch (section 10); the
	// backoffice, which only lets the hook see it at once, runs beside the
	// launch rather than before it.
	if err := e.writeNote(ctx, r.x, hash, line+"\n\n"+string(block), string(kind), false); err != nil {
		return err
	}
	e.besideLaunch(r.x)
	return nil
}

// besideLaunch runs the backoffice of x's repository beside the launch
// (fossilio.Beside: runs coalesced, never overlapping); close waits for it.
func (e *Engine) besideLaunch(x *noderepos.Index) {
	e.bg.Kick(x.Path, e.repos.Backoffice(x, e.fossil))
}

// keepLogs writes the kept logs of a process (section 8.2): the files in
// the workspace, when the run has one, and a reply where the run is, for
// each kept stream that printed a byte.
func (e *Engine) keepLogs(ctx context.Context, eff protocol.RunKeepLogs) error {
	r, err := e.find(ctx, eff.Run)
	if err != nil {
		return err
	}
	e.mu.Lock()
	p := r.procs[eff.Proc]
	prep := r.prepared
	e.mu.Unlock()
	if p == nil {
		return nil // no process of it was seen by this daemon
	}
	var keep runeng.Keep
	var workspace string
	if prep != nil {
		keep, workspace = prep.Keep, prep.Workspace
	} else {
		// A process found alive at start: what the node kept of it.
		if keep, err = runeng.KeepOf(r.run.Process); err != nil {
			return err
		}
		if c, ok, _ := e.readCare(eff.Run); ok {
			workspace = c.Workspace
		}
	}
	errEnd, errTotal := p.stderr.Bytes()
	outEnd, outTotal := p.stdout.Bytes()
	e.mu.Lock()
	pexit := p.exit
	e.mu.Unlock()
	exit := pexit.Exit()
	stderr := runeng.KeptStream{Name: "stderr", End: errEnd, Total: errTotal}
	stdout := runeng.KeptStream{Name: "stdout", End: outEnd, Total: outTotal}
	kept := runeng.Kept(keep, exit, stderr, stdout)
	if len(kept) == 0 {
		return nil
	}
	if workspace != "" {
		// The workspace is the run's process's to write: a link it left at
		// stdout.log is replaced, never followed (docs/trust.md).
		for _, s := range []runeng.KeptStream{stderr, stdout} {
			if err := e.root.WriteFile(filepath.Join(workspace, s.Name+".log"), s.End, 0o600); err != nil {
				e.log.Warn("a kept log's file is not written", slog.String(actors.KeyRun, eff.Run), actors.ErrAttr(err))
			}
		}
	}
	return e.writeKeptLogs(ctx, r, eff, runeng.KeptLogsText(eff.Run, eff.Proc, pexit.Words(), kept))
}

// writeKeptLogs writes a process's kept logs where the run is, once. On
// another host, after a write that failed the server may hold it all the
// same (its answer was lost): the clone is pulled first and the node
// user's reply that begins as this one does is looked for, as for
// started and ended (writeReport). A write the server was not there for
// says so (protocol.ErrUnreachable), and the run's core tries it again
// for as long as it takes, before ended (section 8.2's order).
func (e *Engine) writeKeptLogs(ctx context.Context, r *engineRun, eff protocol.RunKeepLogs, text string) error {
	key := fmt.Sprintf("kept logs %s %d", eff.Run, eff.Proc)
	if e.doubted(key) {
		if err := e.repos.PullNow(ctx, r.x); err != nil {
			return fmt.Errorf("kept logs of run %s: %w: the node's clone cannot be pulled to see whether the server has them: %w", eff.Run, protocol.ErrUnreachable, err)
		}
		head, _, _ := strings.Cut(text, "\n")
		sent, err := r.x.Repo.SentBy(ctx, e.cfg.User, head)
		if err != nil {
			return fmt.Errorf("kept logs of run %s: %w", eff.Run, err)
		}
		for _, s := range sent {
			if strings.TrimSpace(s.Text) == strings.TrimSpace(text) {
				e.log.Info("the run's kept logs are on the record already", slog.String(actors.KeyRun, eff.Run), slog.Int("proc", eff.Proc))
				e.mu.Lock()
				delete(e.doubt, key)
				e.mu.Unlock()
				return nil
			}
		}
	}
	return e.settle(key, r.x, e.writeNote(ctx, r.x, eff.Run, text, "kept logs", true))
}

// Process launches, feeds or signals a process of a run.
func (e *Engine) Process(ctx context.Context, eff protocol.DaemonEffect) error {
	switch eff := eff.(type) {
	case protocol.RunLaunch:
		return e.launch(ctx, eff)
	case protocol.RunDeliver:
		e.mu.Lock()
		socket := ""
		if r := e.runs[eff.Run]; r != nil && r.procs[eff.Proc] != nil {
			socket = r.procs[eff.Proc].socket
		}
		e.mu.Unlock()
		if socket == "" {
			return fmt.Errorf("run %s process %d has no holder to type into", eff.Run, eff.Proc)
		}
		if err := e.keepGiven(eff.Run, eff.Delivery.At); err != nil {
			return fmt.Errorf("run %s: what its session was given is not kept, so %s is not given: %w", eff.Run, eff.Delivery, err)
		}
		return runhold.Type(socket, eff.Delivery.Line)
	case protocol.RunEndPreparing:
		e.mu.Lock()
		var end context.CancelFunc
		if r := e.runs[eff.Run]; r != nil {
			end = r.endPreparing
		}
		e.mu.Unlock()
		if end != nil {
			e.log.Info("the run's preparation is ended by its stop", slog.String(actors.KeyRun, eff.Run))
			end()
		}
		return nil
	case protocol.RunEndProcess:
		e.mu.Lock()
		var p *runProc
		if r := e.runs[eff.Run]; r != nil {
			p = r.procs[eff.Proc]
		}
		e.mu.Unlock()
		if p == nil {
			return fmt.Errorf("run %s has no process %d", eff.Run, eff.Proc)
		}
		// The holder alone: it passes TERM on to its command's group, and
		// KILL hangs the command up.
		return e.signal(ctx, p.id, false, eff.Signal)
	}
	return fmt.Errorf("not a process effect of a run: %s", eff)
}

// launch starts the run's process in its holder (runheld.go). Exactly one
// exit comes back for it, 127 for a process that could not be started.
func (e *Engine) launch(ctx context.Context, eff protocol.RunLaunch) error {
	p := &runProc{stderr: &runeng.Tail{Max: 64 << 10}, stdout: &runeng.Tail{Max: 64 << 10}}
	var prep *runeng.Prepared
	fail := func(err error) error {
		msg := []byte(fmt.Sprintf("ocxd: the process could not be started: %v\n", err))
		if prep != nil {
			// Kept as the process's STDERR is: through its filter (D98).
			if f, ferr := prep.Filter.Filter(); ferr == nil {
				msg = f.Apply(msg)
			}
		}
		p.stderr.Write(msg)
		m := protocol.RunProcessExited{Proc: eff.Proc, Status: messages.Exited(127)}
		e.mu.Lock()
		p.exit = m
		e.mu.Unlock()
		e.exited(eff.Run, m)
		return err
	}
	r, err := e.find(ctx, eff.Run)
	if err != nil {
		return fail(err)
	}
	e.mu.Lock()
	prep = r.prepared
	r.procs[eff.Proc] = p
	e.mu.Unlock()
	if prep == nil {
		return fail(errors.New("the run is not prepared"))
	}
	p.stderr.Max, p.stdout.Max = prep.Keep.Stderr, prep.Keep.Stdout
	return e.launchHeld(ctx, eff, r, prep, p, fail)
}

func (e *Engine) exited(hash string, m protocol.RunProcessExited) {
	e.send(protocol.RunRouted{Run: hash, Event: m})
}

// Boot reads what the node has of its runs when the daemon starts (or a
// re-exec's new image does), and a pure decision over what it read
// (actors.DecideRunBoot) says which runs to restore: each run in its care, and each
// found lost (section 10's last paragraph), as the state its actor starts
// from. tell is called once, with those states (none when they cannot be
// read: the error says why), to hand them to the node; only then is each
// process in care found alive, or holder that ended leaving its status
// file, watched (the daemon is not its parent now), so that no exit
// reaches the node before the state it is an exit of (an actor started
// by the exit alone would know nothing of its run, and end nothing).
//
// A project whose record is not fresh (on another host, a clone not
// pulled since the start) is not read: the decision leaves it waiting,
// its runs untouched, and Fresh finds them once it is.
func (e *Engine) Boot(ctx context.Context, tell func([]protocol.RunActorState)) error {
	d, found, err := e.boot(ctx)
	if err != nil {
		tell(nil)
		return err
	}
	for _, name := range d.Waiting {
		e.mu.Lock()
		e.waiting[name] = true
		e.mu.Unlock()
		e.log.Info("the runs in care of a project served from another host are found once its clone is pulled", slog.String("project", name))
	}
	e.keep(d, found, func() { tell(d.Restore) })
	// The triggers fire what they missed while no daemon ran (D101).
	e.KickTriggers("")
	return nil
}

// boot reads and decides Boot's runs.
func (e *Engine) boot(ctx context.Context) (actors.RunBootDecision, map[string]surveyedRun, error) {
	e.sweepDisks(ctx)
	care, err := e.caresByHash()
	if err != nil {
		return actors.RunBootDecision{}, nil, err
	}
	var projects []actors.RunBootProject
	found := map[string]surveyedRun{}
	for _, name := range e.cfg.ProjectNames() {
		if e.fresh == nil || e.fresh(name) {
			p, err := e.survey(ctx, name, care, found)
			if err != nil {
				return actors.RunBootDecision{}, nil, err
			}
			projects = append(projects, p)
			continue
		}
		projects = append(projects, actors.RunBootProject{Project: name})
	}
	return actors.DecideRunBoot(projects), found, nil
}

// Fresh is told that project's record is fresh: on another host, its
// clone pulled since the daemon started, before the hook's work on what
// the pull brought. The runs of it Boot left waiting are found now, as
// Boot finds the others, and the node is handed them (RunsFound) before
// Fresh returns, so their actors are restored before any line of the
// pull reaches the node. Called again, it does nothing.
func (e *Engine) Fresh(ctx context.Context, project string) {
	e.mu.Lock()
	w := e.waiting[project]
	delete(e.waiting, project)
	e.mu.Unlock()
	if !w {
		return
	}
	found := map[string]surveyedRun{}
	care, err := e.caresByHash()
	p := actors.RunBootProject{Project: project}
	if err == nil {
		p, err = e.survey(ctx, project, care, found)
	}
	if err != nil {
		e.mu.Lock()
		e.waiting[project] = true
		e.mu.Unlock()
		e.log.Error("the runs in care of a project cannot be read on its fresh clone; they are read again at the next pull or `runs check`",
			slog.String("project", project), actors.ErrAttr(err))
		return
	}
	d := actors.DecideRunBoot([]actors.RunBootProject{p})
	e.keep(d, found, func() {
		e.log.Info("the runs in care of a project are found on its fresh clone", slog.String("project", project), slog.Int("runs", len(d.Restore)))
		e.send(protocol.RunsFound{Project: project, Runs: d.Restore})
	})
	e.KickTriggers("")
}

// keep carries out the boot's decision on the host: each run restored
// whose process was found alive, and not launched by this daemon, is
// adopted; tell hands the node the runs restored; then each restored
// whose process was found is watched. The watch of a holder that has
// ended sends its exit at once, so it starts only once the node has the
// run's state to take it in (the node's inbox keeps the order of sends).
func (e *Engine) keep(d actors.RunBootDecision, found map[string]surveyedRun, tell func()) {
	for _, st := range d.Restore {
		if s, ok := found[st.Facts.Hash]; ok && st.Alive && !e.ours(st.Facts.Hash, st.Proc) {
			e.adopt(s.x, s.m, s.run, s.care)
		}
	}
	e.delay("runs-found")
	tell()
	for _, st := range d.Watch {
		e.watch(st.Facts.Hash, st.Proc)
	}
}

// survey reads what the host reports of the node's runs of project: on
// the record, in the record's order, each with what its care file says
// and whether its process (or its holder, or its holder's status) is
// found; found gets what it read of each run in care, for its adoption.
func (e *Engine) survey(ctx context.Context, project string, byHash map[string]protocol.RunCare, found map[string]surveyedRun) (actors.RunBootProject, error) {
	p := actors.RunBootProject{Project: project, Fresh: true}
	x, err := e.repos.Index(project)
	if err != nil {
		return p, err
	}
	msgs, err := x.Runs(ctx)
	if err != nil {
		return p, err
	}
	privileged := x.PrivilegedOnce(ctx)
	for _, m := range msgs {
		run, ok := m.Msg.(*runmsg.Run)
		if !ok || run.Node != e.cfg.User {
			continue
		}
		s := record.StandingOf(msgs, m, privileged)
		st := protocol.RunActorState{Facts: e.factsOf(x, m, run), StartedCounts: s.StartedCounts, StopCounts: s.StopCounts, EndedCounts: s.EndedCounts}
		if c, ok := byHash[m.Hash]; ok {
			st.InCare, st.LaunchedAt, st.Proc, st.Given = true, c.LaunchedAt, c.Proc, c.Given
			st.Alive = e.found(&c)
			found[m.Hash] = surveyedRun{x: x, m: m, run: run, care: c}
		}
		p.Runs = append(p.Runs, st)
	}
	return p, nil
}

// surveyedRun is what survey read of a run in care, for its adoption once
// the boot decided to restore it.
type surveyedRun struct {
	x    *noderepos.Index
	m    record.RunMsg
	run  *runmsg.Run
	care protocol.RunCare
}

// factsOf is what the run core needs of the run m of x (factsOf).
func (e *Engine) factsOf(x *noderepos.Index, m record.RunMsg, run *runmsg.Run) protocol.RunFacts {
	return factsOf(x, m.Hash, m.At(), run)
}

// factsOf is what the run core needs of the run hash of x, at its place
// in the server's order: protocol.RunFactsOf, with its project and place
// (its started keeps the server's order) and, when its password step sets
// its user's password afresh (a run with one, on the server's node, seed
// 004 §5), the user whose slot it takes (D86).
func factsOf(x *noderepos.Index, hash string, at protocol.RunPosition, run *runmsg.Run) protocol.RunFacts {
	f := protocol.RunFactsOf(hash, run)
	f.Project, f.At = x.Project, at
	if run != nil && !x.OtherHost && run.HasPasswordStep() {
		f.Slot = run.Process.User
	}
	return f
}

// found says whether the process a care file names is still the node's to
// watch: alive; or its holder, which a daemon that went down while starting
// it never learnt the PID of, answering on its socket (c.Process is then
// filled in); or a holder that ended while no daemon ran, its status file
// saying how its command ended.
func (e *Engine) found(c *protocol.RunCare) bool {
	if c.Process != nil && e.alive(*c.Process) {
		return true
	}
	if c.Socket == "" {
		return false
	}
	if c.Process == nil {
		if i, err := runhold.Query(c.Socket); err == nil && i.Holder > 0 {
			if id, ok := holderID(i.Holder); ok {
				c.Process = &id
				return true
			}
		}
	}
	_, err := runhold.ReadStatus(e.heldFiles(c.Run).status)
	return err == nil
}

// ours says the process is one this daemon launched (so not to adopt).
func (e *Engine) ours(hash string, proc int) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.runs[hash]
	if r == nil {
		return false
	}
	p := r.procs[proc]
	return p != nil && !p.adopted
}

// adopt records a process found alive at start, not the daemon's child.
func (e *Engine) adopt(x *noderepos.Index, m record.RunMsg, run *runmsg.Run, c protocol.RunCare) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.runs[m.Hash]
	if r == nil {
		r = &engineRun{hash: m.Hash, x: x, msg: m, run: run, procs: map[int]*runProc{}}
		e.runs[m.Hash] = r
	}
	if _, ok := r.procs[c.Proc]; !ok {
		var id protocol.ProcID // none: a holder that ended before its PID was kept
		if c.Process != nil {
			id = *c.Process
		}
		keep, _ := runeng.KeepOf(run.Process) // its sizes were checked when it arrived
		r.procs[c.Proc] = &runProc{id: id, adopted: true, socket: c.Socket,
			stderr: &runeng.Tail{Max: keep.Stderr}, stdout: &runeng.Tail{Max: keep.Stdout}}
		// A daemon before this one may have written its kept logs and
		// gone down before ended: they are looked for before they are
		// written.
		e.doubt[fmt.Sprintf("kept logs %s %d", m.Hash, c.Proc)] = true
	}
}

// alive says the process runs (its PID with its start time, not a zombie).
func (e *Engine) alive(id protocol.ProcID) bool {
	st, err := unixhost.ReadStat(id.PID)
	return err == nil && st.Start == id.Start && !st.Zombie()
}

// watch waits for a run's process found alive at start: a holder, whose
// status file and logs say how it ended; a process without one (a care
// file of an older daemon) ends unknown, the daemon not its parent.
func (e *Engine) watch(hash string, proc int) {
	e.mu.Lock()
	var p *runProc
	if r := e.runs[hash]; r != nil {
		p = r.procs[proc]
	}
	e.mu.Unlock()
	if p == nil {
		return
	}
	if p.socket != "" {
		go e.watchHolder(hash, proc, p, p.id, e.heldFiles(hash))
		return
	}
	if p.id.PID == 0 {
		return
	}
	go func() {
		if err := unixhost.WaitGone(e.ctx, p.id); err != nil {
			return
		}
		e.log.Info("a run's process found at start is gone; how it ended is unknown", slog.String(actors.KeyRun, hash), slog.String(actors.KeyPID, p.id.String()))
		e.exited(hash, protocol.RunProcessExited{Proc: proc, Status: messages.ExitUnknown})
	}()
}

// Check is `runs check`: the runs to end lost now. On another host the
// check is made on a clone pulled now; one that cannot be pulled ends
// nothing lost (D72). A project whose runs Boot left waiting has them
// found first (Fresh).
func (e *Engine) Check(ctx context.Context) ([]protocol.RunRouted, error) {
	var pulled []string
	for _, name := range e.cfg.ProjectNames() {
		x, err := e.repos.Index(name)
		if err != nil {
			return nil, err
		}
		if err := e.repos.PullNow(ctx, x); err != nil {
			e.log.Warn("runs check: the clone of a project served from another host cannot be pulled; none of its runs is found lost now",
				slog.String("project", name), actors.ErrAttr(err))
			continue
		}
		e.Fresh(ctx, name)
		pulled = append(pulled, name)
	}
	care, err := e.caresByHash()
	if err != nil {
		return nil, err
	}
	var projects []actors.RunBootProject
	found := map[string]surveyedRun{}
	for _, name := range pulled {
		p, err := e.survey(ctx, name, care, found)
		if err != nil {
			return nil, err
		}
		projects = append(projects, p)
	}
	var out []protocol.RunRouted
	for _, st := range actors.DecideRunBoot(projects).Restore {
		if s, ok := found[st.Facts.Hash]; ok && st.Alive && !e.ours(st.Facts.Hash, st.Proc) {
			e.adopt(s.x, s.m, s.run, s.care) // a process no daemon adopted yet
		}
		if st.Lost == "" {
			continue
		}
		note := st.Lost
		st.Lost = ""
		out = append(out, protocol.RunRouted{Run: st.Facts.Hash, Start: &st, Event: protocol.RunNotInCare{Note: note}})
	}
	return out, nil
}

// Start is `run start`: the events that start a manual run, read from the
// record now.
func (e *Engine) Start(ctx context.Context, s protocol.StartRun) ([]protocol.RunRouted, string, error) {
	return e.record.StartRun(ctx, s)
}
