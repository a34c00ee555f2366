// Package daemon is ocxd's wiring: it maps the actors' interfaces onto the
// real host (host/unixhost) and Fossil (fossilio), feeds the node the lines of
// its pipe and the ends of its children, and holds the lock, the log and the
// re-exec.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/cmd/internal/answers"
	"github.com/ocx-go/ocx/cmd/internal/daemon/otherhosts"
	"github.com/ocx-go/ocx/cmd/internal/daemon/reaper"
	"github.com/ocx-go/ocx/cmd/internal/hookshell"
	"github.com/ocx-go/ocx/cmd/internal/runengine"
	"github.com/ocx-go/ocx/fossilio/noderepos"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/daemonclient"
	"github.com/ocx-go/ocx/host/metrics"
	"github.com/ocx-go/ocx/host/procs"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/host/version"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
	"github.com/ocx-go/ocx/messages/protocol"
)

// errRunning says another daemon holds the agents root's lock: nothing to do.
var errRunning = errors.New("ocxd: a daemon already runs for this agents root")

// Main runs ocxd with the command line args and returns its exit code: 0
// when it stopped on INT, TERM or QUIT, or found another daemon running; 1
// when it could not run; 2 for a bad command line.
func Main(args []string, stdout, stderr io.Writer) int {
	opts, err := parseArgs(args)
	if err == nil {
		err = opts.ParseEnv(os.Getenv)
	}
	switch {
	case errors.Is(err, errHelp):
		fmt.Fprint(stdout, usageText)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "ocxd: %v\n%s", err, usageText)
		return 2
	case opts.HandoffCheck:
		if err := checkHandoff(opts); err != nil {
			fmt.Fprintln(stderr, "ocxd: check the hand-off:", err)
			return 1
		}
		fmt.Fprintln(stdout, protocol.HandoffCheckAnswer)
		return 0
	case opts.HandoffVersion:
		fmt.Fprintln(stdout, protocol.HandoffVersion)
		return 0
	case opts.Version:
		fmt.Fprint(stdout, version.Line("ocxd"))
		return 0
	}
	// Run catches the signals itself (D26): the stop is one of their actions.
	err = run(context.Background(), opts)
	switch {
	case errors.Is(err, errRunning):
		fmt.Fprintln(stderr, err)
		return 0
	case err != nil:
		fmt.Fprintln(stderr, "ocxd:", err)
		return 1
	}
	return 0
}

// reexecAsked starts the probe of the ocxd a re-exec would run, while the
// node pauses and gathers its state.
func (d *instance) reexecAsked() {
	if target, err := d.target(); err == nil {
		d.probes.Start(target)
	}
}

// reread has the daemon read node.json again, which it read at start: a
// re-exec in place, as on HUP (the same PID, the same children), so that
// every part built from it (the hook's work, the pokes, the pulls, the
// status) is built again from the file as it is now.
func (d *instance) reread() {
	d.reexecAsked()
	d.inputs.send(protocol.LineRead{Line: pipe.ReexecLine{}})
}

