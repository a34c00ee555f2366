// Command codex is a stand-in for the Codex CLI in the tests of
// ocx-runner-codex. It refuses (exit 2, a message on standard error) any
// run that is not exactly the one docs/runners.md says the runner makes:
//
//	codex exec --json --model MODEL --cd DIR --skip-git-repo-check
//	    --dangerously-bypass-approvals-and-sandbox
//	    [-c mcp_servers.ocx.command="OCX" -c mcp_servers.ocx.args=[...]]
//	    [resume ID] -
//
// with the prompt on standard input, DIR its working directory and
// $STANDIN_CWD, the server ocx as `OCX mcp connect --socket
// $OCX_MCP_SOCKET` (OCX an absolute path to an executable named ocx; no
// -c at all when STANDIN_NO_TOOLS is set), ID a thread it started before,
// and HOME set. It answers as the real one does with --json: JSON Lines
// events on standard output. The prompt chooses them:
//
//	standin:turn_failed  an error event, then turn.failed; exit 1
//	standin:error_event  an error event alone; exit 1
//	standin:reconnect    a passing error event, then a completed turn
//	standin:garbage      a line that is not JSON amid the events
//	standin:no_message   a completed turn with no agent message
//	standin:report       an answer holding a done report note
//	anything else        "codex(MODEL) turn N of ID heard: PROMPT"
//
// Its threads are files under $HOME/.standin-codex/, as the real one's
// are under $CODEX_HOME (~/.codex).
package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "codex stand-in:", err)
		os.Exit(2)
	}
}

func run() error {
	args := os.Args[1:]
	if len(args) == 0 || args[0] != "exec" {
		return fmt.Errorf("the first argument is not exec: %q", args)
	}
	args = args[1:]
	if len(args) == 0 || args[len(args)-1] != "-" {
		return fmt.Errorf("the last argument is not - (the prompt on standard input): %q", args)
	}
	args = args[:len(args)-1]
	var model, dir, resume string
	var overrides []string
	seen := map[string]bool{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		value := func() (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s has no value", a)
			}
			i++
			return args[i], nil
		}
		var err error
		switch a {
		case "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox":
			seen[a] = true
		case "--model":
			model, err = value()
		case "--cd":
			dir, err = value()
		case "-c":
			var o string
			o, err = value()
			overrides = append(overrides, o)
		case "resume":
			resume, err = value()
			if err == nil && i != len(args)-1 {
				return fmt.Errorf("resume ID is not last before -: %q", args[i+1:])
			}
		default:
			return fmt.Errorf("argument %q is not one the runner should pass", a)
		}
		if err != nil {
			return err
		}
	}
	for _, f := range []string{"--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"} {
		if !seen[f] {
			return fmt.Errorf("%s is missing", f)
		}
	}
	if model == "" {
		return fmt.Errorf("--model is missing")
	}
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	if want := os.Getenv("STANDIN_CWD"); want == "" || cwd != want || dir != want {
		return fmt.Errorf("working directory %q and --cd %q, not the tree %q", cwd, dir, want)
	}
	home := os.Getenv("HOME")
	if home == "" {
		return fmt.Errorf("HOME is not set")
	}
	if err := checkOverrides(overrides); err != nil {
		return err
	}
	prompt, err := io.ReadAll(os.Stdin)
	if err != nil || len(bytes.TrimSpace(prompt)) == 0 {
		return fmt.Errorf("no prompt on standard input")
	}
	threads := filepath.Join(home, ".standin-codex")
	turn, id := 1, resume
	if resume != "" {
		b, err := os.ReadFile(filepath.Join(threads, resume))
		if err != nil {
			event(map[string]any{"type": "error", "message": "thread/resume failed: no rollout found for thread id " + resume})
			os.Exit(1)
		}
		turn, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		turn++
	} else {
		id = newID()
	}
	p := string(prompt)
	event(map[string]any{"type": "thread.started", "thread_id": id})
	event(map[string]any{"type": "turn.started"})
	switch {
	case strings.Contains(p, "standin:turn_failed"):
		event(map[string]any{"type": "error", "message": "unexpected status 401 Unauthorized: Missing bearer"})
		event(map[string]any{"type": "turn.failed", "error": map[string]string{"message": "unexpected status 401 Unauthorized: Missing bearer"}})
		os.Exit(1)
	case strings.Contains(p, "standin:error_event"):
		event(map[string]any{"type": "error", "message": "stream disconnected before completion"})
		os.Exit(1)
	case strings.Contains(p, "standin:reconnect"):
		event(map[string]any{"type": "error", "message": "Reconnecting... 1/5"})
	case strings.Contains(p, "standin:garbage"):
		fmt.Println("this line is not JSON")
	}
	if err := os.MkdirAll(threads, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(threads, id), []byte(strconv.Itoa(turn)), 0o600); err != nil {
		return err
	}
	event(map[string]any{"type": "item.completed", "item": map[string]any{"id": "item_0", "type": "reasoning", "text": "**Reading the post**"}})
	event(map[string]any{"type": "item.started", "item": map[string]any{"id": "item_1", "type": "mcp_tool_call", "server": "ocx", "tool": "post", "status": "in_progress"}})
	event(map[string]any{"type": "item.completed", "item": map[string]any{"id": "item_1", "type": "mcp_tool_call", "server": "ocx", "tool": "post", "status": "completed"}})
	if !strings.Contains(p, "standin:no_message") {
		event(map[string]any{"type": "item.completed", "item": map[string]any{"id": "item_2", "type": "agent_message", "text": "a first thought"}})
		answer := fmt.Sprintf("codex(%s) turn %d of %s heard: %s", model, turn, id, p)
		if strings.Contains(p, "standin:report") {
			answer = "codex did the work.\n\n```json\n{\"ocx\": \"report\", \"outcome\": \"done\", \"summary\": \"codex did it\"}\n```"
		}
		event(map[string]any{"type": "item.completed", "item": map[string]any{"id": "item_3", "type": "agent_message", "text": answer}})
	}
	event(map[string]any{"type": "turn.completed", "usage": map[string]int{"input_tokens": 100, "cached_input_tokens": 50, "output_tokens": 20}})
	return nil
}

