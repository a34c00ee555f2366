// Command ocx is OCX's command line: the node's actions (init, agent logins,
// the hook, workspaces, sessions, listeners, the status), the wake hook
// itself, and the demo. Each subcommand is a file of its own that registers
// itself, so adding one is adding a file.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *env, args []string) error
}

// env is what every subcommand gets from main: its streams and the logger.
type env struct {
	stdout, stderr io.Writer
	log            *slog.Logger
}

var commands = map[string]command{}

// register adds a subcommand; each subcommand's file calls it from init.
func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("ocx: subcommand registered twice: " + c.name)
	}
	commands[c.name] = c
}

// errUsage marks a usage error, which exits 2.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, unixhost.OSSignal(host.SIGTERM))
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr, log: slog.New(slog.NewTextHandler(stderr, nil))}
	if len(args) > 1 && args[0] == "help" {
		if _, ok := commands[args[1]]; ok {
			args = []string{args[1], "--help"} // `ocx help CMD` is `ocx CMD --help`
		}
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" {
		args = append([]string{"version"}, args[1:]...)
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "ocx: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	if err := c.run(ctx, e, args[1:]); err != nil {
		if errors.Is(err, errStopped) {
			return 1 // the answer printed says why
		}
		if ex, ok := errors.AsType[errExit](err); ok {
			return ex.code // a run's holder exits as its command did
		}
		if errors.Is(err, errUsage) {
			fmt.Fprintf(stderr, "ocx %s: %v\n", c.name, err)
			return 2
		}
		fmt.Fprintf(stderr, "ocx %s: %v\n", c.name, err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: ocx COMMAND [ARGS]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
}