// run runs the daemon of opts.Agents until a signal stops it (INT, TERM,
// QUIT) or ctx ends, then stops its actors and readers and releases the
// lock. It never signals a session: they outlive the daemon. errRunning
// when another daemon holds the lock. What each signal means is actionOf's
// (D26); run only routes it.
func run(ctx context.Context, opts options) (err error) {
	d := &instance{opts: opts}
	defer func() {
		if cerr := d.close(); err == nil && !errors.Is(err, errRunning) {
			err = cerr
		}
	}()
	// The signals are caught before anything starts, before the lock is
	// taken: whoever sends one may see the daemon as soon as it holds the
	// lock, and Go's default for HUP, INT and TERM ends the process (QUIT's
	// dumps it and exits 2), leaving the pipe's name behind. A re-exec'd
	// image runs this too, at once; Exec keeps HUP ignored across the exec
	// until here.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unixhost.OSSignals(caughtSignals...)...)
	defer signal.Stop(sigs)
	d.sigs, d.settled = sigs, make(chan struct{}, 1)
	if opts.CPUProfile != "" {
		stop, err := startCPUProfile(opts.CPUProfile)
		if err != nil {
			return err
		}
		defer stop()
		d.stopProfile = stop
	}
	if err := d.start(); err != nil {
		if opts.Restore {
			// The release's image could not start from the hand-off: said
			// so for the next ensure, which rolls the release back (D73).
			d.recordStart(err)
		}
		return err
	}
	// The stop runs beside the loop, so that a signal during it is still
	// answered (USR2 shows a stop that hangs) or logged as ignored.
	var stopped chan struct{}
	done, fatal := ctx.Done(), d.inputs.fatal
	stop := func(msg string, attrs ...any) {
		d.stopAsked.Store(true)
		d.tellNewImageToStop()
		d.log.Info(msg, attrs...)
		stopped, done, fatal = make(chan struct{}), nil, nil
		go func() {
			defer close(stopped)
			d.finish()
		}()
	}
	// The word is taken at every start: only the image an exec started
	// heeds it.
	if asked := daemonclient.TakeStopAsked(d.layout, d.root); asked && opts.Restore {
		stop("stopping: the old image was asked to stop during its exec; sessions keep running")
	}
	for {
		select {
		case <-done:
			stop("stopping: the caller's context ended; sessions keep running")
		case err := <-fatal:
			return fmt.Errorf("read %s: %w", d.layout.Pipe(), err)
		case <-stopped:
			return nil
		case sig := <-sigs:
			if d.signalled(sig, stopped != nil) == sigStop {
				d.testDelay("signal")
				stop("stopping on a signal; sessions keep running", slog.String(keySignal, signalName(sig)))
			}
		}
	}
}

// signalled acts on a signal the loop caught, but a stop, which it
// returns for the loop to begin; stopping says a stop has begun.
func (d *instance) signalled(sig os.Signal, stopping bool) sigAction {
	n, _ := unixhost.SignalOf(sig)
	name := signalName(sig)
	a := actionOf(n, stopping)
	switch a {
	case sigReexec:
		d.log.Info("HUP: re-exec the current release", slog.String(keySignal, name))
		d.reexecAsked()
		d.inputs.send(protocol.LineRead{Line: pipe.ReexecLine{}})
	case sigStop: // the loop's to begin
	case sigMemory:
		d.logMemory()
	case sigStacks:
		d.logStacks(name)
	case sigIgnored:
		d.log.Info("signal ignored: the daemon is stopping", slog.String(keySignal, name))
	case sigSettle:
		select {
		case d.settled <- struct{}{}:
		default: // one word is enough
		}
	default:
		d.log.Warn("a signal caught that means nothing to the daemon", slog.String(keySignal, name))
	}
	return a
}

// keySignal is the log attribute naming a signal the daemon received, as
// host.SignalName names it (SIGHUP).
const keySignal = "signal"

func signalName(sig os.Signal) string {
	if n, ok := unixhost.SignalOf(sig); ok {
		return n.String()
	}
	return sig.String()
}

// settleBound is how long the actors have, at a stop, to act on what was
// read (how long the drain waits for the writers still holding the pipe
// is --drain).
const settleBound = 10 * time.Second

// finish is the stop on INT, TERM or QUIT, before the actors stop: every line
// written to the pipe is read (inputs.drain) and acted on to its end (a
// launch spawned or refused with its note written, a stop signalled, an end
// note written), so that no line is half-handled: a line is acted on by this
// daemon, or its writer could not write it. The settling is the snapshot's:
// it answers once no actor awaits an effect's result. A session being
// stopped is not waited for; it outlives the daemon as every session does.
func (d *instance) finish() {
	d.execMu.Lock()
	d.stopping = true
	d.execMu.Unlock()
	d.sock.Stop()
	d.sock = nil
	d.hooks.Stop()
	d.remote.Stop()
	n, err := d.inputs.drain(d.root, d.opts.Drain)
	if err != nil {
		d.log.Warn("stopping: the pipe was not read to its end", slog.Int("lines", n), actors.ErrAttr(err))
	} else {
		d.log.Info("stopping: the pipe is read to its end and removed", slog.Int("lines", n))
	}
	if _, err := actors.Snapshot(d.sys, d.node, settleBound); err != nil {
		d.log.Warn("stopping before every line read was acted on", actors.ErrAttr(err))
		return
	}
	d.log.Info("stopping: every line read is acted on")
}

