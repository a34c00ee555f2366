package answers

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/cmd/internal/console"
	"github.com/ocx-go/ocx/cmd/internal/noderepos"
	"github.com/ocx-go/ocx/host/nodesock"
	"github.com/ocx-go/ocx/messages/wire"
)

// openConsole is the console the daemon renders pages with (D71): each
// page's node reads the daemon's open repositories and asks the daemon's
// answers in its own process, its status the kept one. nil when the
// console's key does not open (every page is then refused, and served
// by `ocx console`).
func (s *Socket) openConsole(repos *noderepos.Repos) *console.Console {
	c, err := console.Open(s.layout.Root())
	if err != nil {
		s.log.Warn("the daemon's socket serves no console page: its key does not open", actors.ErrAttr(err))
		return nil
	}
	c.Node.Records = liveRecords{repos}
	c.Node.Daemon = os.Getpid()
	c.Node.Ask = s.askHere
	c.InDaemon = true
	return c
}

// askHere is an ask of the daemon's own answers, as a page's node makes
// it: a refusal is an error, as it is on the socket.
func (s *Socket) askHere(ctx context.Context, a *wire.Ask) (*wire.Reply, error) {
	if a.Kind == wire.AskPage {
		return nil, fmt.Errorf("%w: a page asks for no page", nodesock.ErrRefused)
	}
	r := s.answer(ctx, a)
	if r.Error != "" {
		return nil, fmt.Errorf("%w: %s", nodesock.ErrRefused, r.Error)
	}
	return r, nil
}

// page answers a page ask: the console's whole CGI reply, after the
// reply's line.
func (s *Socket) page(a *wire.Ask) *wire.Reply {
	if s.console == nil {
		return nodesock.Refusal("this daemon serves no console page: its key did not open")
	}
	out := s.console.ServePage(a.Env)
	r := wire.NewReply()
	r.Page = len(out)
	line, err := json.Marshal(r)
	if err != nil {
		return nodesock.Refusal("the reply does not encode: %v", err)
	}
	r.Line = append(append(line, '\n'), out...)
	// A page of a big status is copies of the kept one: the runtime's
	// own collections take them back, not a forced one for each page.
	r.KeepMemory = true
	s.log.Debug("ocxd.sock: a console page served", slog.Int("bytes", len(out)))
	return r
}
