package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	ocxmcp "github.com/ocx-go/ocx/cmd/internal/mcp"
	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/tools"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/toolio"
)

const mcpUsage = `mcp start|serve LOGIN/PROJECT [--agents ROOT] [--session PID@START] [--model MODEL]
       ocx mcp connect [--socket PATH]
       ocx mcp call TOOL [--socket PATH] [--input FILE]
       ocx mcp tools [--socket PATH]

start and serve run on the node, outside the sandbox: serve answers MCP on
the session's socket (AGENTS/LOGIN/mcp/PROJECT/mcp.sock) as the workspace's
agent login, with the password the node keeps for it, until the session
--session names is gone or a TERM, and with --model (an llm session's,
as its definition names it) the node's model proxy beside it
(model.sock), for that model alone; start binds the sockets, leaves serve
running on it in a session of its own, and returns (the daemon runs it at
each launch, D38). connect, inside the sandbox, bridges standard input and
output to the socket ($OCX_MCP_SOCKET), for a runner that takes an MCP
server command; call calls one tool with the SDK's client, its JSON input
on standard input, and prints the answer; tools lists the tools the
socket offers, with their input schemas.`

func runMCP(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(e.stderr, "usage: ocx %s\n", mcpUsage)
		if len(args) == 0 {
			return fmt.Errorf("%w: no mcp command named", errUsage)
		}
		return nil
	}
	switch args[0] {
	case "start", "serve":
		return runMCPServe(ctx, e, args[0], args[1:])
	case "connect":
		return runMCPConnect(ctx, e, args[1:])
	case "call":
		return runMCPCall(ctx, e, args[1:])
	case "tools":
		return runMCPTools(ctx, e, args[1:])
	}
	return fmt.Errorf("%w: %q is not an mcp command (start, serve, connect, call, tools)", errUsage, args[0])
}

func runMCPServe(ctx context.Context, e *env, verb string, args []string) error {
	var c common
	fs := c.flags(e, "mcp "+verb, "mcp "+verb+" LOGIN/PROJECT [--agents ROOT] [--session PID@START] [--model MODEL]", false, false)
	only := fs.String("model", "", "serve the node's model proxy beside the socket, for this model alone (an llm session's, as its definition names it)")
	session := fs.String("session", "", "serve until this process (the session's bwrap, PID@START) is gone")
	fromFD := fs.Bool("listen-fd", false, "serve on descriptor 3, bound by mcp start (internal)")
	modelFD := fs.Bool("model-fd", false, "serve the model proxy on descriptor 4, bound by mcp start (internal)")
	mf := addMeterFlags(fs)
	syncFD := fs.Int("sync-fd", 0, "serve the sync socket on this descriptor, bound by mcp start (internal)")
	pos, _, err := parse(fs, args)
	if err != nil {
		return usageErr(err)
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: mcp %s takes one LOGIN/PROJECT", errUsage, verb)
	}
	key, err := messages.ParseWorkspaceKey(pos[0])
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	var sess protocol.ProcID
	if *session != "" {
		if sess, err = protocol.ParseProcID(*session); err != nil {
			return fmt.Errorf("%w: --session: %v", errUsage, err)
		}
	}
	if verb == "serve" && *session != "" {
		// In its session's cgroup before it holds anything (D80).
		ocxmcp.JoinCgroup(e.log, c.agents, key)
	}
	// A server lives as long as its session: the backoffice each write
	// needs runs beside its answer, not before it (D38).
	n, err := node.Open(c.agents, node.Options{Log: e.log, BackofficeBeside: verb == "serve"})
	if err != nil {
		return err
	}
	defer n.Wait()
	ws, err := n.Layout.Workspace(key)
	if err != nil {
		return err
	}
	if _, err := tools.Of(n).AgentCaller(key.Login); err != nil {
		return fmt.Errorf("mcp %s %s: %w", verb, key, err)
	}
	ln, modelLn, modelH, err := ocxmcp.Listen(e.log, n, ws, verb, *fromFD, *modelFD, *only)
	if err != nil {
		return err
	}
	syncLn, err := ocxmcp.ListenSync(ctx, e.log, n, ws, key, *fromFD, *syncFD)
	if err != nil {
		ln.Close()
		return err
	}
	if verb == "start" {
		return ocxmcp.Start(e.stdout, ln, modelLn, syncLn, ws, c.agents, key, *session, *only, mf.args())
	}
	return ocxmcp.ServeSession(ctx, e.log, n, ws, key, sess, *session != "", ln, modelLn, syncLn, modelH, ocxmcp.Meter{Launch: *mf.launch, Tokens: *mf.tokens})
}