// logMemory writes the daemon's memory to its log on USR1, after a full
// collection, so that the heap it reports is what is live: the memory
// benchmark asks for it, and so may an operator.
func (d *instance) logMemory() {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	d.log.Info("memory", slog.Uint64("heap_live", m.HeapAlloc), slog.Uint64("heap_objects", m.HeapObjects),
		slog.Uint64("heap_sys", m.HeapSys), slog.Uint64("stack", m.StackInuse), slog.Uint64("sys", m.Sys),
		slog.Int("goroutines", runtime.NumGoroutine()))
}

// maxStacks bounds the goroutine dump USR2 asks for; a dump cut there says
// so. The daemon's goroutines are bounded (the workers, a watch per adopted
// session), so a dump is tens of kilobytes.
const maxStacks = 16 << 20

// logStacks writes every goroutine's stack to the log on USR2, as one
// record, the daemon running on: what a daemon that seems stuck (a stop
// that does not end, lines not acted on) is doing.
func (d *instance) logStacks(sig string) {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) || len(buf) >= maxStacks {
			d.log.Info("goroutines", slog.String(keySignal, sig), slog.Int("goroutines", runtime.NumGoroutine()),
				slog.Bool("truncated", n == len(buf)), slog.String("stacks", string(buf[:n])))
			return
		}
		buf = make([]byte, 2*len(buf))
	}
}

// start opens the log, takes the lock (or, after a re-exec, takes it over),
// reads node.json, opens the pipe, the reaper and the process table, starts
// the actor tree and tells it what runs: a Boot from the process table, or
// the hand-off of the image before. Each part is built with what it needs.
func (d *instance) start() error {
	st := &stepTimes{began: time.Now()}
	if err := d.openLog(); err != nil {
		return err
	}
	h, err := d.takeOver(st)
	if err != nil {
		return err
	}
	self, err := d.readConfig()
	if err != nil {
		return err
	}
	if h != nil {
		st.mark("config")
		d.nameReleases(h)
	}
	limits, err := d.openHost(st)
	if err != nil {
		return err
	}
	reader, err := d.openPipe(h)
	if err != nil {
		return err
	}
	if err := d.startActors(limits); err != nil {
		return err
	}
	if h != nil {
		d.restoreFrom(h, st)
	} else {
		d.boot(limits)
	}
	d.inputs.start(reader)
	// The start's reads (the record's index, the process table) peak
	// well above what the daemon keeps (a third more with 10,000
	// workspaces), and the Go runtime hands freed pages back slowly: hand
	// them back now, the pipe read already. Until the socket is served a
	// caller reads the record itself, as with no daemon.
	debug.FreeOSMemory()
	d.sock = answers.Open(d.layout, d.root, d.cfg, d.nodeJSON, d.reread, d.repos, d.log,
		answers.Parts{Procs: d.table, Hand: d.inputs.hand, Poke: d.remote.Poker.Poke, Puller: d.remote.Puller, Metrics: d.metrics})
	d.repos.SetOwnHook(hookshell.AfterWrites(d.layout.Root(), d.sock.Hook))
	d.remote.Start()
	if d.opts.HookWatch > 0 {
		d.hooks = hookshell.New(d.layout, d.root, d.cfg, d.records.Repos, d.opts.HookWatch, d.sock.Hook, d.log)
		d.hooks.Start()
	}
	if h != nil {
		// The new image runs: it reads its pipe, serves its socket and
		// follows its children. Recorded only now, so that an image that
		// could not start never says it runs (D73).
		d.recordReexec(messages.ReexecOutcome{Target: self, From: d.pendingFrom()})
		st.mark("recorded")
	}
	return nil
}

