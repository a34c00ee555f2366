package hookshell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/actors/hookwatch"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/noderepos"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// hookRunBound bounds one run of the hook the daemon starts itself.
const hookRunBound = time.Minute

// Watch is the daemon's backstop for the wake hook (D24, D29). Fossil
// runs the hook from its backoffice at most once per receipt range, and
// sometimes not for a long while: never after a web form's post (the form
// answers with a redirect, and only a 200 reply starts the backoffice), a
// lease held for 60 s, an embargo of 60 s after every push the server
// answered with gimme cards, a server whose backoffice never runs
// (fossil-2.21.md 4.3 and 4.5). A wake held back is a session that does not
// answer. So the watch follows each repository's writes (fsnotify on its
// directory, for the file and its -wal) and looks at it after each, and at
// least every times.Every: the newest receipt, Fossil's hook-last-rcvid and
// the hook's mark (AGENTS/hook.mark.PROJECT) with its lock. What to do is
// the core's (actors/hookwatch); this is its shell: the events, the timer, the reads, and the
// runs of the installed command, as Fossil would run it, with nothing on
// standard input: the hook handles what arrived after its mark, once (its
// mark is under a lock), so a run that finds nothing new does nothing. A
// repository without OCX's hook is left alone.
type Watch struct {
	times    hookwatch.Times
	layout   host.Layout
	root     *unixhost.Root
	projects map[string]string // repository path by project
	// repo gives the daemon's open reader of a project's repository.
	repo func(project string) (*fossilio.Repo, error)
	// fossil is the executable %F names.
	fossil string
	log    *slog.Logger
	// noEvents leaves the file events out (tests of the fallback).
	noEvents bool
	// own, when set, does the hook's work in the daemon for a repository
	// (the socket's answer to a hook's ask): a run of OCX's own installed
	// command is that, with no /bin/sh and no ocx-hook asking the daemon
	// back; an error has the command run as Fossil would run it.
	own func(ctx context.Context, repo string) error

	// reqs carries pause and resume to the loop.
	reqs   chan watchReq
	cancel context.CancelFunc
	done   chan struct{}
	// released is closed once the file events are released (Release).
	released chan struct{}
}

// watchReq is a pause (or a resume) for the loop; done is closed once the
// loop has taken it, for a pause once no run is under way.
type watchReq struct {
	pause bool
	done  chan struct{}
}

// New readies the watch over every project of cfg, looking at each at
// least every every, through the daemon's open readers of repos. own, when
// not nil, does the hook's work in the daemon for a repository: the runs
// of OCX's own command are that (ownCommand).
func New(layout host.Layout, root *unixhost.Root, cfg *messages.NodeConfig, repos *noderepos.Repos, every time.Duration, own func(ctx context.Context, repo string) error, log *slog.Logger) *Watch {
	w := &Watch{layout: layout, root: root, projects: map[string]string{}, fossil: "fossil", log: log,
		times: hookwatch.DefaultTimes(every), own: own}
	for name, p := range cfg.Projects {
		w.projects[name] = p.Repository
	}
	w.repo = func(project string) (*fossilio.Repo, error) {
		x, err := repos.Index(project)
		if err != nil {
			return nil, err
		}
		return x.Repo, nil
	}
	if exe, err := exec.LookPath("fossil"); err == nil {
		w.fossil = exe
	}
	return w
}

// Start runs the watch until Stop.
func (w *Watch) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel, w.done, w.reqs, w.released = cancel, make(chan struct{}), make(chan watchReq), make(chan struct{})
	go func() {
		defer close(w.done)
		w.loop(ctx)
	}()
}

// Stop ends the watch, and a hook run under way (its process group): once it
// returns, the watch looks at nothing and runs nothing. A nil watch
// (--hook-watch 0) has nothing to stop; stopping twice is once. The file
// events are released after it, in the background: closing an inotify
// descriptor waits for the kernel's RCU grace period (7 ms here, more under
// load), which the stop, a step before the drain, does not wait for.
func (w *Watch) Stop() {
	if w == nil || w.cancel == nil {
		return
	}
	w.cancel()
	<-w.done
}

