package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ocx-go/ocx/host/model"
	"github.com/ocx-go/ocx/host/runner"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/modelapi"
)

const (
	testKey = "sk-test-SECRET-0123456789"
	rec     = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	post1   = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	post2   = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

// exchange is one scripted reply of the stand-in model: a status, headers
// and a body, after an optional delay.
type exchange struct {
	status int
	header map[string]string
	body   string
	delay  time.Duration
}

// seen is one request the stand-in model got.
type seen struct {
	path   string
	header http.Header
	body   map[string]any
	raw    string
}

// bench is a node's side for one session: a stand-in model on 127.0.0.1
// playing a script, the real model proxy on model.sock with the key, a
// go-sdk MCP server offering post on mcp.sock, and a session directory.
type bench struct {
	t          *testing.T
	api        model.API
	mcpDir     string
	sessionDir string

	mu     sync.Mutex
	script []exchange
	got    []seen
	posted []string
}

func newBench(t *testing.T, api model.API, script ...exchange) *bench {
	t.Helper()
	dir, err := os.MkdirTemp("", "ocxn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b := &bench{t: t, api: api, mcpDir: filepath.Join(dir, "mcp"), sessionDir: filepath.Join(dir, "session"), script: script}
	for _, d := range []string{b.mcpDir, b.sessionDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	upstream := httptest.NewServer(http.HandlerFunc(b.serveModel))
	t.Cleanup(upstream.Close)
	proxy, err := model.NewProxy(&model.Config{API: api, BaseURL: upstream.URL}, map[model.API]string{api: testKey}, "m1", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	mln := listen(t, filepath.Join(b.mcpDir, "model.sock"))
	wg.Go(func() { model.Serve(ctx, mln, proxy, nil, nil) })
	b.serveMCP(ctx, &wg, listen(t, filepath.Join(b.mcpDir, "mcp.sock")))
	return b
}

func listen(t *testing.T, path string) net.Listener {
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func (b *bench) serveModel(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	json.Unmarshal(raw, &body)
	b.mu.Lock()
	b.got = append(b.got, seen{path: r.URL.Path, header: r.Header.Clone(), body: body, raw: string(raw)})
	var ex exchange
	if len(b.script) > 0 {
		ex, b.script = b.script[0], b.script[1:]
	} else {
		ex = exchange{status: 418, body: `{"error":{"message":"the script is over"}}`}
	}
	b.mu.Unlock()
	if ex.delay > 0 {
		select {
		case <-time.After(ex.delay):
		case <-r.Context().Done():
			return
		}
	}
	for k, v := range ex.header {
		w.Header().Set(k, v)
	}
	if ex.status == 0 {
		ex.status = 200
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(ex.status)
	io.WriteString(w, ex.body)
}

// serveMCP offers a post tool in the node's answer shape (docs/tools.md):
// a text holding "refuse" is refused, stopped and isError.
func (b *bench) serveMCP(ctx context.Context, wg *sync.WaitGroup, ln net.Listener) {
	s := mcp.NewServer(&mcp.Implementation{Name: "ocx", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "post", Description: "Post a reply on a record.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"text":{"type":"string"}},"required":["to","text"],"additionalProperties":false}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct{ To, Text string }
			json.Unmarshal(req.Params.Arguments, &in)
			b.mu.Lock()
			b.posted = append(b.posted, in.Text)
			b.mu.Unlock()
			a := map[string]any{"tool": "post", "dry_run": false, "log": []string{"posted on " + in.To}, "result": "dddd", "stopped": nil}
			if strings.Contains(in.Text, "refuse") {
				a = map[string]any{"tool": "post", "dry_run": false, "log": []string{}, "result": nil, "stopped": "post: the text is refused"}
			}
			j, _ := json.Marshal(a)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(j)}}, IsError: a["stopped"] != nil}, nil
		})
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	wg.Go(func() {
		defer stop()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			ss, err := s.Connect(ctx, &mcp.IOTransport{Reader: conn, Writer: conn}, nil)
			if err != nil {
				conn.Close()
				continue
			}
			wg.Go(func() {
				done := context.AfterFunc(ctx, func() { ss.Close() })
				defer done()
				ss.Wait()
			})
		}
	})
}

// result is what one run of the runner printed and how it ended.
type result struct {
	stdout, stderr string
	code           int
}

// run runs the built runner for one turn on post with text, as a session
// does.
func (b *bench) run(post, text string, args ...string) result {
	b.t.Helper()
	in := runner.Input{Post: post, From: "alice", Text: text, Record: rec, Objective: "Record " + rec + ": say hello",
		Login: "agent1", Session: rec}
	cmd := exec.Command(runnerExe, append([]string{"--model", "m1"}, args...)...)
	cmd.Stdin = bytes.NewReader(in.Line())
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "OCX_POST=" + post, "OCX_RECORD=" + rec, "OCX_FROM=alice",
		"OCX_SESSION_DIR=" + b.sessionDir, "OCX_MCP_SOCKET=" + filepath.Join(b.mcpDir, "mcp.sock"),
		runner.EnvTurnUsage + "=" + b.usageFile()}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		b.t.Fatal(err)
	}
	r := result{stdout: stdout.String(), stderr: stderr.String(), code: code}
	b.noKey(r)
	return r
}