// pendingFrom is the release the image before this one ran, as its
// pending outcome names it: the one a rollback would put back.
func (d *instance) pendingFrom() string {
	o, err := daemonclient.ReadReexec(d.layout)
	if err != nil || o == nil || o.State != messages.ReexecPending || o.PID != os.Getpid() {
		return ""
	}
	return o.From
}

// openLog finds the agents root and opens the daemon's log there.
func (d *instance) openLog() error {
	layout, err := host.NewLayout(d.opts.Agents)
	if err != nil {
		return err
	}
	d.layout = layout
	if st, err := os.Stat(layout.Root()); err != nil || !st.IsDir() {
		return fmt.Errorf("agents root %s is not a directory: %w", layout.Root(), orNotDir(err))
	}
	d.logFile, err = unixhost.OpenLog(layout.Log(), unixhost.LogJSON)
	if err != nil {
		return fmt.Errorf("open the log: %w", err)
	}
	d.log = slog.New(d.logFile.Handler(&slog.HandlerOptions{Level: d.opts.Level})).With(slog.Int("ocxd", os.Getpid()))
	return nil
}

// takeOver takes the hand-off of the image before (--restore), or the
// lock; the hand-off is nil for a daemon that starts afresh.
func (d *instance) takeOver(st *stepTimes) (*handoffFile, error) {
	if d.opts.Restore {
		h, err := d.takeHandoff()
		if err != nil {
			d.log.Error("re-exec: the hand-off cannot be taken over; exiting (sessions keep running, and the next daemon finds them)", actors.ErrAttr(err))
			return nil, fmt.Errorf("take the hand-off over: %w", err)
		}
		st.mark("handoff")
		return &h, nil
	}
	var err error
	d.lock, err = unixhost.AcquireLock(d.layout.Lock())
	if errors.Is(err, host.ErrLocked) {
		d.log.Info("another daemon holds the lock; exiting", actors.ErrAttr(err))
		return nil, fmt.Errorf("%w (%s): %v", errRunning, d.layout.Root(), err)
	}
	if err != nil {
		return nil, fmt.Errorf("take the lock: %w", err)
	}
	return nil, nil
}

// readConfig reads node.json, opens the agents root and finds the releases
// from the running executable, which it returns.
func (d *instance) readConfig() (string, error) {
	data, err := unixhost.Below(d.layout.Root()).ReadFile(d.layout.NodeJSON(), unixhost.NodeFile)
	if err != nil {
		return "", fmt.Errorf("read node.json: %w", err)
	}
	d.cfg, err = messages.DecodeNodeConfig(data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", d.layout.NodeJSON(), err)
	}
	d.nodeJSON = data
	if d.root, err = unixhost.OpenRoot(d.layout.Root()); err != nil {
		return "", err
	}
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		return "", fmt.Errorf("find the running executable: %w", err)
	}
	d.rel = procs.NewReleases(d.cfg.Release, filepath.Dir(self))
	return self, nil
}

// nameReleases names the release of each launch of the hand-off: an image
// before this one named none, and the directory says which it is.
func (d *instance) nameReleases(h *handoffFile) {
	for i := range h.Workspaces {
		for j := range h.Workspaces[i].Sessions {
			if l := &h.Workspaces[i].Sessions[j].Launch; l.ReleaseName == "" && l.ReleaseDir != "" {
				l.ReleaseName = d.rel.Name(l.ReleaseDir)
			}
		}
	}
}

