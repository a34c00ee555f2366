package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/release"
)

// releaseHelp is `ocx release help`'s text, before the actions.
const releaseHelp = `A release root holds one directory of programs per check-in (releases/CHECKIN)
and the links current, previous, staged/CHECKIN and staged/next; every link is
replaced in one step. Each release is checked on this host before a link
changes: every program says its version line naming the check-in, the staged
ocxd reads the running daemon's hand-off version, and workspace answers in a
sandbox. Accept and rollback move the links, then ask a running daemon to
re-exec in place (same PID, same sessions) and report its outcome; nothing is
ever restarted by itself. docs/releases.md tells more.

  ocx release init ROOT --from DIR            make a release root (then ocx init --release ROOT)
  ocx release stage --repo REPO CHECKIN        build a check-in of OCX's source and stage it
  ocx release stage --from DIR                 stage programs already built (make build)
  ocx release accept [CHECKIN]                 make staged/next (or CHECKIN) current
  ocx release rollback                         swap current and previous
  ocx release status [--json]                  the links, the daemon, older sessions

`

// sourceFlags adds --repo and --from; the check-in is the one positional
// argument with --repo.
func sourceFlags(fs *flag.FlagSet, src *release.Source) {
	fs.StringVar(&src.Repo, "repo", "", "a Fossil repository file on this node holding OCX's source; the check-in (full hash or unique prefix) is the argument")
	fs.StringVar(&src.From, "from", "", "a directory of programs already built (ocx, ocxd, workspace, runners), all stamped with one check-in")
}

// sourceArgs takes the check-in argument of --repo.
func sourceArgs(src *release.Source, pos []string, what string) error {
	switch {
	case src.From != "" && len(pos) > 0:
		return fmt.Errorf("%w: %s --from DIR takes no check-in, got %q", errUsage, what, pos)
	case src.From == "" && len(pos) != 1:
		return fmt.Errorf("%w: %s --repo REPO CHECKIN wants one check-in, got %d arguments", errUsage, what, len(pos))
	case src.From == "":
		src.Checkin = pos[0]
	}
	return nil
}

func runRelease(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(e.stderr, releaseHelp)
	}
	return dispatch(ctx, e, "release", map[string]action{
		"init":     {summary: "make a release root holding one release, current linking to it", run: runReleaseInit},
		"stage":    {summary: "build a check-in (--repo REPO CHECKIN) or copy programs (--from DIR); link staged/CHECKIN and staged/next", run: runReleaseStage},
		"accept":   {summary: "check the staged release, make it current, re-exec the daemon", run: runReleaseAccept},
		"rollback": {summary: "swap current and previous, re-exec the daemon", run: runReleaseRollback},
		"status":   {summary: "current, previous, staged; the daemon and its last re-exec; sessions on older releases", run: runReleaseStatus},
	}, args)
}

func runReleaseInit(ctx context.Context, e *env, args []string) error {
	var c common
	fs := c.flags(e, "release init", "release init ROOT (--from DIR | --repo REPO CHECKIN) [--dry-run] [--json]", false, true)
	var src release.Source
	sourceFlags(fs, &src)
	pos, _, err := parseArgs(fs, args, func(pos []string) error {
		if len(pos) == 0 {
			return fmt.Errorf("%w: release init ROOT: which release root?", errUsage)
		}
		return sourceArgs(&src, pos[1:], "release init")
	})
	if err != nil {
		return err
	}
	return c.answer(e, release.Init(ctx, release.InitInput{Root: pos[0], Source: src, DryRun: c.dryRun}, node.Options{Log: e.log}))
}

func runReleaseStage(ctx context.Context, e *env, args []string) error {
	var c common
	fs := c.flags(e, "release stage", "release stage (--repo REPO CHECKIN | --from DIR) [--dry-run] [--json]", false, true)
	var src release.Source
	sourceFlags(fs, &src)
	if _, _, err := parseArgs(fs, args, func(pos []string) error { return sourceArgs(&src, pos, "release stage") }); err != nil {
		return err
	}
	return c.act(e, func(n *node.Node) *node.Answer {
		return release.Stage(ctx, n, release.StageInput{Source: src, DryRun: c.dryRun})
	})
}

// waitFlag adds --wait, the bound on the daemon's re-exec outcome.
func waitFlag(fs *flag.FlagSet) *time.Duration {
	return fs.Duration("wait", release.DefaultReexecWait, "how long to wait for the daemon's re-exec outcome")
}

func runReleaseAccept(ctx context.Context, e *env, args []string) error {
	var c common
	fs := c.flags(e, "release accept", "release accept [CHECKIN] [--wait 30s] [--dry-run] [--json]", false, true)
	wait := waitFlag(fs)
	pos, _, err := parseArgs(fs, args, func(pos []string) error {
		if len(pos) > 1 {
			return fmt.Errorf("%w: release accept takes at most one check-in, got %q", errUsage, pos)
		}
		return nil
	})
	if err != nil {
		return err
	}
	in := release.AcceptInput{Wait: max(*wait, time.Second), DryRun: c.dryRun}
	if len(pos) == 1 {
		in.Checkin = pos[0]
	}
	return c.act(e, func(n *node.Node) *node.Answer { return release.Accept(ctx, n, in) })
}

// noArgsOf refuses every positional argument, naming the command.
func noArgsOf(what string) posCheck {
	return func(pos []string) error {
		if len(pos) > 0 {
			return fmt.Errorf("%w: %s takes no argument, got %q", errUsage, what, pos)
		}
		return nil
	}
}

func runReleaseRollback(ctx context.Context, e *env, args []string) error {
	var c common
	fs := c.flags(e, "release rollback", "release rollback [--wait 30s] [--dry-run] [--json]", false, true)
	wait := waitFlag(fs)
	if _, _, err := parseArgs(fs, args, noArgsOf("release rollback")); err != nil {
		return err
	}
	return c.act(e, func(n *node.Node) *node.Answer {
		return release.Rollback(ctx, n, release.RollbackInput{Wait: max(*wait, time.Second), DryRun: c.dryRun})
	})
}

func runReleaseStatus(ctx context.Context, e *env, args []string) error {
	var c common
	fs := c.flags(e, "release status", "release status [--json]", false, false)
	fs.Lookup("json").Usage = "print the release state as JSON"
	if _, _, err := parseArgs(fs, args, noArgsOf("release status")); err != nil {
		return err
	}
	n, err := c.open(e)
	if err != nil {
		return err
	}
	st, err := release.Status(ctx, n)
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(e, st)
	}
	_, err = fmt.Fprint(e.stdout, st)
	return err
}
