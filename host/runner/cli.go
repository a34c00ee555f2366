package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
)

// Bridge is the command an agent CLI launches as its stdio MCP server to
// reach the node's tools: `ocx mcp connect --socket SOCKET` (D38). The
// socket is in the arguments, not only in the environment, because a CLI
// may start its servers with an environment of its own (codex passes a
// few variables only).
type Bridge struct {
	// Command is ocx's absolute path.
	Command string
	Args    []string
}

// bridgeOf finds the bridge for env: ocx on PATH (lookPath is
// exec.LookPath) and the session's MCP socket. It says why there is none
// when the node serves no tools here or ocx is not on PATH; the runner
// then runs its CLI without the node's tools, as a session whose MCP
// server did not start runs on (D38).
func bridgeOf(env Env, lookPath func(string) (string, error)) (Bridge, error) {
	if env.MCPSocket == "" {
		return Bridge{}, fmt.Errorf("the node serves no tools here ($%s is not set)", envMCPSocket)
	}
	p, err := lookPath("ocx")
	if err != nil {
		return Bridge{}, errors.New("ocx, which bridges the node's tools, is not on PATH")
	}
	if !filepath.IsAbs(p) {
		if p, err = filepath.Abs(p); err != nil {
			return Bridge{}, fmt.Errorf("ocx's path: %w", err)
		}
	}
	return Bridge{Command: p, Args: []string{"mcp", "connect", "--socket", env.MCPSocket}}, nil
}

// CLI is one run of an agent CLI for a turn.
type CLI struct {
	// Name is the program, found on PATH (claude, codex).
	Name string
	Args []string
	// Stdin is the prompt.
	Stdin string
	// Env is the CLI's whole environment; Dir its working directory ("" is
	// the runner's, the session's tree).
	Env []string
	Dir string
	// Stderr receives the CLI's standard error: the session's log.
	Stderr io.Writer
}

// maxCLIOutput bounds what a CLI may print on standard output in a turn.
const maxCLIOutput = 64 << 20

// cliRun is what a CLI printed and how it ended.
type cliRun struct {
	Stdout []byte
	// Exit is its exit status, -1 when a signal ended it.
	Exit int
}

// killGrace is how long a CLI has to end after SIGTERM when the turn is
// cancelled, before SIGKILL.
const killGrace = 5 * time.Second

// Run runs the CLI until it exits or ctx ends (SIGTERM, then SIGKILL after
// a grace). A CLI not on PATH is a Failure naming it; an exit status that
// is not 0 is not an error here, the caller reads the output first. The
// error is for a CLI that could not run or printed too much.
func (c CLI) Run(ctx context.Context) (cliRun, error) {
	if _, err := exec.LookPath(c.Name); err != nil {
		return cliRun{}, Failf("%s is not on PATH (the sandbox's path must hold it)", c.Name)
	}
	cmd := exec.CommandContext(ctx, c.Name, c.Args...)
	cmd.Stdin = bytes.NewReader([]byte(c.Stdin))
	var out limitedBuffer
	out.max = maxCLIOutput
	cmd.Stdout = &out
	cmd.Stderr = c.Stderr
	cmd.Env = c.Env
	cmd.Dir = c.Dir
	cmd.Cancel = func() error { return cmd.Process.Signal(unixhost.OSSignal(host.SIGTERM)) }
	cmd.WaitDelay = killGrace
	err := cmd.Run()
	if out.over {
		return cliRun{}, Failf("%s printed more than %d bytes", c.Name, maxCLIOutput)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return cliRun{Stdout: out.b.Bytes()}, nil
	case ctx.Err() != nil:
		return cliRun{}, Failf("%s was stopped: the turn was cancelled", c.Name)
	case errors.As(err, &ee):
		return cliRun{Stdout: out.b.Bytes(), Exit: ee.ExitCode()}, nil
	}
	return cliRun{}, Failf("%s did not run: %v", c.Name, err)
}

// limitedBuffer keeps at most max bytes and notes when more came.
type limitedBuffer struct {
	b    bytes.Buffer
	max  int
	over bool
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if l.b.Len()+len(p) > l.max {
		l.over = true
		return 0, errors.New("too much output")
	}
	return l.b.Write(p)
}