// logDisks says at the start whether each workspace is on a disk of its
// own, and whether each sandbox's user namespace is held to its counts
// (D82), or why not.
func (d *instance) logDisks() {
	if disk, err := host.NodeDisk(d.cfg.SessionLimits); err == nil && disk > 0 {
		if why := unixhost.DiskWhy(); why != "" {
			d.log.Warn("node.json's session_limits.disk is not applied: workspaces are on the host's file system", slog.String("why", why))
		} else {
			d.log.Info("each workspace on a disk of its own", slog.String("disk", host.SizeWords(disk)))
		}
	}
	if l, ok := d.reaper.Current().(*unixhost.Launcher); ok {
		if why := l.UserNSWhy(); why != "" {
			d.log.Warn("sandboxes share the node uid's inotify instances and watches without a bound of their own", slog.String("why", why))
		}
	}
}

// openHost builds the parts that face the host and the record, each with
// what it needs: the node's repositories, the cgroups, the reaper, the
// process table, the records and the run engine.
func (d *instance) openHost(st *stepTimes) (*procs.Limits, error) {
	repos := noderepos.New(d.cfg, d.log)
	d.repos = repos
	// The gauges read the socket's view once it is served (answers.Open).
	d.metrics = metrics.New(nil)
	d.remote = otherhosts.Open(otherhosts.Host{Layout: d.layout, Config: d.cfg, Log: d.log, Repos: repos, Metrics: d.metrics,
		RunsFresh: func(ctx context.Context, project string) { d.runs.Fresh(ctx, project) },
		CheckRuns: func() { d.inputs.send(protocol.LineRead{Line: pipe.RunsCheckLine{}}) }})
	limits, noCgroups, err := procs.NewLimits(d.layout, d.cfg)
	if err != nil {
		return nil, err
	}
	if limits != nil {
		lim, cgroups := limits.Words()
		d.log.Info("sessions run in cgroups of their own", slog.String("limits", lim), slog.String("cgroups", cgroups))
	} else {
		d.log.Warn("sessions run without cgroups, so without memory and processes limits", slog.String("why", noCgroups))
	}
	if d.reaper, err = reaper.New(d.layout, d.root, d.cfg, d.rel, d.log, reaper.Host{Cgroups: limits, RecordAt: repos.RecordAt}); err != nil {
		return nil, err
	}
	d.logDisks()
	st.mark("reaper")
	if d.table, err = unixhost.NewProcTable(unixhost.ProcOptions{Layout: d.layout, ReleaseRoot: d.cfg.Release, Daemon: os.Getpid()}); err != nil {
		return nil, fmt.Errorf("open the process table: %w", err)
	}
	if err := d.table.Watch(); err != nil {
		d.log.Warn("the process table is read by full scans: the kernel's process events are not available", actors.ErrAttr(err))
	}
	st.mark("proc_table")
	boot, err := unixhost.BootTime()
	if err != nil {
		boot = time.Time{}
		d.log.Warn("the host's boot time cannot be read; a session found at start counts its wall limit from then", actors.ErrAttr(err))
	}
	d.procs = procs.NewTable(d.table, boot)
	d.records = newRecords(repos, d.layout, d.rel, d.log, recordHost{procs: d.procs, support: d.reaper.RunSupport, forgetSpawned: d.reaper.ForgetSpawned})
	d.runs = runengine.New(runengine.Deps{Config: d.cfg, Layout: d.layout, Root: d.root, Repos: repos,
		Fossil: d.records.fossil, WriteNote: d.records.writeNote, Signal: d.reaper.Signal, Support: d.reaper.RunSupport,
		Release: d.rel.Dir, ReleaseRoot: d.rel.Root(), Log: d.log, Send: d.send, Fresh: d.remote.IsFresh(d.cfg), Delay: d.testDelay,
		Clock: d.triggerClock()})
	d.records.kickTriggers = d.runs.KickTriggers
	return limits, nil
}

// triggerClock is the clock the triggers' schedules read: the system's,
// or the tests' faster one (OCXD_TEST_TRIGGER_CLOCK, D101).
func (d *instance) triggerClock() host.Clock {
	if c := d.opts.TriggerClock; c != nil {
		d.log.Info("the triggers read a test clock", slog.Time("at", c.Now()), slog.Float64("rate", c.Rate))
		return *c
	}
	return unixhost.Clock{}
}

