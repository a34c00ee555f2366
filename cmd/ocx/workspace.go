package main

import (
	"context"
	"fmt"
	"os"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/workspaces"
)

func runWorkspace(ctx context.Context, e *env, args []string) error {
	return dispatch(ctx, e, "workspace", map[string]action{
		"add": {summary: "post a workspace definition and make the workspace on the host", run: func(ctx context.Context, e *env, args []string) error {
			var c common
			fs := c.flags(e, "workspace add", "workspace add --login LOGIN --project PROJECT --branch BRANCH [--sandbox FILE] [--record HASH] --user USER", true, true)
			login := fs.String("login", "", "the agent login (required)")
			project := fs.String("project", "", "the project (required)")
			branch := fs.String("branch", "", "the branch of the workspace's tree (required)")
			sandbox := fs.String("sandbox", "", "a file holding the sandbox as JSON (network, read_only, read_write, homes, path); default: the workspace template")
			record := fs.String("record", "", "a thread to post the definition in (default: a new thread)")
			_, _, err := parseArgs(fs, args, noArgs)
			if err != nil {
				return err
			}
			in := workspaces.WorkspaceAddInput{Login: *login, Project: *project, Branch: *branch, Record: *record, DryRun: c.dryRun}
			if *sandbox != "" {
				if in.SandboxJSON, err = os.ReadFile(*sandbox); err != nil { // trust:outside the caller's own --sandbox file
					return fmt.Errorf("--sandbox: %w", err)
				}
			}
			return c.act(e, func(n *node.Node) *node.Answer { return workspaces.Of(n).WorkspaceAdd(ctx, in) })
		}},
		"terminate": {summary: "post the terminated note and remove the workspace from the host", run: func(ctx context.Context, e *env, args []string) error {
			var c common
			fs := c.flags(e, "workspace terminate", "workspace terminate LOGIN/PROJECT [--reason TEXT] --user USER", true, true)
			reason := fs.String("reason", "", "why, for a person")
			pos, _, err := parseArgs(fs, args, oneArg("LOGIN/PROJECT"))
			if err != nil {
				return err
			}
			key := pos[0]
			return c.act(e, func(n *node.Node) *node.Answer {
				return workspaces.Of(n).WorkspaceTerminate(ctx, key, *reason, c.dryRun)
			})
		}},
		"gc": {summary: "remove workspaces whose record ended them (never one a process names)", run: func(ctx context.Context, e *env, args []string) error {
			var c common
			fs := c.flags(e, "workspace gc", "workspace gc [--dry-run]", false, true)
			if _, _, err := parseArgs(fs, args, noArgs); err != nil {
				return err
			}
			return c.act(e, func(n *node.Node) *node.Answer { return workspaces.Of(n).WorkspaceGC(ctx, c.dryRun) })
		}},
	}, args)
}
