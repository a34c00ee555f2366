package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	ocxmcp "github.com/ocx-go/ocx/cmd/internal/mcp"
	"github.com/ocx-go/ocx/cmd/internal/model"
	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/syncfwd"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
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

// mcpListenFD is the descriptor start hands serve its bound socket on,
// and modelListenFD the model socket's, when the node has a model.json.
const (
	mcpListenFD   = 3
	modelListenFD = 4
)

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
	var sess messages.ProcID
	if *session != "" {
		if sess, err = messages.ParseProcID(*session); err != nil {
			return fmt.Errorf("%w: --session: %v", errUsage, err)
		}
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
	if _, err := n.AgentCaller(key.Login); err != nil {
		return fmt.Errorf("mcp %s %s: %w", verb, key, err)
	}
	ln, modelLn, modelH, err := listenMCP(e, n, ws, verb, *fromFD, *modelFD, *only)
	if err != nil {
		return err
	}
	syncLn, err := listenSync(ctx, e, n, ws, key, *fromFD, *syncFD)
	if err != nil {
		ln.Close()
		return err
	}
	if verb == "start" {
		return startMCPServe(e, ln, modelLn, syncLn, ws, c.agents, key, *session, *only, mf.args())
	}
	return serveMCP(ctx, e, n, ws, key, sess, *session != "", ln, modelLn, syncLn, modelH, mf)
}

// listenMCP binds the session's MCP socket, or takes it from descriptor 3
// (fromFD), and the model proxy's beside it when the session has a model.
func listenMCP(e *env, n *node.Node, ws host.Workspace, verb string, fromFD, modelFD bool, only string) (ln, modelLn net.Listener, modelH http.Handler, err error) {
	if fromFD {
		f := os.NewFile(mcpListenFD, ws.MCPSocket())
		ln, err = net.FileListener(f)
		f.Close()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("mcp serve: the socket on descriptor %d: %w", mcpListenFD, err)
		}
	} else if ln, err = unixhost.ListenSocket(n.Layout.Root(), ws.MCPDir, host.MCPSocketName); err != nil {
		return nil, nil, nil, err
	}
	// The model proxy beside it (docs/runners.md), for an llm session
	// alone and for the model its definition names: bound here, or by
	// start when it handed us descriptor 4. A session without a model has
	// no model socket at all; one left by an earlier session goes.
	hasModel := false
	if only != "" {
		var merr error
		modelH, hasModel, merr = model.Open(n.Layout, only, e.log)
		if merr != nil {
			e.log.Warn("the node's model configuration does not read; its proxy refuses every request", slog.String("error", merr.Error()))
		}
	} else if !fromFD {
		if err := os.Remove(ws.ModelSocket()); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			ln.Close()
			return nil, nil, nil, fmt.Errorf("mcp %s: remove the model socket of an earlier session: %w", verb, err)
		}
	}
	switch {
	case fromFD && modelFD:
		f := os.NewFile(modelListenFD, ws.ModelSocket())
		modelLn, err = net.FileListener(f)
		f.Close()
		if err != nil {
			ln.Close()
			return nil, nil, nil, fmt.Errorf("mcp serve: the model socket on descriptor %d: %w", modelListenFD, err)
		}
	case hasModel && !fromFD:
		if modelLn, err = unixhost.ListenSocket(n.Layout.Root(), ws.MCPDir, host.ModelSocketName); err != nil {
			ln.Close()
			return nil, nil, nil, err
		}
	}
	return ln, modelLn, modelH, nil
}

