package relay

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// ServeHTTP is the node's side of a socket a relay carries to: it serves
// srv (its Handler and limits set; its ErrorLog, when nil, goes to log) on
// every connection ln accepts until ctx ends, then closes ln, lets requests
// under way finish for a few seconds, and returns nil (or the listener's
// failure, prefixed by name). accept, when set, may refuse a connection
// before it is served (unixhost.SameUser); a refusal is logged as name's.
func ServeHTTP(ctx context.Context, name string, ln net.Listener, srv *http.Server, accept func(net.Conn) error, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if accept != nil {
		ln = &acceptingListener{Listener: ln, accept: accept, name: name, log: log}
	}
	if srv.ErrorLog == nil {
		srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("%s: %w", name, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	<-done
	return nil
}

// acceptingListener drops the connections accept refuses.
type acceptingListener struct {
	net.Listener
	accept func(net.Conn) error
	name   string
	log    *slog.Logger
}

func (l *acceptingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if err := l.accept(c); err != nil {
			l.log.Warn(l.name+": connection refused", slog.String("error", err.Error()))
			c.Close()
			continue
		}
		return c, nil
	}
}