// mcpSocket is --socket, else $OCX_MCP_SOCKET.
func mcpSocket(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if s := os.Getenv(host.MCPSocketEnv); s != "" {
		return s, nil
	}
	return "", fmt.Errorf("%w: no --socket and no $%s", errUsage, host.MCPSocketEnv)
}

// socketFlags are the flags every client of a session's socket takes.
type socketFlags struct {
	sock *string
	wait *time.Duration
}

func addSocketFlags(fs *flag.FlagSet) socketFlags {
	return socketFlags{
		sock: fs.String("socket", "", "the session's MCP socket (default $"+host.MCPSocketEnv+")"),
		wait: fs.Duration("wait", 5*time.Second, "how long to wait for the socket"),
	}
}

// parsePath parses fs's flags and args, and names the socket the flags or
// the environment name.
func (f socketFlags) parsePath(fs *flag.FlagSet, args []string) (string, error) {
	if _, _, err := parseArgs(fs, args, nil); err != nil {
		return "", err
	}
	return mcpSocket(*f.sock)
}

func runMCPConnect(ctx context.Context, e *env, args []string) error {
	var c common
	fs := c.flags(e, "mcp connect", "mcp connect [--socket PATH]", false, false)
	sf := addSocketFlags(fs)
	path, err := sf.parsePath(fs, args)
	if err != nil {
		return err
	}
	conn, err := ocxmcp.Dial(ctx, path, *sf.wait)
	if err != nil {
		return err
	}
	defer conn.Close()
	go func() {
		io.Copy(conn, os.Stdin)
		conn.(*net.UnixConn).CloseWrite()
	}()
	_, err = io.Copy(e.stdout, conn)
	return err
}

func runMCPCall(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: mcp call takes a TOOL", errUsage)
	}
	name := args[0]
	var c common
	fs := c.flags(e, "mcp call "+name, "mcp call TOOL [--socket PATH] [--input FILE]", false, false)
	sf := addSocketFlags(fs)
	input := fs.String("input", "-", "a file holding the tool's JSON input (- for standard input)")
	path, err := sf.parsePath(fs, args[1:])
	if err != nil {
		return err
	}
	var raw []byte
	if *input == "-" {
		raw, err = io.ReadAll(io.LimitReader(os.Stdin, toolio.MaxToolInputLen+1))
	} else {
		raw, err = os.ReadFile(*input) // trust:outside the caller's own --input file
	}
	if err != nil {
		return fmt.Errorf("--input: %w", err)
	}
	if !json.Valid(raw) {
		return fmt.Errorf("%w: the input is not JSON: MCP carries a JSON object", errUsage)
	}
	a, err := callMCP(ctx, path, *sf.wait, name, raw)
	if err != nil {
		return err
	}
	if err := a.WriteJSON(e.stdout); err != nil {
		return err
	}
	if !a.OK() {
		return errStopped
	}
	return nil
}

// callMCP calls one tool on the socket with the SDK's client and reads the
// answer back from its text content.
func callMCP(ctx context.Context, path string, wait time.Duration, name string, input json.RawMessage) (*node.Answer, error) {
	cs, err := ocxmcp.Connect(ctx, path, wait)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: input})
	if err != nil {
		return nil, fmt.Errorf("mcp: call %s: %w", name, err)
	}
	return ocxmcp.AnswerOf(res)
}

func runMCPTools(ctx context.Context, e *env, args []string) error {
	var c common
	fs := c.flags(e, "mcp tools", "mcp tools [--socket PATH]", false, false)
	sf := addSocketFlags(fs)
	path, err := sf.parsePath(fs, args)
	if err != nil {
		return err
	}
	cs, err := ocxmcp.Connect(ctx, path, *sf.wait)
	if err != nil {
		return err
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		return fmt.Errorf("mcp: list the tools: %w", err)
	}
	return printJSON(e, res.Tools)
}
