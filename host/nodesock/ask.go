package nodesock

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/wire"
)

// connectWait bounds how long a caller waits for the daemon's socket to
// take its connection (issue 24: 100 ms): a daemon that does not answer by
// then is taken for gone, and the caller reads the repository itself.
const connectWait = 100 * time.Millisecond

// AnswerWait bounds how long a caller waits, once its ask is written, for
// the daemon to take it: the first byte of the reply, which the daemon
// writes as soon as it has read the ask, before any of its work (D75). A
// daemon stopped (SIGSTOP) or stuck still lets the kernel take the
// connection and the ask, and would hold its caller until it goes on; by
// this bound the caller does the work itself instead. A live daemon takes
// an ask in 0.2 ms at p50 and 1 ms at p99 for one caller, 41-67 ms at p99
// and 125 ms at worst with eight callers at once and both cores busy
// (BenchmarkAskTaken, D75), so 250 ms is past any live daemon's worst,
// and a writer (`ocx post`, whose hook asks) still returns well inside a
// second. A live daemon found late costs only the fallback: it finds the
// caller gone and does none of the work.
const AnswerWait = 250 * time.Millisecond

// ErrNoDaemon: nothing answers on the daemon's socket.
var ErrNoDaemon = errors.New("no daemon answers on its socket")

// ErrNotTaken: the daemon took the connection but not the ask within
// AnswerWait (it is stopped, or stuck): the caller does the work itself,
// and the daemon, should it go on, finds the caller gone and does none of
// it (D75).
var ErrNotTaken = errors.New("the daemon took no ask")

// errRefused: the daemon answered, and said it did not do what was asked.
var errRefused = errors.New("the daemon refused")

// Ask asks the daemon on its socket (AGENTS/ocxd.sock) and reads its one
// reply, waiting at most connectWait for the connection, AnswerWait for
// the daemon to take the ask (the reply's first byte) and wait for the
// whole reply. Every failure is an error the caller falls back on:
// ErrNoDaemon when nothing answers, ErrNotTaken when the daemon took no
// ask in time, ErrRefused when the daemon says why it did nothing, and a
// reply that does not read names what is wrong with it.
func Ask(ctx context.Context, layout host.Layout, a *wire.Ask, wait time.Duration) (*wire.Reply, error) {
	line, err := json.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("encode the ask: %w", err)
	}
	dctx, cancel := context.WithTimeout(ctx, connectWait)
	c, err := unixhost.DialSocket(dctx, layout.Socket(), 0)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDaemon, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	start := time.Now()
	deadline := func(d time.Duration) {
		c.SetDeadline(start.Add(d))
		if ctx.Err() != nil {
			// Ended before the deadline was set: AfterFunc's may be lost.
			c.SetDeadline(time.Now())
		}
	}
	taken := min(wait, AnswerWait)
	deadline(taken)
	notTaken := func(err error) bool {
		var ne net.Error
		return errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil
	}
	if _, err := c.Write(append(line, '\n')); err != nil {
		if notTaken(err) {
			return nil, fmt.Errorf("%w within %s (it is stopped, or stuck): the ask was not read whole: %v", ErrNotTaken, taken, err)
		}
		return nil, fmt.Errorf("ask the daemon: %w", err)
	}
	br := bufio.NewReader(c)
	if _, err := br.Peek(1); err != nil {
		if notTaken(err) {
			return nil, fmt.Errorf("%w within %s (it is stopped, or stuck): %v", ErrNotTaken, taken, err)
		}
		if errors.Is(err, io.EOF) {
			return nil, errors.New("read the daemon's reply: the connection ended before its first byte")
		}
		return nil, fmt.Errorf("read the daemon's reply: %w", err)
	}
	deadline(wait)
	got, err := wire.ReadLine(br, wire.MaxReplyLen)
	if err != nil {
		return nil, fmt.Errorf("read the daemon's reply: %w", err)
	}
	r, err := wire.DecodeReply(got)
	if err != nil {
		return nil, fmt.Errorf("the daemon's reply: %w", err)
	}
	if r.Error != "" {
		return nil, fmt.Errorf("%w: %s", errRefused, r.Error)
	}
	if err := readBody(br, r); err != nil {
		return nil, err
	}
	return r, nil
}

// readBody reads what follows the reply's line, whole: the state
// document (D70), the page (D71) or the metrics' text its line counts.
func readBody(br io.Reader, r *wire.Reply) error {
	if r.Doc > 0 {
		r.StateDoc = make([]byte, r.Doc)
		if _, err := io.ReadFull(br, r.StateDoc); err != nil {
			return fmt.Errorf("read the daemon's state document (%d bytes): %w", r.Doc, err)
		}
		if err := messages.CheckStateDoc(r.StateDoc); err != nil {
			return fmt.Errorf("the daemon's reply: %w", err)
		}
	}
	if r.Page > 0 {
		r.CGIPage = make([]byte, r.Page)
		if _, err := io.ReadFull(br, r.CGIPage); err != nil {
			return fmt.Errorf("read the daemon's page (%d bytes): %w", r.Page, err)
		}
		if !bytes.HasPrefix(r.CGIPage, []byte("Status: ")) || !bytes.Contains(r.CGIPage, []byte("\r\n\r\n")) {
			return errors.New("the daemon's page is no CGI reply (a Status line, headers, a blank line)")
		}
	}
	if r.Metrics > 0 {
		r.MetricsText = make([]byte, r.Metrics)
		if _, err := io.ReadFull(br, r.MetricsText); err != nil {
			return fmt.Errorf("read the daemon's metrics (%d bytes): %w", r.Metrics, err)
		}
	}
	return nil
}