// serveMCP serves the session's sockets until ctx ends or, when watch, the
// session's sandbox sess is gone.
func serveMCP(ctx context.Context, e *env, n *node.Node, ws host.Workspace, key messages.WorkspaceKey, sess messages.ProcID, watch bool,
	ln, modelLn, syncLn net.Listener, modelH http.Handler, mf meterFlags) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	if syncLn != nil {
		defer serveSync(ctx, cancel, e, n, ws, key, syncLn)()
	}
	if modelLn != nil {
		if modelH == nil { // descriptor 4 but model.json is gone since start
			modelH = model.Refusing(errors.New("this node serves no model (no AGENTS/model.json)"))
		}
		modelH = meterModel(ctx, e, n.Layout, ws, key, mf, modelH) // D50: the node's count
		e.log.Info("model proxy serving", slog.String("workspace", key.String()), slog.String("socket", ws.ModelSocket()))
		wg.Go(func() {
			if err := model.Serve(ctx, modelLn, modelH, unixhost.SameUser, e.log); err != nil {
				e.log.Error("model proxy ended", slog.String("error", err.Error()))
			}
		})
		defer func() {
			cancel()
			wg.Wait()
			os.Remove(ws.ModelSocket())
		}()
	}
	if watch {
		go func() {
			if err := waitSandbox(ctx, n.Layout.Root(), ws, sess); err == nil {
				e.log.Info("the session is gone", slog.String("session", sess.String()))
			}
			cancel()
		}()
	}
	caller := func() (node.Caller, error) { return n.AgentCaller(key.Login) }
	e.log.Info("mcp serving", slog.String("workspace", key.String()), slog.String("socket", ws.MCPSocket()))
	err := ocxmcp.Serve(ctx, ocxmcp.NewServer(n, key.Project, caller), ln, unixhost.SameUser, e.log)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	os.Remove(ws.MCPSocket())
	return err
}

// startMCPServe leaves `ocx mcp serve --listen-fd` running on ln in a
// session of its own, its output appended to the MCP log, and returns:
// the socket is bound and listening already, so a client may connect at
// once.
func startMCPServe(e *env, ln, modelLn, syncLn net.Listener, ws host.Workspace, agents string, key messages.WorkspaceKey, session, only string, meter []string) error {
	defer ln.Close()
	f, err := ln.(*net.UnixListener).File()
	if err != nil {
		return fmt.Errorf("mcp start: %w", err)
	}
	defer f.Close()
	files := []*os.File{f} // descriptor 3
	if modelLn != nil {
		defer modelLn.Close()
		mf, err := modelLn.(*net.UnixListener).File()
		if err != nil {
			return fmt.Errorf("mcp start: %w", err)
		}
		defer mf.Close()
		files = append(files, mf) // descriptor 4
	}
	logf, err := unixhost.OpenLog(ws.MCPLog)
	if err != nil {
		return fmt.Errorf("mcp start: %w", err)
	}
	defer logf.Close()
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("mcp start: %w", err)
	}
	args := []string{"mcp", "serve", key.String(), "--agents", agents, "--listen-fd"}
	if modelLn != nil {
		args = append(append(args, "--model-fd", "--model", only), meter...)
	}
	if session != "" {
		args = append(args, "--session", session)
	}
	sf, args, err := syncFile(syncLn, len(files), args)
	if err != nil {
		return fmt.Errorf("mcp start: %w", err)
	}
	if sf != nil {
		defer sf.Close()
		files = append(files, sf)
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = files
	cmd.SysProcAttr = unixhost.SessionAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("mcp start: %w", err)
	}
	fmt.Fprintf(e.stdout, "%d %s\n", cmd.Process.Pid, ws.MCPSocket())
	return cmd.Process.Release()
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
		raw, err = io.ReadAll(io.LimitReader(os.Stdin, messages.MaxToolInputLen+1))
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

