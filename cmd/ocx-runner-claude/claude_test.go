package main

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/host/runner"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/modelapi"
)

func TestParseOutput(t *testing.T) {
	for _, tc := range []struct {
		name, out, answer, id, note string
		exit                        int
	}{
		{"success", `{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s1","total_cost_usd":0.1}`, "done", "s1", "", 0},
		{"verbose list", `[{"type":"system","subtype":"init","session_id":"s1"},{"type":"assistant"},{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s1"}]`, "ok", "s1", "", 0},
		{"lines", "{\"type\":\"system\"}\n{\"type\":\"result\",\"subtype\":\"success\",\"result\":\"ok\",\"session_id\":\"s2\"}\n", "ok", "s2", "", 0},
		{"api error", `{"type":"result","subtype":"success","is_error":true,"result":"Invalid API key · Please run /login","session_id":"s1"}`, "", "", "claude: success: Invalid API key · Please run /login", 1},
		{"error objects", `{"type":"result","subtype":"error_during_execution","is_error":true,"errors":[{"message":"boom"}]}`, "", "", "claude: error_during_execution: boom", 1},
		{"error bare", `{"type":"result","subtype":"error_max_budget_usd","is_error":true}`, "", "", "claude: error_max_budget_usd", 1},
		{"nonzero after success", `{"type":"result","subtype":"success","result":"x","session_id":"s"}`, "", "", "claude exited with status 1 after a successful result", 1},
		{"no result", `{"type":"system"}`, "", "", "claude's output holds no result object", 0},
		{"nothing", "", "", "", "claude printed nothing", 0},
		{"nothing, failed", "", "", "", "claude exited with status 2 and no result (its standard error is in the session's log)", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, perr := parseOutput([]byte(tc.out))
			answer, id, err := outcome(r, perr, tc.exit)
			if tc.note != "" {
				if err == nil || err.Error() != tc.note {
					t.Fatalf("err %v, want %q", err, tc.note)
				}
				return
			}
			if err != nil || answer != tc.answer || id != tc.id {
				t.Fatalf("%q, %q, %v; want %q, %q", answer, id, err, tc.answer, tc.id)
			}
		})
	}
}

