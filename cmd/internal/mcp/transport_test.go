package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/ocx-go/ocx/cmd/internal/mcp"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages/toolio"
)

// serveEcho serves, on a socket of its own, an MCP server with one tool,
// echo, which answers the length of its input's "text"; it returns the
// socket's path.
func serveEcho(t *testing.T) string {
	t.Helper()
	s := sdk.NewServer(mcp.Implementation, nil)
	s.AddTool(&sdk.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var in struct{ Text string }
			json.Unmarshal(req.Params.Arguments, &in)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprint(len(in.Text))}}}, nil
		})
	sock := filepath.Join(t.TempDir(), "mcp.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { mcp.Serve(ctx, s, ln, unixhost.SameUser, nil) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return sock
}

// rpcConn is a raw connection to an MCP socket, a line at a time.
type rpcConn struct {
	net.Conn
	r *bufio.Reader
}

func dialRPC(t *testing.T, sock string) *rpcConn {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rpcConn{Conn: c, r: bufio.NewReader(c)}
}

// reply reads one JSON-RPC message.
func (c *rpcConn) reply(t *testing.T) (id string, errMsg string, result json.RawMessage) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		t.Fatalf("no reply (%q): %v", line, err)
	}
	var v struct {
		ID     json.RawMessage
		Error  *struct{ Message string }
		Result json.RawMessage
	}
	if err := json.Unmarshal(line, &v); err != nil {
		t.Fatalf("the reply %q: %v", line, err)
	}
	if v.Error != nil {
		errMsg = v.Error.Message
	}
	return string(v.ID), errMsg, v.Result
}

// xs writes n bytes of "x" to w without holding them.
func xs(w io.Writer, n int) {
	b := []byte(strings.Repeat("x", 64<<10))
	for n > 0 {
		k := min(n, len(b))
		w.Write(b[:k])
		n -= k
	}
}

// TestLineBound is issue 39 item 4's MCP transport (D80): a tool's input
// of toolio.MaxToolInputLen is called; a 16 MiB line is answered with a
// JSON-RPC error naming the bound and the line's id, read to its end
// without being held (the process allocating a few MiB for it, where the
// SDK's reader held it whole and then closed the connection), and the
// connection serves on.
func TestLineBound(t *testing.T) {
	c := dialRPC(t, serveEcho(t))
	send := func(line string) {
		if _, err := io.WriteString(c, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if id, e, _ := c.reply(t); id != "1" || e != "" {
		t.Fatalf("initialize: %s %s", id, e)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	head := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`
	n := toolio.MaxToolInputLen - len(`{"text":""}`)
	go func() { io.WriteString(c, head); xs(c, n); io.WriteString(c, "\"}}}\n") }()
	if id, e, res := c.reply(t); id != "2" || e != "" || !strings.Contains(string(res), fmt.Sprint(n)) {
		t.Fatalf("a tool's input of %d bytes: %s %s %s", toolio.MaxToolInputLen, id, e, res)
	}

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	go func() {
		io.WriteString(c, `{"jsonrpc":"2.0","id":"huge","method":"tools/call","params":{"name":"echo","arguments":{"text":"`)
		xs(c, 16<<20)
		io.WriteString(c, "\"}}}\n")
		send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	}()
	id, e, _ := c.reply(t)
	runtime.ReadMemStats(&after)
	if id != `"huge"` || !strings.Contains(e, fmt.Sprintf("longer than %d bytes", mcp.MaxLineLen)) {
		t.Fatalf("a 16 MiB line: answered %s %q, want an error naming the bound", id, e)
	}
	if id, e, _ := c.reply(t); id != "3" || e != "" {
		t.Fatalf("the ping after it: %s %s", id, e)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("a 16 MiB line refused: %d KiB allocated", alloc>>10)
	if alloc > 4<<20 {
		t.Errorf("a 16 MiB line refused allocated %d MiB: it was held", alloc>>20)
	}
}

// TestConnectionsBound: the MCP socket serves at most mcp.MaxConns
// connections at once; one past them is answered a JSON-RPC error naming
// the bound, and once one closes another is served.
func TestConnectionsBound(t *testing.T) {
	sock := serveEcho(t)
	ping := func() (*rpcConn, string) {
		c := dialRPC(t, sock)
		io.WriteString(c, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n")
		_, e, _ := c.reply(t)
		return c, e
	}
	var open []*rpcConn
	for i := range mcp.MaxConns {
		c, e := ping()
		if e != "" {
			t.Fatalf("connection %d: %s", i, e)
		}
		open = append(open, c)
	}
	c, e := ping()
	c.Close()
	if !strings.Contains(e, fmt.Sprintf("at most %d connections", mcp.MaxConns)) {
		t.Fatalf("one past the bound: %q", e)
	}
	open[0].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The place frees once the server has seen the close.
		c, e := ping()
		c.Close()
		if e == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a connection after one closed: %s", e)
		}
	}
}
