package daemonclient

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// A release whose daemon ended before it recorded its outcome (D73): the
// old image wrote AGENTS/ocxd.reexec as pending just before the exec, and
// the new image never replaced it (or said it could not start, and
// exited), and no daemon holds the lock. The next ensure of the daemon
// (the hook, the console, any tool), or an accept or rollback that saw the
// daemon end, rolls the release root's links back to the release the
// daemon ran before, once, before a daemon starts on them: the decision is
// decideRecovery's, the effects Recover's.

// rollback is what the release root's links name after a release whose
// daemon could not run is rolled back.
type rollback struct {
	// Failed is the release whose daemon could not run.
	Failed string
	// Current is what current names after.
	Current string
	// Previous is what previous names after; "" removes it.
	Previous string
}

// RollbackLinks puts current back, and previous unless it names the release
// that failed or current itself: previous never names a release that failed.
func RollbackLinks(failed, current, previous string) rollback {
	if previous == failed || previous == current {
		previous = ""
	}
	return rollback{Failed: failed, Current: current, Previous: previous}
}

// recoveryFacts is what the recovery decides on.
type recoveryFacts struct {
	// Outcome is AGENTS/ocxd.reexec; nil when there is none.
	Outcome *messages.ReexecOutcome
	// Held says a process holds AGENTS/ocxd.lock.
	Held bool
	// Current and Previous are the releases the root's links name ("" for
	// none); CurrentLinked is when current was linked.
	Current, Previous string
	CurrentLinked     time.Time
	// Undo is what ROOT/undo/FAILED names: previous before the failed
	// release was accepted; "" when there is no such link.
	Undo string
	// FromRuns says the release the daemon ran before still holds its ocxd.
	FromRuns bool
}

// decideRecovery says whether the links are rolled back, and to what; or,
// when not, why not.
func decideRecovery(f recoveryFacts) (rollback, string, bool) {
	o := f.Outcome
	switch {
	case o == nil:
		return rollback{}, "no re-exec is recorded", false
	case !o.Ended():
		return rollback{}, "the last re-exec did not end the daemon", false
	case f.Held:
		return rollback{}, "a process holds the daemon's lock", false
	case o.Release == "" || o.From == "":
		return rollback{}, "the re-exec names no release, or not the one the daemon ran before", false
	case o.From == o.Release:
		return rollback{}, fmt.Sprintf("the daemon ran release %s before the re-exec already", o.From), false
	case f.Current != o.Release:
		return rollback{}, fmt.Sprintf("current names %q, not release %s: the links changed since", f.Current, o.Release), false
	case f.CurrentLinked.After(o.At):
		return rollback{}, fmt.Sprintf("current was linked again after the re-exec (%s)", f.CurrentLinked.UTC().Format(time.RFC3339Nano)), false
	case !f.FromRuns:
		return rollback{}, fmt.Sprintf("release %s, which the daemon ran before, has no ocxd", o.From), false
	}
	prev := f.Previous
	if f.Undo != "" {
		prev = f.Undo
	}
	return RollbackLinks(o.Release, o.From, prev), "", true
}

// rolledBack is the outcome recorded once the links are rolled back: o's
// re-exec, with why and what the links name now.
func rolledBack(o *messages.ReexecOutcome, r rollback, at time.Time) messages.ReexecOutcome {
	why := fmt.Sprintf("its daemon ended before it recorded its outcome (pid %d exec'd %s at %s, and no daemon held the lock after)",
		o.PID, orNone(o.Target), o.At.UTC().Format(time.RFC3339))
	if o.State == messages.ReexecExited {
		why = "its daemon could not start from the hand-off, and exited (" + o.Error + ")"
	}
	prev := "previous is removed"
	if r.Previous != "" {
		prev = "previous names " + r.Previous
	}
	text := fmt.Sprintf("release %s was rolled back: %s; current names %s again, %s", r.Failed, why, r.Current, prev)
	if len(text) > messages.MaxTextLen {
		text = strings.ToValidUTF8(text[:messages.MaxTextLen-3], "") + "..."
	}
	return messages.ReexecOutcome{At: at.UTC(), PID: o.PID, Target: o.Target, Release: o.Release, From: o.From,
		State: messages.ReexecRolledBack, Error: text}
}

func orNone(s string) string {
	if s == "" {
		return "an ocxd"
	}
	return s
}

