// Package reaper is ocxd's one owner of its children: it spawns the
// sessions, signals and watches processes for the actors, turns each
// child's end into a ProcessExited for the node, and hands its children
// over to the next image across a re-exec. The launcher under it (a pidfd
// per child, host/unixhost) does the reaping.
package reaper

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/listening"
	"github.com/ocx-go/ocx/host/procs"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// Launcher is what the reaper needs of the host: host's Spawner, Signaler
// and Watcher, and for a re-exec, handing its children over to the next
// image and taking them back. *unixhost.Launcher is the real one (a pidfd
// per child, never wait4(-1)); tests may give host/hosttest's Spawner.
type Launcher interface {
	host.Spawner
	host.Signaler
	host.Watcher
	Detach() ([]unixhost.ChildHandoff, error)
	Adopt(h unixhost.ChildHandoff, onExit func(host.Exit)) error
	Close() error
	// SandboxOf says which sandbox a child runs (D45), for its record.
	SandboxOf(id protocol.ProcID, wait time.Duration) (host.SandboxRecord, error)
}

// Reaper is the daemon's one owner of its children: it spawns sessions
// (actors.Spawner), signals processes (actors.Signaler), watches the ones it
// did not start (actors.Watcher), and turns each child's end into a
// ProcessExited for the node, naming the workspace it spawned the child for
// (the route is fixed at the spawn, or at the adoption from a hand-off). Reaping is the launcher's. Around a re-exec the
// gate holds the exits back, so that none reaches the old image's actors
// after their state was gathered; the held ones go into the hand-off.
type Reaper struct {
	layout   host.Layout
	root     *unixhost.Root
	cfg      *messages.NodeConfig
	releases *procs.Releases
	log      *slog.Logger

	// lmu guards the launcher, which a re-exec replaces, and the watches.
	lmu      sync.Mutex
	l        Launcher
	watches  map[protocol.ProcID]chan struct{}
	launcher func() (Launcher, error)
	// signalOne signals a process that is not the daemon's child.
	signalOne func(protocol.ProcID, host.Signal) error

	// gmu guards the gate: where exits go.
	gmu    sync.Mutex
	send   func(protocol.ProcessExited)
	paused bool
	held   []protocol.ProcessExited

	// cgroups, when set, is where each session is spawned in a cgroup of
	// its own (D46); nil on a host that makes none.
	cgroups *procs.Limits

	// recordAt gives the daemon's live index of a node repository, named
	// by its path as a launch gives it, so that a launch rebuilds the
	// listening index from it, in one read of what arrived since.
	recordAt func(path string) (*record.Index, error)
}

// Host is what the reaper is built with besides the layout: its
// launcher maker (nil: unixhost.NewLauncher below the agents root), the
// cgroups sessions run in (nil: none), and the daemon's open readers of
// the node's repositories.
type Host struct {
	Launcher func() (Launcher, error)
	Cgroups  *procs.Limits
	RecordAt func(path string) (*record.Index, error)
}

// New makes the reaper; with h.Launcher nil, it runs on the real host
// (unixhost.NewLauncher below the agents root, unixhost.SignalOne).
func New(layout host.Layout, root *unixhost.Root, cfg *messages.NodeConfig, rel *procs.Releases, log *slog.Logger, h Host) (*Reaper, error) {
	r := &Reaper{layout: layout, root: root, cfg: cfg, releases: rel, log: log,
		watches: map[protocol.ProcID]chan struct{}{}, paused: true, launcher: h.Launcher, signalOne: unixhost.SignalOne,
		cgroups: h.Cgroups, recordAt: h.RecordAt}
	if r.launcher == nil {
		r.launcher = func() (Launcher, error) { return unixhost.NewLauncher(unixhost.LauncherOptions{Root: root}) }
	}
	l, err := r.launcher()
	if err != nil {
		return nil, fmt.Errorf("start the reaper: %w", err)
	}
	r.l = l
	return r, nil
}

// Open lets exits through to send, first those held meanwhile.
func (r *Reaper) Open(send func(protocol.ProcessExited)) {
	r.gmu.Lock()
	defer r.gmu.Unlock()
	if send != nil {
		r.send = send
	}
	r.paused = false
	for _, e := range r.held {
		r.send(e)
	}
	r.held = nil
}

// Pause holds exits back from now on. Every exit let through before it
// returns was sent (under gmu), so it is in the node's mailbox.
func (r *Reaper) Pause() {
	r.gmu.Lock()
	r.paused = true
	r.gmu.Unlock()
}

