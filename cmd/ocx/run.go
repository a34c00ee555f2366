package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/tools"
)

var runActions = map[string]action{
	"post":     {"post a run message as the caller: a new thread, or a reply (--to); --pattern NAME makes it from the pattern run/NAME, written in full", runRunPost},
	"patterns": {"the run patterns: the wiki pages run/NAME an admin or setup user last sent", runRunPatterns},
	"stop":     {"post a stop where the run is, as the caller (admin or setup)", runRunStop},
	"start":    {"start a manual run that waits (admin or setup)", runRunStart},
	"check":    {"the node's check of its runs: end lost each started run it no longer has", runRunCheck},
	"status":   {"the runs, as the record and the node's care say", runRunStatus},
	"shell":    {"open a shell in a run's sandbox, on its node (admin or setup); Ctrl-] detaches, which ends it (D100)", runRunShell},
	"enter":    {"the process ocx run shell starts in a run's sandbox; not for people", runRunEnter},
	"hold":     {"hold a run's terminal: COMMAND on a terminal of its own, which ocx attach joins (docs/runs.md §8.1)", runRunHold},
}

func runRun(ctx context.Context, e *env, args []string) error {
	return dispatch(ctx, e, "run", runActions, args)
}

func runRunPost(ctx context.Context, e *env, args []string) error {
	var c common
	fs := c.flags(e, "run post", "run post (--input FILE | --message JSON | --pattern NAME [--objective TEXT] [--input FILE | --message JSON]) [--to HASH] --user USER", true, true)
	project := fs.String("project", "", "the project (default: the node's one project)")
	input := fs.String("input", "", "a file holding the run message's JSON (- for standard input); with --pattern, the run's fields over the pattern's")
	message := fs.String("message", "", "the run message's JSON itself; with --pattern, the run's fields over the pattern's")
	pattern := fs.String("pattern", "", "make the run from the pattern NAME, the wiki page run/NAME, and write it in full (docs/runs.md, D84)")
	objective := fs.String("objective", "", "with --pattern: the run's objective, set over the message's")
	to := fs.String("to", "", "post it as a reply to this post, or as a change to this ticket (default: a new thread titled from its objective)")
	_, _, err := parseArgs(fs, args, noArgs)
	if err != nil {
		return err
	}
	var raw []byte
	switch {
	case *objective != "" && *pattern == "":
		return fmt.Errorf("%w: --objective goes with --pattern (a run written in full gives its own)", errUsage)
	case *input != "" && *message != "":
		return fmt.Errorf("%w: --input and --message both give the message", errUsage)
	case *message != "":
		raw = []byte(*message)
	case *input == "-":
		if raw, err = io.ReadAll(io.LimitReader(os.Stdin, 1<<20)); err != nil {
			return fmt.Errorf("read the message from standard input: %w", err)
		}
	case *input != "":
		if raw, err = os.ReadFile(*input); err != nil { // trust:outside the caller's own --input file
			return fmt.Errorf("--input: %w", err)
		}
	case *pattern != "":
	default:
		return fmt.Errorf("%w: give the run message with --input FILE or --message JSON, or a pattern with --pattern NAME", errUsage)
	}
	return c.act(e, func(n *node.Node) *node.Answer {
		return tools.Of(n).RunPost(ctx, tools.RunInput{Project: *project, Message: raw, To: *to, Pattern: *pattern, Objective: *objective, DryRun: c.dryRun})
	})
}

