package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/ocx-go/ocx/host/model"
	"github.com/ocx-go/ocx/host/runner"
)

// call is one tool call the model asks for.
type call struct {
	ID, Name string
	Input    json.RawMessage
}

// reply is the model's one assistant message, as it goes back into the
// history, with its text and its tool calls.
type reply struct {
	Message json.RawMessage
	Text    string
	Calls   []call
}

// flavour is what differs between the two APIs: the request's body, the
// reading of a reply, and how a post and the tools' answers are words of
// the conversation. Messages are kept in the API's own wire shape.
type flavour interface {
	body(p params, msgs []json.RawMessage, tools []runner.Tool) ([]byte, error)
	parse(b []byte) (reply, error)
	user(text string) json.RawMessage
	results(calls []call, answers []runner.Result) []json.RawMessage
	header(h http.Header)
}

// params are the request's settings from the flags and the turn.
type params struct {
	Model     string
	System    string
	MaxTokens int
}

func flavourOf(api model.API) (flavour, error) {
	switch api {
	case model.OpenAI:
		return openAI{}, nil
	case model.Anthropic:
		return anthropic{}, nil
	}
	return nil, fmt.Errorf("the node's model proxy speaks %q, which this runner does not (openai, anthropic)", api)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil { // our own values: strings, raw JSON already valid
		panic(err)
	}
	return b
}

// malformed is a reply this runner cannot read.
func malformed(format string, args ...any) error {
	return runner.Failf("the model's reply is malformed: "+format, args...)
}

// openAI is an OpenAI-compatible chat-completions API.
type openAI struct{}

func (openAI) header(h http.Header) {}

