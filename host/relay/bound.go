package relay

import (
	"net"
	"sync"
	"time"
)

// refuseWait bounds the write of a refusal to a connection past the
// bound: a client that does not read holds up no accept.
const refuseWait = time.Second

// Bounded is ln serving at most n connections at once (D80): one accepted
// past them is handed to refuse, which writes why in the socket's own
// protocol (within a second), and closed, and Accept goes on to the next;
// a connection served frees its place when it is closed. A session's own
// sockets are bounded so that what it opens cannot make the node's server
// hold more for it than n connections' worth.
func Bounded(ln net.Listener, n int, refuse func(net.Conn)) net.Listener {
	return &bounded{Listener: ln, slots: make(chan struct{}, n), refuse: refuse}
}

type bounded struct {
	net.Listener
	slots  chan struct{}
	refuse func(net.Conn)
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
		c.Close()
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
