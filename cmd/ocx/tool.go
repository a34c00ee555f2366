package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/tools"
	"github.com/ocx-go/ocx/messages/toolio"
)

const toolUsage = `tool NAME [--input FILE] [FLAGS]   (JSON input on standard input when no --input and no field flag)
       ocx tool list

The tools of protocol v1 (docs/tools.md): create, post, audit, push, stop.
The answer is always {"tool", "dry_run", "log", "result", "stopped"}, in
JSON; ocx exits 1 when stopped is set. Field flags set the input's fields
over what --input gives.`

func runTool(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(e.stderr, "usage: ocx %s\n", toolUsage)
		if len(args) == 0 {
			return fmt.Errorf("%w: no tool named", errUsage)
		}
		return nil
	}
	name := args[0]
	if name == "list" {
		return printJSON(e, tools.Tools())
	}
	if !slices.ContainsFunc(tools.Tools(), func(t tools.Tool) bool { return t.Name == name }) {
		return fmt.Errorf("%w: %q is not a tool (create, post, audit, push, stop, or list)", errUsage, name)
	}
	var c common
	fs := c.flags(e, "tool "+name, "tool "+name+" [--input FILE] [FLAGS]", true, true)
	input := fs.String("input", "", "a file holding the tool's JSON input (- for standard input)")
	project := fs.String("project", "", "the project (default: the node's one project)")
	agent := fs.String("agent", "", "call as this agent login of the node, with the password the node keeps for it (in place of --user)")
	// The friendly flags, tools.ToolFields: each sets one field of the input.
	set := map[string]*string{}
	for _, f := range tools.ToolFields(name) {
		set[f.Name] = fs.String(f.Name, "", f.Help)
	}
	pos, _, err := parse(fs, args[1:])
	if err != nil {
		return usageErr(err)
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	}
	flagged := false
	fs.Visit(func(f *flag.Flag) {
		if _, ok := set[f.Name]; ok || f.Name == "dry-run" {
			flagged = true
		}
	})
	var raw []byte
	switch {
	case *input == "-" || (*input == "" && !flagged):
		if raw, err = io.ReadAll(io.LimitReader(os.Stdin, toolio.MaxToolInputLen+1)); err != nil {
			return fmt.Errorf("read the input from standard input: %w", err)
		}
	case *input != "":
		if raw, err = os.ReadFile(*input); err != nil { // trust:outside the caller's own --input file
			return fmt.Errorf("--input: %w", err)
		}
	}
	raw = withFlags(fs, name, raw, set, c.dryRun)
	n, err := node.Open(c.agents, node.Options{Log: e.log})
	if err != nil {
		return err
	}
	caller, err := c.caller()
	if err != nil {
		return err
	}
	if *agent != "" {
		if c.user != "" {
			return fmt.Errorf("%w: --agent and --user both name a caller", errUsage)
		}
		if caller, err = tools.Of(n).AgentCaller(*agent); err != nil {
			return fmt.Errorf("--agent: %w", err)
		}
	}
	a := tools.Of(n).CallIn(ctx, *project, caller, name, raw)
	if err := a.WriteJSON(e.stdout); err != nil {
		return err
	}
	if !a.OK() {
		return errStopped
	}
	return nil
}

// withFlags sets the fields the flags give over the JSON input
// (tools.WithFields, as the console's forms do). Without a field flag the
// input is left as it came, for the tool's strict reader.
func withFlags(fs *flag.FlagSet, tool string, raw []byte, set map[string]*string, dry bool) []byte {
	given := map[string]string{}
	var dryRun *bool
	fs.Visit(func(f *flag.Flag) {
		if v, field := set[f.Name]; field {
			given[f.Name] = *v
		}
		if f.Name == "dry-run" {
			dryRun = &dry
		}
	})
	return tools.WithFields(tool, raw, given, dryRun)
}
