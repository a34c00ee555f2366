package answers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/ocx-go/ocx/messages/wire"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/cmd/internal/consolepage"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host/metrics"
	"github.com/ocx-go/ocx/host/nodesock"
	"github.com/ocx-go/ocx/messages"
)

// openConsole reads the console's key, with which the daemon renders
// pages (D71); nil when it does not open (every page is then refused,
// and served by `ocx console`).
func (s *Socket) openConsole() []byte {
	key, err := consolepage.LoadKey(s.layout.Root())
	if err != nil {
		s.log.Warn("the daemon's socket serves no console page: its key does not open", actors.ErrAttr(err))
		return nil
	}
	return key
}

// page answers a page ask: the page's whole CGI reply, after the reply's
// line, rendered from the status the socket derives (or keeps) and the
// daemon's open repositories. A page that is not one the daemon renders
// (a form, the releases, the tools: consolepage.Serve) is refused, and
// `ocx console` serves it.
func (s *Socket) page(a *wire.Ask) *wire.Reply {
	if s.consoleKey == nil {
		return nodesock.Refusal("this daemon serves no console page: its key did not open")
	}
	// A page's reads log nothing of the files they pass over, as a page
	// rendered by `ocx console` for the daemon logged nothing.
	out, ok := consolepage.ServePage(a.Env, s.layout, s.status.cfg, pageReads{s.status, s.metrics}, s.consoleKey, slog.New(slog.DiscardHandler))
	if !ok {
		return nodesock.Refusal("the daemon renders no such page: ocx console serves it")
	}
	r := wire.NewReply()
	r.Page = len(out)
	if err := withBody(r, out); err != nil {
		return nodesock.Refusal("%v", err)
	}
	// A page of a big status is copies of the kept one: the runtime's
	// own collections take them back, not a forced one for each page.
	r.KeepMemory = true
	s.log.Debug("ocxd.sock: a console page served", slog.Int("bytes", len(out)))
	return r
}

// withBody sets r's Line: its line, encoded, then body, which the line
// counts (Page, Metrics).
func withBody(r *wire.Reply, body []byte) error {
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("the reply does not encode: %v", err)
	}
	r.Line = append(append(line, '\n'), body...)
	return nil
}

// pageReads are a page's reads in the daemon: the status the socket
// derives or keeps, as it is (no document decoded), the daemon's open
// repositories and record indexes, and its metrics.
type pageReads struct {
	s *status
	m *metrics.Set
}

// ProjectCode is the code the daemon's index of the project read once.
func (p pageReads) ProjectCode(ctx context.Context, project string) (string, error) {
	x, err := p.s.repos.Index(project)
	if err != nil {
		return "", err
	}
	return x.ProjectCode(ctx)
}

func (p pageReads) Metrics(context.Context) ([]byte, error) {
	if p.m == nil {
		return nil, errors.New("this daemon keeps no metrics")
	}
	return p.m.Text()
}

func (p pageReads) Status(ctx context.Context) (*messages.NodeState, string, error) {
	r, st := p.s.current(ctx)
	if st == nil {
		return nil, "", errors.New(r.Error)
	}
	return st, "", nil
}

func (p pageReads) StateDoc(ctx context.Context) ([]byte, error) {
	r, st := p.s.current(ctx)
	if st == nil {
		return nil, errors.New(r.Error)
	}
	return r.StateDoc, nil
}

func (p pageReads) Repo(project string) (*fossilio.Repo, error) {
	return liveRecords{p.s.repos}.Repo(project)
}

func (p pageReads) Index(r *fossilio.Repo) *record.Index {
	return daemonFacts{liveRecords: liveRecords{p.s.repos}, cfg: p.s.cfg}.Index(r)
}
