package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/ocx-go/ocx/host/runner"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/modelapi"
)

// args is claude's command line for a turn (docs/runners.md, "## claude"):
// print mode with its JSON result, the session's model, the MCP servers
// of config alone (the node's tools as mcp__ocx, allowed), no permission
// prompts (the session's sandbox is the boundary), and the conversation
// resumed by its id after the first turn. The prompt is on standard
// input: --mcp-config and --allowedTools take several values, and would
// take a prompt that follows them for one.
func args(model, config, resume string) []string {
	a := []string{"-p", "--output-format", "json", "--model", model,
		"--mcp-config", config, "--strict-mcp-config", "--allowedTools", "mcp__ocx",
		"--permission-mode", "bypassPermissions"}
	if resume != "" {
		a = append(a, "--resume", resume)
	}
	return a
}

// mcpServer is a stdio server in claude's MCP configuration.
type mcpServer struct {
	Type    string   `json:"type"`
	Command string   `json:"command"`
	Args    []string `json:"args"`
}

// mcpConfig renders the MCP configuration file: the server ocx as the
// bridge, or no server when the node serves no tools here (b nil).
func mcpConfig(b *runner.Bridge) []byte {
	servers := map[string]mcpServer{}
	if b != nil {
		servers["ocx"] = mcpServer{Type: "stdio", Command: b.Command, Args: b.Args}
	}
	out, _ := json.MarshalIndent(map[string]any{"mcpServers": servers}, "", "  ") // strings only
	return append(out, '\n')
}

// result is claude's result object (--output-format json): the fields a
// runner reads. Others are ignored, as the CLI adds fields over time.
type result struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	IsError   bool   `json:"is_error"`
	Result    string `json:"result"`
	SessionID string `json:"session_id"`
	// Errors says what failed in an error_* result: strings, or objects
	// with a message in some versions.
	Errors []json.RawMessage `json:"errors"`
	// Usage is the turn's usage as the Messages API says it (input,
	// output and cache tokens), and Cost what claude says it cost.
	Usage json.RawMessage `json:"usage"`
	Cost  *float64        `json:"total_cost_usd"`
}

// reported is what the result says the turn used, for the session to
// keep beside the turn (D50): its usage read as the Messages API's (the
// cache's tokens read too), and its total_cost_usd; ok is false when it
// says neither. claude's own word: the node counts at its proxy.
func (r result) reported() (rep messages.RunnerReport, ok bool) {
	if len(r.Usage) > 0 && r.Usage[0] == '{' {
		body := append(append([]byte(`{"usage":`), r.Usage...), '}')
		if t, tok := modelapi.ParseUsage(modelapi.ShapeMessages, body); tok {
			rep.Tokens, ok = t, true
		}
	}
	if r.Cost != nil {
		if c := messages.CostOf(*r.Cost); c != "" {
			rep.Cost, ok = c, true
		}
	}
	return rep, ok
}

// maxErrorLen bounds what of claude's error a failure note quotes.
const maxErrorLen = 200

// parseOutput reads claude's standard output: its one result object, or,
// when it printed a list of messages (as --verbose does) or one message a
// line, the last result among them.
func parseOutput(b []byte) (result, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return result{}, errors.New("claude printed nothing")
	}
	var values []json.RawMessage
	if b[0] == '[' {
		if err := json.Unmarshal(b, &values); err != nil {
			return result{}, fmt.Errorf("claude's output is not JSON: %v", err)
		}
	} else {
		dec := json.NewDecoder(bytes.NewReader(b))
		for {
			var v json.RawMessage
			err := dec.Decode(&v)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return result{}, fmt.Errorf("claude's output is not JSON: %v", err)
			}
			values = append(values, v)
		}
	}
	for i := len(values) - 1; i >= 0; i-- {
		var r result
		if json.Unmarshal(values[i], &r) == nil && r.Type == "result" {
			return r, nil
		}
	}
	return result{}, errors.New("claude's output holds no result object")
}

// outcome is a turn's answer and the conversation's id from claude's
// output (parsed into r, or perr) and its exit status, or the failure.
func outcome(r result, perr error, exit int) (answer, id string, err error) {
	if perr != nil {
		if exit != 0 {
			return "", "", runner.Failf("claude exited with status %d and no result (its standard error is in the session's log)", exit)
		}
		return "", "", runner.Failf("%v", perr)
	}
	if r.IsError || r.Subtype != "success" {
		what := r.Subtype
		if msg := r.message(); msg != "" {
			what += ": " + msg
		}
		return "", "", runner.Failf("claude: %s", what)
	}
	if exit != 0 {
		return "", "", runner.Failf("claude exited with status %d after a successful result", exit)
	}
	return r.Result, r.SessionID, nil
}

// message is what failed, in one short line: the first of the errors, or
// the result's text (an API error comes as subtype success, is_error and
// the message in result).
func (r result) message() string {
	msg := ""
	for _, e := range r.Errors {
		var s string
		var o struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e, &s) == nil && s != "" {
			msg = s
		} else if json.Unmarshal(e, &o) == nil && o.Message != "" {
			msg = o.Message
		}
		if msg != "" {
			break
		}
	}
	if msg == "" {
		msg = r.Result
	}
	return runner.OneLine(msg, maxErrorLen)
}
