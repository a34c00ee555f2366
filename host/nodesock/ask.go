package nodesock

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// ConnectWait bounds how long a caller waits for the daemon's socket to
// take its connection (issue 24: 100 ms): a daemon that does not answer by
// then is taken for gone, and the caller reads the repository itself.
const ConnectWait = 100 * time.Millisecond

// ErrNoDaemon: nothing answers on the daemon's socket.
var ErrNoDaemon = errors.New("no daemon answers on its socket")

// ErrRefused: the daemon answered, and said it did not do what was asked.
var ErrRefused = errors.New("the daemon refused")

// Ask asks the daemon on its socket (AGENTS/ocxd.sock) and reads its one
// reply, waiting at most ConnectWait for the connection and wait for the
// reply. Every failure is an error the caller falls back on: ErrNoDaemon
// when nothing answers, ErrRefused when the daemon says why it did
// nothing, and a reply that does not read names what is wrong with it.
func Ask(ctx context.Context, layout host.Layout, a *messages.Ask, wait time.Duration) (*messages.Reply, error) {
	line, err := json.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("encode the ask: %w", err)
	}
	dctx, cancel := context.WithTimeout(ctx, ConnectWait)
	c, err := unixhost.DialSocket(dctx, layout.Socket(), 0)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDaemon, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write(append(line, '\n')); err != nil {
		return nil, fmt.Errorf("ask the daemon: %w", err)
	}
	br := bufio.NewReader(c)
	got, err := messages.ReadLine(br, messages.MaxReplyLen)
	if err != nil {
		return nil, fmt.Errorf("read the daemon's reply: %w", err)
	}
	r, err := messages.DecodeReply(got)
	if err != nil {
		return nil, fmt.Errorf("the daemon's reply: %w", err)
	}
	if r.Error != "" {
		return nil, fmt.Errorf("%w: %s", ErrRefused, r.Error)
	}
	if r.Doc > 0 {
		// The state document that follows the line, whole (D70).
		r.StateDoc = make([]byte, r.Doc)
		if _, err := io.ReadFull(br, r.StateDoc); err != nil {
			return nil, fmt.Errorf("read the daemon's state document (%d bytes): %w", r.Doc, err)
		}
		if err := messages.CheckStateDoc(r.StateDoc); err != nil {
			return nil, fmt.Errorf("the daemon's reply: %w", err)
		}
	}
	if r.Page > 0 {
		// The CGI reply that follows the line, whole (D71).
		r.CGIPage = make([]byte, r.Page)
		if _, err := io.ReadFull(br, r.CGIPage); err != nil {
			return nil, fmt.Errorf("read the daemon's page (%d bytes): %w", r.Page, err)
		}
		if !bytes.HasPrefix(r.CGIPage, []byte("Status: ")) || !bytes.Contains(r.CGIPage, []byte("\r\n\r\n")) {
			return nil, errors.New("the daemon's page is no CGI reply (a Status line, headers, a blank line)")
		}
	}
	return r, nil
}
