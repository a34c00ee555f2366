package remote

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/ocx-go/ocx/messages"
)

// PokeTaker is what takes the pokes a listener lets through: the
// daemon's puller.
type PokeTaker interface{ Poked() }

// Pokes takes the server's pokes on one address: a POST to any path that
// carries the secret node.json holds (Authorization: Bearer SECRET,
// compared in constant time), its body read to a bound and ignored, tells
// the taker and is answered 204; one without it is refused 401 and tells
// nothing, another method 405. A poke says only "pull now", and the
// puller takes one at most every pull.pokeGap (D81).
type Pokes struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// ListenPokes serves pokes on addr for taker, each carrying secret.
func ListenPokes(addr, secret string, taker PokeTaker, log *slog.Logger) (*Pokes, error) {
	if len(secret) < messages.MinPokeSecret {
		return nil, fmt.Errorf("take pokes on %s: no secret for them (node.json's pull.secret)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("take pokes on %s: %w", addr, err)
	}
	want := []byte("Bearer " + secret)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "a poke is a POST that says: pull now", http.StatusMethodNotAllowed)
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.Header.Get(pokeHeader)), want) != 1 {
			log.Debug("a poke without the secret refused", slog.String("from", r.RemoteAddr))
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "a poke carries the secret this node and its server's node.json hold (Authorization: Bearer SECRET): refused, nothing pulled", http.StatusUnauthorized)
			return
		}
		io.Copy(io.Discard, io.LimitReader(r.Body, 4<<10))
		taker.Poked()
		w.WriteHeader(http.StatusNoContent)
	})
	k := &Pokes{ln: ln, done: make(chan struct{}),
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}}
	go func() {
		defer close(k.done)
		if err := k.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("the pokes stopped", slog.String("error", err.Error()))
		}
	}()
	log.Info("taking pokes", slog.String("listen", ln.Addr().String()))
	return k, nil
}

// Addr is the address pokes are taken on.
func (k *Pokes) Addr() string { return k.ln.Addr().String() }

// Close stops taking pokes.
func (k *Pokes) Close() {
	if k == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	k.srv.Shutdown(ctx)
	<-k.done
}
