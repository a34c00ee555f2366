package main

import (
	"context"
	"encoding/json"
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
func (c *common) open(e *env) (*node.Node, error) { return c.openWith(e, node.Options{}) }

// openWith opens the node as the caller with opts, their Caller and Log
// set here.
func (c *common) openWith(e *env, opts node.Options) (*node.Node, error) {
	caller, err := c.caller()
	if err != nil {
		return nil, err
	}
	opts.Caller, opts.Log = caller, e.log
	return node.Open(c.agents, opts)
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

// usageErr wraps a flag error: --help exits 0 (errHelped), anything else
// 2.
func usageErr(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return errHelped
	}
	return fmt.Errorf("%w: %v", errUsage, err)
}

// errHelped says a --help printed the usage asked for: ocx exits 0.
var errHelped = errors.New("help printed")

// posCheck checks a command's positional arguments.
type posCheck func(pos []string) error

// noArgs refuses every positional argument.
func noArgs(pos []string) error {
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	}
	return nil
}

// oneArg wants exactly one positional argument, named what.
func oneArg(what string) posCheck {
	return func(pos []string) error {
		_, err := one(pos, what)
		return err
	}
}

// parseArgs parses fs's flags and the positional arguments (as parse
// does) and checks the positional ones; nil check takes any.
func parseArgs(fs *flag.FlagSet, args []string, check posCheck) (pos, rest []string, err error) {
	pos, rest, err = parse(fs, args)
	if err != nil {
		return nil, nil, usageErr(err)
	}
	if check != nil {
		if err := check(pos); err != nil {
			return nil, nil, err
		}
	}
	return pos, rest, nil
}

// act opens the node as the caller and prints do's answer: the end of
// every node action.
func (c *common) act(e *env, do func(n *node.Node) *node.Answer) error {
	return c.actWith(e, node.Options{}, do)
}

// actWith is act with the node opened with opts (see openWith).
func (c *common) actWith(e *env, opts node.Options, do func(n *node.Node) *node.Answer) error {
	n, err := c.openWith(e, opts)
	if err != nil {
		return err
	}
	return c.answer(e, do(n))
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

// printJSON prints v as indented JSON.
func printJSON(e *env, v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// commaList splits a comma-separated flag value, its empty items left out;
// never nil.
func commaList(s string) []string {
	out := []string{}
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