// Release stops the watch and waits until its file events are released
// too: the daemon's last step, and a test's.
func (w *Watch) Release() {
	if w == nil || w.cancel == nil {
		return
	}
	w.Stop()
	<-w.released
}

// Pause waits for a run under way to end and holds the watch: no look and
// no run until Resume. Writes meanwhile are looked at after it.
func (w *Watch) Pause() { w.request(true) }

// Resume ends a Pause.
func (w *Watch) Resume() { w.request(false) }

func (w *Watch) request(pause bool) {
	if w == nil || w.reqs == nil {
		return
	}
	r := watchReq{pause: pause, done: make(chan struct{})}
	select {
	case w.reqs <- r:
	case <-w.done:
		return
	}
	select {
	case <-r.done:
	case <-w.done:
	}
}

// runEnded is a run's end, from the goroutine that waited for it.
type runEnded struct {
	project string
	err     error
}

// loop owns the core: it turns the file events, the timer, the requests and
// the runs' ends into messages, and carries out the effects. Looks are made
// here, in order (each is about 100 us); a run is waited for by a goroutine
// of its own, so that the events are read meanwhile.
func (w *Watch) loop(ctx context.Context) {
	names := make([]string, 0, len(w.projects))
	for p := range w.projects {
		names = append(names, p)
	}
	l := &watchLoop{w: w, ctx: ctx, begun: time.Now(), core: hookwatch.NewCore(w.times, names),
		commands: map[string]string{}, timer: time.NewTimer(time.Hour), ran: make(chan runEnded, 1)}
	l.timer.Stop()
	defer l.timer.Stop()
	if !w.noEvents {
		var err error
		if l.events, err = openRepoEvents(w.projects); err != nil {
			w.log.Warn("hook watch: the repositories' writes cannot be followed; looking at them every "+w.times.Every.String()+" only", actors.ErrAttr(err))
		} else {
			l.evc, l.errc = l.events.w.Events, l.events.w.Errors
		}
	}
	defer l.release()
	defer l.end()

	l.step(hookwatch.WatchStarted{At: l.now()})
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-l.evc:
			l.event(ev, ok)
		case err, ok := <-l.errc:
			l.eventsFailed(err, ok)
		case <-l.timer.C:
			l.step(hookwatch.Tick{At: l.now()})
		case r := <-l.ran:
			l.runEnded(r)
		case req := <-w.reqs:
			l.request(req)
		}
	}
}

// watchLoop is the loop's state: the core, the file events, the timer and
// the run under way.
type watchLoop struct {
	w        *Watch
	ctx      context.Context
	begun    time.Time
	core     *hookwatch.Core
	commands map[string]string // the installed hook command by project

	events *repoEvents
	evc    <-chan fsnotify.Event
	errc   <-chan error

	timer   *time.Timer
	ran     chan runEnded
	running string
	acks    []chan struct{} // pauses waiting for the run under way
	queue   []hookwatch.WatchMsg
}

func (l *watchLoop) now() time.Duration { return time.Since(l.begun) }

// end waits for the run under way (ctx is done: its group was killed) and
// answers the pauses waiting for it.
func (l *watchLoop) end() {
	if l.running != "" {
		<-l.ran
	}
	for _, a := range l.acks {
		close(a)
	}
}

// release closes the file events, in the background (see Stop).
func (l *watchLoop) release() {
	if l.events == nil {
		close(l.w.released)
		return
	}
	go func(e *repoEvents) {
		defer close(l.w.released)
		e.close()
	}(l.events)
}

func (l *watchLoop) stopEvents(reason string) {
	if l.events != nil {
		l.events.close() // rare: no hurry here
		l.events, l.evc, l.errc = nil, nil, nil
	}
	l.w.log.Warn("hook watch: the repositories' writes are no longer followed; looking at them every "+l.w.times.Every.String()+" only", slog.String("reason", reason))
}

// step gives the core m, and what its effects bring back, in order.
func (l *watchLoop) step(m hookwatch.WatchMsg) {
	l.queue = append(l.queue, m)
	for len(l.queue) > 0 {
		m := l.queue[0]
		l.queue = l.queue[1:]
		for _, e := range l.core.Step(m) {
			l.effect(e)
		}
	}
}

