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
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/ocx-go/ocx/host/runner"
	"github.com/ocx-go/ocx/messages"
)

// name is the runner's name: its conversations' directory and its CLI.
const name = "codex"

// state is what the conversation store keeps for codex: its thread id.
type state struct {
	ThreadID string `json:"thread_id"`
}

func main() { runner.Main(runner.CLIMain(name, turn)) }

// turn runs one turn and returns the answer.
func turn(ctx context.Context, t *runner.CLITurn, stderr io.Writer) (string, error) {
	in, conv, bridge := t.Input, t.Conv, t.Bridge
	st, err := runner.ResumeState(t, func(s state) string { return s.ThreadID }, "codex thread id")
	if err != nil {
		return "", err
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", runner.Failf("the session's tree: %v", err)
	}
	modelURL, cliEnv := "", os.Environ()
	if r, err := runner.ModelRelay(t.Env, stderr); err == nil {
		defer r.Close()
		modelURL = r.URL()
		cliEnv = runner.WithEnv(cliEnv, nil, keyEnv+"="+r.Key())
	} else if f := (*runner.Failure)(nil); errors.As(err, &f) {
		return "", err
	} else {
		fmt.Fprintf(stderr, "ocx-runner-codex: codex uses its own configuration: %v\n", err)
	}
	out, err := runner.CLI{
		Name:   name,
		Args:   args(t.Model, dir, bridge, st.ThreadID, modelURL),
		Stdin:  in.Message(conv == nil),
		Env:    cliEnv,
		Stderr: stderr,
	}.Run(ctx)
	if err != nil {
		return "", err
	}
	ev := parseEvents(out.Stdout)
	if ev.Reported {
		if err := runner.ReportUsage(t.Env, messages.RunnerReport{Tokens: ev.Used}); err != nil {
			fmt.Fprintf(stderr, "ocx-runner-codex: %v\n", err)
		}
	}
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
	t.Keep(state{ThreadID: id}, stderr)
	return answer, nil
}