// Recover rolls back, once, the release whose daemon ended before it
// recorded its outcome (decideRecovery), holding the daemon's lock
// meanwhile so that no daemon starts on the links half-moved and no second
// caller rolls back too; it writes the rolled-back outcome and a line in
// the daemon's log. It returns that outcome, or nil when nothing was
// rolled back. A daemon found holding the lock is left alone.
func Recover(layout host.Layout) (*messages.ReexecOutcome, error) {
	o, err := ReadReexec(layout)
	if err != nil || o == nil || !o.Ended() {
		return nil, err // the common case: one small read
	}
	data, err := unixhost.Below(layout.Root()).ReadFile(layout.NodeJSON(), unixhost.NodeFile)
	if err != nil {
		return nil, fmt.Errorf("roll back a release: read node.json: %w", err)
	}
	cfg, err := messages.DecodeNodeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("roll back a release: %s: %w", layout.NodeJSON(), err)
	}
	if cfg.Release == "" {
		return nil, nil // no links to roll back: the daemon runs its own program
	}
	root, err := host.NewReleaseRoot(cfg.Release)
	if err != nil {
		return nil, err
	}
	lock, err := unixhost.AcquireLock(layout.Lock())
	if errors.Is(err, host.ErrLocked) {
		return nil, nil // a daemon runs, or another caller recovers
	}
	if err != nil {
		return nil, fmt.Errorf("roll back a release: %w", err)
	}
	defer lock.Release()
	// Read again under the lock: another caller may have rolled back.
	if o, err = ReadReexec(layout); err != nil || o == nil {
		return nil, err
	}
	f := recoveryFacts{Outcome: o}
	if f.Current, err = ReleaseLink(root.Current()); err != nil {
		return nil, err
	}
	if f.Previous, err = ReleaseLink(root.Previous()); err != nil {
		return nil, err
	}
	if o.Release != "" {
		if f.Undo, err = ReleaseLink(root.Undo(o.Release)); err != nil {
			return nil, err
		}
	}
	if st, err := os.Lstat(root.Current()); err == nil {
		f.CurrentLinked = st.ModTime()
	}
	if o.From != "" {
		if st, err := os.Stat(filepath.Join(root.Release(o.From), "ocxd")); err == nil && st.Mode().IsRegular() {
			f.FromRuns = true
		}
	}
	r, why, ok := decideRecovery(f)
	if !ok {
		if o.Ended() && o.Release != "" && f.Current == o.Release {
			logRecovery(layout, slog.LevelWarn, "re-exec: a release whose daemon ended is not rolled back", slog.String("release", o.Release), slog.String("why", why))
		}
		return nil, nil
	}
	if err := ApplyRollback(root, r); err != nil {
		logRecovery(layout, slog.LevelError, "re-exec: the rollback of a release whose daemon ended failed", slog.String("release", r.Failed), slog.String("error", err.Error()))
		return nil, err
	}
	rec := rolledBack(o, r, time.Now())
	if err := WriteReexec(layout, nil, rec); err != nil {
		logRecovery(layout, slog.LevelError, "re-exec: the rollback is not recorded", slog.String("error", err.Error()))
	}
	logRecovery(layout, slog.LevelWarn, "re-exec: the release was rolled back", slog.String("release", r.Failed),
		slog.String("current", r.Current), slog.String("previous", r.Previous), slog.Int("daemon", o.PID), slog.String("why", rec.Error))
	return &rec, nil
}

// ApplyRollback writes r's links: current, then previous (or its removal),
// then the undo link of the release that failed goes.
func ApplyRollback(root host.ReleaseRoot, r rollback) error {
	if err := unixhost.ReplaceLink(root.Current(), host.RootTarget(r.Current)); err != nil {
		return fmt.Errorf("roll back release %s: %w", r.Failed, err)
	}
	var err error
	if r.Previous != "" {
		err = unixhost.ReplaceLink(root.Previous(), host.RootTarget(r.Previous))
	} else {
		err = unixhost.RemoveLink(root.Previous())
	}
	if err != nil {
		return fmt.Errorf("roll back release %s: current names %s again, but previous: %w", r.Failed, r.Current, err)
	}
	if err := unixhost.RemoveLink(root.Undo(r.Failed)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("roll back release %s: %w", r.Failed, err)
	}
	return nil
}

// logRecovery writes one line in the daemon's log (AGENTS/ocxd.log, as
// the daemon writes it), naming this process (by): what a daemon that ended
// could not say. A log that cannot be opened is left alone.
func logRecovery(layout host.Layout, level slog.Level, msg string, attrs ...any) {
	f, err := unixhost.OpenLog(layout.Log(), unixhost.LogJSON)
	if err != nil {
		return
	}
	defer f.Close()
	slog.New(f.Handler(nil)).With(slog.Int("by", os.Getpid())).Log(context.Background(), level, msg, attrs...)
}

// ReadReexec reads AGENTS/ocxd.reexec: nil when there is none.
func ReadReexec(l host.Layout) (*messages.ReexecOutcome, error) {
	data, err := unixhost.Below(l.Root()).ReadFile(l.Reexec(), unixhost.SmallFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return messages.DecodeReexecOutcome(data)
}

// WriteReexec writes r to AGENTS/ocxd.reexec through root, or, when root
// is nil, through a root opened for it.
func WriteReexec(layout host.Layout, root *unixhost.Root, r messages.ReexecOutcome) error {
	data, err := r.Encode()
	if err != nil {
		return err
	}
	if root == nil {
		if root, err = unixhost.OpenRoot(layout.Root()); err != nil {
			return err
		}
		defer root.Close()
	}
	return root.WriteFile(layout.Reexec(), data, 0o600)
}

// ReleaseLink reads the release a link of a release root names: "" when
// there is no link, an error when it names something else.
func ReleaseLink(link string) (string, error) {
	t, err := os.Readlink(link)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("release link: %w", err)
	}
	id, ok := host.ReleaseOfTarget(t)
	if !ok {
		return "", fmt.Errorf("release link %s -> %s does not name a release", link, t)
	}
	return id, nil
}

// WriteStopAsked is an old image's word to the image its exec under way
// starts (D92): a stop was asked, AGENTS/ocxd.stopasked names this PID.
func WriteStopAsked(layout host.Layout, root *unixhost.Root) error {
	return root.WriteFile(layout.StopAsked(), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
}

// TakeStopAsked takes the word WriteStopAsked left, saying whether it
// names this PID: the old image of this process was asked to stop while
// it exec'd this one.
func TakeStopAsked(layout host.Layout, root *unixhost.Root) bool {
	data, err := root.ReadFile(layout.StopAsked(), 64)
	if err != nil {
		return false
	}
	root.Remove(layout.StopAsked())
	return string(data) == strconv.Itoa(os.Getpid())+"\n"
}
