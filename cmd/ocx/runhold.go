package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/runhold"
	"github.com/ocx-go/ocx/host/unixhost"
)

// runHoldUsage says what run hold does, after runhold.Usage.
const runHoldUsage = runhold.Usage + `

hold is a run's watcher: it starts COMMAND in a session of its own, on a
terminal it holds (--terminal) or on pipes, and holds its streams until
COMMAND exits, so that the run outlives its caller and the daemon. The node
types the first line and each delivery in through the socket (docs/runs.md
§8.1): on pipes only with --feed, else the input closes after the first
line; a person joins a terminal with ocx attach. STDERR is a pipe (copied to
the terminal), and the ends of both streams are rewritten to the logs
named. --spec FILE names the command as the daemon prepared it (its
environment, directory, sandbox, limits and first lines), started as the
daemon would start it; without it COMMAND runs unconfined with the
holder's environment. At the exit it writes {"exit":N} (or
{"exit":128+N,"signal":"SIGX"}) to --status, removes the socket, and exits
with COMMAND's status. --detach binds the socket, leaves the holder
running in a session of its own, prints "PID SOCKET" and returns. Killed
outright, the holder hangs COMMAND up (SIGHUP). A TERM, INT or HUP to the
holder is sent on to COMMAND's session; a USR1 binds a removed socket again.`

// errExit carries a holder's exit code out of run: the command's own.
type errExit struct{ code int }

func (e errExit) Error() string { return fmt.Sprintf("the command exited %d", e.code) }

// runRunHold is `ocx run hold`: args are what follows hold.
func runRunHold(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintf(e.stderr, "usage: ocx %s\n", runHoldUsage)
		if len(args) == 0 {
			return fmt.Errorf("%w: run hold takes a COMMAND after --, or --spec", errUsage)
		}
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	code, err := runhold.Main(ctx, []string{exe, "run", "hold"}, args, e.stdout, e.stderr, e.log)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return nil
	case err != nil && code == 2:
		return fmt.Errorf("%w: %v", errUsage, err)
	case err != nil:
		return err
	case code != 0:
		return errExit{code}
	}
	return nil
}

const attachUsage = `attach [--agents AGENTS] RUN | [--socket PATH | PATH]

attach joins the terminal of a run a holder holds (ocx run hold): RUN, a
run's hash or its beginning, in the node's care (its holder's socket under
AGENTS/ocxd.runs, docs/runs.md section 8.1), or the socket given to a
holder started by hand. It shows what the terminal shows, starting with the last of what it showed, and
what you type goes in. Standard input is put in raw mode when it is a
terminal, and its size becomes the run's. Ctrl-] detaches, leaving the run
running; when the run ends, attach ends. Several people may attach at once:
each sees the output, and what each types goes in.`

func runAttach(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("attach", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { fmt.Fprintf(e.stderr, "usage: ocx %s\n\n", attachUsage); fs.PrintDefaults() }
	sock := fs.String("socket", "", "the holder's socket")
	agents := os.Getenv("OCX_AGENTS")
	if agents == "" {
		agents = node.DefaultAgents
	}
	fs.StringVar(&agents, "agents", agents, "the agents root, where RUN is in care ($OCX_AGENTS when set)")
	pos, _, err := parse(fs, args)
	if err != nil {
		return usageErr(err)
	}
	switch {
	case len(pos) == 1 && *sock == "" && !strings.Contains(pos[0], "/"):
		s, err := runhold.RunSocket(filepath.Join(agents, host.RunCareName), pos[0])
		if err != nil {
			return err
		}
		*sock = s
	case len(pos) == 1 && *sock == "":
		*sock = pos[0]
	case len(pos) != 0 || *sock == "":
		return fmt.Errorf("%w: attach takes one run or one socket", errUsage)
	}
	var size unixhost.WindowSize
	if unixhost.IsTerminal(os.Stdout) {
		size, _ = unixhost.GetWindowSize(os.Stdout)
	}
	if unixhost.IsTerminal(os.Stdin) {
		restore, err := unixhost.MakeRaw(os.Stdin)
		if err != nil {
			return err
		}
		defer restore()
		fmt.Fprintf(e.stderr, "[attached to %s: Ctrl-] detaches]\r\n", *sock)
	}
	detached, err := runhold.Attach(*sock, os.Stdin, e.stdout, size)
	if err != nil {
		return fmt.Errorf("attach %s: %w", *sock, err)
	}
	if detached {
		fmt.Fprint(e.stderr, "\r\n[detached; the run goes on]\r\n")
	} else {
		fmt.Fprint(e.stderr, "\r\n[the run ended]\r\n")
	}
	return nil
}
