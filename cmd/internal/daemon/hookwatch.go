package daemon

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"sync"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
)

// DefaultHookWatch is how often the daemon compares each repository's newest
// receipt with the wake hook's mark.
const DefaultHookWatch = 2 * time.Second

// hookRunBound bounds one run of the hook the daemon starts itself.
const hookRunBound = time.Minute

// hookBusyBound is how long a run of the hook may hold its mark before the
// watch takes it for stuck and runs another: the bound the hook itself
// waits for an overlapping run (hook.DefaultLockWait).
const hookBusyBound = 10 * time.Second

// hookWatch is the daemon's backstop for the wake hook. Fossil runs the hook
// from its backoffice at most once per receipt range, and sometimes not for a
// long while: a backoffice lease held for 60 s, an embargo of 60 s after
// every push the server answered with gimme cards (for as long as a phantom
// lasts), a server whose backoffice never runs (fossil-2.21.md 4.3 and 4.5).
// A wake held back that long is a session that does not answer. So every
// look, the watch reads each repository's newest receipt and the hook's mark
// (AGENTS/hook.mark.PROJECT); when the mark stayed behind a receipt for a
// whole look, it runs the installed hook command itself, as Fossil would,
// with nothing on standard input: the hook handles what arrived after its
// mark, once (its mark is under a lock), so a run that finds nothing new
// does nothing. A repository without OCX's hook is left alone.
type hookWatch struct {
	every    time.Duration
	layout   host.Layout
	root     *unixhost.Root
	projects map[string]string // repository path by project
	// repo gives the daemon's open reader of a project's repository.
	repo func(project string) (*fossilio.Repo, error)
	// fossil is the executable %F names.
	fossil string
	log    *slog.Logger

	// mu is held while the watch looks and runs the hook; a re-exec takes it
	// so that no hook the watch started is left to the new image.
	mu   sync.Mutex
	lags map[string]*lag
	// busySince is when the watch first found a run of the hook holding a
	// project's mark, in a row of looks.
	busySince map[string]time.Time

	cancel context.CancelFunc
	done   chan struct{}
}

// start looks every w.every until stop.
func (w *hookWatch) start() {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel, w.done = cancel, make(chan struct{})
	w.lags = map[string]*lag{}
	w.busySince = map[string]time.Time{}
	go func() {
		defer close(w.done)
		t := time.NewTicker(w.every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				w.mu.Lock()
				w.lookAll(ctx)
				w.mu.Unlock()
			}
		}
	}()
}

// stop ends the watch, and a hook run under way (its process group). A nil
// watch (--hook-watch 0) has nothing to stop; stopping twice is once.
func (w *hookWatch) stop() {
	if w == nil || w.cancel == nil {
		return
	}
	w.cancel()
	<-w.done
}

// pause holds the watch between looks; resume lets it go on.
func (w *hookWatch) pause() {
	if w != nil {
		w.mu.Lock()
	}
}

func (w *hookWatch) resume() {
	if w != nil {
		w.mu.Unlock()
	}
}

func (w *hookWatch) lookAll(ctx context.Context) {
	names := make([]string, 0, len(w.projects))
	for p := range w.projects {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		if ctx.Err() != nil {
			return
		}
		w.look(ctx, p)
	}
}

