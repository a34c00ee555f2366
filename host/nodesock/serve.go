package nodesock

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages/wire"
)

// handler answers one ask that reads. It is called on the connection's own
// goroutine; ctx ends when the server does.
type handler func(ctx context.Context, a *wire.Ask) *wire.Reply

// askWait bounds how long a connection may take to send its ask: a caller
// writes it at once, so one that does not is stuck or hostile, and is not
// waited for.
const askWait = 5 * time.Second

// replyStart is every reply's first byte (each is one JSON object), which
// the server writes as soon as it has read an ask it will answer.
var replyStart = []byte("{")

// GaveUp is the server's log line for an ask whose caller was gone before
// the ask was taken: it did the work itself, and the server does none.
const GaveUp = "ocxd.sock: the caller gave up before the daemon took its ask; it does the work itself"

// replyWait bounds how long a reply may take to be written (a caller that
// stopped reading is not waited for).
const replyWait = 10 * time.Second

// server is the daemon's side of its socket.
type server struct {
	ln     net.Listener
	handle handler
	log    *slog.Logger
	// accept checks a connection's peer before anything is read from it;
	// unixhost.SameUser unless a test says otherwise.
	accept func(net.Conn) error
}

// New serves ln with handle; accept is the peer check (nil:
// unixhost.SameUser, the node's user alone).
func New(ln net.Listener, handle handler, accept func(net.Conn) error, log *slog.Logger) *server {
	if accept == nil {
		accept = unixhost.SameUser
	}
	return &server{ln: ln, handle: handle, log: log, accept: accept}
}

// Serve answers connections until ctx ends, then closes the listener and
// returns once every connection it took is done.
func (s *server) Serve(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { s.ln.Close() })
	defer stop()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("nodesock: accept: %w", err)
		}
		wg.Go(func() { s.serveConn(ctx, c) })
	}
}

func (s *server) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	if err := s.accept(c); err != nil {
		s.log.Warn("ocxd.sock: connection refused", "error", err)
		return
	}
	// The connection ends when the server does, whatever it waits on.
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	c.SetReadDeadline(time.Now().Add(askWait))
	line, err := wire.ReadLine(bufio.NewReader(c), wire.MaxAskLen)
	var reply *wire.Reply
	taken := false
	switch {
	case err != nil:
		reply = refusal(fmt.Sprintf("the ask did not arrive whole: %v", err))
	default:
		a, derr := wire.DecodeAsk(line)
		if derr != nil {
			reply = refusal("the ask does not read: " + derr.Error())
			break
		}
		// The ask is taken: the reply's first byte says so at once, before
		// any of the work (D75). A caller that waited nodesock.AnswerWait
		// for it and gave up (the daemon was stopped) has closed its end,
		// and does the work itself: the write fails, and none of it is
		// done here.
		c.SetWriteDeadline(time.Now().Add(replyWait))
		if _, err := c.Write(replyStart); err != nil {
			s.log.Info(GaveUp, "ask", string(a.Kind), "error", err)
			return
		}
		taken = true
		reply = s.handle(ctx, a)
		if reply == nil {
			reply = refusal("the daemon has no answer to " + string(a.Kind))
		}
	}
	if reply.Error != "" {
		s.log.Warn("ocxd.sock: refused an ask", "why", reply.Error)
	}
	b := reply.Line
	if b == nil {
		var err error
		if b, err = json.Marshal(reply); err != nil {
			b, _ = json.Marshal(refusal("the reply does not encode: " + err.Error()))
		}
		b = append(b, '\n')
	}
	if taken {
		if !bytes.HasPrefix(b, replyStart) {
			// No handler's reply begins otherwise: each is one JSON object.
			b, _ = json.Marshal(refusal("the reply does not begin as a JSON object"))
			b = append(b, '\n')
		}
		b = b[len(replyStart):]
	}
	c.SetWriteDeadline(time.Now().Add(replyWait))
	if _, err := c.Write(b); err != nil {
		s.log.Warn("ocxd.sock: the reply was not taken", "error", err)
	}
	// A reply made for this ask alone leaves its memory to hand back; a
	// kept one stays.
	if !reply.KeepMemory && len(b) >= bigReply {
		returnMemory()
	}
}

// bigReply is the size of a reply past which the memory its answer took
// is handed back to the system once it is written (a status of thousands
// of workspaces): the Go runtime would keep its peak resident for minutes.
// A smaller answer's memory is reused by the next.
const bigReply = 1 << 20

// returnMemory collects the garbage and returns the free pages to the
// system, one call at a time (another big reply meanwhile finds it done):
// after a big reply, which the caller already has, so it waits for none
// of it. A variable, so that a test counts its calls.
var returnMemory = func() {
	if returning.TryLock() {
		defer returning.Unlock()
		debug.FreeOSMemory()
	}
}

var returning sync.Mutex

// refusal is a reply saying why nothing was done.
func refusal(why string) *wire.Reply {
	r := wire.NewReply()
	r.Error = why
	return r
}

// Refusal is a handler's reply saying why it did nothing: the caller then
// does the work itself.
func Refusal(format string, args ...any) *wire.Reply {
	return refusal(fmt.Sprintf(format, args...))
}