// noKey fails when the key is anywhere the runner could show it: its
// output, its log, its conversation.
func (b *bench) noKey(r result) {
	b.t.Helper()
	if strings.Contains(r.stdout, testKey) || strings.Contains(r.stderr, testKey) {
		b.t.Fatalf("the key reached the runner's output:\n%s\n%s", r.stdout, r.stderr)
	}
	filepath.WalkDir(b.sessionDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if c, _ := os.ReadFile(p); bytes.Contains(c, []byte(testKey)) {
				b.t.Fatalf("the key is in %s", p)
			}
		}
		return nil
	})
}

func (b *bench) usageFile() string { return filepath.Join(b.sessionDir, "turn-usage.json") }

// reported is what the last turn reported it used, nil for nothing.
func (b *bench) reported() *messages.RunnerReport {
	b.t.Helper()
	c, err := os.ReadFile(b.usageFile())
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		b.t.Fatal(err)
	}
	os.Remove(b.usageFile())
	r, err := messages.DecodeRunnerReport(c)
	if err != nil {
		b.t.Fatalf("the report %s: %v", c, err)
	}
	return r
}

func (b *bench) requests() []seen {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]seen(nil), b.got...)
}

func (b *bench) postedTexts() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.posted...)
}

func (b *bench) conversation() map[string]any {
	b.t.Helper()
	c, err := os.ReadFile(filepath.Join(b.sessionDir, "conversations", "native", rec+".json"))
	if err != nil {
		b.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(c, &m); err != nil {
		b.t.Fatal(err)
	}
	return m
}

// Replies in each API's shape.

func openAIText(text string) string {
	return fmt.Sprintf(`{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, text)
}

func openAICall(id, name, args string) string {
	a, _ := json.Marshal(args)
	return fmt.Sprintf(`{"id":"c2","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":%q,"type":"function","function":{"name":%q,"arguments":%s}}]},"finish_reason":"tool_calls"}]}`, id, name, a)
}

func anthropicText(text string) string {
	return fmt.Sprintf(`{"id":"m1","type":"message","role":"assistant","model":"m1","content":[{"type":"text","text":%q}],"stop_reason":"end_turn"}`, text)
}

func anthropicCall(id, name, input string) string {
	return fmt.Sprintf(`{"id":"m2","type":"message","role":"assistant","model":"m1","content":[{"type":"text","text":"I will post."},{"type":"tool_use","id":%q,"name":%q,"input":%s}],"stop_reason":"tool_use"}`, id, name, input)
}

func text(api model.API, s string) string {
	if api == model.Anthropic {
		return anthropicText(s)
	}
	return openAIText(s)
}

func toolCall(api model.API, id, input string) string {
	if api == model.Anthropic {
		return anthropicCall(id, "post", input)
	}
	return openAICall(id, "post", input)
}

var apis = []model.API{model.OpenAI, model.Anthropic}

// withUsage adds to a reply the usage its API says: in, out and cached.
func withUsage(api model.API, reply string, in, out, cached int) string {
	u := fmt.Sprintf(`"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}`, in, out, in+out, cached)
	if api == model.Anthropic {
		u = fmt.Sprintf(`"usage":{"input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":%d}`, in-cached, cached, out)
	}
	return strings.TrimSuffix(reply, "}") + "," + u + "}"
}