// TakeHeld returns the exits held back, leaving none.
func (r *Reaper) TakeHeld() []protocol.ProcessExited {
	r.gmu.Lock()
	defer r.gmu.Unlock()
	h := r.held
	r.held = nil
	return h
}

// Hold puts exits back to be sent when the gate opens (a failed exec).
func (r *Reaper) Hold(es []protocol.ProcessExited) {
	r.gmu.Lock()
	defer r.gmu.Unlock()
	r.held = append(es, r.held...)
}

// exitTo is the end of a child spawned (or adopted) for workspace w, called
// on the launcher's goroutines.
func (r *Reaper) exitTo(w messages.WorkspaceKey) func(host.Exit) {
	return func(e host.Exit) {
		r.forgetSandbox(w, e.ID)
		r.onExit(e, w)
	}
}

func (r *Reaper) onExit(e host.Exit, w messages.WorkspaceKey) {
	id := e.ID
	r.gmu.Lock()
	defer r.gmu.Unlock()
	m := protocol.ProcessExited{Proc: id, Workspace: w, Status: e.Status(), At: e.At}
	r.log.Info("reaped", slog.String(actors.KeyPID, id.String()), slog.String("status", m.Status.String()), slog.String("exit", e.String()))
	if r.paused || r.send == nil {
		r.held = append(r.held, m)
		return
	}
	r.send(m)
}

func (r *Reaper) Current() Launcher {
	r.lmu.Lock()
	defer r.lmu.Unlock()
	return r.l
}

// Spawn starts `workspace serve KEY --root AGENTS --launch HASH` as the
// daemon's child in the workspace's sandbox (contracts 1): the release's
// workspace program, the sandbox checked against the node's own files, the
// session directory and wake pipe made, the listening index rebuilt from the
// node's repository, exactly the environment the contract gives
// (actors.SessionSpawn). The launcher registers the child before Spawn
// returns, and reports its end only after.
func (r *Reaper) Spawn(ctx context.Context, l protocol.LaunchSpec) (protocol.ProcID, error) {
	var none protocol.ProcID
	key := l.Workspace
	ws, err := r.layout.Workspace(key)
	if err != nil {
		return none, err
	}
	if st, err := os.Lstat(ws.Dir); err != nil || !st.IsDir() {
		return none, fmt.Errorf("workspace %s is not on this host (no directory %s)", key, ws.Dir)
	}
	dir, prog, err := r.program(l)
	if err != nil {
		return none, err
	}
	sb, err := r.sandbox(l, ws, dir)
	if err != nil {
		return none, err
	}
	if err := r.disk(ctx, ws, l); err != nil {
		return none, err
	}
	if err := r.sessionPlace(ws); err != nil {
		return none, err
	}
	first, err := r.RebuildListening(ctx, ws, l)
	if err != nil {
		return none, err
	}
	spec := actors.SessionSpawn(l, ws, r.layout.Root(), dir, prog, sb, first)
	if r.cgroups != nil {
		spec.Cgroup, spec.Limits = r.cgroups.Spec(key)
	}
	p, err := r.Current().Spawn(spec, r.exitTo(key))
	if err != nil {
		return none, err
	}
	r.keepSpawned(ws, protocol.Spawned{Workspace: key, Launch: l.Hash, Proc: p, Release: dir})
	r.recordSandbox(ws, p)
	r.log.Info("spawned", slog.String(actors.KeyWorkspace, key.String()), slog.String(actors.KeyLaunch, l.Hash),
		slog.String(actors.KeyPID, p.String()), slog.String("release", dir))
	r.startMCP(ctx, dir, key, p, l)
	return p, nil
}

// program finds the launch's release directory and its workspace program,
// refusing a runner the release does not offer.
func (r *Reaper) program(l protocol.LaunchSpec) (dir, prog string, err error) {
	dir = l.ReleaseDir
	if dir == "" {
		if dir, err = r.releases.Dir(l.Release); err != nil {
			return "", "", err
		}
	}
	prog = filepath.Join(dir, "workspace")
	if st, err := os.Stat(prog); err != nil || st.IsDir() {
		return "", "", fmt.Errorf("the release %s has no workspace program", dir)
	}
	if l.Kind == messages.LLM {
		if err := actors.RunnerRefusal(l, dir, unixhost.OfferedRunners(dir)); err != nil {
			return "", "", err
		}
	}
	return dir, prog, nil
}

