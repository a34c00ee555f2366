package node

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// HookCommand is the after-receive hook's command line as Fossil runs it
// with /bin/sh -c: the release's ocx-hook (D66), which hands the work to
// the daemon's socket, or, in a release without one, its `ocx hook`; the
// agents root; and %R, which Fossil replaces with the repository's path.
func (n *Node) HookCommand() string {
	tail := " --agents " + shellQuote(n.Agents) + " --repo %R"
	if unixhost.HasProgram(n.Release, host.HookProgram) {
		return shellQuote(n.Program(host.HookProgram)) + tail
	}
	return shellQuote(n.Program("ocx")) + " hook" + tail
}

// shellQuote quotes s for /bin/sh: Fossil substitutes into the command with
// no quoting of its own.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// HookInstall installs the wake hook on each repository of the login group
// (seed 002, "install the wake hook"): installing again replaces it. A fresh
// install also sets the hook's own mark to the newest receipt, so it neither
// replays the repository's past nor misses what comes next.
func (n *Node) HookInstall(ctx context.Context, dry bool) *Answer {
	a := NewAnswer("hook install", dry)
	cmd := n.HookCommand()
	root, err := unixhost.OpenRoot(n.Agents)
	if err != nil {
		return a.Stop(err)
	}
	defer root.Close()
	for _, p := range n.Projects() {
		if p.OtherHost {
			a.Logf("%s is served from another host: the hook's work follows each pull of its clone (D72), and the server's node installs the server's hook", p.Name)
			continue
		}
		st, err := n.Admin(p).Hook(ctx)
		if err != nil {
			return a.Stop(fmt.Errorf("hook of %s: %w", p.Name, err))
		}
		if dry {
			a.Would("install the after-receive hook on %s: %s", p.Repository, cmd)
			continue
		}
		r, err := n.OpenProjectRepo(p)
		if err != nil {
			return a.Stop(err)
		}
		_, last, err := r.Received(ctx, math.MaxInt64)
		r.Close()
		if err != nil {
			return a.Stop(fmt.Errorf("newest receipt of %s: %w", p.Name, err))
		}
		if err := n.Admin(p).InstallHook(ctx, cmd); err != nil {
			return a.Stop(fmt.Errorf("install the hook on %s: %w", p.Name, err))
		}
		if !st.Installed {
			if err := root.WriteFile(n.Layout.HookMark(p.Name), host.HookMarkContent(last), 0o600); err != nil {
				return a.Stop(fmt.Errorf("write the hook's mark for %s: %w", p.Name, err))
			}
		}
		verb := "installed"
		if st.Installed {
			verb = "replaced"
		}
		a.Logf("%s the after-receive hook on %s: %s", verb, p.Repository, cmd)
	}
	return a
}

// HookRemove removes the wake hook from each repository of the login
// group, keeping every other hook.
func (n *Node) HookRemove(ctx context.Context, dry bool) *Answer {
	a := NewAnswer("hook remove", dry)
	root, err := unixhost.OpenRoot(n.Agents)
	if err != nil {
		return a.Stop(err)
	}
	defer root.Close()
	var plan Plan
	for _, p := range n.Projects() {
		if p.OtherHost {
			plan.Say("%s is served from another host: no hook of its is installed here", p.Name)
			continue
		}
		plan.Add(fmt.Sprintf("remove the after-receive hook from %s", p.Repository), func(ctx context.Context, a *Answer) error {
			if err := n.Admin(p).RemoveHook(ctx); err != nil {
				return fmt.Errorf("remove the hook from %s: %w", p.Name, err)
			}
			if err := root.Remove(n.Layout.HookMark(p.Name)); err != nil {
				return err
			}
			a.Logf("removed the after-receive hook from %s", p.Repository)
			return nil
		})
	}
	return a.Stop(Execute(ctx, a, plan))
}

// HookStatus says whether the wake hook is installed on each repository,
// and with which command.
func (n *Node) HookStatus(ctx context.Context) ([]messages.HookStatus, *Answer) {
	return n.hookStatus(ctx, nil)
}

// hookStatus is HookStatus, each setting read on the repository repos
// holds open for its project (a status's), else opened for it.
func (n *Node) hookStatus(ctx context.Context, repos map[string]*fossilio.Repo) ([]messages.HookStatus, *Answer) {
	a := NewAnswer("hook status", false)
	var out []messages.HookStatus
	want := n.HookCommand()
	for _, p := range n.Projects() {
		read := n.Admin(p).Hook
		if r := repos[p.Name]; r != nil {
			read = r.Hook
		}
		st, err := read(ctx)
		if err != nil {
			return nil, a.Stop(fmt.Errorf("hook of %s: %w", p.Name, err))
		}
		h := messages.HookStatus{Project: p.Name, Repository: p.Repository, Installed: st.Installed, Newest: uint64(max(st.Newest, 0))}
		if m, ok := n.hookMark(p.Name); ok {
			h.Mark = &m
		}
		if !st.HeldUntil.IsZero() {
			h.HeldUntil = &st.HeldUntil
		}
		out = append(out, h)
		switch {
		case !st.Installed:
			a.Logf("%s: not installed", p.Name)
		case st.Command != want:
			a.Logf("%s: installed with another command: %s (this release's is %s)", p.Name, st.Command, want)
		default:
			a.Logf("%s: installed: %s", p.Name, st.Command)
		}
		if h.Mark != nil && *h.Mark < h.Newest {
			a.Logf("%s: the hook handled receipts to %d of %d; the daemon runs it when it stays behind (D24)", p.Name, *h.Mark, h.Newest)
		}
		if h.HeldUntil != nil {
			a.Logf("%s: Fossil holds its hooks back until %s (an embargo: the server lacks an artifact some push named); the daemon runs the hook meanwhile", p.Name, h.HeldUntil.Format(time.RFC3339))
		}
	}
	return out, a
}

// hookMark reads the hook's mark of a project: the newest receipt it
// handled (Fossil's own list can skip a receipt after a quiet day,
// docs/fossil.md §4, so the hook keeps its own).
func (n *Node) hookMark(project string) (uint64, bool) {
	v, _, ok := host.ReadHookMark(func() ([]byte, error) {
		return unixhost.Below(n.Agents).ReadFile(n.Layout.HookMark(project), unixhost.SmallFile)
	})
	return uint64(v), ok && v <= strictjson.MaxSafeInt
}
