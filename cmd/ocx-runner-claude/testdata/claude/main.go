// Command claude is a stand-in for Claude Code's CLI in the tests of
// ocx-runner-claude. It refuses (exit 2, a message on standard error) any
// run that is not exactly the one docs/runners.md says the runner makes:
//
//	claude -p --output-format json --model MODEL --mcp-config FILE
//	    --strict-mcp-config --allowedTools mcp__ocx
//	    --permission-mode bypassPermissions [--resume ID]
//
// with the prompt on standard input, FILE naming `ocx mcp connect --socket
// $OCX_MCP_SOCKET` as the server ocx (or no server when the test says the
// node serves no tools), ID one it handed out before, IS_SANDBOX=1, HOME
// set, and its working directory $STANDIN_CWD. It answers as the real one
// does with --output-format json: one result object on standard output.
// Its result carries usage and total_cost_usd as the real one's does
// (a success's, and error_max_turns's). The prompt chooses the answer:
//
//	standin:is_error    an API error: subtype success, is_error true, exit 1
//	standin:max_turns   subtype error_max_turns with errors, exit 1
//	standin:garbage     a line that is not JSON, exit 0
//	standin:crash       nothing on standard output, exit 3
//	standin:report      an answer holding a done report note
//	anything else       "claude(MODEL) turn N of ID heard: PROMPT"
//
// Its sessions are files under $HOME/.standin-claude/, as the real one's
// are under $HOME/.claude/.
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
		fmt.Fprintln(os.Stderr, "claude stand-in:", err)
		os.Exit(2)
	}
}

type server struct {
	Type    string   `json:"type"`
	Command string   `json:"command"`
	Args    []string `json:"args"`
}

func run() error {
	args := os.Args[1:]
	want := map[string]string{"-p": "", "--output-format": "json", "--strict-mcp-config": "",
		"--allowedTools": "mcp__ocx", "--permission-mode": "bypassPermissions"}
	got := map[string]string{}
	var model, config, resume string
	for i := 0; i < len(args); i++ {
		a := args[i]
		value := func() (string, error) {
			if i+1 >= len(args) || strings.HasPrefix(args[i+1], "-") {
				return "", fmt.Errorf("%s has no value", a)
			}
			i++
			return args[i], nil
		}
		var err error
		switch a {
		case "-p", "--strict-mcp-config":
			got[a] = ""
		case "--output-format", "--allowedTools", "--permission-mode":
			got[a], err = value()
		case "--model":
			model, err = value()
		case "--mcp-config":
			config, err = value()
		case "--resume":
			resume, err = value()
		default:
			return fmt.Errorf("argument %q is not one the runner should pass", a)
		}
		if err != nil {
			return err
		}
		if _, ok := got[a]; ok && want[a] != got[a] {
			return fmt.Errorf("%s is %q, not %q", a, got[a], want[a])
		}
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			return fmt.Errorf("%s is missing", k)
		}
	}
	if model == "" {
		return fmt.Errorf("--model is missing")
	}
	if os.Getenv("IS_SANDBOX") != "1" {
		return fmt.Errorf("IS_SANDBOX is %q, not 1", os.Getenv("IS_SANDBOX"))
	}
	home := os.Getenv("HOME")
	if home == "" {
		return fmt.Errorf("HOME is not set")
	}
	if err := checkCwd(); err != nil {
		return err
	}
	if err := checkConfig(config); err != nil {
		return err
	}
	prompt, err := io.ReadAll(os.Stdin)
	if err != nil || len(bytes.TrimSpace(prompt)) == 0 {
		return fmt.Errorf("no prompt on standard input")
	}
	sessions := filepath.Join(home, ".standin-claude")
	turn := 1
	id := resume
	if resume != "" {
		b, err := os.ReadFile(filepath.Join(sessions, resume))
		if err != nil {
			// What the real one says for an unknown id.
			return result(map[string]any{"type": "result", "subtype": "error_during_execution", "is_error": true,
				"session_id": newID(), "errors": []string{"No conversation found with session ID: " + resume}}, 1)
		}
		turn, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		turn++
	} else {
		id = newID()
	}
	p := string(prompt)
	switch {
	case strings.Contains(p, "standin:is_error"):
		return result(map[string]any{"type": "result", "subtype": "success", "is_error": true, "session_id": id,
			"result": "API Error: 401 {\"type\":\"error\",\"error\":{\"type\":\"authentication_error\"}}\nPlease run /login"}, 1)
	case strings.Contains(p, "standin:max_turns"):
		return result(map[string]any{"type": "result", "subtype": "error_max_turns", "is_error": true, "session_id": id,
			"num_turns": 9, "errors": []string{"Reached maximum number of turns (8)"}, "total_cost_usd": 0.5, "usage": usage}, 1)
	case strings.Contains(p, "standin:garbage"):
		fmt.Println("Welcome to Claude Code! this is not JSON")
		return nil
	case strings.Contains(p, "standin:crash"):
		fmt.Fprintln(os.Stderr, "claude stand-in: crashing as asked")
		os.Exit(3)
	}
	if err := os.MkdirAll(sessions, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(sessions, id), []byte(strconv.Itoa(turn)), 0o600); err != nil {
		return err
	}
	answer := fmt.Sprintf("claude(%s) turn %d of %s heard: %s", model, turn, id, p)
	if strings.Contains(p, "standin:report") {
		answer = "claude did the work.\n\n```json\n{\"ocx\": \"report\", \"outcome\": \"done\", \"summary\": \"claude did it\"}\n```"
	}
	return result(map[string]any{"type": "result", "subtype": "success", "is_error": false, "duration_ms": 1200,
		"duration_api_ms": 1100, "num_turns": 1, "result": answer, "session_id": id, "total_cost_usd": 0.0123,
		"usage": usage}, 0)
}