// TestReported: the result's usage read as the Messages API's, the
// cache's tokens among those read, and its cost; a result without them
// reports nothing, and counts that are not whole numbers are not read.
func TestReported(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      messages.RunnerReport
		ok        bool
	}{
		{"usage and cost", `{"type":"result","subtype":"success","result":"x","session_id":"s","total_cost_usd":0.0123,
			"usage":{"input_tokens":10,"cache_creation_input_tokens":5,"cache_read_input_tokens":100,"output_tokens":20,"service_tier":"standard"}}`,
			messages.RunnerReport{Tokens: modelapi.Tokens{Input: 115, Output: 20, Cached: 100}, Cost: "0.0123"}, true},
		{"cost alone", `{"type":"result","subtype":"success","result":"x","total_cost_usd":1}`, messages.RunnerReport{Cost: "1"}, true},
		{"neither", `{"type":"result","subtype":"success","result":"x"}`, messages.RunnerReport{}, false},
		{"not counts", `{"type":"result","usage":{"input_tokens":"10","output_tokens":-2},"total_cost_usd":-1}`, messages.RunnerReport{}, false},
	} {
		r, err := parseOutput([]byte(tc.out))
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := r.reported(); ok != tc.ok || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestMessageIsShortAndOneLine(t *testing.T) {
	r := result{Result: strings.Repeat("é\n", 300)}
	m := r.message()
	if strings.Contains(m, "\n") || len(m) > maxErrorLen+len("…") || !strings.HasSuffix(m, "…") {
		t.Fatalf("message %q", m)
	}
}

func TestArgs(t *testing.T) {
	got := strings.Join(args("opus", "/s/claude-mcp.json", ""), " ")
	want := "-p --output-format json --model opus --mcp-config /s/claude-mcp.json --strict-mcp-config --allowedTools mcp__ocx --permission-mode bypassPermissions"
	if got != want {
		t.Fatalf("args\n got %s\nwant %s", got, want)
	}
	if got := args("opus", "/c", "abc"); strings.Join(got[len(got)-2:], " ") != "--resume abc" {
		t.Fatalf("resumed args %q", got)
	}
}

// FuzzParseOutput: any output parses or is refused, never a panic; what
// parses is a result, and a failure note is one line.
func FuzzParseOutput(f *testing.F) {
	f.Add([]byte(`{"type":"result","subtype":"success","result":"x","session_id":"s"}`))
	f.Add([]byte(`[{"type":"result","subtype":"error_max_turns","is_error":true,"errors":["a",{"message":"b"},3]}]`))
	f.Add([]byte("{\"type\":\"result\"}\n{\"type\":"))
	f.Add([]byte("not json"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, perr := parseOutput(b)
		if perr == nil && r.Type != "result" {
			t.Fatalf("parsed a %q, not a result", r.Type)
		}
		if rep, ok := r.reported(); ok {
			if err := rep.Validate(); err != nil {
				t.Fatalf("reported what does not validate: %+v: %v", rep, err)
			}
		}
		for _, exit := range []int{0, 1} {
			if _, _, err := outcome(r, perr, exit); err != nil && strings.Contains(r.message(), "\n") {
				t.Fatalf("message %q spans lines", r.message())
			}
		}
	})
}

// With the node's model socket, claude reaches it at a relay on
// 127.0.0.1 whose key, made for the turn, is claude's API key (D79): a
// request holding it reaches the socket, one without is refused; another
// turn's key is another. Whatever credential its environment held for
// Anthropic's API is gone; the node's tools are in front of the model
// either way.
func TestModelEnv(t *testing.T) {
	dir := t.TempDir()
	env := runner.Env{MCPSocket: filepath.Join(dir, "mcp.sock")}
	base := []string{"PATH=/bin", "ANTHROPIC_API_KEY=sk-real", "ANTHROPIC_AUTH_TOKEN=t", "CLAUDE_CODE_USE_BEDROCK=1"}
	got, done, err := modelEnv(base, env, "sonnet", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done()
	if !slices.Contains(got, "ANTHROPIC_API_KEY=sk-real") || !slices.Contains(got, "ENABLE_TOOL_SEARCH=false") {
		t.Fatalf("without the node's model: %q", got)
	}
	ln, err := net.Listen("unix", env.ModelSocket())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "the node's model") })}
	go srv.Serve(ln)
	defer srv.Close()
	got, done, err = modelEnv(base, env, "sonnet", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	value := func(env []string, name string) string {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, name+"="); ok {
				return v
			}
		}
		return ""
	}
	key, url := value(got, "ANTHROPIC_API_KEY"), value(got, "ANTHROPIC_BASE_URL")
	if len(key) != 64 {
		t.Fatalf("claude's key is %q, not the relay's", key)
	}
	for _, k := range []string{key, "", "ocx-the-node-holds-the-key"} {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/messages", strings.NewReader("{}"))
		req.Header.Set("X-Api-Key", k)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := k == key; (resp.StatusCode == 200 && string(b) == "the node's model") != want {
			t.Errorf("through the relay with key %q: %d %s", k, resp.StatusCode, b)
		}
	}
	again, done2, err := modelEnv(base, env, "sonnet", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done2()
	if value(again, "ANTHROPIC_API_KEY") == key {
		t.Errorf("two turns were given the same key")
	}
	joined := strings.Join(got, "\n")
	for _, want := range []string{"ANTHROPIC_API_KEY=", "ANTHROPIC_BASE_URL=http://127.0.0.1:", "ENABLE_TOOL_SEARCH=false",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "IS_SANDBOX=1", "ANTHROPIC_SMALL_FAST_MODEL=sonnet", "PATH=/bin", "CLAUDE_CODE_MAX_RETRIES=2"} {
		if !strings.Contains(joined, want) {
			t.Errorf("the environment lacks %s:\n%s", want, joined)
		}
	}
	for _, gone := range []string{"sk-real", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK"} {
		if strings.Contains(joined, gone) {
			t.Errorf("the environment keeps %s:\n%s", gone, joined)
		}
	}
}