// TestUsageReported: the runner sums what each of the turn's replies says
// it used, a tool call's and the answer's, and reports it for the session
// (D50); a reply that says nothing adds nothing, and a turn none of whose
// replies said anything reports nothing.
func TestUsageReported(t *testing.T) {
	for _, api := range apis {
		t.Run(string(api), func(t *testing.T) {
			b := newBench(t, api,
				exchange{body: withUsage(api, toolCall(api, "call_1", `{"to":"`+rec+`","text":"progress"}`), 120, 30, 100)},
				exchange{body: withUsage(api, text(api, "Posted."), 200, 12, 150)},
				exchange{body: text(api, "No usage.")})
			if r := b.run(post1, "post progress"); r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			want := messages.RunnerReport{Tokens: modelapi.Tokens{Input: 320, Output: 42, Cached: 250}}
			if got := b.reported(); got == nil || *got != want {
				t.Fatalf("reported %+v, want %+v", got, want)
			}
			if r := b.run(post2, "again"); r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if got := b.reported(); got != nil {
				t.Fatalf("a reply without usage reported %+v", got)
			}
		})
	}
}

func TestPlainAnswer(t *testing.T) {
	for _, api := range apis {
		t.Run(string(api), func(t *testing.T) {
			b := newBench(t, api, exchange{body: text(api, "Hello, alice.")})
			r := b.run(post1, "hi there")
			if r.code != 0 || r.stdout != "Hello, alice.\n" {
				t.Fatalf("exit %d, %q, stderr %s", r.code, r.stdout, r.stderr)
			}
			got := b.requests()
			if len(got) != 1 || got[0].path != api.Paths()[0] || got[0].body["model"] != "m1" {
				t.Fatalf("requests %+v", got)
			}
			h := got[0].header
			switch api {
			case model.OpenAI:
				if h.Get("Authorization") != "Bearer "+testKey || h.Get("X-Api-Key") != "" {
					t.Fatalf("headers %v", h)
				}
				if tools := got[0].body["tools"].([]any); tools[0].(map[string]any)["function"].(map[string]any)["name"] != "post" {
					t.Fatalf("tools %v", tools)
				}
			case model.Anthropic:
				if h.Get("X-Api-Key") != testKey || h.Get("Authorization") != "" || h.Get("Anthropic-Version") != "2023-06-01" {
					t.Fatalf("headers %v", h)
				}
				if got[0].body["max_tokens"] != 4096.0 || !strings.Contains(got[0].body["system"].(string), "agent1") {
					t.Fatalf("body %s", got[0].raw)
				}
				if tools := got[0].body["tools"].([]any); tools[0].(map[string]any)["input_schema"] == nil {
					t.Fatalf("tools %v", tools)
				}
			}
			// The first turn opens with the objective (E4), then the post.
			want := "Record " + rec + `: say hello\n\nalice wrote on record ` + rec + " (post " + post1 + `):\nhi there`
			if !strings.Contains(got[0].raw, want) {
				t.Fatalf("the first message is not %q:\n%s", want, got[0].raw)
			}
		})
	}
}

func TestToolCallThenAnswer(t *testing.T) {
	for _, api := range apis {
		t.Run(string(api), func(t *testing.T) {
			b := newBench(t, api,
				exchange{body: toolCall(api, "call_1", `{"to":"`+rec+`","text":"progress"}`)},
				exchange{body: text(api, "Posted.")})
			r := b.run(post1, "post progress")
			if r.code != 0 || r.stdout != "Posted.\n" {
				t.Fatalf("exit %d, %q, stderr %s", r.code, r.stdout, r.stderr)
			}
			if p := b.postedTexts(); len(p) != 1 || p[0] != "progress" {
				t.Fatalf("posted %v", p)
			}
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if !hasLine(lines, `tool call call_1 post: {"to":"`+rec+`","text":"progress"}`) ||
				!hasLine(lines, `tool answer call_1 post: {"dry_run":false,"log":["posted on `+rec+`"],"result":"dddd","stopped":null,"tool":"post"}`) {
				t.Fatalf("the log:\n%s", r.stderr)
			}
			got := b.requests()
			if len(got) != 2 {
				t.Fatalf("%d requests", len(got))
			}
			second := got[1].raw
			switch api {
			case model.OpenAI:
				if !strings.Contains(second, `"role":"tool","tool_call_id":"call_1"`) && !strings.Contains(second, `"tool_call_id":"call_1"`) {
					t.Fatalf("no tool message: %s", second)
				}
			case model.Anthropic:
				if !strings.Contains(second, `"type":"tool_result","tool_use_id":"call_1"`) {
					t.Fatalf("no tool_result: %s", second)
				}
			}
		})
	}
}

func hasLine(lines []string, want string) bool {
	for _, l := range lines {
		if strings.HasSuffix(l, want) {
			return true
		}
	}
	return false
}

