package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// MCPImplementation names the node's MCP server to its clients.
var MCPImplementation = &mcp.Implementation{Name: "ocx", Title: "OCX protocol v1 tools", Version: "1"}

// MCPServer offers the registry's tools over MCP (D38), each registered
// with its own JSON Schema as given (the raw AddTool: the SDK validates
// nothing, the registry's strict reader does, so a refusal reads the same
// from every front end). Each call runs as caller() on the named project
// ("" for the node's one project); the tool result's one text content is
// the registry's Answer as JSON, the same value as structured content, and
// IsError is set when the answer is stopped.
func (n *Node) MCPServer(project string, caller func() (Caller, error)) *mcp.Server {
	opts := &mcp.ServerOptions{}
	if n.Log != nil {
		opts.Logger = n.Log
	}
	s := mcp.NewServer(MCPImplementation, opts)
	for _, t := range Tools() {
		tool := &mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema,
			Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(t.Name == messages.ToolStop), OpenWorldHint: ptr(false)}}
		name := t.Name
		s.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return MCPResult(n.mcpCall(ctx, project, caller, name, req.Params.Arguments)), nil
		})
	}
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: MCPArtifactTemplate, Name: "artifact",
		Description: "One artifact of the project, its bytes as the node's repository holds them, read as this connection's agent (D39).",
		MIMEType:    "application/octet-stream"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return n.mcpArtifact(ctx, project, caller, req.Params.URI)
		})
	return s
}

// MCPArtifactTemplate is the URI of an artifact a session reads over its
// socket (D39): a full hash after the prefix.
const (
	MCPArtifactTemplate = "ocx:artifact/{hash}"
	MCPArtifactPrefix   = "ocx:artifact/"
)

// mcpArtifact reads one artifact for the connection's agent: what a sync
// fetch with its password would give it (D39). The caller must still hold
// read (o); a private artifact (a post awaiting moderation) is refused, as
// sync sends it to no clone.
func (n *Node) mcpArtifact(ctx context.Context, project string, caller func() (Caller, error), uri string) (*mcp.ReadResourceResult, error) {
	hash, ok := strings.CutPrefix(uri, MCPArtifactPrefix)
	if !ok || !fossilio.IsHash(hash) {
		return nil, fmt.Errorf("resource %q: not %sHASH with a full hash", uri, MCPArtifactPrefix)
	}
	c, err := caller()
	if err != nil {
		return nil, fmt.Errorf("the caller of this MCP connection: %w", err)
	}
	p, err := n.defaultProject(project)
	if err != nil {
		return nil, err
	}
	r, err := n.openRepo(p)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	caps, err := r.EffectiveCaps(ctx, c.Login)
	if err != nil {
		return nil, err
	}
	if !strings.ContainsRune(caps, 'o') {
		return nil, fmt.Errorf("read %s: %q may not read %s (no capability o)", hash, c.Login, p.Name)
	}
	info, err := r.Info(ctx, hash)
	if errors.Is(err, fossilio.ErrNotFound) {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, err
	}
	if info.Pending {
		return nil, fmt.Errorf("read %s: it is private (awaiting moderation), and sync sends it to no clone", hash)
	}
	data, err := r.Content(ctx, info.Hash)
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/octet-stream", Blob: data}}}, nil
}

func ptr[T any](v T) *T { return &v }

// mcpCall runs one tool call that came over MCP. A call without
// arguments is the empty object: MCP clients leave out empty arguments.
func (n *Node) mcpCall(ctx context.Context, project string, caller func() (Caller, error), name string, input json.RawMessage) *Answer {
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	c, err := caller()
	if err != nil {
		return newAnswer(name, messages.ToolDryRun(input)).Stop(fmt.Errorf("the caller of this MCP connection: %w", err))
	}
	return n.CallIn(ctx, project, c, name, input)
}

// MCPResult is an Answer as an MCP tool result: its JSON as the one text
// content and as structured content, IsError when it stopped.
func MCPResult(a *Answer) *mcp.CallToolResult {
	b, err := json.Marshal(a)
	if err != nil { // an Answer holds strings only
		panic(err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}},
		StructuredContent: json.RawMessage(b), IsError: !a.OK()}
}

// AnswerOfMCP reads the Answer back from an MCP tool result: its one text
// content, which must be exactly one Answer object.
func AnswerOfMCP(res *mcp.CallToolResult) (*Answer, error) {
	if res == nil || len(res.Content) != 1 {
		return nil, errors.New("mcp: the tool result holds no single content")
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		return nil, fmt.Errorf("mcp: the tool result's content is a %T, not text", res.Content[0])
	}
	return DecodeAnswer([]byte(tc.Text))
}

// DecodeAnswer reads one Answer in the tools' shape, refusing a field it
// does not know, a missing tool name, a null log, and trailing data.
func DecodeAnswer(b []byte) (*Answer, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("answer: %w", err)
	}
	for _, k := range []string{"tool", "dry_run", "log", "result", "stopped"} {
		if _, ok := raw[k]; !ok {
			return nil, fmt.Errorf("answer: no %q", k)
		}
	}
	if len(raw) != 5 {
		for k := range raw {
			switch k {
			case "tool", "dry_run", "log", "result", "stopped":
			default:
				return nil, fmt.Errorf("answer: unknown field %q", k)
			}
		}
	}
	var a Answer
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("answer: %w", err)
	}
	if a.Tool == "" {
		return nil, errors.New(`answer: "tool" is empty`)
	}
	if a.Log == nil {
		return nil, errors.New(`answer: "log" is null`)
	}
	return &a, nil
}

// ServeMCP serves the MCP server s on every connection ln accepts until
// ctx ends or ln fails; it then closes ln and every connection, waits for
// them, and returns ctx's error or the accept error. accept, when set,
// may refuse a connection before it is served (its error is logged).
func ServeMCP(ctx context.Context, s *mcp.Server, ln net.Listener, accept func(net.Conn) error, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var err error
	for {
		conn, aerr := ln.Accept()
		if aerr != nil {
			if ctx.Err() == nil {
				err = fmt.Errorf("mcp: accept: %w", aerr)
			} else {
				err = ctx.Err()
			}
			break
		}
		if accept != nil {
			if rerr := accept(conn); rerr != nil {
				log.Warn("mcp connection refused", slog.String("error", rerr.Error()))
				conn.Close()
				continue
			}
		}
		ss, cerr := s.Connect(ctx, &mcp.IOTransport{Reader: conn, Writer: conn}, nil)
		if cerr != nil {
			log.Warn("mcp connect", slog.String("error", cerr.Error()))
			conn.Close()
			continue
		}
		wg.Go(func() {
			done := context.AfterFunc(ctx, func() { ss.Close() })
			defer done()
			ss.Wait()
		})
	}
	cancel()
	ln.Close()
	wg.Wait()
	return err
}

// DialMCP connects to a session's MCP socket, waiting up to wait for a
// server that is not there yet (a session's first moments).
func DialMCP(ctx context.Context, path string, wait time.Duration) (net.Conn, error) {
	conn, err := unixhost.DialSocket(ctx, path, wait)
	if err != nil {
		return nil, fmt.Errorf("mcp: %w", err)
	}
	return conn, nil
}

// ConnectMCP connects the SDK's client to a session's MCP socket.
func ConnectMCP(ctx context.Context, path string, wait time.Duration) (*mcp.ClientSession, error) {
	conn, err := DialMCP(ctx, path, wait)
	if err != nil {
		return nil, err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "ocx-mcp", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: conn, Writer: conn}, nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("mcp: initialize over %s: %w", path, err)
	}
	return cs, nil
}