// CLITurn is what a turn of a runner that drives an agent's CLI (claude,
// codex) starts from: its model, the turn's line, the conversation so far
// (nil on the first turn) in its store, and the bridge to the node's tools
// (nil: the CLI runs without them, and the log says why).
type CLITurn struct {
	Name   string
	Model  string
	Input  Input
	Env    Env
	Store  *store
	Conv   *Conversation
	Bridge *Bridge
}

// startCLITurn reads the runner NAME's command line (--model MODEL), the
// turn's line on stdin, and the conversation of the turn's session, and
// finds the bridge. The caller closes Store.
func startCLITurn(name string, argv []string, stdin io.Reader, stderr io.Writer, getenv func(string) string) (*CLITurn, error) {
	fs := flag.NewFlagSet("ocx-runner-"+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	model := fs.String("model", "", "the model "+name+" runs")
	if err := fs.Parse(argv); err != nil || fs.NArg() != 0 || *model == "" {
		return nil, &Failure{What: "usage: ocx-runner-" + name + " --model MODEL, with the turn's line on standard input", Usage: true}
	}
	in, err := ReadInput(stdin)
	if err != nil {
		return nil, err
	}
	env := EnvOf(getenv)
	store, err := OpenStore(env.SessionDir, name)
	if err != nil {
		return nil, err
	}
	conv, err := store.Load(in.Session)
	if err != nil {
		store.Close()
		return nil, err
	}
	t := &CLITurn{Name: name, Model: *model, Input: in, Env: env, Store: store, Conv: conv}
	if b, err := bridgeOf(env, exec.LookPath); err != nil {
		fmt.Fprintf(stderr, "ocx-runner-%s: %s runs without the node's tools: %v\n", name, name, err)
	} else {
		t.Bridge = &b
	}
	return t, nil
}

// CLIMain is the run of the runner NAME (runner.Main's): it starts the turn
// (StartCLITurn, the environment os.Getenv's), runs turn, and prints its
// answer or its failure note (Finish).
func CLIMain(name string, turn func(ctx context.Context, t *CLITurn, stderr io.Writer) (string, error)) func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) int {
		t, err := startCLITurn(name, argv, stdin, stderr, os.Getenv)
		if err != nil {
			return Finish(stdout, "", err)
		}
		defer t.Store.Close()
		answer, err := turn(ctx, t, stderr)
		return Finish(stdout, answer, err)
	}
}

// Turns is how many turns the conversation will have held once this one is
// saved.
func (t *CLITurn) Turns() int {
	if t.Conv == nil {
		return 1
	}
	return t.Conv.Turns + 1
}

// ResumeState is the state the conversation keeps for the CLI (its
// session or thread id, which id returns): the zero S for a new
// conversation, a Failure naming what when the kept state holds no id.
func ResumeState[S any](t *CLITurn, id func(S) string, what string) (S, error) {
	var st S
	if t.Conv == nil {
		return st, nil
	}
	if err := json.Unmarshal(t.Conv.State, &st); err != nil || id(st) == "" {
		return st, Failf("the conversation of %s holds no %s", t.Input.Session, what)
	}
	return st, nil
}

// Keep saves the conversation, one turn longer, with the CLI's state st
// (a struct of strings). A failure is only said on stderr: the answer
// stands, since the model did the work and may have posted.
func (t *CLITurn) Keep(st any, stderr io.Writer) {
	b, _ := json.Marshal(st)
	if err := t.Store.Save(t.Input.Session, &Conversation{Turns: t.Turns(), State: b}); err != nil {
		fmt.Fprintf(stderr, "ocx-runner-%s: %v\n", t.Name, err)
	}
}

// OneLine is msg on one line, cut to max bytes (at a rune's start) and
// marked "…" when cut: what a failure note quotes of a CLI's error.
func OneLine(msg string, max int) string {
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > max {
		cut := max
		for cut > 0 && msg[cut]&0xC0 == 0x80 {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}
