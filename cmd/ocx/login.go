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
		"add": {summary: "provision an agent login on each repository of the login group (on a node on another host: keep the password of one the server's node made)", run: func(ctx context.Context, e *env, args []string) error {
			var c common
			fs := c.flags(e, "login add", "login add LOGIN [--password-file FILE] [--agents AGENTS] [--dry-run] [--json]", false, true)
			pwFile := fs.String("password-file", "", "on a node on another host: a file holding the password of the agent login the server's node made (mode 0600)")
			pos, _, err := parseArgs(fs, args, oneArg("LOGIN"))
			if err != nil {
				return err
			}
			pw := ""
			if *pwFile != "" {
				if pw, err = passwordOf(*pwFile); err != nil {
					return err
				}
			}
			return c.act(e, func(n *node.Node) *node.Answer { return n.LoginAddWith(ctx, pos[0], pw, c.dryRun) })
		}},
		"withdraw": word("withdraw", "take every capability from an agent login", func(n *node.Node, l string, dry bool) *node.Answer {
			return n.LoginWithdraw(ctx, l, dry)
		}),
		"rotate": word("rotate", "give an agent login a fresh password", func(n *node.Node, l string, dry bool) *node.Answer {
			return n.LoginRotate(ctx, l, dry)
		}),
	}, args)
}
