package main

import (
	"context"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/workspaces"
)

func runListener(ctx context.Context, e *env, args []string) error {
	word := func(name, summary string, do func(n *node.Node, in workspaces.ListenerInput) *node.Answer) action {
		return action{summary: summary, run: func(ctx context.Context, e *env, args []string) error {
			var c common
			fs := c.flags(e, "listener "+name, "listener "+name+" LOGIN/PROJECT --kind thread|ticket|branch --names X [--record HASH]", false, true)
			kind := fs.String("kind", "", "thread, ticket or branch")
			names := fs.String("names", "", "a post of the thread, the ticket's id, or the branch's name")
			record := fs.String("record", "", "branch: the session's own record, where the note goes (default: the workspace's record)")
			pos, _, err := parseArgs(fs, args, oneArg("LOGIN/PROJECT"))
			if err != nil {
				return err
			}
			key := pos[0]
			return c.act(e, func(n *node.Node) *node.Answer {
				return do(n, workspaces.ListenerInput{Workspace: key, Kind: *kind, Names: *names, Record: *record, DryRun: c.dryRun})
			})
		}}
	}
	return dispatch(ctx, e, "listener", map[string]action{
		"add": word("add", "the listen note, as the agent login, and the listening index", func(n *node.Node, in workspaces.ListenerInput) *node.Answer {
			return workspaces.Of(n).ListenerAdd(ctx, in)
		}),
		"remove": word("remove", "the unlisten note, as the agent login, and the listening index", func(n *node.Node, in workspaces.ListenerInput) *node.Answer {
			return workspaces.Of(n).ListenerRemove(ctx, in)
		}),
	}, args)
}
