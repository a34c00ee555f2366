package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/fossilio"
)

// common are the flags every node command takes.
type common struct {
	agents       string
	user         string
	passwordFile string
	json         bool
	dryRun       bool
}

// flags makes a subcommand's flag set with the common flags; caller says
// whether the command writes as its caller (D10), dry whether it has a dry
// run.
func (c *common) flags(e *env, name, usage string, caller, dry bool) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: ocx %s\n\n", usage)
		fs.PrintDefaults()
	}
	agents := os.Getenv("OCX_AGENTS")
	if agents == "" {
		agents = node.DefaultAgents
	}
	fs.StringVar(&c.agents, "agents", agents, "the agents root ($OCX_AGENTS when set)")
	fs.BoolVar(&c.json, "json", false, "answer in JSON: {tool, dry_run, log, result, stopped}")
	if caller {
		fs.StringVar(&c.user, "user", os.Getenv("OCX_USER"), "the Fossil login to write as (default $OCX_USER); its password from $OCX_PASSWORD or --password-file")
		fs.StringVar(&c.passwordFile, "password-file", "", "a file holding the caller's password (mode 0600)")
	}
	if dry {
		fs.BoolVar(&c.dryRun, "dry-run", false, "check everything and write nothing; the log says what would be written")
	}
	return fs
}

// open opens the node as the caller.
func (c *common) open(e *env) (*node.Node, error) {
	caller, err := c.caller()
	if err != nil {
		return nil, err
	}
	return node.Open(c.agents, node.Options{Caller: caller, Log: e.log})
}

func (c *common) caller() (node.Caller, error) {
	cl := node.Caller{Login: c.user}
	if c.user == "" {
		return cl, nil
	}
	switch {
	case c.passwordFile != "":
		pw, err := fossilio.ReadPasswordFile(c.passwordFile)
		if err != nil {
			return cl, fmt.Errorf("--password-file: %w", err)
		}
		cl.Password = pw
	default:
		cl.Password = os.Getenv("OCX_PASSWORD")
	}
	return cl, nil
}

// answer prints an answer and turns a stopped one into an error that makes
// ocx exit 1.
func (c *common) answer(e *env, a *node.Answer) error {
	var err error
	if c.json {
		err = a.WriteJSON(e.stdout)
	} else {
		err = a.WriteText(e.stdout)
	}
	if err != nil {
		return err
	}
	if !a.OK() {
		return errStopped
	}
	return nil
}

// errStopped says the answer, already printed, says why the action stopped.
var errStopped = errors.New("stopped")

// parse parses flags and positional arguments in any order, and returns the
// positional ones. Everything after "--" is returned apart, untouched.
func parse(fs *flag.FlagSet, args []string) (pos, rest []string, err error) {
	for i, a := range args {
		if a == "--" {
			args, rest = args[:i], args[i+1:]
			if rest == nil {
				rest = []string{}
			}
			break
		}
	}
	for {
		if err := fs.Parse(args); err != nil {
			return nil, nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, rest, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// usageErr wraps a flag error: --help exits 0, anything else 2.
func usageErr(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return fmt.Errorf("%w: %v", errUsage, err)
}

// action is one action word of a command (`ocx login add`).
type action struct {
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

// dispatch runs the action word args[0] of a command.
func dispatch(ctx context.Context, e *env, cmd string, actions map[string]action, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		var names []string
		for n := range actions {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(e.stderr, "usage: ocx %s ACTION [FLAGS]\n\nactions:\n", cmd)
		for _, n := range names {
			fmt.Fprintf(e.stderr, "  %-10s %s\n", n, actions[n].summary)
		}
		fmt.Fprintf(e.stderr, "\n`ocx %s ACTION --help` tells more.\n", cmd)
		if len(args) == 0 {
			return fmt.Errorf("%w: no action given", errUsage)
		}
		return nil
	}
	act, ok := actions[args[0]]
	if !ok {
		var names []string
		for n := range actions {
			names = append(names, n)
		}
		sort.Strings(names)
		return fmt.Errorf("%w: %q is not an action of ocx %s (%s)", errUsage, args[0], cmd, strings.Join(names, ", "))
	}
	return act.run(ctx, e, args[1:])
}

// one checks that exactly one positional argument was given.
func one(pos []string, what string) (string, error) {
	if len(pos) != 1 {
		return "", fmt.Errorf("%w: want one %s, got %d arguments", errUsage, what, len(pos))
	}
	return pos[0], nil
}
