package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/node"
)

func init() {
	register(command{name: "session", summary: "start or stop a workspace's session", run: runSession})
}

func runSession(ctx context.Context, e *env, args []string) error {
	return dispatch(ctx, e, "session", map[string]action{
		"start": {summary: "post the session definition and launch note, and hand the launch to the daemon", run: func(ctx context.Context, e *env, args []string) error {
			var c common
			fs := c.flags(e, "session start", "session start LOGIN/PROJECT --kind mechanical --lifetime stays|completes [flags] -- COMMAND ARGS...\n       ocx session start LOGIN/PROJECT --kind llm --runner RUNNER --model MODEL --lifetime stays|completes [flags]", true, true)
			kind := fs.String("kind", "", "mechanical (a command) or llm (a runner and a model)")
			lifetime := fs.String("lifetime", "", "stays (runs until stopped) or completes (ends on its report)")
			runner := fs.String("runner", "", "llm: the runner (claude, codex, native)")
			model := fs.String("model", "", "llm: the model")
			command := fs.String("command", "", "mechanical: the command, run by /bin/sh -c (or give it after --)")
			record := fs.String("record", "", "the session's own record: a thread's post or a ticket's id (default: the workspace's record)")
			release := fs.String("release", "current", "the release to run: current or previous")
			wait := fs.Duration("wait", node.DefaultOutcomeWait, "how long to wait for the daemon's outcome")
			var hears []string
			fs.Func("hears", "whose posts wake the session: logins separated by commas, * for every user, or '' for nobody (default: every user holding admin or setup now, written out)", func(s string) error {
				hears = []string{}
				for _, u := range strings.Split(s, ",") {
					if u = strings.TrimSpace(u); u != "" {
						hears = append(hears, u)
					}
				}
				return nil
			})
			pos, rest, err := parse(fs, args)
			if err != nil {
				return usageErr(err)
			}
			key, err := one(pos, "LOGIN/PROJECT")
			if err != nil {
				return err
			}
			in := node.SessionStartInput{Workspace: key, Kind: *kind, Runner: *runner, Model: *model, Lifetime: *lifetime, Record: *record, Release: *release, Hears: hears, DryRun: c.dryRun}
			switch {
			case *command != "" && rest != nil:
				return fmt.Errorf("%w: give the command with --command or after --, not both", errUsage)
			case *command != "":
				in.Command = []string{"/bin/sh", "-c", *command}
			case rest != nil:
				in.Command = rest
			}
			caller, err := c.caller()
			if err != nil {
				return err
			}
			n, err := node.Open(c.agents, node.Options{Caller: caller, Log: e.log, OutcomeWait: max(*wait, time.Second)})
			if err != nil {
				return err
			}
			return c.answer(e, n.SessionStart(ctx, in))
		}},
		"stop": {summary: "hand `stop LOGIN PROJECT` to the daemon", run: func(ctx context.Context, e *env, args []string) error {
			var c common
			fs := c.flags(e, "session stop", "session stop LOGIN/PROJECT", false, true)
			pos, _, err := parse(fs, args)
			if err != nil {
				return usageErr(err)
			}
			key, err := one(pos, "LOGIN/PROJECT")
			if err != nil {
				return err
			}
			n, err := c.open(e)
			if err != nil {
				return err
			}
			return c.answer(e, n.SessionStop(ctx, key, c.dryRun))
		}},
	}, args)
}
