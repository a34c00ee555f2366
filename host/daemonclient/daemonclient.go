// Package daemonclient is what a tool and the hook need of ocxd: find its
// release, make sure it runs and reads its pipe, hand it lines, and find its
// PID. It does not import the actors, so neither `ocx` nor the hook links
// the actor system.
package daemonclient

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
)

// env is the whole environment a daemon started by the hook or a
// tool gets: nothing of the caller's (the hook's environment is whatever
// Fossil's backoffice had, fossil-2.21.md 4.4).
func env(agents string) []string {
	return []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + agents, "LANG=C.UTF-8"}
}

// Ensure makes sure the daemon of the agents root runs and reads its
// pipe (contracts 8): whenever no process holds AGENTS/ocxd.lock, it starts
// `ocxd --agents AGENTS` detached, in a session of its own, with its standard
// streams on /dev/null; then it waits, at most wait, until the pipe has a
// reader. A daemon found stopping (it holds the lock but has removed its
// pipe's name, D22) is waited for, and the next one started as soon as the
// lock is free. Before each start, a release whose daemon ended before it
// recorded its re-exec's outcome is rolled back, once (Recover, D73), so
// that the daemon starts on the release that ran before. It reports whether
// it started one.
func Ensure(ctx context.Context, layout host.Layout, ocxd string, wait time.Duration) (started bool, err error) {
	deadline := time.Now().Add(wait)
	var lastStart time.Time
	for {
		probe := probeReader(layout)
		if probe == nil {
			return started, nil
		}
		_, held, err := unixhost.LockHolder(layout.Lock())
		if err != nil {
			return started, fmt.Errorf("ensure the daemon runs: %w", err)
		}
		// One start per restartGap at most: a daemon started a moment ago
		// may not hold the lock yet; a second start would only exit 0.
		if !held && time.Since(lastStart) >= restartGap {
			// A failed recovery is in the daemon's log; the daemon
			// starts all the same.
			_, _ = Recover(layout)
			if err := startDetached(ctx, ocxd, []string{"--agents", layout.Root()}, env(layout.Root())); err != nil {
				return started, fmt.Errorf("ensure the daemon runs: %w", err)
			}
			started, lastStart = true, time.Now()
		}
		if time.Now().After(deadline) {
			return started, fmt.Errorf("ensure the daemon runs: nobody reads %s after %s: %w", layout.Pipe(), wait, probe)
		}
		select {
		case <-ctx.Done():
			return started, fmt.Errorf("ensure the daemon runs: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// restartGap is how long Ensure lets a daemon it started take the
// lock before it starts another.
const restartGap = 500 * time.Millisecond

// startDetached starts a program that outlives its starter: a shell in a
// session of its own starts it in the background and exits at once, so the
// program is reparented (to init or the nearest subreaper) and never left a
// zombie of this process; the arguments reach it as positional parameters,
// never through the shell's parsing.
func startDetached(ctx context.Context, program string, args, env []string) error {
	if _, err := os.Stat(program); err != nil {
		return fmt.Errorf("start %s: %w", program, err)
	}
	argv := append([]string{"-c", `"$0" "$@" </dev/null >/dev/null 2>&1 &`, program}, args...)
	cmd := exec.CommandContext(ctx, "/bin/sh", argv...)
	cmd.Env = env
	cmd.Dir = "/"
	cmd.SysProcAttr = unixhost.SessionAttr()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("start %s: %w: %s", program, err, out)
	}
	return nil
}

// probeReader opens the daemon's pipe for writing without waiting:
// host.ErrNoReader or fs.ErrNotExist until the daemon reads it.
func probeReader(layout host.Layout) error {
	root, err := unixhost.OpenRoot(layout.Root())
	if err != nil {
		return err
	}
	defer root.Close()
	w, err := unixhost.OpenLineWriter(root, layout.Pipe())
	if err != nil {
		return err
	}
	return w.Close()
}

// Send hands lines to the daemon, packed into atomic writes.
func Send(layout host.Layout, lines []pipe.Line) error {
	var raw [][]byte
	for _, l := range lines {
		b, err := l.Encode()
		if err != nil {
			return fmt.Errorf("hand %v to the daemon: %w", l, err)
		}
		raw = append(raw, b[:len(b)-1])
	}
	root, err := unixhost.OpenRoot(layout.Root())
	if err != nil {
		return fmt.Errorf("hand lines to the daemon: %w", err)
	}
	defer root.Close()
	w, err := unixhost.OpenLineWriter(root, layout.Pipe())
	if err != nil {
		return fmt.Errorf("hand lines to the daemon: %w", err)
	}
	defer w.Close()
	if err := w.WriteLines(raw); err != nil {
		return fmt.Errorf("hand lines to the daemon through %s: %w", layout.Pipe(), err)
	}
	return nil
}

// PID returns the PID of the daemon holding the lock, 0 when none.
func PID(layout host.Layout) (int, error) {
	pid, held, err := unixhost.LockHolder(layout.Lock())
	if err != nil || !held {
		return 0, err
	}
	return pid, nil
}

// Ended reports whether the daemon pid no longer holds the lock: another
// daemon holds it, or none does. A /proc/locks read that finds no holder
// is asked again of pid's own descriptors (unixhost.HoldsLock), which
// cannot miss the lock a daemon holds across its re-exec.
func Ended(layout host.Layout, pid int) bool {
	p, err := PID(layout)
	if err == nil && p == pid {
		return false
	}
	if err == nil && p != 0 {
		return true
	}
	held, err := unixhost.HoldsLock(pid, layout.Lock())
	return err == nil && !held
}

// DefaultWait bounds how long Ensure waits for the daemon to read its pipe.
const DefaultWait = 10 * time.Second

// Release is the release directory the node's tools run from: the release
// root's current link, or, for a developer's build without a release root,
// the directory of the running executable (D2).
func Release(cfg *messages.NodeConfig) (string, error) {
	if cfg != nil && cfg.Release != "" {
		return filepath.Join(cfg.Release, "current"), nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the release: %w", err)
	}
	exe, err = filepath.EvalSymlinks(exe)
	if err != nil {
		return "", fmt.Errorf("find the release: %w", err)
	}
	return filepath.Dir(exe), nil
}

// Status says whether the agents root's daemon runs (the holder of
// AGENTS/ocxd.lock, or pid when the daemon itself asks: it holds the
// lock), the release its program belongs to (release, given its PID, as
// a process table reads /proc/PID/exe; "" when unknown), and its last
// re-exec's outcome (AGENTS/ocxd.reexec).
func Status(layout host.Layout, cfg *messages.NodeConfig, pid int, release func(pid int) string) (*messages.DaemonStatus, error) {
	d := &messages.DaemonStatus{}
	if pid == 0 {
		var err error
		if pid, err = PID(layout); err != nil {
			return nil, fmt.Errorf("daemon status: %w", err)
		}
	}
	if pid > 0 {
		d.Running, d.PID = true, pid
		d.Release = release(pid)
	}
	if o, err := ReadReexec(layout); err == nil {
		d.Reexec = o
	}
	d.ConfinedOnly = cfg.ConfinedOnly
	return d, nil
}
