package daemon

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/cmd/internal/hook"
	"github.com/ocx-go/ocx/cmd/internal/nodesock"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// hookBound bounds one hook's work done for a caller on the socket: the
// hook's own process would wait at most 10 s for the mark's lock and then
// work; a stop of the daemon waits for it, and no longer.
const hookBound = 30 * time.Second

// socket is the daemon's side of AGENTS/ocxd.sock (D66) while it is
// served.
type socket struct {
	cancel context.CancelFunc
	done   chan struct{}
	// hook is what each hook's work done here is given: the daemon's
	// config and open repositories, and the hook's log, kept open.
	hook    hook.Options
	hookLog io.Closer
}

// openSocket serves the daemon's socket. Without it the daemon still
// runs: every caller then does its work itself, as before the socket, so
// a socket that cannot be made is logged, not fatal.
func (d *daemon) openSocket() *socket {
	ln, err := unixhost.ListenSocketAt(d.layout.Socket())
	if err != nil {
		d.log.Warn("the daemon's socket is not served; its callers read the repository themselves", slog.String("socket", d.layout.Socket()), actors.ErrAttr(err))
		return nil
	}
	f, err := unixhost.OpenLog(d.layout.HookLog())
	if err != nil {
		ln.Close()
		d.log.Warn("the daemon's socket is not served: the hook's log does not open", actors.ErrAttr(err))
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &socket{cancel: cancel, done: make(chan struct{}), hookLog: f,
		hook: hook.Options{Agents: d.layout.Root(), Config: d.cfg, Open: d.repos.RepoAt, Log: slog.New(slog.NewTextHandler(f, nil))}}
	srv := nodesock.New(ln, func(ctx context.Context, a *messages.Ask) *messages.Reply { return d.answer(ctx, s, a) }, nil, d.log)
	go func() {
		defer close(s.done)
		if err := srv.Serve(ctx); err != nil {
			d.log.Error("the daemon's socket stopped", actors.ErrAttr(err))
		}
	}()
	d.log.Info("serving the daemon's socket", slog.String("socket", d.layout.Socket()))
	return s
}

// stop ends the socket: its name is removed first, so that a caller from
// then on finds no daemon and does its work itself; the asks being
// answered are finished.
func (d *daemon) stopSocket() {
	s := d.sock
	if s == nil {
		return
	}
	d.sock = nil
	if err := d.root.Remove(d.layout.Socket()); err != nil {
		d.log.Warn("remove the daemon's socket", actors.ErrAttr(err))
	}
	s.cancel()
	<-s.done
	s.hookLog.Close()
}

// answer is the daemon's answer to one ask on its socket.
func (d *daemon) answer(ctx context.Context, s *socket, a *messages.Ask) *messages.Reply {
	switch a.Kind {
	case messages.AskHook:
		// The work is finished even when the daemon stops meanwhile: the
		// caller waits for it, and a half-done hook would be done again.
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hookBound)
		defer cancel()
		return hook.Answer(hctx, s.hook, a)
	}
	return nodesock.Refusal("this daemon does not answer %s asks", a.Kind)
}