// runRunPatterns lists the run patterns (D84): each with its page's
// version, who sent it and the layers it holds, or why it makes no run.
func runRunPatterns(ctx context.Context, e *env, args []string) error {
	var c common
	fs := c.flags(e, "run patterns", "run patterns [--project P] [--json]", false, false)
	project := fs.String("project", "", "the project (default: the node's one project)")
	if _, _, err := parseArgs(fs, args, noArgs); err != nil {
		return err
	}
	n, err := c.open(e)
	if err != nil {
		return err
	}
	ps, err := tools.Of(n).RunPatterns(ctx, *project)
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(e, ps)
	}
	if len(ps) == 0 {
		fmt.Fprintln(e.stdout, "no pattern: an admin or setup user writes one as the wiki page run/NAME, holding one fenced JSON block of a run's layers")
	}
	for _, p := range ps {
		line := fmt.Sprintf("%s %s by %s:", p.Name, p.Version, p.Sender)
		if p.Problem != "" {
			line += " makes no run: " + p.Problem
		} else {
			line += " " + strings.Join(p.Layers, ", ")
		}
		fmt.Fprintln(e.stdout, line)
	}
	return nil
}

// runOne parses an action taking one run's hash.
func runOne(ctx context.Context, e *env, args []string, name string, dry bool, caller bool,
	do func(n *node.Node, in tools.RunInput) *node.Answer) error {
	var c common
	fs := c.flags(e, "run "+name, "run "+name+" RUN --user USER", caller, dry)
	project := fs.String("project", "", "the project (default: the node's one project)")
	pos, _, err := parseArgs(fs, args, oneArg("run's hash"))
	if err != nil {
		return err
	}
	run := pos[0]
	return c.act(e, func(n *node.Node) *node.Answer {
		return do(n, tools.RunInput{Project: *project, Run: run, DryRun: c.dryRun})
	})
}

func runRunStop(ctx context.Context, e *env, args []string) error {
	return runOne(ctx, e, args, "stop", true, true, func(n *node.Node, in tools.RunInput) *node.Answer { return tools.Of(n).RunStop(ctx, in) })
}

func runRunStart(ctx context.Context, e *env, args []string) error {
	return runOne(ctx, e, args, "start", true, true, func(n *node.Node, in tools.RunInput) *node.Answer { return tools.Of(n).RunStart(ctx, in) })
}

func runRunCheck(ctx context.Context, e *env, args []string) error {
	var c common
	fs := c.flags(e, "run check", "run check [--project P]", false, true)
	project := fs.String("project", "", "only this project's runs (default: every project of the node)")
	if _, _, err := parseArgs(fs, args, noArgs); err != nil {
		return err
	}
	return c.act(e, func(n *node.Node) *node.Answer {
		return tools.Of(n).RunCheck(ctx, tools.RunInput{Project: *project, DryRun: c.dryRun})
	})
}

func runRunStatus(ctx context.Context, e *env, args []string) error {
	var c common
	fs := c.flags(e, "run status", "run status [RUN] [--project P] [--json]", false, false)
	project := fs.String("project", "", "the project (default: the node's one project)")
	pos, _, err := parse(fs, args)
	if err != nil {
		return usageErr(err)
	}
	if len(pos) > 1 {
		return fmt.Errorf("%w: want at most one run's hash, got %d arguments", errUsage, len(pos))
	}
	in := tools.RunInput{Project: *project}
	if len(pos) == 1 {
		in.Run = pos[0]
	}
	n, err := c.open(e)
	if err != nil {
		return err
	}
	sts, err := tools.Of(n).RunStatus(ctx, in)
	if err != nil {
		return err
	}
	if c.json {
		if sts == nil {
			sts = []tools.RunState{}
		}
		return printJSON(e, sts)
	}
	for _, s := range sts {
		line := fmt.Sprintf("%s %s node %s", s.Run, s.State, s.Node)
		if s.Manual {
			line += " manual"
		}
		if s.Outcome != "" {
			line += " " + s.Outcome
			if s.Exit != nil {
				line += fmt.Sprintf(" exit %d", *s.Exit)
			}
		}
		if s.InCare {
			line += " in care"
			if s.Alive {
				line += " (alive)"
			}
		}
		if s.Note != "" {
			line += ": " + s.Note
		}
		fmt.Fprintln(e.stdout, line)
	}
	return nil
}