// checkOverrides checks the -c overrides name the server ocx as `OCX mcp
// connect --socket $OCX_MCP_SOCKET`, or that there are none when
// STANDIN_NO_TOOLS is set. Values are TOML: a basic string and an array
// of basic strings, which JSON reads the same for these.
func checkOverrides(overrides []string) error {
	if os.Getenv("STANDIN_NO_TOOLS") != "" {
		if len(overrides) != 0 {
			return fmt.Errorf("-c %q given with no tools", overrides)
		}
		return nil
	}
	if len(overrides) != 2 {
		return fmt.Errorf("-c given %d times, not twice: %q", len(overrides), overrides)
	}
	var command string
	var args []string
	for _, o := range overrides {
		k, v, ok := strings.Cut(o, "=")
		if !ok {
			return fmt.Errorf("-c %q is not key=value", o)
		}
		var err error
		switch k {
		case "mcp_servers.ocx.command":
			err = json.Unmarshal([]byte(v), &command)
		case "mcp_servers.ocx.args":
			err = json.Unmarshal([]byte(v), &args)
		default:
			return fmt.Errorf("-c %q sets an unexpected key", o)
		}
		if err != nil {
			return fmt.Errorf("-c %q: the value is not a TOML string or array of strings: %v", o, err)
		}
	}
	if filepath.Base(command) != "ocx" || !filepath.IsAbs(command) {
		return fmt.Errorf("the server ocx's command is %q, not ocx by its absolute path", command)
	}
	if fi, err := os.Stat(command); err != nil || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("the server's command %s is not an executable", command)
	}
	sock := os.Getenv("OCX_MCP_SOCKET")
	if want := []string{"mcp", "connect", "--socket", sock}; sock == "" || strings.Join(args, "\x00") != strings.Join(want, "\x00") {
		return fmt.Errorf("the server's args are %q, not %q", args, want)
	}
	return nil
}

func event(v map[string]any) {
	b, _ := json.Marshal(v)
	os.Stdout.Write(append(b, '\n'))
}

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