// look compares one repository's newest receipt with the hook's mark, and
// runs the hook when the mark stayed behind.
func (w *hookWatch) look(ctx context.Context, project string) {
	l := w.lags[project]
	if l == nil {
		l = &lag{}
		w.lags[project] = l
	}
	r, err := w.repo(project)
	if err != nil {
		w.log.Debug("hook watch: the repository cannot be read", slog.String("project", project), errAttr(err))
		return
	}
	command, installed, err := r.OCXHook(ctx)
	if err != nil || !installed {
		*l = lag{}
		return
	}
	newest, err := r.NewestReceipt(ctx)
	if err != nil {
		w.log.Debug("hook watch: the newest receipt cannot be read", slog.String("project", project), errAttr(err))
		return
	}
	mark, ok := w.mark(project)
	if !ok {
		// No mark: the hook was installed by hand, and handles only
		// Fossil's own list; a run with an empty list would do nothing.
		*l = lag{}
		return
	}
	if w.busy(project) {
		// A run holds the mark: what it handles moves the mark on.
		since, ok := w.busySince[project]
		if !ok {
			since = time.Now()
			w.busySince[project] = since
		}
		if time.Since(since) < hookBusyBound {
			return
		}
	} else {
		delete(w.busySince, project)
	}
	if !l.look(mark, newest) {
		return
	}
	line := fossilio.HookSubst(command, w.fossil, w.projects[project])
	w.log.Warn("the wake hook left receipts unhandled for a whole look; running it",
		slog.String("project", project), slog.Int64("mark", mark), slog.Int64("newest", newest),
		slog.Int("runs", l.runs), slog.String("command", line))
	if err := w.run(ctx, line); err != nil {
		w.log.Error("the wake hook the daemon ran failed", slog.String("project", project), errAttr(err))
		return
	}
	after, _ := w.mark(project)
	w.log.Info("the wake hook the daemon ran is done", slog.String("project", project), slog.Int64("mark", after))
}

// mark reads the hook's mark of a project; false when there is none.
func (w *hookWatch) mark(project string) (int64, bool) {
	b, err := w.root.ReadFile(w.layout.HookMark(project))
	if err != nil {
		return 0, false
	}
	return host.ParseHookMark(b)
}

// busy says whether a run of the hook holds the project's mark: the hook
// keeps an exclusive flock on it for its run. The shared lock tried here is
// dropped at once; a hook starting meanwhile retries within milliseconds.
func (w *hookWatch) busy(project string) bool {
	f, err := w.root.OpenFile(w.layout.HookMark(project), os.O_RDONLY, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	return errors.Is(unixhost.TryLock(f, unixhost.Shared), host.ErrLocked)
}

// run runs the hook's command line as Fossil's backoffice does: /bin/sh -c,
// with an empty standard input, here in a process group of its own so that
// a stop ends all of it. The hook cleans its own environment.
func (w *hookWatch) run(ctx context.Context, line string) error {
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

// lag follows one repository's hook mark against its newest receipt, look by
// look, and says when to run the hook: when the mark is still behind the
// receipt it was behind at the look before. A run after which the mark does
// not pass that receipt (a hook that fails) doubles the looks until the next
// one, up to 32.
type lag struct {
	// waiting is the newest receipt at the look that found the mark behind
	// it; 0 when the mark was not behind.
	waiting int64
	// looks counts the looks since waiting was set or the hook last ran.
	looks int
	// runs counts the runs since the mark last passed waiting.
	runs int
}

// maxBackoff caps the doubling of the looks between runs that do not help.
const maxBackoff = 5

func (l *lag) look(mark, newest int64) bool {
	if l.waiting != 0 && mark >= l.waiting {
		*l = lag{} // the hook caught up with what it was behind
	}
	if mark >= newest {
		*l = lag{}
		return false
	}
	if l.waiting == 0 {
		l.waiting = newest
		return false
	}
	l.looks++
	if l.looks < 1<<min(l.runs, maxBackoff) {
		return false
	}
	l.looks = 0
	l.runs++
	return true
}

// openHookWatch readies the watch over every project of node.json.
func (d *daemon) openHookWatch() *hookWatch {
	w := &hookWatch{every: d.opts.HookWatch, layout: d.layout, root: d.root, projects: map[string]string{},
		fossil: "fossil", log: d.log}
	for name, p := range d.cfg.Projects {
		w.projects[name] = p.Repository
	}
	w.repo = func(project string) (*fossilio.Repo, error) {
		x, err := d.records.index(project)
		if err != nil {
			return nil, err
		}
		return x.repo, nil
	}
	if exe, err := exec.LookPath("fossil"); err == nil {
		w.fossil = exe
	}
	return w
}
