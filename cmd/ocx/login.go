package main

import (
	"context"

	"github.com/ocx-go/ocx/cmd/internal/node"
)

func runLogin(ctx context.Context, e *env, args []string) error {
	word := func(name, summary string, do func(n *node.Node, login string, dry bool) *node.Answer) action {
		return action{summary: summary, run: func(ctx context.Context, e *env, args []string) error {
			var c common
			fs := c.flags(e, "login "+name, "login "+name+" LOGIN [--agents AGENTS] [--dry-run] [--json]", false, true)
			pos, _, err := parseArgs(fs, args, oneArg("LOGIN"))
			if err != nil {
				return err
			}
			login := pos[0]
			return c.act(e, func(n *node.Node) *node.Answer { return do(n, login, c.dryRun) })
		}}
	}
	return dispatch(ctx, e, "login", map[string]action{
		"add": word("add", "provision an agent login on each repository of the login group", func(n *node.Node, l string, dry bool) *node.Answer {
			return n.LoginAdd(ctx, l, dry)
		}),
		"withdraw": word("withdraw", "take every capability from an agent login", func(n *node.Node, l string, dry bool) *node.Answer {
			return n.LoginWithdraw(ctx, l, dry)
		}),
		"rotate": word("rotate", "give an agent login a fresh password", func(n *node.Node, l string, dry bool) *node.Answer {
			return n.LoginRotate(ctx, l, dry)
		}),
	}, args)
}
