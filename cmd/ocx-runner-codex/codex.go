package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/ocx-go/ocx/host/runner"
	"github.com/ocx-go/ocx/messages/modelapi"
)

// args is codex's command line for a turn (docs/runners.md, "## codex"):
// exec with its JSON Lines events, the session's model, the tree as its
// root (a Fossil checkout, not a Git one), no sandbox or approvals of its
// own (the session's sandbox is the boundary), the node's tools as the MCP
// server ocx, the thread resumed by its id after the first turn, and the
// prompt read from standard input ("-"). Every option comes before
// resume, as codex's docs write it.
//
// With modelURL, the node's model at a relay to its model socket (D48),
// codex's provider is that: OpenAI's Responses API at modelURL/v1, its
// key the relay's for this turn, read from the environment variable
// keyEnv (env_key: never on the command line, which every user of the
// host may read; D79), the node's proxy adding the real one outside the
// sandbox, and codex's analytics off: nothing but the model's requests
// leaves the sandbox. Without it codex uses its own configuration.
func args(model, dir string, b *runner.Bridge, resume, modelURL string) []string {
	a := []string{"exec", "--json", "--model", model, "--cd", dir,
		"--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"}
	if modelURL != "" {
		a = append(a, "-c", "model_provider="+tomlString(provider),
			"-c", "model_providers."+provider+".name="+tomlString("the OCX node's model"),
			"-c", "model_providers."+provider+".base_url="+tomlString(modelURL+"/v1"),
			"-c", "model_providers."+provider+".wire_api="+tomlString("responses"),
			"-c", "model_providers."+provider+".env_key="+tomlString(keyEnv),
			// A model that keeps failing fails the turn within seconds.
			"-c", "model_providers."+provider+".request_max_retries="+strconv.Itoa(runner.CLIRetries),
			"-c", "model_providers."+provider+".stream_max_retries="+strconv.Itoa(runner.CLIRetries),
			// codex resolves its analytics' hosts as it ends a turn; in a
			// sandbox without the network each lookup fails only after
			// its resolver's retries, which held every turn about 5 s
			// (0.27 s with analytics off).
			"-c", "analytics.enabled=false")
	}
	if b != nil {
		a = append(a, "-c", "mcp_servers.ocx.command="+tomlString(b.Command),
			"-c", "mcp_servers.ocx.args="+tomlArray(b.Args))
	}
	if resume != "" {
		a = append(a, "resume", resume)
	}
	return append(a, "-")
}

// provider is the name of the node's model among codex's providers.
const provider = "ocx"

// keyEnv names, in codex's environment, the variable holding the key of
// the turn's relay to the node's model, which codex sends as its bearer
// token (the provider's env_key).
const keyEnv = "OCX_MODEL_RELAY_KEY"

// tomlString renders s as a TOML basic string, which codex's -c reads.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// tomlArray renders ss as a TOML array of basic strings.
func tomlArray(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = tomlString(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// event is one line of codex exec --json: the fields a runner reads.
// Others, and event and item types it does not know, are ignored, as the
// CLI adds them over time.
type event struct {
	Type string `json:"type"`
	// ThreadID is thread.started's: the id to resume.
	ThreadID string `json:"thread_id"`
	// Message is an error event's.
	Message string `json:"message"`
	// Usage is turn.completed's: input_tokens (the cached among them),
	// cached_input_tokens, output_tokens.
	Usage json.RawMessage `json:"usage"`
	// Error is turn.failed's.
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	// Item is item.started's, item.updated's and item.completed's.
	Item *struct {
		Type string `json:"type"`
		// ItemType is what codex 0.4x named type.
		ItemType string `json:"item_type"`
		Text     string `json:"text"`
		Message  string `json:"message"`
	} `json:"item"`
}

// run is what a turn's events say.
type events struct {
	ThreadID string
	// Answer is the last agent message completed.
	Answer string
	// Completed says turn.completed came; Failed is turn.failed's message.
	Completed bool
	Failed    string
	// Errors are the error events' and error items' messages, in order.
	Errors []string
	// Skipped counts the lines that are not JSON objects.
	Skipped int
	// Used sums what the turn.completed events say was used; Reported
	// says one said it.
	Used     modelapi.Tokens
	Reported bool
}

// codexTokens reads turn.completed's usage: its input_tokens hold the
// cached ones (cached_input_tokens); ok is false when it says no input
// and output as whole numbers.
func codexTokens(raw json.RawMessage) (modelapi.Tokens, bool) {
	var u struct {
		Input  json.Number `json:"input_tokens"`
		Cached json.Number `json:"cached_input_tokens"`
		Output json.Number `json:"output_tokens"`
	}
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &u) != nil {
		return modelapi.Tokens{}, false
	}
	n := func(x json.Number) (uint64, bool) {
		v, err := strconv.ParseUint(x.String(), 10, 64)
		return min(v, modelapi.MaxTokens), err == nil
	}
	in, iok := n(u.Input)
	out, ook := n(u.Output)
	if !iok || !ook {
		return modelapi.Tokens{}, false
	}
	cached, _ := n(u.Cached)
	return modelapi.Tokens{Input: in, Output: out, Cached: min(cached, in)}, true
}

// parseEvents reads codex's JSON Lines output.
func parseEvents(b []byte) events {
	var ev events
	for _, line := range bytes.Split(b, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var e event
		if line[0] != '{' || json.Unmarshal(line, &e) != nil {
			ev.Skipped++
			continue
		}
		switch e.Type {
		case "thread.started":
			if ev.ThreadID == "" {
				ev.ThreadID = e.ThreadID
			}
		case "turn.completed":
			ev.Completed = true
			if t, ok := codexTokens(e.Usage); ok {
				ev.Used, ev.Reported = ev.Used.Plus(t), true
			}
		case "turn.failed":
			ev.Failed = "the turn failed"
			if e.Error != nil && e.Error.Message != "" {
				ev.Failed = e.Error.Message
			}
		case "error":
			ev.Errors = append(ev.Errors, e.Message)
		case "item.completed":
			if e.Item == nil {
				continue
			}
			switch t := e.Item.Type + e.Item.ItemType; t {
			case "agent_message", "assistant_message":
				ev.Answer = e.Item.Text
			case "error":
				ev.Errors = append(ev.Errors, e.Item.Message)
			}
		}
	}
	return ev
}

// maxErrorLen bounds what of codex's error a failure note quotes.
const maxErrorLen = 200

// outcome is a turn's answer and the thread's id from its events and
// codex's exit status, or the failure. A turn counts when turn.completed
// came, no turn.failed, and codex exited 0: an error event before a
// completed turn is one codex recovered from (a reconnection).
func outcome(ev events, exit int) (answer, id string, err error) {
	switch {
	case ev.Failed != "":
		return "", "", runner.Failf("codex: the turn failed: %s", short(ev.Failed))
	case !ev.Completed && len(ev.Errors) > 0:
		return "", "", runner.Failf("codex: %s", short(ev.Errors[len(ev.Errors)-1]))
	case !ev.Completed && exit != 0:
		return "", "", runner.Failf("codex exited with status %d before its turn completed (its standard error is in the session's log)", exit)
	case !ev.Completed:
		return "", "", runner.Failf("codex ended without completing its turn")
	case exit != 0:
		return "", "", runner.Failf("codex exited with status %d after its turn completed", exit)
	}
	return ev.Answer, ev.ThreadID, nil
}

// short is msg on one line, cut to maxErrorLen bytes.
func short(msg string) string { return runner.OneLine(msg, maxErrorLen) }
