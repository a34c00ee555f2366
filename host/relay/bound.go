package relay

import (
	"io"
	"net"
	"sync"
	"time"
)

// refuseWait bounds the write of a refusal to a connection past the
// bound: a client that does not read holds up no accept.
const refuseWait = time.Second

// A refused connection is read from a little before it is closed, at
// most drainBytes within drainWait: on a Unix socket, closing one whose
// request is unread resets it, and the client reads ECONNRESET instead of
// the refusal it was written (seen under TestHostileLoad). At most
// maxDraining are drained at once (each a goroutine and a read buffer for
// a second at most); past that one is closed at once.
const (
	drainBytes  = 64 << 10
	drainWait   = time.Second
	maxDraining = 128
)

// Bounded is ln serving at most n connections at once (D80): one accepted
// past them is handed to refuse, which writes why in the socket's own
// protocol (within a second), and closed, and Accept goes on to the next;
// a connection served frees its place when it is closed. A session's own
// sockets are bounded so that what it opens cannot make the node's server
// hold more for it than n connections' worth.
func Bounded(ln net.Listener, n int, refuse func(net.Conn)) net.Listener {
	return &bounded{Listener: ln, slots: make(chan struct{}, n), draining: make(chan struct{}, maxDraining), refuse: refuse}
}

type bounded struct {
	net.Listener
	slots    chan struct{}
	draining chan struct{}
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
		c.SetWriteDeadline(time.Now().Add(refuseWait))
		l.refuse(c)
		select {
		case l.draining <- struct{}{}:
			go func() {
				defer func() { <-l.draining }()
				drain(c)
			}()
		default:
			c.Close()
		}
	}
}

// drain ends the refusal's side of c, reads what the client sent until it
// closes (at most drainBytes, within drainWait), and closes c.
func drain(c net.Conn) {
	defer c.Close()
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	c.SetReadDeadline(time.Now().Add(drainWait))
	io.CopyN(io.Discard, c, drainBytes)
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