// A tool's refusal goes back to the model, marked as an error; the turn
// goes on.
func TestToolRefusedGoesBackToTheModel(t *testing.T) {
	for _, api := range apis {
		t.Run(string(api), func(t *testing.T) {
			b := newBench(t, api,
				exchange{body: toolCall(api, "call_9", `{"to":"`+rec+`","text":"please refuse"}`)},
				exchange{body: text(api, "The post was refused.")})
			r := b.run(post1, "try")
			if r.code != 0 || r.stdout != "The post was refused.\n" || !strings.Contains(r.stderr, "tool answer call_9 post (refused):") {
				t.Fatalf("exit %d, %q, stderr %s", r.code, r.stdout, r.stderr)
			}
			second := b.requests()[1].raw
			if !strings.Contains(second, `post: the text is refused`) {
				t.Fatalf("the refusal did not reach the model: %s", second)
			}
			if api == model.Anthropic && !strings.Contains(second, `"is_error":true`) {
				t.Fatalf("not marked an error: %s", second)
			}
		})
	}
}

func TestMalformedReply(t *testing.T) {
	for _, c := range []struct {
		api  model.API
		body string
		want string
	}{
		{model.OpenAI, `{"choices":[]}`, `The runner failed: the model's reply is malformed: it has no "choices".`},
		{model.OpenAI, `not json`, `The runner failed: the model's reply is malformed: it is not a chat completion`},
		{model.OpenAI, `{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"x","type":"function","function":{"name":"post","arguments":"{oops"}}]}}]}`,
			`The runner failed: the model's reply is malformed: the arguments of its tool call 0 (post) are not JSON.`},
		{model.Anthropic, `{"type":"message","role":"assistant","content":[{"type":"tool_use","name":"post","input":{}}]}`,
			`The runner failed: the model's reply is malformed: its tool_use block 0 has no id or no name.`},
		{model.Anthropic, `{"type":"message","role":"user","content":[]}`, `its role is "user", not assistant`},
	} {
		b := newBench(t, c.api, exchange{body: c.body})
		r := b.run(post1, "hi")
		if r.code != 1 || !strings.Contains(r.stdout, c.want) || strings.Count(r.stdout, "\n") != 1 {
			t.Errorf("%s %s: exit %d, %q", c.api, c.body, r.code, r.stdout)
		}
	}
}

func TestSlowReplyPastTheTimeout(t *testing.T) {
	b := newBench(t, model.OpenAI, exchange{body: openAIText("late"), delay: 5 * time.Second})
	start := time.Now()
	r := b.run(post1, "hi", "--timeout", "300ms")
	if r.code != 1 || r.stdout != "The runner failed: the model did not answer within 300ms.\n" {
		t.Fatalf("exit %d, %q", r.code, r.stdout)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("took %s", d)
	}
}

func TestRateLimitHonoursRetryAfter(t *testing.T) {
	b := newBench(t, model.Anthropic,
		exchange{status: 429, header: map[string]string{"Retry-After": "1"}, body: `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`},
		exchange{body: anthropicText("After the wait.")})
	start := time.Now()
	r := b.run(post1, "hi")
	if r.code != 0 || r.stdout != "After the wait.\n" || !strings.Contains(r.stderr, "429 Too Many Requests; trying again in 1s") {
		t.Fatalf("exit %d, %q, %s", r.code, r.stdout, r.stderr)
	}
	if d := time.Since(start); d < time.Second {
		t.Fatalf("did not wait: %s", d)
	}
	// A wait past --max-wait is not waited for; nor are more 429s than
	// --retries.
	b = newBench(t, model.OpenAI, exchange{status: 429, header: map[string]string{"Retry-After": "3600"}})
	r = b.run(post1, "hi")
	if r.code != 1 || r.stdout != "The runner failed: the model's API asks to wait 1h0m0s (429 Retry-After), longer than this runner waits (1m0s).\n" {
		t.Fatalf("exit %d, %q", r.code, r.stdout)
	}
	b = newBench(t, model.OpenAI, exchange{status: 429, header: map[string]string{"Retry-After": "0"}},
		exchange{status: 429, header: map[string]string{"Retry-After": "0"}})
	r = b.run(post1, "hi", "--retries", "1")
	if r.code != 1 || r.stdout != "The runner failed: the model's API still refused with 429 Too Many Requests after 2 tries.\n" {
		t.Fatalf("exit %d, %q", r.code, r.stdout)
	}
}

