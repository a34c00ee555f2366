package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/ocx-go/ocx/messages/modelapi"
	"github.com/ocx-go/ocx/messages/toolio"
)

// MaxLineLen bounds one MCP message the server reads, its newline
// included (D80): the largest input a tool takes (toolio.MaxToolInputLen)
// and room for the JSON-RPC around it. A longer line is no call any tool
// would take: it is read to its end, dropped, and answered with an error.
const MaxLineLen = toolio.MaxToolInputLen + 64<<10

// MaxConns bounds the connections a session's MCP socket serves at once
// (D80): a runner's CLI holds one, the session one, and a tool's
// process one while it runs.
const MaxConns = 16

// lineWait bounds how long one message may take to arrive once its first
// byte has: a line sent a byte at a time holds a connection no longer.
// (A variable for a test's sake.)
var lineWait = time.Minute

// The JSON-RPC error codes the transport answers with.
const (
	codeInvalidRequest = -32600
	codeServerBusy     = -32000
)

// lineReader is what the MCP server reads of a connection (D80): whole
// lines of at most MaxLineLen bytes, one per Read at most, so the SDK's
// reader never holds more than one. A longer line is read to its end and
// dropped, and answered on the connection with a JSON-RPC error naming the
// bound and the id the line's first MaxLineLen bytes say (null when they
// say none); the connection serves on. A line that does not end within
// lineWait of its start ends the connection, said so on it.
type lineReader struct {
	c   net.Conn
	log *slog.Logger

	rd   []byte // what was read, not yet looked at, is pend (in rd)
	pend []byte
	line []byte // the line being read, while it is within the bound
	out  []byte // a line whole, to pass on
	over bool   // the line is past the bound: its id is id
	id   json.RawMessage
	in   bool // a line is under way: the read deadline runs
}

func newLineReader(c net.Conn, log *slog.Logger) *lineReader {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &lineReader{c: c, log: log, rd: make([]byte, 32<<10)}
}

// Read passes on the next whole line, or part of it.
func (l *lineReader) Read(p []byte) (int, error) {
	for len(l.out) == 0 {
		if err := l.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, l.out)
	l.out = l.out[n:]
	return n, nil
}

// Close closes the connection: a Read waiting returns.
func (l *lineReader) Close() error { return l.c.Close() }

// next reads until a line within the bound is whole (out), answering
// those past it.
func (l *lineReader) next() error {
	if cap(l.line) > 64<<10 {
		l.line = nil // what a long line grew goes with it
	}
	l.line = l.line[:0]
	for {
		if len(l.pend) == 0 {
			n, err := l.c.Read(l.rd)
			if n == 0 && err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					l.answer(nil, codeInvalidRequest, fmt.Sprintf("the message did not end within %v of its first byte; the node's MCP server closes the connection", lineWait))
				} else if len(l.line) > 0 && !l.over {
					// The last message, with no newline after it.
					l.out, l.in = l.line, false
					return nil
				}
				return err
			}
			l.pend = l.rd[:n]
			if !l.in {
				l.in = true
				l.c.SetReadDeadline(time.Now().Add(lineWait))
			}
		}
		chunk := l.pend
		end := bytes.IndexByte(chunk, '\n')
		if end >= 0 {
			chunk = chunk[:end+1]
		}
		l.pend = l.pend[len(chunk):]
		switch {
		case l.over:
		case len(l.line)+len(chunk) > MaxLineLen:
			l.over, l.id = true, lineID(l.line, chunk[:MaxLineLen-len(l.line)])
			l.line = l.line[:0]
		default:
			l.line = append(l.line, chunk...)
		}
		if end < 0 {
			continue
		}
		l.in = false
		l.c.SetReadDeadline(time.Time{})
		if !l.over {
			l.out = l.line
			return nil
		}
		l.over = false
		l.log.Warn("mcp: a message past the bound refused", slog.Int("bound", MaxLineLen), slog.String("id", string(l.id)))
		l.answer(l.id, codeInvalidRequest, fmt.Sprintf("the message is longer than %d bytes, the most the node's MCP server reads of one (a tool's input is at most %d bytes); it was read to its end and dropped", MaxLineLen, toolio.MaxToolInputLen))
	}
}

// lineID is the id a message's first bytes (head, then rest) say: a
// string or a number at the top level of its object; nil when they say
// none.
func lineID(head, rest []byte) json.RawMessage {
	s := modelapi.NewObjectScanner("id")
	s.Write(head)
	s.Write(rest)
	raw := s.Value("id").Raw
	if len(raw) == 0 || raw[0] != '"' && raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return nil
	}
	return json.RawMessage(bytes.Clone(raw))
}

// rpcError is a JSON-RPC error response.
type rpcError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// answer writes a JSON-RPC error on the connection, in one write: the
// SDK writes each of its messages in one too, and a connection's writes
// do not interleave.
func (l *lineReader) answer(id json.RawMessage, code int, msg string) {
	writeRPCError(l.c, id, code, msg)
}

func writeRPCError(c net.Conn, id json.RawMessage, code int, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	e := rpcError{JSONRPC: "2.0", ID: id}
	e.Error.Code, e.Error.Message = code, msg
	b, _ := json.Marshal(e)
	c.Write(append(b, '\n'))
}
