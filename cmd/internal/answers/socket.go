package answers

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/ocx-go/ocx/messages/wire"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/cmd/internal/daemon/otherhosts"
	"github.com/ocx-go/ocx/cmd/internal/hook"
	"github.com/ocx-go/ocx/fossilio/noderepos"
	"github.com/ocx-go/ocx/fossilio/remote"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/metrics"
	"github.com/ocx-go/ocx/host/nodesock"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
)

// hookBound bounds one hook's work done for a caller on the socket: the
// hook's own process would wait at most 10 s for the mark's lock and then
// work; a stop of the daemon waits for it, and no longer.
const hookBound = 30 * time.Second

// Socket is the daemon's side of AGENTS/ocxd.sock (D66) while it is
// served.
type Socket struct {
	layout host.Layout
	root   *unixhost.Root
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}
	// hook is what each hook's work done here is given: the daemon's
	// config and open repositories, and the hook's log, kept open.
	hook    hook.Options
	hookLog io.Closer
	// status answers status and runs asks.
	status *status
	// consoleKey is the console's key, with which the pages asked are
	// rendered (D71); nil when it did not open.
	consoleKey []byte
	// puller answers pull asks on a node on another host; nil elsewhere.
	puller *otherhosts.Puller
	// metrics are the daemon's, which the hook's and the status's answers
	// are observed into and a metrics ask writes; nil: none are kept.
	metrics *metrics.Set
	// nodeJSON is node.json as the daemon read it; reread asks the daemon,
	// once, to read it again (a re-exec in place) when it changed.
	nodeJSON   []byte
	reread     func()
	rereadOnce sync.Once
}

// Parts are the daemon's parts the socket's answers use. Procs is the
// daemon's process table, which the status reads (the daemon closes it,
// after Stop). Hand hands a hook's posts to the node in the daemon's own
// process, as its pipe's lines are (D88); an error (its inputs are paused)
// has them written into the pipe instead. For nodes on other hosts (D72):
// Poke pokes remote nodes beside a hook's work (the server's node), Puller
// answers pull asks (a node on another host). Poke and Puller may be nil.
type Parts struct {
	Procs  *unixhost.ProcTable
	Hand   func(lines []pipe.Line) error
	Poke   func(targets []remote.Target)
	Puller *otherhosts.Puller
	// Metrics are the daemon's metrics (nil: none are kept).
	Metrics *metrics.Set
}