func TestServerErrorRetriedOnce(t *testing.T) {
	b := newBench(t, model.OpenAI, exchange{status: 500, body: `{"error":{"message":"boom"}}`}, exchange{body: openAIText("fine now")})
	if r := b.run(post1, "hi"); r.code != 0 || r.stdout != "fine now\n" {
		t.Fatalf("exit %d, %q", r.code, r.stdout)
	}
	b = newBench(t, model.OpenAI, exchange{status: 500, body: `{"error":{"message":"boom"}}`}, exchange{status: 500, body: `{"error":{"message":"boom"}}`})
	r := b.run(post1, "hi")
	if r.code != 1 || r.stdout != "The runner failed: the model's API answered 500 Internal Server Error twice: boom.\n" {
		t.Fatalf("exit %d, %q", r.code, r.stdout)
	}
	if n := len(b.requests()); n != 2 {
		t.Fatalf("%d requests", n)
	}
}

// The second turn continues the first's conversation: the model sees the
// first turn's messages, tool calls included, and the post alone.
func TestSecondTurnContinues(t *testing.T) {
	for _, api := range apis {
		t.Run(string(api), func(t *testing.T) {
			b := newBench(t, api,
				exchange{body: toolCall(api, "call_1", `{"to":"`+rec+`","text":"noted"}`)},
				exchange{body: text(api, "First answer.")},
				exchange{body: text(api, "Second answer.")})
			if r := b.run(post1, "first post"); r.code != 0 {
				t.Fatalf("first: %d %q", r.code, r.stdout)
			}
			if r := b.run(post2, "second post"); r.code != 0 || r.stdout != "Second answer.\n" {
				t.Fatalf("second: %d %q", r.code, r.stdout)
			}
			third := b.requests()[2]
			msgs := third.body["messages"].([]any)
			if api == model.OpenAI {
				msgs = msgs[1:] // the system message
			}
			// user, assistant (tool call), tool result(s), assistant, user
			if len(msgs) != 5 {
				t.Fatalf("%d messages: %s", len(msgs), third.raw)
			}
			for _, want := range []string{"first post", "call_1", "First answer.", "second post"} {
				if !strings.Contains(third.raw, want) {
					t.Fatalf("the history lacks %q: %s", want, third.raw)
				}
			}
			last, _ := json.Marshal(msgs[4])
			if strings.Contains(string(last), "say hello") || !strings.Contains(string(last), "alice wrote on record "+rec+" (post "+post2+")") {
				t.Fatalf("the second turn's message: %s", last)
			}
			if c := b.conversation(); c["turns"] != 2.0 || c["runner"] != "native" {
				t.Fatalf("conversation %v", c)
			}
		})
	}
}

func TestToolLoopBound(t *testing.T) {
	var script []exchange
	for i := range 4 {
		script = append(script, exchange{body: openAICall(fmt.Sprintf("call_%d", i), "post", `{"to":"`+rec+`","text":"again"}`)})
	}
	b := newBench(t, model.OpenAI, script...)
	r := b.run(post1, "loop", "--tool-calls", "2")
	if r.code != 1 || r.stdout != "The runner failed: the model made more than 2 tool calls in one turn.\n" {
		t.Fatalf("exit %d, %q", r.code, r.stdout)
	}
	if p := b.postedTexts(); len(p) != 2 {
		t.Fatalf("posted %d times", len(p))
	}
	// A failed turn leaves the conversation as it was: none yet.
	if _, err := os.Stat(filepath.Join(b.sessionDir, "conversations", "native", rec+".json")); !os.IsNotExist(err) {
		t.Fatalf("a conversation was saved: %v", err)
	}
}

func TestNoModel(t *testing.T) {
	b := newBench(t, model.OpenAI)
	os.Remove(filepath.Join(b.mcpDir, "model.sock"))
	r := b.run(post1, "hi")
	if r.code != 1 || r.stdout != "The runner failed: this node serves no model (no AGENTS/model.json).\n" {
		t.Fatalf("exit %d, %q", r.code, r.stdout)
	}
}

func TestBadInputAndFlags(t *testing.T) {
	cmd := exec.Command(runnerExe, "--model", "m1")
	cmd.Stdin = strings.NewReader(`{"post":"p","text":"t","record":"r","objective":"o","login":"l","session":"s","extra":"x"}` + "\n")
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || string(out) != "The runner failed: the turn's input has the field \"extra\", which this runner does not know.\n" {
		t.Fatalf("%v %q", err, out)
	}
	cmd = exec.Command(runnerExe)
	cmd.Stdin = strings.NewReader("")
	out, err = cmd.Output()
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || string(out) != "The runner failed: --model MODEL is missing.\n" {
		t.Fatalf("%v %q", err, out)
	}
}