// openPipe opens the daemon's pipe: made if missing (0600), or the one the
// image before read.
func (d *instance) openPipe(h *handoffFile) (*unixhost.PipeReader, error) {
	var reader *unixhost.PipeReader
	var err error
	if h != nil {
		reader, err = unixhost.AdoptPipeReader(h.FDs[fdPipeRead], h.FDs[fdPipeWrite], d.layout.Pipe(), h.PipeRemainder)
	} else if err = d.root.Mkfifo(d.layout.Pipe(), 0o600); err == nil {
		reader, err = unixhost.OpenPipeReader(d.root, d.layout.Pipe())
	}
	if err != nil {
		return nil, fmt.Errorf("open the daemon's pipe: %w", err)
	}
	if _, err := reader.SetBuffer(1 << 20); err != nil {
		d.log.Debug("the pipe keeps its default buffer", actors.ErrAttr(err))
	}
	return reader, nil
}

// send gives the node a message, at the address it has once started.
func (d *instance) send(m protocol.DaemonMessage) { d.sys.Root.Send(actors.NodePID(d.sys), m) }

// startActors starts the actor tree on the parts openHost built.
func (d *instance) startActors(limits *procs.Limits) error {
	d.sys = actors.NewSystem(d.log)
	d.inputs = &inputs{path: d.layout.Pipe(), reaper: d.reaper, send: d.send, log: d.log, fatal: make(chan error, 1), reexec: d.reexecAsked}
	deps := actors.Deps{
		Classifier: d.records, Checkins: d.records, Notes: d.records,
		Procs: d.procs, Spawner: d.reaper, Signaler: d.reaper, Watcher: d.reaper,
		Clock: unixhost.Clock{}, Inputs: d.inputs, Execer: d, Runs: d.runs, Logger: d.log,
		Usage: usageReader{layout: d.layout, root: d.root}, Observe: d.metrics.Observe,
	}
	if limits != nil {
		deps.Limits = limits
	}
	var err error
	if d.node, err = actors.StartNode(d.sys, deps, actors.Config{Grace: d.opts.Grace, RetryAfter: d.opts.RetryAfter}); err != nil {
		return err
	}
	return nil
}

// restoreFrom tells the node what the image before handed over, then
// follows its children again, so that an exit that happened during the
// exec finds its session known.
func (d *instance) restoreFrom(h *handoffFile, st *stepTimes) {
	st.mark("actors")
	// The runs the old image had in its care: their holders run on.
	err := d.runs.Boot(context.Background(), func(runs []protocol.RunActorState) {
		d.send(protocol.Restore{Handoff: h.Handoff, Listeners: d.records.Listeners(context.Background()), Runs: runs})
	})
	if err != nil {
		d.log.Error("re-exec: the node's runs cannot be read; `runs check` checks them again", actors.ErrAttr(err))
	}
	d.reaper.Open(func(e protocol.ProcessExited) { d.send(e) })
	d.testDelay("adopt")
	if err := d.reaper.Adopt(h.Reaper, h.ChildWorkspaces()); err != nil {
		d.log.Error("re-exec: a child could not be followed again; its end will not be recorded", actors.ErrAttr(err))
	}
	st.mark("adopted")
	d.log.Info("re-exec: running the new image", slog.String("handoff", h.Summary()), slog.Group("since_main", st.stages...))
}

