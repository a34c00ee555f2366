package itest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// modelStandIn is a model server on 127.0.0.1 that speaks what the real
// agent CLIs speak: Anthropic's Messages (Claude Code), OpenAI's Responses
// (Codex) and chat completions (the native runner), each streamed as
// server-sent events when asked, as the APIs stream them. What it answers
// is the test's: a reply function sees each request, read into one shape
// whatever its API, and says what to answer: text, a tool call, a status,
// a stream that breaks. Every request is kept for the test to read.
type modelStandIn struct {
	t   testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	calls    int // tool calls made, for their ids: a CLI refuses an id twice
	reply    func(*modelRequest) modelReply
	requests []*modelRequest
	other    []string // requests to paths it does not serve
	// models, when set, are the only models it serves: a request naming
	// another is answered 404 in its API's error shape, as the real
	// servers answer a model they do not have (offer).
	models []string
}

// modelRequest is one request to the stand-in, whatever its API.
type modelRequest struct {
	// At is when the stand-in read it.
	At     time.Time
	API    string // "anthropic", "responses" or "chat"
	Path   string
	Query  string // the URL's query, as it reached the stand-in
	Model  string
	Stream bool
	// MaxTokens is the bound on its output the request names
	// (max_tokens, max_completion_tokens, max_output_tokens); 0: none.
	MaxTokens int
	// Header is what the request carried: the key a client sent, if any.
	Header http.Header
	// Body is the request as sent.
	Body []byte
	// Tools are the tools offered, by name (a namespace's as NS.NAME).
	Tools []string
	// User is the text of the last user message. Results are the tools'
	// answers the request carries, by the id of the call they answer:
	// the whole conversation's, since a CLI may keep them in any order.
	User    string
	Results map[string]string
}

// modelReply is what the stand-in answers a request.
type modelReply struct {
	Text string
	// Tool, when set, is a call of the tool of that name with Args (JSON),
	// whose id is ID (the stand-in makes one when it is "").
	Tool string
	Args string
	ID   string
	// Status, when not 0 or 200, is answered with an error body instead.
	Status int
	// Broken ends the stream midway, malformed.
	Broken bool
	// Input and Output are the usage the reply reports.
	Input, Output int
}

// startModelStandIn starts the stand-in; reply nil answers "stand-in:
// USER".
func startModelStandIn(t testing.TB, reply func(*modelRequest) modelReply) *modelStandIn {
	m := &modelStandIn{t: t, reply: reply}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

// offer makes the stand-in serve only models from now on: a request
// naming another is answered 404 as its API answers one (Anthropic's
// not_found_error, OpenAI's model_not_found).
func (m *modelStandIn) offer(models ...string) {
	m.mu.Lock()
	m.models = models
	m.mu.Unlock()
}

// URL is the stand-in's base URL, without a path.
func (m *modelStandIn) URL() string { return m.srv.URL }

// setReply changes what the stand-in answers from now on.
func (m *modelStandIn) setReply(reply func(*modelRequest) modelReply) {
	m.mu.Lock()
	m.reply = reply
	m.mu.Unlock()
}

// seen returns the requests so far, in order.
func (m *modelStandIn) seen() []*modelRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*modelRequest(nil), m.requests...)
}

// others returns the requests to paths the stand-in does not serve.
func (m *modelStandIn) others() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.other...)
}

func (m *modelStandIn) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	api := map[string]string{"/v1/messages": "anthropic", "/v1/responses": "responses", "/v1/chat/completions": "chat"}[r.URL.Path]
	if r.Method != http.MethodPost || api == "" {
		m.mu.Lock()
		m.other = append(m.other, r.Method+" "+r.URL.String())
		m.mu.Unlock()
		http.Error(w, `{"error":{"type":"not_found_error","message":"the stand-in serves no `+r.URL.Path+`"}}`, http.StatusNotFound)
		return
	}
	req := readModelRequest(api, r, body)
	m.mu.Lock()
	m.requests = append(m.requests, req)
	reply := m.reply
	unknown := m.models != nil && !slices.Contains(m.models, req.Model)
	m.mu.Unlock()
	if unknown {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		if api == "anthropic" {
			fmt.Fprintf(w, `{"type":"error","error":{"type":"not_found_error","message":"model: %s"}}`, req.Model)
		} else {
			fmt.Fprintf(w, `{"error":{"message":"The model %s does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`, strconv.Quote(req.Model))
		}
		return
	}
	rep := modelReply{Text: "stand-in: " + req.User}
	if reply != nil {
		rep = reply(req)
	}
	if rep.Input == 0 {
		rep.Input = len(body) / 4
	}
	if rep.Output == 0 {
		rep.Output = len(rep.Text)/4 + 1
	}
	if rep.Broken && !req.Stream {
		// Not streamed either, the reply breaks off: no JSON a client reads.
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"msg_standin","type":"mess`)
		return
	}
	if rep.Status != 0 && rep.Status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		if rep.Status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "0")
		}
		w.WriteHeader(rep.Status)
		fmt.Fprintf(w, `{"type":"error","error":{"type":"api_error","message":"the stand-in answers %d"}}`, rep.Status)
		return
	}
	if rep.Tool != "" && rep.ID == "" {
		m.mu.Lock()
		m.calls++
		rep.ID = "standin_" + strconv.Itoa(m.calls)
		m.mu.Unlock()
	}
	switch api {
	case "anthropic":
		m.anthropic(w, req, rep)
	case "responses":
		m.responses(w, req, rep)
	default:
		m.chat(w, req, rep)
	}
}