func (l *watchLoop) effect(e hookwatch.WatchEffect) {
	w := l.w
	switch e := e.(type) {
	case hookwatch.Look:
		r, command := w.look(l.ctx, e.Project)
		r.At = l.now()
		if r.Installed {
			l.commands[e.Project] = command
		}
		w.log.Debug("hook watch: "+r.String(), slog.String("project", e.Project))
		l.queue = append(l.queue, r)
	case hookwatch.RunHook:
		line := fossilio.HookSubst(l.commands[e.Project], w.fossil, w.projects[e.Project])
		own := w.own != nil && ownCommand(l.commands[e.Project], w.layout.Root())
		// A web post or a receipt Fossil holds back is the
		// watch's daily work; a run stuck or lost is not.
		level := slog.LevelInfo
		if e.Why == "stuck" || e.Why == "lost" {
			level = slog.LevelWarn
		}
		w.log.Log(l.ctx, level, "the wake hook left receipts unhandled; running it",
			slog.String("project", e.Project), slog.Int64("mark", e.Mark), slog.Int64("newest", e.Newest),
			slog.String("woken", e.Why), slog.String("command", line), slog.Bool("in_daemon", own))
		l.running = e.Project
		ctx, ran, repo := l.ctx, l.ran, w.projects[e.Project]
		go func() {
			if own {
				ran <- runEnded{project: e.Project, err: w.runOwn(ctx, repo, line)}
				return
			}
			ran <- runEnded{project: e.Project, err: w.run(ctx, line)}
		}()
	case hookwatch.SetTimer:
		l.timer.Stop()
		if e.At != hookwatch.Never {
			l.timer.Reset(max(e.At-l.now(), 0))
		}
	}
}

func (l *watchLoop) event(ev fsnotify.Event, ok bool) {
	if !ok {
		l.stopEvents("the watcher ended")
		l.step(hookwatch.EventsLost{At: l.now(), Reason: "the watcher ended"})
		return
	}
	project, gone := l.events.project(ev)
	if gone {
		l.stopEvents(fmt.Sprintf("%s: %s", ev.Name, ev.Op))
		l.step(hookwatch.EventsLost{At: l.now(), Reason: "a repository's directory went"})
		return
	}
	if project != "" {
		l.step(hookwatch.RepoWritten{At: l.now(), Project: project})
	}
}

func (l *watchLoop) eventsFailed(err error, ok bool) {
	if ok && errors.Is(err, fsnotify.ErrEventOverflow) {
		l.w.log.Warn("hook watch: writes were missed (the kernel's queue overflowed); looking at every repository", actors.ErrAttr(err))
		l.step(hookwatch.EventsLost{At: l.now(), Reason: "overflow"})
		return
	}
	reason := "the watcher ended"
	if ok {
		reason = err.Error()
	}
	l.stopEvents(reason)
	l.step(hookwatch.EventsLost{At: l.now(), Reason: reason})
}

func (l *watchLoop) runEnded(r runEnded) {
	l.running = ""
	attrs := []any{slog.String("project", r.project)}
	if mark, _, ok := l.w.markOf(r.project); ok {
		attrs = append(attrs, slog.Int64("mark", mark))
	}
	if r.err != nil {
		l.w.log.Error("the wake hook the daemon ran failed", append(attrs, actors.ErrAttr(r.err))...)
	} else {
		l.w.log.Info("the wake hook the daemon ran is done", attrs...)
	}
	l.step(hookwatch.HookRunEnded{At: l.now(), Project: r.project, Failed: r.err != nil})
	for _, a := range l.acks {
		close(a)
	}
	l.acks = nil
}

func (l *watchLoop) request(req watchReq) {
	if !req.pause {
		l.step(hookwatch.WatchResumed{At: l.now()})
		close(req.done)
		return
	}
	l.step(hookwatch.WatchPaused{At: l.now()})
	if l.running == "" {
		close(req.done)
	} else {
		l.acks = append(l.acks, req.done)
	}
}

