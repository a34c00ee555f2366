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
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ocx-go/ocx/host/runner"
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

func main() { runner.Main(runner.CLIMain(name, turn)) }

// turn runs one turn and returns the answer.
func turn(ctx context.Context, t *runner.CLITurn, stderr io.Writer) (string, error) {
	in, conv, bridge, env := t.Input, t.Conv, t.Bridge, t.Env
	st, err := runner.ResumeState(t, func(s state) string { return s.SessionID }, "claude session id")
	if err != nil {
		return "", err
	}
	config, err := writeConfig(env.SessionDir, mcpConfig(bridge))
	if err != nil {
		return "", err
	}
	cliEnv, closeRelay, err := modelEnv(os.Environ(), env, t.Model, stderr)
	if err != nil {
		return "", err
	}
	defer closeRelay()
	out, err := runner.CLI{
		Name:   name,
		Args:   args(t.Model, config, st.SessionID),
		Stdin:  in.Message(conv == nil),
		Env:    cliEnv,
		Stderr: stderr,
	}.Run(ctx)
	if err != nil {
		return "", err
	}
	r, perr := parseOutput(out.Stdout)
	if rep, ok := r.reported(); perr == nil && ok {
		if err := runner.ReportUsage(env, rep); err != nil {
			fmt.Fprintf(stderr, "ocx-runner-claude: %v\n", err)
		}
	}
	answer, id, err := outcome(r, perr, out.Exit)
	if err != nil {
		return "", err
	}
	if id == "" {
		fmt.Fprintln(stderr, "ocx-runner-claude: claude's result has no session_id; the next turn starts a new conversation")
		return answer, nil
	}
	t.Keep(state{SessionID: id}, stderr)
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

// modelEnv is claude's environment for a turn (D48): the node's tools in
// front of the model (ENABLE_TOOL_SEARCH=false, else Claude Code 2.x
// offers MCP tools only behind its ToolSearch), no traffic but the
// model's, IS_SANDBOX for bypassPermissions as root, and, where the node
// serves the session's model, the API at a relay to its model socket with
// the relay's key for this turn as claude's API key (D79): the relay
// carries only what holds it, and the node's proxy adds the real one
// outside the sandbox. Whatever credential the environment held for
// Anthropic's API is dropped then. Without the node's model claude uses
// its own login.
func modelEnv(base []string, env runner.Env, model string, stderr io.Writer) ([]string, func(), error) {
	kvs := []string{"IS_SANDBOX=1", "ENABLE_TOOL_SEARCH=false", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
	// A model that keeps failing fails the turn within seconds, as the
	// native runner's does, not after claude's ten retries of minutes.
	if !slices.ContainsFunc(base, func(kv string) bool { return strings.HasPrefix(kv, "CLAUDE_CODE_MAX_RETRIES=") }) {
		kvs = append(kvs, "CLAUDE_CODE_MAX_RETRIES="+strconv.Itoa(runner.CLIRetries))
	}
	r, err := runner.ModelRelay(env, stderr)
	if err != nil {
		if f := (*runner.Failure)(nil); errors.As(err, &f) {
			return nil, nil, err
		}
		fmt.Fprintf(stderr, "ocx-runner-claude: claude uses its own login: %v\n", err)
		return runner.WithEnv(base, nil, kvs...), func() {}, nil
	}
	kvs = append(kvs, "ANTHROPIC_BASE_URL="+r.URL(), "ANTHROPIC_API_KEY="+r.Key(),
		// The small model Claude Code asks for its own chores is the
		// session's too: the proxy serves no other.
		"ANTHROPIC_SMALL_FAST_MODEL="+model)
	drop := []string{"ANTHROPIC_*", "CLAUDE_CODE_USE_*"}
	return runner.WithEnv(base, drop, kvs...), func() { r.Close() }, nil
}
