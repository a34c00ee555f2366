// Command ocx-runner-claude is an llm session's runner (D9) for Claude
// Code: each turn runs `claude -p` headless in the session's tree, with
// the node's tools over MCP, resuming the session's conversation by the
// id claude gave on its first turn. docs/runners.md, "## claude", says
// each flag and the output it reads.
//
//	ocx-runner-claude --model MODEL < TURN-LINE
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ocx-go/ocx/cmd/internal/runner"
	"github.com/ocx-go/ocx/host/unixhost"
)

// name is the runner's name: its conversations' directory and its CLI.
const name = "claude"

// configFile is the MCP configuration the runner writes in the session's
// directory for each turn.
const configFile = "claude-mcp.json"

// state is what the conversation store keeps for claude: its session id.
type state struct {
	SessionID string `json:"session_id"`
}

func main() { runner.Main(run) }

func run(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) int {
	answer, err := turn(ctx, argv, stdin, stderr)
	return runner.Finish(stdout, answer, err)
}

// turn runs one turn and returns the answer.
func turn(ctx context.Context, argv []string, stdin io.Reader, stderr io.Writer) (string, error) {
	t, err := runner.StartCLITurn(name, argv, stdin, stderr, os.Getenv)
	if err != nil {
		return "", err
	}
	defer t.Store.Close()
	in, conv, bridge, store, env := t.Input, t.Conv, t.Bridge, t.Store, t.Env
	var st state
	if conv != nil {
		if err := json.Unmarshal(conv.State, &st); err != nil || st.SessionID == "" {
			return "", runner.Failf("the conversation of %s holds no claude session id", in.Session)
		}
	}
	config, err := writeConfig(env.SessionDir, mcpConfig(bridge))
	if err != nil {
		return "", err
	}
	out, err := runner.CLI{
		Name:   name,
		Args:   args(t.Model, config, st.SessionID),
		Stdin:  in.Message(conv == nil),
		Env:    withEnv(os.Environ(), "IS_SANDBOX=1"),
		Stderr: stderr,
	}.Run(ctx)
	if err != nil {
		return "", err
	}
	r, perr := parseOutput(out.Stdout)
	answer, id, err := outcome(r, perr, out.Exit)
	if err != nil {
		return "", err
	}
	if id == "" {
		fmt.Fprintln(stderr, "ocx-runner-claude: claude's result has no session_id; the next turn starts a new conversation")
		return answer, nil
	}
	turns := t.Turns()
	b, _ := json.Marshal(state{SessionID: id}) // a string only
	if err := store.Save(in.Session, &runner.Conversation{Turns: turns, State: b}); err != nil {
		// The answer stands: the model did the work and may have posted.
		fmt.Fprintf(stderr, "ocx-runner-claude: %v\n", err)
	}
	return answer, nil
}

// writeConfig writes the MCP configuration in the session's directory,
// whole, and returns its path.
func writeConfig(sessionDir string, config []byte) (string, error) {
	root, err := unixhost.OpenRoot(sessionDir)
	if err != nil {
		return "", fmt.Errorf("the session's directory: %w", err)
	}
	defer root.Close()
	p := filepath.Join(root.Path(), configFile)
	if err := root.WriteFile(p, config, 0o600); err != nil {
		return "", fmt.Errorf("write claude's MCP configuration: %w", err)
	}
	return p, nil
}

// withEnv returns env with kv (KEY=VALUE) set, replacing KEY's value.
func withEnv(env []string, kv string) []string {
	key, _, _ := strings.Cut(kv, "=")
	out := make([]string, 0, len(env)+1)
	for _, e := range env {
		if k, _, _ := strings.Cut(e, "="); k != key {
			out = append(out, e)
		}
	}
	return append(out, kv)
}