// look reads what the core compares, in an order that never shows the mark
// ahead of what it covers: whether a run holds the mark, the mark, then the
// repository.
func (w *Watch) look(ctx context.Context, project string) (hookwatch.LookResult, string) {
	res := hookwatch.LookResult{Project: project}
	res.Mark, res.Held, res.HasMark = w.markOf(project)
	r, err := w.repo(project)
	if err != nil {
		w.log.Debug("hook watch: the repository cannot be read", slog.String("project", project), actors.ErrAttr(err))
		res.Unreadable = true
		return res, ""
	}
	after := res.Mark
	if !res.HasMark {
		after = math.MaxInt64 // left alone: nothing to look for after it
	}
	l, err := r.HookLook(ctx, after)
	if err != nil {
		w.log.Debug("hook watch: the repository cannot be read", slog.String("project", project), actors.ErrAttr(err))
		res.Unreadable = true
		return res, ""
	}
	res.Installed, res.Newest, res.Fossil, res.ByPage, res.PageWriting = l.Installed, l.Newest, l.Fossil, l.ByPage, l.PageWriting
	return res, l.Command
}

// markOf reads the hook's mark of a project (ok false when there is none)
// and whether a run of the hook holds it: the hook keeps an exclusive flock
// on it for its run. The shared lock tried here is dropped at once; a hook
// starting meanwhile retries within milliseconds.
func (w *Watch) markOf(project string) (mark int64, held, ok bool) {
	f, err := w.root.OpenFile(w.layout.HookMark(project), os.O_RDONLY, 0)
	if err != nil {
		return 0, false, false
	}
	defer f.Close()
	held = errors.Is(unixhost.TryLock(f, unixhost.Shared), host.ErrLocked)
	mark, _, ok = host.ReadHookMark(func() ([]byte, error) {
		b := make([]byte, 64)
		n, err := f.ReadAt(b, 0)
		if err != nil && err != io.EOF {
			return nil, err
		}
		return b[:n], nil
	})
	return mark, held, ok
}

// runOwn does the hook's work in the daemon (own), for OCX's own command
// line: what its ocx-hook would have asked the daemon's socket to do. A
// refusal (node.json changed since the daemon read it, the socket not
// served) runs the line as Fossil would, as ocx-hook falls back.
func (w *Watch) runOwn(ctx context.Context, repo, line string) error {
	octx, cancel := context.WithTimeout(ctx, hookRunBound)
	err := w.own(octx, repo)
	cancel()
	if err == nil || ctx.Err() != nil {
		return err
	}
	w.log.Info("the daemon did not do the hook's work itself; running the command", slog.String("repo", repo), actors.ErrAttr(err))
	return w.run(ctx, line)
}

// ownCommand says whether command, a hook command as installed (%R not
// yet replaced), is OCX's own for the agents root agents: its ocx-hook,
// or `ocx hook` of a release without one, with `--agents AGENTS --repo
// %R` and nothing else, words in single quotes as `ocx hook install`
// writes them or bare. Anything else is a command of someone else's,
// run as Fossil runs it.
func ownCommand(command, agents string) bool {
	w, ok := shellWords(command)
	if !ok || len(w) < 5 {
		return false
	}
	prog, rest := w[0], w[1:]
	switch filepath.Base(prog) {
	case host.HookProgram:
	case "ocx":
		if rest[0] != "hook" {
			return false
		}
		rest = rest[1:]
	default:
		return false
	}
	return filepath.IsAbs(prog) && slices.Equal(rest, []string{"--agents", agents, "--repo", "%R"})
}

// shellWords splits a command line of plain words and single-quoted
// parts (a quote inside one written close, backslash, quote, open) as
// /bin/sh would; ok is false for anything else a shell would read
// otherwise (other quotes, escapes, expansions, operators), which is no
// command of OCX's.
func shellWords(line string) (words []string, ok bool) {
	var cur strings.Builder
	in, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case in:
			if c == '\'' {
				in = false
			} else {
				cur.WriteByte(c)
			}
		case c == '\'':
			in, quoted = true, true
		case c == ' ' || c == '\t':
			if cur.Len() > 0 || quoted {
				words = append(words, cur.String())
				cur.Reset()
				quoted = false
			}
		case c == '\\' && strings.HasPrefix(line[i:], `\''`):
			cur.WriteByte('\'')
			i++
		case strings.IndexByte("\"\\$`;&|<>()*?[]~#{}!\n", c) >= 0:
			return nil, false
		default:
			cur.WriteByte(c)
		}
	}
	if in {
		return nil, false
	}
	if cur.Len() > 0 || quoted {
		words = append(words, cur.String())
	}
	return words, true
}