// sandbox reads the launch's sandbox and checks it against the node's own
// files.
func (r *Reaper) sandbox(l protocol.LaunchSpec, ws host.Workspace, dir string) (messages.Sandbox, error) {
	var sb messages.Sandbox
	if err := json.Unmarshal(l.Sandbox, &sb); err != nil {
		return sb, fmt.Errorf("the sandbox of launch %s: %w", l.Hash, err)
	}
	var repos []string
	for _, name := range r.cfg.ProjectNames() {
		repos = append(repos, r.cfg.Projects[name].Repository)
	}
	nf, err := unixhost.NodeFilesOf(repos, r.layout.Root(), r.releases.Root(), dir, ws.Dir)
	if err != nil {
		return sb, fmt.Errorf("resolve the node's own files: %w", err)
	}
	if err := nf.CheckSandbox(sb, unixhost.Resolve); err != nil {
		return sb, fmt.Errorf("the workspace definition's sandbox is refused: %w", err)
	}
	return sb, nil
}

// disk gives the workspace's own file system (D82) the size the launch
// asks (the session definition's limits.disk, else node.json's
// session_limits.disk) and mounts it at the workspace if it is not (after
// a host's reboot the image is there and its mount is not), before
// anything of the session is made in the workspace. A limits.disk the
// node cannot give is refused, naming why.
func (r *Reaper) disk(ctx context.Context, ws host.Workspace, l protocol.LaunchSpec) error {
	size, err := host.SessionDisk(l.Disk, r.cfg.SessionLimits)
	if err != nil {
		return err
	}
	why := unixhost.DiskWhy()
	if !unixhost.Exists(ws.Disk) {
		switch {
		case l.Disk != "" && why != "":
			return fmt.Errorf("limits.disk is not provided by this node: %s", why)
		case l.Disk != "":
			return fmt.Errorf("limits.disk %s cannot be provided: workspace %s was made without a disk of its own (before node.json's session_limits.disk, or on a host that could make none); terminate it and add it again", l.Disk, ws.Key)
		case size > 0 && why == "":
			r.log.Warn("the workspace has no disk of its own, made before node.json's session_limits.disk: the session is bounded by the host's file system alone",
				slog.String(actors.KeyWorkspace, ws.Key.String()))
		}
		return nil
	}
	if why != "" {
		return fmt.Errorf("the workspace's disk %s cannot be mounted: %s", ws.Disk, why)
	}
	did, err := unixhost.EnsureDisk(ctx, ws.Disk, ws.Dir, size)
	if err != nil {
		return fmt.Errorf("the workspace's disk: %w", err)
	}
	if did != "" {
		r.log.Info("the workspace's disk", slog.String(actors.KeyWorkspace, ws.Key.String()), slog.String("disk", did))
	}
	return nil
}

// sessionPlace makes the session directory, its wake pipe and its log, the
// binding as the node made it, and the MCP directory.
func (r *Reaper) sessionPlace(ws host.Workspace) error {
	// The session directory, its wake pipe and its log are in the
	// workspace, the agent's to fill: what an earlier session planted in
	// their place (a link, a file) goes, and they are made afresh; nothing
	// is followed (docs/trust.md).
	for _, want := range []struct {
		p    string
		kind fs.FileMode
	}{{ws.Session, fs.ModeDir}, {ws.Wake, fs.ModeNamedPipe}, {ws.Log, 0}} {
		was, err := r.root.Reclaim(want.p, want.kind)
		if err != nil {
			return fmt.Errorf("make room for %s: %w", want.p, err)
		}
		if was != "" {
			r.log.Warn("what the agent left in the session's place is removed", slog.String(actors.KeyWorkspace, ws.Key.String()),
				slog.String("path", want.p), slog.String("was", was))
		}
		if want.p == ws.Session {
			if err := r.root.MkdirAll(ws.Session, 0o700); err != nil {
				return fmt.Errorf("make the session directory: %w", err)
			}
		}
	}
	if err := r.root.Mkfifo(ws.Wake, 0o600); err != nil {
		return fmt.Errorf("make the wake pipe: %w", err)
	}
	if err := r.putBindingBack(ws); err != nil {
		return err
	}
	// The MCP directory is bound into the sandbox, so it must be there
	// before bwrap starts; the server's socket in it comes after (D38).
	if err := r.root.MkdirAll(ws.MCPDir, 0o700); err != nil {
		return fmt.Errorf("make the MCP directory: %w", err)
	}
	return nil
}