// readModelRequest reads a request of api into one shape.
func readModelRequest(api string, r *http.Request, body []byte) *modelRequest {
	req := &modelRequest{At: time.Now(), API: api, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body, Results: map[string]string{}}
	var v struct {
		Model    string            `json:"model"`
		Stream   bool              `json:"stream"`
		Max      int               `json:"max_tokens"`
		MaxComp  int               `json:"max_completion_tokens"`
		MaxOut   int               `json:"max_output_tokens"`
		Messages []json.RawMessage `json:"messages"`
		Input    json.RawMessage   `json:"input"`
		Tools    []struct {
			Name     string `json:"name"`
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"tools"`
	}
	json.Unmarshal(body, &v)
	req.Model, req.Stream, req.MaxTokens = v.Model, v.Stream, max(v.Max, v.MaxComp, v.MaxOut)
	for _, tl := range v.Tools {
		switch {
		case tl.Function.Name != "":
			req.Tools = append(req.Tools, tl.Function.Name)
		case len(tl.Tools) > 0:
			for _, in := range tl.Tools {
				req.Tools = append(req.Tools, tl.Name+"."+in.Name)
			}
		default:
			req.Tools = append(req.Tools, tl.Name)
		}
	}
	// Messages (anthropic, chat) or input items (responses): the last
	// user text, and the tools' results carried back.
	items := v.Messages
	if api == "responses" {
		var in []json.RawMessage
		if json.Unmarshal(v.Input, &in) != nil {
			var s string
			if json.Unmarshal(v.Input, &s) == nil {
				req.User = s
			}
		}
		items = in
	}
	for _, raw := range items {
		var it struct {
			Type       string          `json:"type"`
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			Output     json.RawMessage `json:"output"`
			CallID     string          `json:"call_id"`
			ToolCallID string          `json:"tool_call_id"`
		}
		if json.Unmarshal(raw, &it) != nil {
			continue
		}
		if it.Type == "function_call_output" {
			req.Results[it.CallID] = textOf(it.Output)
			continue
		}
		if it.Role == "tool" {
			req.Results[it.ToolCallID] = textOf(it.Content)
			continue
		}
		if it.Role != "user" {
			continue
		}
		var blocks []struct {
			Type      string          `json:"type"`
			Text      string          `json:"text"`
			Content   json.RawMessage `json:"content"`
			ToolUseID string          `json:"tool_use_id"`
		}
		if json.Unmarshal(it.Content, &blocks) != nil {
			if s := textOf(it.Content); s != "" {
				req.User = s
			}
			continue
		}
		text := ""
		for _, b := range blocks {
			switch b.Type {
			case "tool_result":
				req.Results[strings.TrimPrefix(b.ToolUseID, "toolu_")] = textOf(b.Content)
			case "text", "input_text":
				// Claude Code puts its <system-reminder>s first and the
				// prompt last.
				if !strings.HasPrefix(strings.TrimSpace(b.Text), "<system-reminder>") {
					text = b.Text
				}
			}
		}
		if text != "" {
			req.User = text
		}
	}
	return req
}

// textOf reads a content that is a string or a list of text blocks.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &blocks)
	var b strings.Builder
	for _, x := range blocks {
		b.WriteString(x.Text)
	}
	return b.String()
}

// sse writes one server-sent event and flushes it.
func sse(w http.ResponseWriter, event string, data any) {
	b, _ := json.Marshal(data)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func (m *modelStandIn) anthropic(w http.ResponseWriter, req *modelRequest, rep modelReply) {
	block := map[string]any{"type": "text", "text": rep.Text}
	stop := "end_turn"
	if rep.Tool != "" {
		var in any
		json.Unmarshal([]byte(rep.Args), &in)
		block = map[string]any{"type": "tool_use", "id": "toolu_" + rep.ID, "name": rep.Tool, "input": in}
		stop = "tool_use"
	}
	msg := map[string]any{"id": "msg_standin", "type": "message", "role": "assistant", "model": req.Model,
		"stop_sequence": nil}
	if !req.Stream {
		msg["content"], msg["stop_reason"] = []any{block}, stop
		msg["usage"] = map[string]any{"input_tokens": rep.Input, "output_tokens": rep.Output}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(msg)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	msg["content"], msg["stop_reason"] = []any{}, nil
	msg["usage"] = map[string]any{"input_tokens": rep.Input, "output_tokens": 1}
	sse(w, "message_start", map[string]any{"type": "message_start", "message": msg})
	if rep.Broken {
		fmt.Fprint(w, "event: content_block_start\ndata: {\"type\":\"content_block_sta")
		return
	}
	if rep.Tool != "" {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": "toolu_" + rep.ID, "name": rep.Tool, "input": map[string]any{}}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": rep.Args}})
	} else {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": rep.Text}})
	}
	sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": rep.Output}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

func (m *modelStandIn) responses(w http.ResponseWriter, req *modelRequest, rep modelReply) {
	item := map[string]any{"type": "message", "id": "msg_standin", "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": rep.Text, "annotations": []any{}}}}
	if rep.Tool != "" {
		name, ns := rep.Tool, ""
		if i := strings.LastIndex(rep.Tool, "."); i > 0 {
			ns, name = rep.Tool[:i], rep.Tool[i+1:]
		}
		item = map[string]any{"type": "function_call", "id": "fc_" + rep.ID, "call_id": rep.ID, "name": name, "arguments": rep.Args, "status": "completed"}
		if ns != "" {
			item["namespace"] = ns
		}
	}
	usage := map[string]any{"input_tokens": rep.Input, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": rep.Output, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": rep.Input + rep.Output}
	resp := map[string]any{"id": "resp_standin", "object": "response", "created_at": 1, "status": "completed", "model": req.Model,
		"output": []any{item}, "usage": usage}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(resp)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	sse(w, "response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": "resp_standin", "object": "response", "status": "in_progress", "model": req.Model, "output": []any{}}})
	if rep.Broken {
		fmt.Fprint(w, "event: response.output_item.added\ndata: {\"type\":\"response.outp")
		return
	}
	added := map[string]any{}
	for k, v := range item {
		added[k] = v
	}
	added["status"] = "in_progress"
	if rep.Tool == "" {
		added["content"] = []any{}
	}
	sse(w, "response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": added})
	if rep.Tool == "" {
		sse(w, "response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": "msg_standin", "output_index": 0, "content_index": 0, "delta": rep.Text})
	}
	sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	sse(w, "response.completed", map[string]any{"type": "response.completed", "response": resp})
}

func (m *modelStandIn) chat(w http.ResponseWriter, req *modelRequest, rep modelReply) {
	msg := map[string]any{"role": "assistant", "content": rep.Text}
	finish := "stop"
	if rep.Tool != "" {
		msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": rep.ID, "type": "function",
			"function": map[string]any{"name": rep.Tool, "arguments": rep.Args}}}}
		finish = "tool_calls"
	}
	usage := map[string]any{"prompt_tokens": rep.Input, "completion_tokens": rep.Output, "total_tokens": rep.Input + rep.Output}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-standin", "object": "chat.completion", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	if rep.Broken {
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":")
		return
	}
	sse(w, "", map[string]any{"id": "chatcmpl-standin", "object": "chat.completion.chunk", "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "delta": msg, "finish_reason": nil}}})
	sse(w, "", map[string]any{"id": "chatcmpl-standin", "object": "chat.completion.chunk", "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}, "usage": usage})
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// holds says whether any request so far holds s in its body: a later
// turn's request carrying an earlier turn's words.
func (m *modelStandIn) holds(s string) bool {
	for _, r := range m.seen() {
		if bytes.Contains(r.Body, []byte(s)) {
			return true
		}
	}
	return false
}
