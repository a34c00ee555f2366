// Command ocx is OCX's command line: the node's actions (init, agent logins,
// the hook, workspaces, sessions, listeners, the status), the wake hook
// itself, and the demo. Each subcommand is a file of its own, named in
// the one command table, commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"

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

// commands is ocx's one command table, as cmd/go's base.Go.Commands is:
// every subcommand, sorted by name (`ocx help` lists them in this order),
// each running from its own file.
var commands = []*command{
	{name: "attach", summary: "join a run's terminal; Ctrl-] detaches and the run goes on", run: runAttach},
	{name: "console", summary: "install the web console in Fossil's extension root; with --agents alone, be the console", run: runConsole},
	{name: "demo", summary: "run a demo node on 127.0.0.1 until interrupted", run: runDemo},
	{name: "hook", summary: "install, remove or show the wake hook; with --repo, be the hook", run: runHook},
	{name: "init", summary: "make the agents root and node.json; provision the node user", run: runInit},
	{name: "listener", summary: "add or remove a session's listener", run: runListener},
	{name: "login", summary: "add, withdraw or rotate an agent login", run: runLogin},
	{name: "logs", summary: "print the end of a session's log; -f follows it as it grows", run: runLogs},
	{name: "mcp", summary: "the tools over MCP: serve a session's socket (start, serve), or reach it from inside the sandbox (connect, call)", run: runMCP},
	{name: "metrics", summary: "print the daemon's metrics in Prometheus' text format", run: runMetrics},
	{name: "node", summary: "nodes on other hosts: list one on the server's node (add, remove); keep a run user's password on one (password)", run: runNode},
	{name: "post", summary: "reply to a post, or comment on a ticket, as the caller", run: runPost},
	{name: "release", summary: "stage, accept or roll back a release; make a release root", run: runRelease},
	{name: "run", summary: "OCX's run tool (seed 004): post, stop, start, check and list runs; hold a run's terminal", run: runRun},
	{name: "session", summary: "start, stop or restart sessions", run: runSession},
	{name: "status", summary: "the node's state: hooks, agent logins, workspaces, sessions, listeners", run: runStatus},
	{name: "thread", summary: "start a forum thread as the caller", run: runThread},
	{name: "ticket", summary: "open a ticket as the caller", run: runTicket},
	{name: "tool", summary: "call a protocol v1 tool (create, post, audit, push, stop) with JSON input; `tool list` lists them", run: runTool},
	{name: "version", summary: "print this build's version and check-in, one line", run: runVersion},
	{name: "workspace", summary: "add, terminate or collect workspaces", run: runWorkspace},
}

// lookup finds the subcommand named name.
func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
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
	e := &env{stdout: stdout, stderr: stderr, log: slog.New(unixhost.LogHandler(stderr, unixhost.LogText, nil))}
	if len(args) > 1 && args[0] == "help" {
		if lookup(args[1]) != nil {
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
	c := lookup(args[0])
	if c == nil {
		fmt.Fprintf(stderr, "ocx: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	if err := c.run(ctx, e, args[1:]); err != nil {
		if errors.Is(err, errHelped) {
			return 0 // the usage asked for is printed
		}
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
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
}
