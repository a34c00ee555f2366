package mcp

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

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/tools"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host/relay"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages/toolio"
)

// Implementation names the node's MCP server to its clients.
var Implementation = &sdk.Implementation{Name: "ocx", Title: "OCX protocol v1 tools", Version: "1"}

// NewServer offers the node's tools over MCP (D38), each registered
// with its own JSON Schema as given (the raw AddTool: the SDK validates
// nothing, the registry's strict reader does, so a refusal reads the same
// from every front end). Each call runs as caller() on the named project
// ("" for the node's one project); the tool result's one text content is
// the registry's Answer as JSON, the same value as structured content, and
// IsError is set when the answer is stopped.
func NewServer(n *node.Node, project string, caller func() (node.Caller, error)) *sdk.Server {
	opts := &sdk.ServerOptions{}
	if n.Log != nil {
		opts.Logger = n.Log
	}
	s := sdk.NewServer(Implementation, opts)
	for _, t := range tools.Tools() {
		tool := &sdk.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema,
			Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(t.Name == toolio.ToolStop), OpenWorldHint: ptr(false)}}
		name := t.Name
		s.AddTool(tool, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return result(call(ctx, n, project, caller, name, req.Params.Arguments)), nil
		})
	}
	s.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: artifactTemplate, Name: "artifact",
		Description: "One artifact of the project, its bytes as the node's repository holds them, read as this connection's agent (D39).",
		MIMEType:    "application/octet-stream"},
		func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return artifact(ctx, n, project, caller, req.Params.URI)
		})
	return s
}

// artifactTemplate is the URI of an artifact a session reads over its
// socket (D39): a full hash after the prefix.
const (
	artifactTemplate = "ocx:artifact/{hash}"
	ArtifactPrefix   = "ocx:artifact/"
)

// artifact reads one artifact for the connection's agent: what a sync
// fetch with its password would give it (D39). The caller must still hold
// read (o); a private artifact (a post awaiting moderation) is refused, as
// sync sends it to no clone.
func artifact(ctx context.Context, n *node.Node, project string, caller func() (node.Caller, error), uri string) (*sdk.ReadResourceResult, error) {
	hash, ok := strings.CutPrefix(uri, ArtifactPrefix)
	if !ok || !fossilio.IsHash(hash) {
		return nil, fmt.Errorf("resource %q: not %sHASH with a full hash", uri, ArtifactPrefix)
	}
	c, err := caller()
	if err != nil {
		return nil, fmt.Errorf("the caller of this MCP connection: %w", err)
	}
	name, r, err := n.ProjectRepo(project)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var caps string
	if p, _ := n.Project(name); p.OtherHost {
		// A node on another host knows no capabilities but the server's
		// answer to the agent itself (D81).
		v, err := n.ServerViewer(ctx, p, c)
		if err != nil {
			return nil, err
		}
		caps = v.Effective
	} else if caps, err = r.EffectiveCaps(ctx, c.Login); err != nil {
		return nil, err
	}
	if !strings.ContainsRune(caps, 'o') {
		return nil, fmt.Errorf("read %s: %q may not read %s (no capability o)", hash, c.Login, name)
	}
	info, err := r.Info(ctx, hash)
	if errors.Is(err, fossilio.ErrNotFound) {
		return nil, sdk.ResourceNotFoundError(uri)
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
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "application/octet-stream", Blob: data}}}, nil
}

func ptr[T any](v T) *T { return &v }

// call runs one tool call that came over MCP. A call without
// arguments is the empty object: MCP clients leave out empty arguments.
func call(ctx context.Context, n *node.Node, project string, caller func() (node.Caller, error), name string, input json.RawMessage) *node.Answer {
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	c, err := caller()
	if err != nil {
		return (&node.Answer{Tool: name, DryRun: toolio.ToolDryRun(input), Log: []string{}}).Stop(fmt.Errorf("the caller of this MCP connection: %w", err))
	}
	return tools.Of(n).CallIn(ctx, project, c, name, input)
}

// result is an Answer as an MCP tool result: its JSON as the one text
// content and as structured content, IsError when it stopped.
func result(a *node.Answer) *sdk.CallToolResult {
	b, err := json.Marshal(a)
	if err != nil { // an Answer holds strings only
		panic(err)
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(b)}},
		StructuredContent: json.RawMessage(b), IsError: !a.OK()}
}

// AnswerOf reads the Answer back from an MCP tool result: its one text
// content, which must be exactly one Answer object.
func AnswerOf(res *sdk.CallToolResult) (*node.Answer, error) {
	if res == nil || len(res.Content) != 1 {
		return nil, errors.New("mcp: the tool result holds no single content")
	}
	tc, ok := res.Content[0].(*sdk.TextContent)
	if !ok {
		return nil, fmt.Errorf("mcp: the tool result's content is a %T, not text", res.Content[0])
	}
	return DecodeAnswer([]byte(tc.Text))
}

// DecodeAnswer reads one Answer in the tools' shape, refusing a field it
// does not know, a missing tool name, a null log, and trailing data.
func DecodeAnswer(b []byte) (*node.Answer, error) {
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
	var a node.Answer
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

// Serve serves the MCP server s on every connection ln accepts until
// ctx ends or ln fails; it then closes ln and every connection, waits for
// them, and returns ctx's error or the accept error. accept, when set,
// may refuse a connection before it is served (its error is logged). At
// most MaxConns connections are served at once (relay.Bounded: one past
// them is answered a JSON-RPC error naming the bound, and closed), and
// each is read a line of at most MaxLineLen bytes at a time (lineReader,
// D80).
func Serve(ctx context.Context, s *sdk.Server, ln net.Listener, accept func(net.Conn) error, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	ln = relay.Bounded(ln, MaxConns, func(c net.Conn) {
		msg := fmt.Sprintf("this session's MCP socket serves at most %d connections at once; one must close before another is served", MaxConns)
		log.Warn("mcp connection refused", slog.String("why", msg))
		writeRPCError(c, nil, codeServerBusy, msg)
	})
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
		t := &sdk.IOTransport{Reader: newLineReader(conn, log), Writer: conn, MaxLineLength: MaxLineLen + 1}
		ss, cerr := s.Connect(ctx, t, nil)
		if cerr != nil {
			log.Warn("mcp connect", slog.String("error", cerr.Error()))
			conn.Close()
			continue
		}
		wg.Go(func() {
			done := context.AfterFunc(ctx, func() { ss.Close() })
			defer done()
			ss.Wait()
			conn.Close() // its place is free
		})
	}
	cancel()
	ln.Close()
	wg.Wait()
	return err
}

// Dial connects to a session's MCP socket, waiting up to wait for a
// server that is not there yet (a session's first moments).
func Dial(ctx context.Context, path string, wait time.Duration) (net.Conn, error) {
	conn, err := unixhost.DialSocket(ctx, path, wait)
	if err != nil {
		return nil, fmt.Errorf("mcp: %w", err)
	}
	return conn, nil
}

// Connect connects the SDK's client to a session's MCP socket.
func Connect(ctx context.Context, path string, wait time.Duration) (*sdk.ClientSession, error) {
	conn, err := Dial(ctx, path, wait)
	if err != nil {
		return nil, err
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "ocx-mcp", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &sdk.IOTransport{Reader: conn, Writer: conn}, nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("mcp: initialize over %s: %w", path, err)
	}
	return cs, nil
}
