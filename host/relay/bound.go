package relay

import (
	"bytes"
	"io"
	"net"
	"sync"
	"time"
)

// refuseWait bounds the whole of a refusal: reading what the protocol
// needs before it answers, the answer, and the drain after it. A client
// that neither sends nor reads holds a refusal no longer.
const refuseWait = time.Second

// A refused connection is read from a little before it is closed, at
// most drainBytes: on a Unix socket, closing one whose request is unread
// resets it, and the client reads ECONNRESET instead of the refusal it
// was written (seen under TestHostileLoad). At most maxRefusing
// connections are refused at once (each a goroutine and a read buffer for
// a second at most); past that one is closed at once.
const (
	drainBytes  = 64 << 10
	maxRefusing = 128
)

// Bounded is ln serving at most n connections at once (D80): one accepted
// past them is handed to refuse, which reads what its protocol needs and
// writes why in the socket's own protocol, on a goroutine of its own
// (within refuseWait), and closed; Accept goes on to the next at once. A
// connection served frees its place when it is closed. A session's own
// sockets are bounded so that what it opens cannot make the node's server
// hold more for it than n connections' worth.
func Bounded(ln net.Listener, n int, refuse func(net.Conn)) net.Listener {
	return &bounded{Listener: ln, slots: make(chan struct{}, n), refusing: make(chan struct{}, maxRefusing), refuse: refuse}
}

type bounded struct {
	net.Listener
	slots    chan struct{}
	refusing chan struct{}
	refuse   func(net.Conn)
}

func (l *bounded) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &boundedConn{Conn: c, free: func() { <-l.slots }}, nil
		default:
		}
		select {
		case l.refusing <- struct{}{}:
			go func() {
				defer func() { <-l.refusing }()
				c.SetDeadline(time.Now().Add(refuseWait))
				l.refuse(c)
				drain(c)
			}()
		default:
			c.Close()
		}
	}
}

// drain ends the refusal's side of c, reads what the client sent until it
// closes (at most drainBytes, within the deadline set), and closes c.
func drain(c net.Conn) {
	defer c.Close()
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	io.CopyN(io.Discard, c, drainBytes)
}

// AwaitRequest reads from c until the end of an HTTP request's head (its
// blank line), at most drainBytes or until c's deadline. A refusal in
// HTTP is written after it: an HTTP client drops an answer that comes
// before its request ("readLoopPeekFailLocked", Go's net/http: an
// unsolicited response).
func AwaitRequest(c net.Conn) {
	var head []byte
	buf := make([]byte, 4096)
	for len(head) < drainBytes {
		n, err := c.Read(buf)
		head = append(head, buf[:n]...)
		if bytes.Contains(head, []byte("\r\n\r\n")) || err != nil {
			return
		}
	}
}

// boundedConn is a connection served, which frees its place once closed.
type boundedConn struct {
	net.Conn
	once sync.Once
	free func()
}

// NetConn is the connection accepted (unixhost.SameUser reads its peer).
func (c *boundedConn) NetConn() net.Conn { return c.Conn }

func (c *boundedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
}
