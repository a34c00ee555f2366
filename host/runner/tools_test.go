package runner_test

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ocx-go/ocx/host/runner"
)

// serveTools serves a go-sdk MCP server offering one tool, echo, on a
// unix socket until the test ends.
func serveTools(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo", Description: "says it back", InputSchema: json.RawMessage(`{"type":"object","properties":{"say":{"type":"string"}}}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct{ Say string }
			json.Unmarshal(req.Params.Arguments, &in)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "said " + in.Say}}, IsError: in.Say == "no"}, nil
		})
	path := filepath.Join(t.TempDir(), "mcp.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
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
			wg.Go(func() { ss.Wait() })
		}
	})
	t.Cleanup(func() { cancel(); ln.Close(); wg.Wait() })
	return path
}

func TestTools(t *testing.T) {
	ctx := context.Background()
	tools, err := runner.ConnectTools(ctx, serveTools(t), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer tools.Close()
	list, err := tools.List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "echo" || !strings.Contains(string(list[0].InputSchema), `"say"`) {
		t.Fatalf("%+v %v", list, err)
	}
	r, err := tools.Call(ctx, "echo", json.RawMessage(`{"say":"hi"}`))
	if err != nil || r.Text != "said hi" || r.IsError {
		t.Fatalf("%+v %v", r, err)
	}
	r, err = tools.Call(ctx, "echo", json.RawMessage(`{"say":"no"}`))
	if err != nil || !r.IsError {
		t.Fatalf("a refusal: %+v %v", r, err)
	}
	if _, err := tools.Call(ctx, "nope", nil); err == nil {
		t.Fatal("an unknown tool")
	}
}

func TestConnectToolsNoSocket(t *testing.T) {
	_, err := runner.ConnectTools(context.Background(), filepath.Join(t.TempDir(), "none.sock"), 100*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "none.sock") {
		t.Fatal(err)
	}
	if _, err := runner.ConnectTools(context.Background(), "", 0); err == nil || !strings.Contains(err.Error(), "OCX_MCP_SOCKET") {
		t.Fatal(err)
	}
}
