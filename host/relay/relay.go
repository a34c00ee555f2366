// Package relay carries connections from a loopback TCP port inside a
// sandbox to a unix socket the node bound into it: how a program that
// speaks only TCP (an agent CLI to its model, fossil to its server)
// reaches the node from a sandbox whose network is its own, the node's
// side of the socket deciding what lies behind it (ServeHTTP serves that
// side for the model proxy and the sync socket; docs/runners.md,
// docs/session.md).
package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// dialWait bounds each dial of the socket.
const dialWait = 10 * time.Second

// Relay is a listener on 127.0.0.1 whose every connection is carried to
// the unix socket Socket.
type Relay struct {
	Socket string
	ln     net.Listener
	log    *slog.Logger

	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
}

// Listen listens on 127.0.0.1:port (0 for any free port) and carries what
// connects to socket until Close. log may be nil.
func Listen(port int, socket string, log *slog.Logger) (*Relay, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return nil, fmt.Errorf("relay to %s: %w", socket, err)
	}
	r := &Relay{Socket: socket, ln: ln, log: log, conns: map[net.Conn]bool{}}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

// Addr is the address the relay listens on, host:port.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// URL is http://Addr, for a client that takes a base URL.
func (r *Relay) URL() string { return "http://" + r.Addr() }

func (r *Relay) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				r.log.Warn("relay: accept", slog.String("socket", r.Socket), slog.String("error", err.Error()))
			}
			return
		}
		if !r.track(c, true) {
			c.Close()
			return
		}
		r.wg.Add(1)
		go r.carry(c)
	}
}

// track adds (or removes) a connection; false once the relay is closed.
func (r *Relay) track(c net.Conn, add bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if add {
		if r.closed {
			return false
		}
		r.conns[c] = true
		return true
	}
	delete(r.conns, c)
	return true
}

// carry copies c to a connection to the socket and back, until both
// sides have closed; a side that ends closes its half of the other.
func (r *Relay) carry(c net.Conn) {
	defer r.wg.Done()
	defer r.track(c, false)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), dialWait)
	var d net.Dialer
	s, err := d.DialContext(ctx, "unix", r.Socket)
	cancel()
	if err != nil {
		r.log.Warn("relay: the node's socket", slog.String("socket", r.Socket), slog.String("error", err.Error()))
		return
	}
	if !r.track(s, true) {
		s.Close()
		return
	}
	defer r.track(s, false)
	defer s.Close()
	done := make(chan struct{}, 2)
	half := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go half(s, c)
	go half(c, s)
	<-done
	<-done
}

// Close stops listening, ends the connections under way and waits for
// their goroutines.
func (r *Relay) Close() error {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	err := r.ln.Close()
	r.wg.Wait()
	return err
}
