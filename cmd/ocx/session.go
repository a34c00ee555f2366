package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/workspaces"
)

func runSession(ctx context.Context, e *env, args []string) error {
	return dispatch(ctx, e, "session", map[string]action{
		"start":   {summary: "post the session definition and launch note, and hand the launch to the daemon", run: runSessionStart},
		"restart": {summary: "launch the stopped `stays` sessions again, on the current or the previous release", run: runSessionRestart},
		"stop":    {summary: "hand `stop LOGIN PROJECT` to the daemon", run: runSessionStop},
	}, args)
}

func runSessionStart(ctx context.Context, e *env, args []string) error {
	var c common
	fs := c.flags(e, "session start", "session start LOGIN/PROJECT --kind mechanical --lifetime stays|completes [flags] -- COMMAND ARGS...\n       ocx session start LOGIN/PROJECT --kind llm --runner RUNNER --model MODEL --lifetime stays|completes [flags]", true, true)
	kind := fs.String("kind", "", "mechanical (a command) or llm (a runner and a model)")
	lifetime := fs.String("lifetime", "", "stays (runs until stopped) or completes (ends on its report)")
	runner := fs.String("runner", "", "llm: the runner (claude, codex, native)")
	model := fs.String("model", "", "llm: the model")
	command := fs.String("command", "", "mechanical: the command, run by /bin/sh -c (or give it after --)")
	record := fs.String("record", "", "the session's own record: a thread's post or a ticket's id (default: the workspace's record)")
	release := fs.String("release", "current", "the release to run: current or previous")
	branch := fs.String("branch", workspaces.DefaultStartBranch, "the branch of the workspace the start makes when there is none (a workspace that exists keeps its own)")
	wall := fs.String("wall", "", "the longest the session runs, from its start: a whole number and s, m, h or d (limits.wall; default: none)")
	tokens := fs.Uint64("tokens", 0, "llm: the tokens its model may read and write, as the node's model proxy counts them (limits.tokens; default: none)")
	disk := fs.String("disk", "", "the size of the workspace's own file system while the session runs, as \"4G\" (limits.disk; default: node.json's session_limits.disk)")
	wait := fs.Duration("wait", node.DefaultOutcomeWait, "how long to wait for the daemon's outcome")
	stopWait := fs.Duration("stop-wait", node.DefaultStopWait, "a second start: how long to wait for the end of the session it stops")
	var hears []string
	fs.Func("hears", "whose posts wake the session: logins separated by commas, * for every user, or '' for nobody (default: every user holding admin or setup now, written out)", func(s string) error {
		hears = commaList(s)
		return nil
	})
	var checkins []string
	fs.Func("checkins", "the branches whose check-ins the session is given, separated by commas (default: none)", func(s string) error {
		checkins = append(checkins, commaList(s)...)
		return nil
	})
	pos, rest, err := parseArgs(fs, args, oneArg("LOGIN/PROJECT"))
	if err != nil {
		return err
	}
	in := workspaces.SessionStartInput{Workspace: pos[0], Kind: *kind, Runner: *runner, Model: *model, Lifetime: *lifetime, Record: *record, Release: *release, Hears: hears, Checkins: checkins, Wall: *wall, Tokens: *tokens, Disk: *disk, Branch: *branch, DryRun: c.dryRun}
	switch {
	case *command != "" && rest != nil:
		return fmt.Errorf("%w: give the command with --command or after --, not both", errUsage)
	case *command != "":
		in.Command = []string{"/bin/sh", "-c", *command}
	case rest != nil:
		in.Command = rest
	}
	opts := node.Options{OutcomeWait: max(*wait, time.Second), StopWait: max(*stopWait, time.Second)}
	return c.actWith(e, opts, func(n *node.Node) *node.Answer { return workspaces.Of(n).SessionStart(ctx, in) })
}

func runSessionRestart(ctx context.Context, e *env, args []string) error {
	var c common
	fs := c.flags(e, "session restart", "session restart --release current|previous [--project PROJECT] [-n] [--only LOGIN/PROJECT@START ...] [flags]\n\n"+
		"Launches again, as the caller, each `stays` session whose record shows a start\n"+
		"and no process running it, in a workspace not terminated and a login not\n"+
		"withdrawn; the daemon's refusals still decide. Nothing restarts by itself.\n"+
		"First list what would restart (-n); then confirm exactly that list with\n"+
		"--only, as the list's last line writes it out: a session whose latest start\n"+
		"is another by then is left alone, saying so.", true, true)
	fs.BoolVar(&c.dryRun, "n", false, "short for --dry-run: list what would restart and what is left alone, and why")
	release := fs.String("release", "", "the release to run them on: current or previous (required)")
	project := fs.String("project", "", "restart the sessions of this project only (default: every project of the node)")
	wait := fs.Duration("wait", node.DefaultOutcomeWait, "how long to wait for the daemon's outcomes")
	var only []node.RestartPick
	fs.Func("only", "restart only this session of a list: LOGIN/PROJECT@START, the start its list showed (repeat it, or separate by commas)", func(s string) error {
		for _, one := range strings.Split(s, ",") {
			ws, start, ok := strings.Cut(strings.TrimSpace(one), "@")
			if !ok || ws == "" || start == "" {
				return fmt.Errorf("%q is not LOGIN/PROJECT@START", one)
			}
			only = append(only, node.RestartPick{Workspace: ws, Start: start})
		}
		return nil
	})
	if _, _, err := parseArgs(fs, args, noArgsOf("session restart")); err != nil {
		return err
	}
	if *release == "" {
		return fmt.Errorf("%w: --release current or --release previous: a restart says which release it runs", errUsage)
	}
	in := workspaces.SessionRestartInput{Release: *release, Project: *project, Only: only, DryRun: c.dryRun}
	return c.actWith(e, node.Options{OutcomeWait: max(*wait, time.Second)}, func(n *node.Node) *node.Answer { return workspaces.Of(n).SessionRestart(ctx, in) })
}

func runSessionStop(ctx context.Context, e *env, args []string) error {
	var c common
	fs := c.flags(e, "session stop", "session stop LOGIN/PROJECT", false, true)
	pos, _, err := parseArgs(fs, args, oneArg("LOGIN/PROJECT"))
	if err != nil {
		return err
	}
	key := pos[0]
	return c.act(e, func(n *node.Node) *node.Answer { return workspaces.Of(n).SessionStop(ctx, key, c.dryRun) })
}