// listenSync is the session's sync socket (D49), beside its MCP socket:
// bound here (start, or serve run by hand), or taken from the descriptor
// start handed serve. It is nil, and a socket an earlier session left is
// removed, when the node offers the workspace none (node.SyncTarget: its
// record restricts no_password) or its project's URL cannot be told; the
// session then reaches the server as it can, and its log says so.
func listenSync(ctx context.Context, e *env, n *node.Node, ws host.Workspace, key messages.WorkspaceKey, fromFD bool, fd int) (net.Listener, error) {
	if fromFD {
		if fd <= 0 {
			return nil, nil
		}
		f := os.NewFile(uintptr(fd), ws.SyncSocket())
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("mcp serve: the sync socket on descriptor %d: %w", fd, err)
		}
		return ln, nil
	}
	_, why, err := n.SyncTarget(ctx, key)
	if err != nil || why != "" {
		if err != nil {
			e.log.Warn("no sync socket: the project's server cannot be told", slog.String("workspace", key.String()), slog.String("error", err.Error()))
		} else {
			e.log.Info("no sync socket", slog.String("workspace", key.String()), slog.String("why", why))
		}
		if err := os.Remove(ws.SyncSocket()); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			return nil, fmt.Errorf("mcp: remove the sync socket of an earlier session: %w", err)
		}
		return nil, nil
	}
	return unixhost.ListenSocket(n.Layout.Root(), ws.MCPDir, host.SyncSocketName)
}

// syncFile is the sync socket's listener as the descriptor start hands
// serve after the n it hands already, and serve's arguments saying which
// one it is; nil when there is no sync socket.
func syncFile(syncLn net.Listener, n int, args []string) (*os.File, []string, error) {
	if syncLn == nil {
		return nil, args, nil
	}
	defer syncLn.Close()
	f, err := syncLn.(*net.UnixListener).File()
	if err != nil {
		return nil, args, err
	}
	return f, append(args, "--sync-fd", strconv.Itoa(mcpListenFD+n)), nil
}

// serveSync serves the sync forwarder on ln, to the project's server
// node.json names (node.SyncTarget), until ctx ends; the function it
// returns waits for it and removes the socket. A forwarder that cannot
// be made is logged and its socket removed: the session's reads then fail
// and say so, and its MCP socket serves on.
func serveSync(ctx context.Context, cancel context.CancelFunc, e *env, n *node.Node, ws host.Workspace, key messages.WorkspaceKey, ln net.Listener) func() {
	log := e.log.With(slog.String("workspace", key.String()), slog.String("socket", ws.SyncSocket()))
	target, why, err := n.SyncTarget(ctx, key)
	var fwd *syncfwd.Forwarder
	if err == nil && why == "" {
		fwd, err = syncfwd.New(target, nil, log)
	}
	if fwd == nil {
		if err != nil {
			why = err.Error()
		}
		log.Warn("the sync socket serves nothing", slog.String("why", why))
		ln.Close()
		os.Remove(ws.SyncSocket())
		return func() {}
	}
	log.Info("sync socket serving", slog.String("target", fwd.Target()))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := syncfwd.Serve(ctx, ln, fwd, unixhost.SameUser, log); err != nil {
			log.Error("sync socket ended", slog.String("error", err.Error()))
		}
	}()
	return func() {
		cancel()
		<-done
		os.Remove(ws.SyncSocket())
	}
}

// waitSandbox waits until the session's sandbox is gone: its bwrap, then,
// when the node recorded that bwrap's sandbox (D45) and its init runs on
// (bwrap was ended by a signal, the sandbox not), that init, which lives
// as long as anything in the sandbox does. The session inside writes
// through the sync socket (D49), its stopped note too, after its bwrap
// may be gone.
func waitSandbox(ctx context.Context, root string, ws host.Workspace, sess messages.ProcID) error {
	if err := unixhost.WaitGone(ctx, sess); err != nil {
		return err
	}
	b, err := unixhost.Below(root).ReadFile(ws.Sandbox, unixhost.SmallFile)
	if err != nil {
		return nil
	}
	rec, err := host.DecodeSandboxRecord(b)
	if err != nil || rec.Bwrap != sess {
		return nil
	}
	return unixhost.WaitGone(ctx, rec.Init)
}