// Open serves the daemon's socket. Without it the daemon still
// runs: every caller then does its work itself, as before the socket, so
// a socket that cannot be made is logged, not fatal (nil).
//
// nodeJSON is node.json as the daemon read it: an ask made once it has
// changed is refused (the caller does its work itself, with the file as
// it is now) and reread is called, once, to have the daemon read it again.
func Open(layout host.Layout, root *unixhost.Root, cfg *messages.NodeConfig, nodeJSON []byte, reread func(), repos *noderepos.Repos, log *slog.Logger, parts Parts) *Socket {
	ln, err := unixhost.ListenSocketAt(layout.Socket())
	if err != nil {
		log.Warn("the daemon's socket is not served; its callers read the repository themselves", slog.String("socket", layout.Socket()), actors.ErrAttr(err))
		return nil
	}
	f, err := unixhost.OpenLog(layout.HookLog(), unixhost.LogText)
	if err != nil {
		ln.Close()
		log.Warn("the daemon's socket is not served: the hook's log does not open", actors.ErrAttr(err))
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Socket{layout: layout, root: root, log: log, cancel: cancel, done: make(chan struct{}), hookLog: f,
		hook:   hook.Options{Agents: layout.Root(), Config: cfg, Open: repos.RepoAt, Index: repos.RecordAt, Log: slog.New(f.Handler(nil)), Poke: parts.Poke, Hand: parts.Hand},
		puller: parts.Puller, metrics: parts.Metrics, nodeJSON: nodeJSON, reread: reread}
	s.status = newStatus(layout, cfg, repos, parts.Procs, log)
	parts.Metrics.ViewFrom(s.MetricsView)
	s.consoleKey = s.openConsole()
	srv := nodesock.New(ln, s.answer, nil, log)
	go func() {
		defer close(s.done)
		if err := srv.Serve(ctx); err != nil {
			log.Error("the daemon's socket stopped", actors.ErrAttr(err))
		}
	}()
	log.Info("serving the daemon's socket", slog.String("socket", layout.Socket()))
	return s
}

// Stop ends the socket: its name is removed first, so that a caller from
// then on finds no daemon and does its work itself; the asks being
// answered are finished. A nil socket stops at once.
func (s *Socket) Stop() {
	if s == nil {
		return
	}
	if err := s.root.Remove(s.layout.Socket()); err != nil {
		s.log.Warn("remove the daemon's socket", actors.ErrAttr(err))
	}
	s.cancel()
	<-s.done
	s.hookLog.Close()
	s.status.close()
}

// pullBound bounds a pull asked on the socket: a tool that asks waits
// for it, and a server that does not answer is the tool's to report.
const pullBound = time.Minute

// pull answers a pull ask (D72): once a pull of the project begun after
// the ask has ended, with its outcome.
func (s *Socket) pull(ctx context.Context, a *wire.Ask) *wire.Reply {
	if s.puller == nil {
		return nodesock.Refusal("this node pulls nothing: project %s is not served from another host", a.Project)
	}
	ctx, cancel := context.WithTimeout(ctx, pullBound)
	defer cancel()
	r := wire.NewReply()
	if err := s.puller.Pull(ctx, a.Project); err != nil {
		r.Error = "the pull: " + err.Error()
	}
	return r
}

// sameNode refuses an ask when node.json changed since the daemon read
// it, whatever the ask: the caller then does its work itself with the
// file as it is now (a hook pokes the remote nodes listed now), and the
// daemon is asked, once, to read it again by a re-exec in place (the
// same PID, the same children), after which every ask is answered with
// it (issue 38). A node.json that does not read is refused naming why,
// and no re-exec is asked: the daemon keeps the node it read.
func (s *Socket) sameNode() *wire.Reply {
	data, err := unixhost.Below(s.layout.Root()).ReadFile(s.layout.NodeJSON(), unixhost.NodeFile)
	if err != nil {
		return nodesock.Refusal("read node.json: %v", err)
	}
	if bytes.Equal(data, s.nodeJSON) {
		return nil
	}
	if _, err := messages.DecodeNodeConfig(data); err != nil {
		return nodesock.Refusal("node.json changed since the daemon read it, and does not read (%v): the daemon keeps the node it read", err)
	}
	s.rereadOnce.Do(func() {
		s.log.Info("node.json changed since the daemon read it: the daemon re-execs in place to read it again")
		if s.reread != nil {
			s.reread()
		}
	})
	return nodesock.Refusal("node.json changed since the daemon read it; the daemon re-execs to read it again")
}

// Hook does the hook's work for the repository repo in the daemon, as a
// hook's ask on the socket has it done (answer), refusals alike: the hook
// watch's run of OCX's own command, without the command's /bin/sh and
// ocx-hook asking the daemon back. A nil socket (not served) refuses.
func (s *Socket) Hook(ctx context.Context, repo string) error {
	if s == nil {
		return errors.New("the daemon's socket is not served")
	}
	a := wire.NewAsk(wire.AskHook)
	a.Repo = repo
	if r := s.answer(ctx, a); r.Error != "" {
		return errors.New(r.Error)
	}
	return nil
}

// answer is the daemon's answer to one ask on its socket.
func (s *Socket) answer(ctx context.Context, a *wire.Ask) *wire.Reply {
	if refusal := s.sameNode(); refusal != nil {
		return refusal
	}
	switch a.Kind {
	case wire.AskHook:
		// The work is finished even when the daemon stops meanwhile: the
		// caller waits for it, and a half-done hook would be done again.
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hookBound)
		defer cancel()
		t0 := time.Now()
		defer func() { s.metrics.HookTook(time.Since(t0)) }()
		return hook.Answer(hctx, s.hook, a)
	case wire.AskStatus:
		t0 := time.Now()
		defer func() { s.metrics.StatusTook(time.Since(t0)) }()
		return s.status.answer(ctx)
	case wire.AskMetrics:
		return s.metricsText()
	case wire.AskRuns:
		return s.status.runs(ctx, a)
	case wire.AskPage:
		return s.page(a)
	case wire.AskPull:
		return s.pull(ctx, a)
	}
	return nodesock.Refusal("this daemon does not answer %s asks", a.Kind)
}