// putBindingBack puts the workspace's binding.json back as the node made it
// (its held copy, D44) whenever it says anything else: it is the session's
// to read and the agent's to spoil.
func (r *Reaper) putBindingBack(ws host.Workspace) error {
	held, err := r.root.ReadFile(ws.HeldBinding, unixhost.SmallFile)
	if err != nil {
		return nil
	}
	if cur, err := r.root.ReadFile(ws.Binding, unixhost.SmallFile); err == nil && bytes.Equal(cur, held) {
		return nil
	}
	if _, err := r.root.Reclaim(ws.Binding, 0); err != nil {
		return fmt.Errorf("make room for %s: %w", ws.Binding, err)
	}
	if err := r.root.WriteFile(ws.Binding, held, 0o600); err != nil {
		return fmt.Errorf("put back %s: %w", ws.Binding, err)
	}
	r.log.Warn("the workspace's binding.json said something else; put back as the node made it", slog.String(actors.KeyWorkspace, ws.Key.String()))
	return nil
}

// RebuildListening rebuilds the session's listening index from the node's
// repository, which knows who sent each listen note (D7); the session in
// its sandbox cannot, so a note another user pushed in the agent's name
// would otherwise count. It returns the record's first post or change, in
// the server's order (D47).
func (r *Reaper) RebuildListening(ctx context.Context, ws host.Workspace, l protocol.LaunchSpec) (string, error) {
	key := ws.Key
	x, err := r.recordAt(l.Repository)
	if err != nil {
		return "", fmt.Errorf("rebuild the listening index of %s: %w", key, err)
	}
	own, err := listening.OwnRecordIn(ctx, x, l.Record)
	if err != nil {
		return "", fmt.Errorf("rebuild the listening index of %s: the session's own %w", key, err)
	}
	first, err := record.FirstOf(ctx, x.Repo(), own.Kind, own.ID)
	if err != nil {
		return "", fmt.Errorf("the session's own record: %w", err)
	}
	// Whom the session hears, written for the hook beside the index (D27):
	// the definition's hears, or the users holding admin or setup as of
	// the one read the rebuild makes under the index's lock.
	idx, err := listening.RebuildWith(ctx, r.root, ws, own, listening.InIndex(x, key, l.Hears))
	if err != nil {
		return "", err
	}
	if err := listening.WriteCheckins(ctx, r.root, ws, l.Checkins); err != nil {
		return "", err
	}
	r.log.Info("listening index rebuilt", slog.String(actors.KeyWorkspace, key.String()),
		slog.String("files", strings.Join(idx.Files, ",")), slog.Int("notes", idx.Notes), slog.String("hears", strings.Join(idx.Hears, ",")), slog.String("checkins", strings.Join(l.Checkins, ",")))
	return first, nil
}

// mcpStartWait bounds `ocx mcp start`, which returns once the socket is
// bound.
const mcpStartWait = 10 * time.Second

// startMCP runs the release's `ocx mcp start KEY --session PID@START`,
// with `--model MODEL` for an llm session (its definition's model, which
// the model proxy beside the socket alone serves, counting its tokens for
// the launch against its limits.tokens, which host.MCPLaunchEnv
// and host.MCPTokensEnv say, D50; any other session has no model socket), which
// binds the session's MCP socket and leaves its
// server running in a
// session of its own until the session is gone (D38): a process apart
// from the daemon, so that the daemon's re-exec or end leaves it serving,
// and a failure of it ends no more than the tools of one session. A
// session whose server did not start runs on without its tools; the log
// says why.
func (r *Reaper) startMCP(ctx context.Context, dir string, key messages.WorkspaceKey, p protocol.ProcID, l protocol.LaunchSpec) {
	ocx := filepath.Join(dir, "ocx")
	ctx, cancel := context.WithTimeout(ctx, mcpStartWait)
	defer cancel()
	args := []string{"mcp", "start", key.String(), "--agents", r.layout.Root(), "--session", p.String()}
	var env []string
	if l.Kind == messages.LLM {
		args = append(args, "--model", l.Model)
		// The launch and its tokens limit go in the environment: a release
		// from before D50 (a session on the previous one) ignores them,
		// where it would refuse a flag it does not know and serve nothing.
		env = append(env, host.MCPLaunchEnv+"="+l.Hash)
		if l.Tokens > 0 {
			env = append(env, host.MCPTokensEnv+"="+strconv.FormatUint(l.Tokens, 10))
		}
	}
	cmd := exec.CommandContext(ctx, ocx, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.CombinedOutput()
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
	}
	r.log.Log(ctx, level, "mcp server started", slog.String(actors.KeyWorkspace, key.String()),
		slog.String(actors.KeyPID, p.String()), slog.String("output", strings.TrimSpace(string(out))), actors.ErrAttr(err))
}

