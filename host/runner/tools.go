package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/ocx-go/ocx/host/unixhost"
)

// Tool is one of the node's tools as its MCP server lists it.
type Tool struct {
	Name        string
	Description string
	// InputSchema is the tool's JSON Schema for its input, as listed.
	InputSchema json.RawMessage
}

// Result is a tool call's answer: the tool's text content (the node's
// answer as JSON, docs/tools.md) and whether the tool refused or failed.
type Result struct {
	Text    string
	IsError bool
}

// Tools is a client of the node's MCP server on a session's socket.
type Tools struct {
	cs *mcp.ClientSession
}

// clientImplementation names a runner to the node's MCP server.
var clientImplementation = &mcp.Implementation{Name: "ocx-runner", Version: "1"}

// ConnectTools connects to the MCP socket at path, waiting up to wait for
// a server not there yet (the server starts just after the session).
func ConnectTools(ctx context.Context, path string, wait time.Duration) (*Tools, error) {
	if path == "" {
		return nil, fmt.Errorf("the node serves no tools here ($%s is not set)", envMCPSocket)
	}
	conn, err := unixhost.DialSocket(ctx, path, wait)
	if err != nil {
		return nil, fmt.Errorf("the node's tools: %w", err)
	}
	client := mcp.NewClient(clientImplementation, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: conn, Writer: conn}, nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("the node's tools: initialize MCP over %s: %w", path, err)
	}
	return &Tools{cs: cs}, nil
}

// Close ends the connection.
func (t *Tools) Close() error { return t.cs.Close() }

// List lists the node's tools, every page of them.
func (t *Tools) List(ctx context.Context) ([]Tool, error) {
	var out []Tool
	for tool, err := range t.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list the node's tools: %w", err)
		}
		schema, err := json.Marshal(tool.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("list the node's tools: the schema of %s: %w", tool.Name, err)
		}
		if string(schema) == "null" {
			schema = []byte(`{"type":"object"}`)
		}
		out = append(out, Tool{Name: tool.Name, Description: tool.Description, InputSchema: schema})
	}
	return out, nil
}

// Call calls the tool name with its JSON input (an object; empty is {}).
// A tool that refuses is a Result with IsError, not an error: the model
// reads the refusal and may try again. The error is for a call that did
// not reach the tool (a broken connection, an unknown tool).
func (t *Tools) Call(ctx context.Context, name string, input json.RawMessage) (Result, error) {
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	res, err := t.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: input})
	if err != nil {
		return Result{}, fmt.Errorf("call the tool %s: %w", name, err)
	}
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	if len(texts) == 0 && res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err == nil {
			texts = append(texts, string(b))
		}
	}
	if len(texts) == 0 {
		return Result{}, errors.New("call the tool " + name + ": its result holds no text")
	}
	return Result{Text: strings.Join(texts, "\n"), IsError: res.IsError}, nil
}
