// Command ocx-runner-codex is an llm session's runner (D9) for the Codex
// CLI: each turn runs `codex exec` in the session's tree, with the node's
// tools over MCP, resuming the session's thread by the id codex gave on
// its first turn. docs/runners.md, "## codex", says each flag and the
// events it reads.
//
//	ocx-runner-codex --model MODEL < TURN-LINE
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"

	"github.com/ocx-go/ocx/cmd/internal/runner"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
)

// name is the runner's name: its conversations' directory and its CLI.
const name = "codex"

// state is what the conversation store keeps for codex: its thread id.
type state struct {
	ThreadID string `json:"thread_id"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), unixhost.OSSignal(host.SIGTERM), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) int {
	answer, err := turn(ctx, argv, stdin, stderr)
	return runner.Finish(stdout, answer, err)
}

// turn runs one turn and returns the answer.
func turn(ctx context.Context, argv []string, stdin io.Reader, stderr io.Writer) (string, error) {
	fs := flag.NewFlagSet("ocx-runner-"+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	model := fs.String("model", "", "the model codex runs")
	if err := fs.Parse(argv); err != nil || fs.NArg() != 0 || *model == "" {
		return "", &runner.Failure{What: "usage: ocx-runner-codex --model MODEL, with the turn's line on standard input", Usage: true}
	}
	in, err := runner.ReadInput(stdin)
	if err != nil {
		return "", err
	}
	env := runner.EnvOf(os.Getenv)
	store, err := runner.OpenStore(env.SessionDir, name)
	if err != nil {
		return "", err
	}
	defer store.Close()
	conv, err := store.Load(in.Session)
	if err != nil {
		return "", err
	}
	var st state
	if conv != nil {
		if err := json.Unmarshal(conv.State, &st); err != nil || st.ThreadID == "" {
			return "", runner.Failf("the conversation of %s holds no codex thread id", in.Session)
		}
	}
	var bridge *runner.Bridge
	if b, err := runner.BridgeOf(env, exec.LookPath); err != nil {
		fmt.Fprintf(stderr, "ocx-runner-codex: codex runs without the node's tools: %v\n", err)
	} else {
		bridge = &b
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", runner.Failf("the session's tree: %v", err)
	}
	out, err := runner.CLI{
		Name:   name,
		Args:   args(*model, dir, bridge, st.ThreadID),
		Stdin:  in.Message(conv == nil),
		Env:    os.Environ(),
		Stderr: stderr,
	}.Run(ctx)
	if err != nil {
		return "", err
	}
	ev := parseEvents(out.Stdout)
	if ev.Skipped > 0 {
		fmt.Fprintf(stderr, "ocx-runner-codex: %d lines of codex's output were not JSON events\n", ev.Skipped)
	}
	for _, e := range ev.Errors {
		fmt.Fprintf(stderr, "ocx-runner-codex: codex said: %s\n", short(e))
	}
	answer, id, err := outcome(ev, out.Exit)
	if err != nil {
		return "", err
	}
	if id == "" {
		fmt.Fprintln(stderr, "ocx-runner-codex: codex's events have no thread.started; the next turn starts a new thread")
		return answer, nil
	}
	turns := 1
	if conv != nil {
		turns = conv.Turns + 1
	}
	b, _ := json.Marshal(state{ThreadID: id}) // a string only
	if err := store.Save(in.Session, &runner.Conversation{Turns: turns, State: b}); err != nil {
		// The answer stands: the model did the work and may have posted.
		fmt.Fprintf(stderr, "ocx-runner-codex: %v\n", err)
	}
	return answer, nil
}