// boot tells the node what runs now: the sessions found in the process
// table, the branch listeners and the node's runs.
func (d *instance) boot(limits *procs.Limits) {
	if limits != nil {
		// Left by sessions that ended while no daemon ran; a running
		// session's holds its processes and stays.
		if gone, err := limits.Sweep(); err != nil || len(gone) > 0 {
			d.log.Info("cgroups of ended sessions removed", slog.String("removed", strings.Join(gone, ",")), actors.ErrAttr(err))
		}
	}
	found, dirs, looks, err := d.procs.Found(d.rel)
	if err != nil {
		d.log.Error("the process table cannot be read at start; sessions running now are not adopted", actors.ErrAttr(err))
	}
	for _, l := range looks {
		d.log.Warn("found a process that only looks like a session; not adopted", slog.String(actors.KeyPID, l.ID.String()), slog.String("why", l.String()))
	}
	// The sessions a daemon before spawned whose end is not on the record
	// (D76): those found gone ended while no daemon ran. Read after the
	// process table, so that a session whose record is read is one the
	// table said runs or not; with the table unreadable none is taken as
	// gone.
	var spawned []protocol.Spawned
	if err == nil {
		var serr error
		if spawned, serr = d.reaper.SpawnedRecords(); serr != nil {
			d.log.Error("the spawned records cannot be read at start; sessions that ended while no daemon ran get their end at a later start", actors.ErrAttr(serr))
		}
	}
	d.records.setFound(dirs, spawned)
	// The node's runs (seed 004, section 10): those in its care, and
	// those it finds lost, ended so once their actors start.
	err = d.runs.Boot(context.Background(), func(runs []protocol.RunActorState) {
		d.send(protocol.Boot{Found: found, Spawned: spawned, Listeners: d.records.Listeners(context.Background()), Runs: runs})
	})
	if err != nil {
		d.log.Error("the node's runs cannot be checked at start; `runs check` checks them again", actors.ErrAttr(err))
	}
	// What arrived for the sessions in care while no daemon ran.
	d.reaper.Open(func(e protocol.ProcessExited) { d.send(e) })
	d.log.Info("started", slog.String("agents", d.layout.Root()), slog.Int("found", len(found)), slog.Duration("grace", d.opts.Grace))
}

// recordStart records a new image's failure to start from the hand-off, as
// far as it got: the release it is in is read from its own program.
func (d *instance) recordStart(err error) {
	if d.layout.Root() == "" {
		return // no agents root to record it in
	}
	self, serr := os.Executable()
	if serr == nil {
		self, serr = filepath.EvalSymlinks(self)
	}
	if serr != nil {
		self = ""
	}
	r := messages.ReexecOutcome{Target: self, Error: "the new image could not start, and exited: " + err.Error(),
		State: messages.ReexecExited, From: d.pendingFrom()}
	if data, derr := unixhost.Below(d.layout.Root()).ReadFile(d.layout.NodeJSON(), unixhost.NodeFile); derr == nil {
		if cfg, derr := messages.DecodeNodeConfig(data); derr == nil && self != "" {
			d.rel = procs.NewReleases(cfg.Release, filepath.Dir(self))
		}
	}
	d.recordReexec(r)
}

// close stops the readers, then the actor tree, then the reaper (which
// signals nothing), and releases the lock, in that order.
func (d *instance) close() error {
	var errs []error
	d.sock.Stop()
	d.sock = nil
	d.hooks.Stop()
	d.remote.Stop()
	if d.inputs != nil {
		d.inputs.close()
	}
	if d.sys != nil {
		if d.node != nil {
			if err := actors.StopNode(d.sys, d.node); err != nil {
				errs = append(errs, err)
			}
		}
		d.sys.Shutdown()
	}
	d.probes.Wait()
	if d.runs != nil {
		d.runs.Close()
	}
	if d.reaper != nil {
		d.reaper.Close()
	}
	if d.table != nil {
		d.table.Close()
	}
	if d.records != nil {
		d.records.Close()
	}
	if d.root != nil {
		d.root.Close()
	}
	d.hooks.Release()
	if d.lock != nil {
		if err := d.lock.Release(); err != nil {
			errs = append(errs, err)
		}
	}
	if d.log != nil && d.lock != nil {
		d.log.Info("stopped")
	}
	if d.logFile != nil {
		d.logFile.Close()
	}
	return errors.Join(errs...)
}

// startCPUProfile starts writing a CPU profile to path, returning what ends
// it (once, whoever calls it first).
func startCPUProfile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600) // trust:outside a file the administrator names with --cpu-profile
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpu-profile %s: %w", path, err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			f.Close()
		})
	}, nil
}