// run runs the hook's command line as Fossil's backoffice does: /bin/sh -c,
// with an empty standard input, here in a process group of its own so that
// a stop ends all of it. The hook cleans its own environment.
func (w *Watch) run(ctx context.Context, line string) error {
	ctx, cancel := context.WithTimeout(ctx, hookRunBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", line)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + w.layout.Root(), "LANG=C.UTF-8"}
	cmd.Dir = w.layout.Root()
	cmd.SysProcAttr = unixhost.GroupAttr()
	cmd.Cancel = func() error { return unixhost.KillGroup(cmd.Process.Pid, host.SIGKILL) }
	cmd.WaitDelay = time.Second
	return cmd.Run()
}

// repoEvents follows the writes to the repositories: one inotify watch on
// each repository's directory, its events kept for the repository's file and
// its -wal by name. A directory, not the files: SQLite removes the -wal when
// its last connection closes and makes it again at the next open, and a
// watch on a file ends when the file goes; a repository replaced by a rename
// is a new file under the old name. A commit in WAL mode writes the -wal (a
// checkpoint, the file); a read writes neither (it may create the -wal, or
// change its mode), so the daemon's own looks wake nothing.
type repoEvents struct {
	w *fsnotify.Watcher
	// files names the project of each file followed; dirs the directories
	// watched.
	files map[string]string
	dirs  map[string]bool
}

func openRepoEvents(projects map[string]string) (*repoEvents, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	e := &repoEvents{w: fw, files: map[string]string{}, dirs: map[string]bool{}}
	for name, repo := range projects {
		path, err := filepath.Abs(repo)
		if err != nil {
			fw.Close()
			return nil, err
		}
		// SQLite puts the -wal beside the file a link leads to.
		if real, err := filepath.EvalSymlinks(path); err == nil {
			path = real
		}
		dir := filepath.Dir(path)
		if !e.dirs[dir] {
			if err := fw.Add(dir); err != nil {
				fw.Close()
				return nil, fmt.Errorf("watch %s: %w", dir, err)
			}
			e.dirs[dir] = true
		}
		e.files[path] = name
		e.files[path+"-wal"] = name
	}
	return e, nil
}

// project is the project whose repository an event wrote, "" for any other
// event; gone when a watched directory itself went (its watch is over).
func (e *repoEvents) project(ev fsnotify.Event) (project string, gone bool) {
	if e.dirs[ev.Name] && ev.Has(fsnotify.Remove|fsnotify.Rename) {
		return "", true
	}
	if !ev.Has(fsnotify.Write | fsnotify.Create | fsnotify.Rename | fsnotify.Remove) {
		return "", false // a mode change: every open of the -wal makes one
	}
	return e.files[ev.Name], false
}

func (e *repoEvents) close() { e.w.Close() }

// AfterWrites is the daemon's own hook work after its own writes
// (noderepos.OwnHook, D96): for a repository whose only hook is OCX's own
// command for the agents root agents (ownCommand), the work (the
// socket's answer to a hook's ask) in place of the `fossil backoffice`
// that would run /bin/sh and an ocx-hook asking the daemon back. A
// repository with another hook beside it is left to its backoffice,
// which runs them all.
func AfterWrites(agents string, work func(ctx context.Context, repo string) error) noderepos.OwnHook {
	return func(ctx context.Context, x *noderepos.Index) (bool, error) {
		st, err := x.Repo.Hook(ctx)
		if err != nil || !st.Installed || st.Others > 0 || !ownCommand(st.Command, agents) {
			return false, err
		}
		return true, work(ctx, x.Path)
	}
}
