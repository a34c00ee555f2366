package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/ocx-go/ocx/cmd/internal/hook"
	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/messages/wire"
)

// runHook is `ocx hook install|remove|status`, or, with no action word,
// the hook itself as Fossil runs it: `ocx hook --agents A --repo R`.
func runHook(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-h" && args[0] != "--help" {
		return runTheHook(ctx, e, args)
	}
	simple := func(name, summary string, do func(n *node.Node, dry bool) *node.Answer) action {
		return action{summary: summary, run: func(ctx context.Context, e *env, args []string) error {
			var c common
			fs := c.flags(e, "hook "+name, "hook "+name+" [--agents AGENTS] [--dry-run] [--json]", false, true)
			if _, _, err := parseArgs(fs, args, noArgs); err != nil {
				return err
			}
			return c.act(e, func(n *node.Node) *node.Answer { return do(n, c.dryRun) })
		}}
	}
	return dispatch(ctx, e, "hook", map[string]action{
		"install": simple("install", "install the after-receive hook on each repository (again: replace it)", func(n *node.Node, dry bool) *node.Answer {
			return n.HookInstall(ctx, dry)
		}),
		"remove": simple("remove", "remove the after-receive hook from each repository", func(n *node.Node, dry bool) *node.Answer {
			return n.HookRemove(ctx, dry)
		}),
		"status": {summary: "say whether the hook is installed on each repository", run: func(ctx context.Context, e *env, args []string) error {
			var c common
			fs := c.flags(e, "hook status", "hook status [--agents AGENTS] [--json]", false, false)
			if _, _, err := parse(fs, args); err != nil {
				return usageErr(err)
			}
			n, err := c.open(e)
			if err != nil {
				return err
			}
			hooks, a := n.HookStatus(ctx)
			if c.json && a.OK() {
				return printJSON(e, hooks)
			}
			return c.answer(e, a)
		}},
	}, args)
}

// runTheHook is the hook as Fossil runs it. It cleans its environment and
// points its standard output at /dev/null first (Fossil closed it), logs to
// AGENTS/hook.log, and always exits 0: Fossil ignores the status anyway.
func runTheHook(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("hook", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	agents := fs.String("agents", "", "the agents root")
	repo := fs.String("repo", "", "the repository Fossil received into (%R)")
	if err := fs.Parse(args); err != nil {
		return usageErr(err)
	}
	if *agents == "" || *repo == "" || fs.NArg() > 0 {
		return fmt.Errorf("%w: the hook is `ocx hook --agents AGENTS --repo REPOSITORY`", errUsage)
	}
	fallback := os.Getenv(wire.HookFallbackEnv) // before Prepare clears it
	if err := hook.Prepare(*agents); err != nil {
		fmt.Fprintf(e.stderr, "ocx hook: %v\n", err)
	}
	if err := hook.Run(ctx, hook.Options{Agents: *agents, Repo: *repo, Stdin: os.Stdin, Fallback: fallback}); err != nil {
		fmt.Fprintf(e.stderr, "ocx hook: %v\n", err)
	}
	return nil
}