// checkCwd checks the working directory is the one the test ran the runner in.
func checkCwd() error {
	want := os.Getenv("STANDIN_CWD")
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	if want == "" || cwd != want {
		return fmt.Errorf("working directory %q, not the tree %q", cwd, want)
	}
	return nil
}

// checkConfig checks the MCP configuration: strictly the server ocx as
// `ocx mcp connect --socket $OCX_MCP_SOCKET`, or no server at all when
// STANDIN_NO_TOOLS is set.
func checkConfig(path string) error {
	if path == "" || !filepath.IsAbs(path) {
		return fmt.Errorf("--mcp-config %q is not an absolute path", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var c struct {
		MCPServers map[string]server `json:"mcpServers"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return fmt.Errorf("the MCP configuration %s: %v", path, err)
	}
	if os.Getenv("STANDIN_NO_TOOLS") != "" {
		if len(c.MCPServers) != 0 || c.MCPServers == nil {
			return fmt.Errorf("the MCP configuration names servers %v (or none at all), not an empty mcpServers", c.MCPServers)
		}
		return nil
	}
	s, ok := c.MCPServers["ocx"]
	if !ok || len(c.MCPServers) != 1 {
		return fmt.Errorf("the MCP configuration names %v, not the server ocx alone", c.MCPServers)
	}
	if s.Type != "stdio" || filepath.Base(s.Command) != "ocx" || !filepath.IsAbs(s.Command) {
		return fmt.Errorf("the server ocx is %+v, not ocx by its absolute path over stdio", s)
	}
	if fi, err := os.Stat(s.Command); err != nil || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("the server's command %s is not an executable", s.Command)
	}
	sock := os.Getenv("OCX_MCP_SOCKET")
	if want := []string{"mcp", "connect", "--socket", sock}; sock == "" || strings.Join(s.Args, "\x00") != strings.Join(want, "\x00") {
		return fmt.Errorf("the server's args are %q, not %q", s.Args, want)
	}
	return nil
}

// usage is the turn's usage as the real one reports it in its result: the
// Messages API's counts (those past the cache, written to it, read from
// it, and written by the model), the server's tools, the service tier.
var usage = map[string]any{"input_tokens": 10, "cache_creation_input_tokens": 5, "cache_read_input_tokens": 100,
	"output_tokens": 20, "server_tool_use": map[string]int{"web_search_requests": 0, "web_fetch_requests": 0},
	"service_tier": "standard"}

func result(v map[string]any, code int) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	os.Stdout.Write(append(b, '\n'))
	os.Exit(code)
	return nil
}

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