func (openAI) body(p params, msgs []json.RawMessage, tools []runner.Tool) ([]byte, error) {
	all := append([]json.RawMessage{mustJSON(map[string]string{"role": "system", "content": p.System})}, msgs...)
	type fn struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	type tool struct {
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	req := struct {
		Model    string            `json:"model"`
		Messages []json.RawMessage `json:"messages"`
		Tools    []tool            `json:"tools,omitempty"`
	}{Model: p.Model, Messages: all}
	for _, t := range tools {
		req.Tools = append(req.Tools, tool{Type: "function", Function: fn{Name: t.Name, Description: t.Description, Parameters: t.InputSchema}})
	}
	return json.Marshal(req)
}

type openAIToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

func (openAI) parse(b []byte) (reply, error) {
	var r struct {
		Choices []struct {
			Message *struct {
				Role      string           `json:"role"`
				Content   *string          `json:"content"`
				ToolCalls []openAIToolCall `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return reply{}, malformed("it is not a chat completion (%v)", err)
	}
	if len(r.Choices) == 0 {
		return reply{}, malformed(`it has no "choices"`)
	}
	m := r.Choices[0].Message
	if m == nil {
		return reply{}, malformed(`its first choice has no "message"`)
	}
	if m.Role != "" && m.Role != "assistant" {
		return reply{}, malformed("its message's role is %q, not assistant", m.Role)
	}
	out := reply{}
	if m.Content != nil {
		out.Text = *m.Content
	}
	type storedFn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type storedCall struct {
		ID       string   `json:"id"`
		Type     string   `json:"type"`
		Function storedFn `json:"function"`
	}
	var calls []storedCall
	for i, tc := range m.ToolCalls {
		if tc.Function.Name == "" {
			return reply{}, malformed("its tool call %d names no function", i)
		}
		// The arguments are a string of JSON; some compatible servers send
		// the object itself.
		args := tc.Function.Arguments
		var s string
		if json.Unmarshal(args, &s) == nil {
			args = json.RawMessage(s)
		}
		if strings.TrimSpace(string(args)) == "" {
			args = json.RawMessage("{}")
		}
		if !json.Valid(args) {
			return reply{}, malformed("the arguments of its tool call %d (%s) are not JSON", i, tc.Function.Name)
		}
		id := tc.ID
		if id == "" { // some compatible servers give none
			id = fmt.Sprintf("call_%d", i)
		}
		out.Calls = append(out.Calls, call{ID: id, Name: tc.Function.Name, Input: args})
		calls = append(calls, storedCall{ID: id, Type: "function", Function: storedFn{Name: tc.Function.Name, Arguments: string(args)}})
	}
	msg := struct {
		Role      string       `json:"role"`
		Content   *string      `json:"content"`
		ToolCalls []storedCall `json:"tool_calls,omitempty"`
	}{Role: "assistant", Content: m.Content, ToolCalls: calls}
	if msg.Content == nil && len(calls) == 0 {
		return reply{}, malformed("its message has neither content nor tool calls")
	}
	out.Message = mustJSON(msg)
	return out, nil
}

func (openAI) user(text string) json.RawMessage {
	return mustJSON(map[string]string{"role": "user", "content": text})
}

func (openAI) results(calls []call, answers []runner.Result) []json.RawMessage {
	out := make([]json.RawMessage, len(calls))
	for i, c := range calls {
		out[i] = mustJSON(map[string]string{"role": "tool", "tool_call_id": c.ID, "content": answers[i].Text})
	}
	return out
}

// anthropic is Anthropic's Messages API.
type anthropic struct{}

// anthropicVersion is the API version the runner speaks.
const anthropicVersion = "2023-06-01"

func (anthropic) header(h http.Header) { h.Set("Anthropic-Version", anthropicVersion) }

func (anthropic) body(p params, msgs []json.RawMessage, tools []runner.Tool) ([]byte, error) {
	type tool struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	req := struct {
		Model     string            `json:"model"`
		MaxTokens int               `json:"max_tokens"`
		System    string            `json:"system,omitempty"`
		Messages  []json.RawMessage `json:"messages"`
		Tools     []tool            `json:"tools,omitempty"`
	}{Model: p.Model, MaxTokens: p.MaxTokens, System: p.System, Messages: msgs}
	for _, t := range tools {
		req.Tools = append(req.Tools, tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	return json.Marshal(req)
}

func (anthropic) parse(b []byte) (reply, error) {
	var r struct {
		Type    string            `json:"type"`
		Role    string            `json:"role"`
		Content []json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return reply{}, malformed("it is not a message (%v)", err)
	}
	if r.Role != "assistant" {
		return reply{}, malformed("its role is %q, not assistant", r.Role)
	}
	if r.Content == nil {
		return reply{}, malformed(`it has no "content"`)
	}
	out := reply{}
	var texts []string
	for i, raw := range r.Content {
		var blk struct {
			Type  string          `json:"type"`
			Text  *string         `json:"text"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}
		if err := json.Unmarshal(raw, &blk); err != nil {
			return reply{}, malformed("its content block %d is not an object (%v)", i, err)
		}
		switch blk.Type {
		case "text":
			if blk.Text == nil {
				return reply{}, malformed("its text block %d has no text", i)
			}
			texts = append(texts, *blk.Text)
		case "tool_use":
			if blk.ID == "" || blk.Name == "" {
				return reply{}, malformed("its tool_use block %d has no id or no name", i)
			}
			if len(blk.Input) == 0 || blk.Input[0] != '{' {
				return reply{}, malformed("the input of its tool_use block %d (%s) is not an object", i, blk.Name)
			}
			out.Calls = append(out.Calls, call{ID: blk.ID, Name: blk.Name, Input: blk.Input})
		case "":
			return reply{}, malformed("its content block %d has no type", i)
		}
		// Other blocks (thinking) go back into the history as they came.
	}
	out.Text = strings.Join(texts, "\n\n")
	out.Message = mustJSON(struct {
		Role    string            `json:"role"`
		Content []json.RawMessage `json:"content"`
	}{"assistant", r.Content})
	return out, nil
}

func (anthropic) user(text string) json.RawMessage {
	return mustJSON(map[string]string{"role": "user", "content": text})
}

func (anthropic) results(calls []call, answers []runner.Result) []json.RawMessage {
	type block struct {
		Type      string `json:"type"`
		ToolUseID string `json:"tool_use_id"`
		Content   string `json:"content"`
		IsError   bool   `json:"is_error,omitempty"`
	}
	blocks := make([]block, len(calls))
	for i, c := range calls {
		blocks[i] = block{Type: "tool_result", ToolUseID: c.ID, Content: answers[i].Text, IsError: answers[i].IsError}
	}
	return []json.RawMessage{mustJSON(struct {
		Role    string  `json:"role"`
		Content []block `json:"content"`
	}{"user", blocks})}
}

// errorMessage finds an API's error message in a reply body: the proxy's
// {"error": "..."}, OpenAI's and Anthropic's {"error": {"message": ...}}.
func errorMessage(b []byte) string {
	var r struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &r) != nil || len(r.Error) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(r.Error, &s) == nil {
		return s
	}
	var o struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(r.Error, &o) == nil {
		return o.Message
	}
	return ""
}

var errNoModel = errors.New("this node serves no model (no AGENTS/model.json)")