// Signal sends TERM or KILL to a process, or the group it leads, only while
// its PID has its start time. A sandboxed child is signalled inside its
// sandbox (D16).
func (r *Reaper) Signal(ctx context.Context, p protocol.ProcID, group bool, sig string) error {
	var s host.Signal
	switch sig {
	case protocol.SigTERM:
		s = host.SIGTERM
	case protocol.SigKILL:
		s = host.SIGKILL
	default:
		return fmt.Errorf("signal %q: the daemon sends TERM and KILL only", sig)
	}
	id := p
	var err error
	if group {
		err = r.Current().Signal(id, s)
	} else {
		err = r.signalOne(id, s)
	}
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
	}
	r.log.Log(ctx, level, "signaled", slog.String(actors.KeyPID, p.String()), slog.String("signal", sig), slog.Bool("group", group), actors.ErrAttr(err))
	return err
}

// Watch returns once a process the daemon did not start is gone. A watch
// asked again (after a freeze, say) waits on the same one.
func (r *Reaper) Watch(ctx context.Context, p protocol.ProcID) error {
	r.lmu.Lock()
	ch, ok := r.watches[p]
	if !ok {
		ch = make(chan struct{})
		done := ch
		err := r.l.Watch(p, func(host.Exit) { close(done) })
		if err != nil {
			r.lmu.Unlock()
			return err
		}
		r.watches[p] = ch
	}
	r.lmu.Unlock()
	select {
	case <-ch:
		r.lmu.Lock()
		if r.watches[p] == ch {
			delete(r.watches, p)
		}
		r.lmu.Unlock()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Detach stops following every child for an exec, returning what the new
// image adopts; the launcher is closed.
func (r *Reaper) Detach() ([]unixhost.ChildHandoff, error) {
	r.lmu.Lock()
	l := r.l
	r.lmu.Unlock()
	return l.Detach()
}

// Reattach follows again, in a new launcher, the children a failed exec
// detached, each for its workspace. Watches start afresh: the actors arm
// them again when they resume. A child reaped during the detach is left
// alone: its end is held, and its status descriptor was closed by the
// follower that reaped it.
func (r *Reaper) Reattach(hs []unixhost.ChildHandoff, children map[protocol.ProcID]messages.WorkspaceKey, reaped map[protocol.ProcID]bool) error {
	l, err := r.launcher()
	if err != nil {
		return err
	}
	r.lmu.Lock()
	r.l = l
	r.watches = map[protocol.ProcID]chan struct{}{}
	r.lmu.Unlock()
	var errs []error
	for _, h := range hs {
		p := h.ID
		if reaped[p] {
			continue
		}
		w, ok := children[p]
		if !ok {
			unixhost.CloseFD(h.StatusFD)
			continue
		}
		if err := l.Adopt(h, r.exitTo(w)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Adopt follows the children a previous image handed over, each for the
// workspace whose session it runs.
func (r *Reaper) Adopt(cs []unixhost.ChildHandoff, children map[protocol.ProcID]messages.WorkspaceKey) error {
	var errs []error
	for _, c := range cs {
		w, ok := children[c.ID]
		if !ok {
			errs = append(errs, fmt.Errorf("adopt child %s: no session of the hand-off runs it", c.ID))
			unixhost.CloseFD(c.StatusFD)
			continue
		}
		if err := r.Current().Adopt(c, r.exitTo(w)); err != nil {
			errs = append(errs, fmt.Errorf("adopt child %s: %w", c.ID, err))
		}
	}
	return errors.Join(errs...)
}

func (r *Reaper) Close() error { return r.Current().Close() }

// sandboxReportWait bounds the wait for bwrap to say which process is its
// sandbox's first: it does so as soon as it has made it.
const sandboxReportWait = 2 * time.Second

// recordSandbox keeps, in AGENTS/LOGIN/held/PROJECT/sandbox, outside every
// sandbox, which sandbox the session of ws runs in (D45): a process in it
// counts for ws, across a restart too, even once bwrap is gone, while a
// process elsewhere whose command line names ws counts for nothing. A
// session whose sandbox is not recorded still counts while its bwrap runs
// (bwrap, a process of the host, binds ws, and its child is the sandbox's).
func (r *Reaper) recordSandbox(ws host.Workspace, id protocol.ProcID) {
	if r.root == nil {
		return
	}
	rec, err := r.Current().SandboxOf(id, sandboxReportWait)
	if err == nil {
		err = unixhost.WriteSandboxRecord(r.root, ws, rec)
	}
	if err != nil {
		r.log.Warn("the session's sandbox is not recorded: it counts for its workspace only while its bwrap runs",
			slog.String(actors.KeyWorkspace, ws.Key.String()), slog.String(actors.KeyPID, id.String()), actors.ErrAttr(err))
		return
	}
	r.log.Debug("sandbox recorded", slog.String(actors.KeyWorkspace, ws.Key.String()), slog.String(actors.KeyPID, id.String()),
		slog.String("init", rec.Init.String()), slog.Uint64("pid_namespace", rec.PIDNamespace))
}

// keepSpawned keeps, in ws's held directory, the spawned record of a
// session just spawned (D76), so that a daemon that starts after it ended
// while none ran writes its end. It is removed once its end note is on the
// record (forgetSpawned). A failure is logged: the session runs, but an
// end while no daemon runs would not be found.
func (r *Reaper) keepSpawned(ws host.Workspace, s protocol.Spawned) {
	if r.root == nil {
		return
	}
	if err := unixhost.WriteSpawned(r.root, ws, s); err != nil {
		r.log.Warn("the session's spawned record is not kept: should it end while no daemon runs, its end will not be written",
			slog.String(actors.KeyWorkspace, ws.Key.String()), slog.String(actors.KeyLaunch, s.Launch), slog.String(actors.KeyPID, s.Proc.String()), actors.ErrAttr(err))
	}
}

// ForgetSpawned removes the spawned record of launch in workspace w: its
// end note is on the record.
func (r *Reaper) ForgetSpawned(w messages.WorkspaceKey, launch string) error {
	if r.root == nil {
		return nil
	}
	ws, err := r.layout.Workspace(w)
	if err != nil {
		return err
	}
	return unixhost.ForgetSpawned(r.root, ws, launch)
}

// SpawnedRecords reads the spawned records of every workspace of the
// agents root (each login's directory but the node user's, each project of
// node.json), for the daemon's start (D76): a session each whose end note
// is not on the record. A record that does not read is logged and left.
func (r *Reaper) SpawnedRecords() ([]protocol.Spawned, error) {
	if r.root == nil {
		return nil, nil
	}
	entries, err := r.root.ReadDir(r.layout.Root())
	if err != nil {
		return nil, fmt.Errorf("list the agents root: %w", err)
	}
	projects := r.cfg.ProjectNames()
	var out []protocol.Spawned
	for _, e := range entries {
		if !e.IsDir() || messages.ValidateLogin(e.Name()) != nil || e.Name() == r.cfg.User {
			continue
		}
		for _, project := range projects {
			ws, err := r.layout.Workspace(messages.WorkspaceKey{Login: e.Name(), Project: project})
			if err != nil {
				continue
			}
			got, bad, err := unixhost.ReadSpawned(r.root, ws)
			for _, b := range append(bad, err) {
				if b != nil {
					r.log.Warn("a spawned record is passed over", slog.String(actors.KeyWorkspace, ws.Key.String()), actors.ErrAttr(b))
				}
			}
			out = append(out, got...)
		}
	}
	return out, nil
}

// forgetSandbox removes the record of the sandbox bwrap ran for w once it
// has ended, unless its init runs on (unixhost.ForgetSandbox).
func (r *Reaper) forgetSandbox(w messages.WorkspaceKey, bwrap protocol.ProcID) {
	if r.root == nil {
		return
	}
	ws, err := r.layout.Workspace(w)
	if err == nil {
		err = unixhost.ForgetSandbox(r.root, ws, bwrap)
	}
	if err != nil {
		r.log.Warn("the record of an ended sandbox is left", slog.String(actors.KeyWorkspace, w.String()),
			slog.String(actors.KeyPID, bwrap.String()), actors.ErrAttr(err))
	}
}

// RunSupport is what the host can give a run (refusal row 8); a launcher
// that starts no runs (a test's) provides nothing but an unconfined run.
func (r *Reaper) RunSupport() host.RunSupport {
	if s, ok := r.Current().(interface{ RunSupport() host.RunSupport }); ok {
		return s.RunSupport()
	}
	return host.RunSupport{Sandbox: "this host starts no sandboxed runs", CPU: "not enforced", Processes: "not enforced", Memory: "not enforced"}
}
