package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ocx-go/ocx/cmd/internal/console"
	"github.com/ocx-go/ocx/cmd/internal/node"
)

// runConsole is `ocx console install --extroot DIR`, or, with no action
// word, the console itself as Fossil runs it (its entry script execs
// `ocx console --agents AGENTS`): one CGI request on stdin and stdout.
func runConsole(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-h" && args[0] != "--help" {
		fs := flag.NewFlagSet("console", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		agents := fs.String("agents", node.DefaultAgents, "")
		if err := fs.Parse(args); err != nil {
			return usageErr(err)
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
		}
		if code := console.ServeCGI(*agents, os.Stdin, e.stdout, os.Environ()); code != 0 {
			return errStopped
		}
		return nil
	}
	return dispatch(ctx, e, "console", map[string]action{
		"install": {summary: "put the console's entry in Fossil's extension root (fossil server --extroot DIR)", run: func(ctx context.Context, e *env, args []string) error {
			var c common
			fs := c.flags(e, "console install", "console install --extroot DIR [--agents AGENTS] [--dry-run] [--json]", false, true)
			extroot := fs.String("extroot", "", "Fossil's extension root (fossil server --extroot DIR)")
			if _, _, err := parseArgs(fs, args, noArgs); err != nil {
				return err
			}
			if *extroot == "" {
				return fmt.Errorf("%w: --extroot: no extension root given", errUsage)
			}
			return c.act(e, func(n *node.Node) *node.Answer { return n.ConsoleInstall(*extroot, c.dryRun) })
		}},
	}, args)
}
