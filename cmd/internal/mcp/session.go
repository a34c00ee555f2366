package mcp

import (
	"context"
	"errors"
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

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/tools"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/model"
	"github.com/ocx-go/ocx/host/procs"
	"github.com/ocx-go/ocx/host/syncfwd"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// listenFD is the descriptor start hands serve its bound socket on,
// and modelListenFD the model socket's, when the node has a model.json.
const (
	listenFD      = 3
	modelListenFD = 4
)

// Listen binds the session's MCP socket, or takes it from descriptor 3
// (fromFD), and the model proxy's beside it when the session has a model.
func Listen(log *slog.Logger, n *node.Node, ws host.Workspace, verb string, fromFD, modelFD bool, only string) (ln, modelLn net.Listener, modelH http.Handler, err error) {
	if fromFD {
		f := os.NewFile(listenFD, ws.MCPSocket())
		ln, err = net.FileListener(f)
		f.Close()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("mcp serve: the socket on descriptor %d: %w", listenFD, err)
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
		modelH, hasModel, merr = model.Open(n.Layout, only, log)
		if merr != nil {
			log.Warn("the node's model configuration does not read; its proxy refuses every request", slog.String("error", merr.Error()))
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

// ListenSync is the session's sync socket (D49), beside its MCP socket:
// bound here (start, or serve run by hand), or taken from the descriptor
// start handed serve. It is nil, and a socket an earlier session left is
// removed, when the node offers the workspace none (node.SyncTarget: its
// record restricts no_password) or its project's URL cannot be told; the
// session then reaches the server as it can, and its log says so.
func ListenSync(ctx context.Context, log *slog.Logger, n *node.Node, ws host.Workspace, key messages.WorkspaceKey, fromFD bool, fd int) (net.Listener, error) {
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
			log.Warn("no sync socket: the project's server cannot be told", slog.String("workspace", key.String()), slog.String("error", err.Error()))
		} else {
			log.Info("no sync socket", slog.String("workspace", key.String()), slog.String("why", why))
		}
		if err := os.Remove(ws.SyncSocket()); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			return nil, fmt.Errorf("mcp: remove the sync socket of an earlier session: %w", err)
		}
		return nil, nil
	}
	return unixhost.ListenSocket(n.Layout.Root(), ws.MCPDir, host.SyncSocketName)
}

// JoinCgroup puts this process, the server of the session of key on
// the node whose agents root is agents, in the cgroup below the session's
// (procs.JoinServer, D80): what the sandbox makes it hold counts against
// the session's limits. `ocx mcp serve --session` calls it first thing,
// before it opens the node or accepts a connection; a failure is logged,
// and the server serves where it is.
func JoinCgroup(log *slog.Logger, agents string, key messages.WorkspaceKey) {
	l, err := host.NewLayout(agents)
	name := ""
	if err == nil {
		name, err = procs.JoinServer(l, key)
	}
	switch {
	case err != nil:
		log.Warn("the server is in no cgroup of its session: the session's limits do not hold it", slog.String("workspace", key.String()), slog.String("error", err.Error()))
	case name != "":
		log.Info("the server is in its session's cgroup", slog.String("workspace", key.String()), slog.String("cgroup", name))
	}
}

// ServeSession serves the session's sockets until ctx ends or, when watch, the
// session's sandbox sess is gone.
func ServeSession(ctx context.Context, log *slog.Logger, n *node.Node, ws host.Workspace, key messages.WorkspaceKey, sess protocol.ProcID, watch bool,
	ln, modelLn, syncLn net.Listener, modelH http.Handler, meter Meter) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	if syncLn != nil {
		defer serveSync(ctx, cancel, log, n, ws, key, syncLn)()
	}
	if modelLn != nil {
		if modelH == nil { // descriptor 4 but model.json is gone since start
			modelH = model.Refusing(errors.New("this node serves no model (no AGENTS/model.json)"))
		}
		modelH = meterModel(ctx, log, n.Layout, ws, key, meter, modelH) // D50: the node's count
		log.Info("model proxy serving", slog.String("workspace", key.String()), slog.String("socket", ws.ModelSocket()))
		wg.Go(func() {
			if err := model.Serve(ctx, modelLn, modelH, unixhost.SameUser, log); err != nil {
				log.Error("model proxy ended", slog.String("error", err.Error()))
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
				log.Info("the session is gone", slog.String("session", sess.String()))
			}
			cancel()
		}()
	}
	caller := func() (node.Caller, error) { return tools.Of(n).AgentCaller(key.Login) }
	log.Info("mcp serving", slog.String("workspace", key.String()), slog.String("socket", ws.MCPSocket()))
	err := Serve(ctx, NewServer(n, key.Project, caller), ln, unixhost.SameUser, log)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	os.Remove(ws.MCPSocket())
	return err
}

// Start leaves `ocx mcp serve --listen-fd` running on ln in a
// session of its own, its output appended to the MCP log, and returns:
// the socket is bound and listening already, so a client may connect at
// once.
func Start(stdout io.Writer, ln, modelLn, syncLn net.Listener, ws host.Workspace, agents string, key messages.WorkspaceKey, session, only string, meter []string) error {
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
	logf, err := unixhost.OpenLog(ws.MCPLog, unixhost.LogText)
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
	cmd.Stdout, cmd.Stderr = logf.File(), logf.File()
	cmd.ExtraFiles = files
	cmd.SysProcAttr = unixhost.SessionAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("mcp start: %w", err)
	}
	fmt.Fprintf(stdout, "%d %s\n", cmd.Process.Pid, ws.MCPSocket())
	return cmd.Process.Release()
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
	return f, append(args, "--sync-fd", strconv.Itoa(listenFD+n)), nil
}

// serveSync serves the sync forwarder on ln, to the project's server
// node.json names (node.SyncTarget), until ctx ends; the function it
// returns waits for it and removes the socket. A forwarder that cannot
// be made is logged and its socket removed: the session's reads then fail
// and say so, and its MCP socket serves on.
func serveSync(ctx context.Context, cancel context.CancelFunc, log *slog.Logger, n *node.Node, ws host.Workspace, key messages.WorkspaceKey, ln net.Listener) func() {
	log = log.With(slog.String("workspace", key.String()), slog.String("socket", ws.SyncSocket()))
	target, why, err := n.SyncTarget(ctx, key)
	var fwd *syncfwd.Forwarder
	if err == nil && why == "" {
		fwd, err = syncfwd.New(target, key.Login, nil, log)
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
func waitSandbox(ctx context.Context, root string, ws host.Workspace, sess protocol.ProcID) error {
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
