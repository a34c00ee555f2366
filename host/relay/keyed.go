package relay

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// keyLen is the length in bytes of a keyed relay's key (NewKey): 32
// random bytes, written as 64 hex digits.
const keyLen = 32

// NewKey makes a key for a keyed relay: keyLen random bytes in hex, made
// fresh for each relay, so that a key seen once opens nothing after it.
func NewKey() (string, error) {
	var b [keyLen]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("a relay's key: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// credentials are the headers a keyed relay reads its key from and never
// carries on: the node's side adds the credential the API takes.
var credentials = []string{"X-Api-Key", "Authorization", "Proxy-Authorization", "Api-Key", "Cookie"}

// Keyed is an HTTP relay on 127.0.0.1 that carries a request to the unix
// socket Socket only when it holds the relay's key: in X-Api-Key, or in
// Authorization as a bearer token (how Claude Code and Codex send an API
// key). The key is compared in constant time before a byte of the request
// is carried, and goes no further: every credential header is removed. A
// request without it is answered 401, naming why, and logged; nothing of
// it reaches the socket. Where a sandbox shares the host's network its
// loopback is everyone's on the host: the key, which only the process
// given it holds, is what makes the relay its own (D79).
type Keyed struct {
	Socket string
	key    []byte
	ln     net.Listener
	srv    *http.Server
	tr     *http.Transport
	log    *slog.Logger
	served sync.WaitGroup // the server's goroutine

	mu       sync.Mutex
	closed   bool
	handlers sync.WaitGroup // the requests under way
}

// ListenKeyed listens on a free port of 127.0.0.1 and carries each HTTP
// request holding key to socket until Close. log may be nil.
func ListenKeyed(socket, key string, log *slog.Logger) (*Keyed, error) {
	if len(key) < 16 {
		return nil, errors.New("a keyed relay's key is shorter than 16 bytes")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("relay to %s: %w", socket, err)
	}
	k := &Keyed{Socket: socket, key: []byte(key), ln: ln, log: log}
	k.tr = &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, dialWait)
			defer cancel()
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		// The reply's bytes as they come: the node's side decides them.
		DisableCompression:  true,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
	}
	node := &url.URL{Scheme: "http", Host: "node"}
	fwd := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(node)
			for _, h := range credentials {
				pr.Out.Header.Del(h)
			}
		},
		Transport: k.tr,
		// A stream goes on as it comes.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			k.log.Warn("relay: the node's socket", slog.String("socket", socket), slog.String("error", err.Error()))
			writeRelayError(w, http.StatusBadGateway, "api_error", fmt.Sprintf("the relay could not reach the node's socket: %v", err))
		},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	k.srv = &http.Server{Handler: k.guard(fwd), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	k.served.Add(1)
	go func() {
		defer k.served.Done()
		k.srv.Serve(ln)
	}()
	return k, nil
}

// Addr is the address the relay listens on, host:port.
func (k *Keyed) Addr() string { return k.ln.Addr().String() }

// URL is http://Addr, for a client that takes a base URL.
func (k *Keyed) URL() string { return "http://" + k.Addr() }

// Key is the relay's key, for the one client it is made for: never for a
// command line, which every user of the host may read.
func (k *Keyed) Key() string { return string(k.key) }

// guard passes on only the requests that hold the key (Check).
func (k *Keyed) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !k.enter() {
			writeRelayError(w, http.StatusServiceUnavailable, "api_error", "the relay is closing: the turn is over")
			return
		}
		defer k.handlers.Done()
		if why := check(r.Header, k.key); why != "" {
			k.log.Warn("relay: request refused", slog.String("why", why), slog.String("from", r.RemoteAddr),
				slog.String("method", r.Method), slog.String("path", r.URL.Path))
			// Closed after the answer: what the body still holds is read
			// by nobody.
			w.Header().Set("Connection", "close")
			writeRelayError(w, http.StatusUnauthorized, "authentication_error",
				"the relay to this session's model refuses the request: "+why+"; only the session's own agent CLI holds this turn's key")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// check says why a request's header does not hold key ("" when it does):
// X-Api-Key KEY or Authorization "Bearer KEY", compared in constant time,
// and no credential header holding anything else.
func check(h http.Header, key []byte) string {
	var held [][]byte
	for _, v := range h.Values("X-Api-Key") {
		held = append(held, []byte(v))
	}
	for _, v := range h.Values("Authorization") {
		scheme, tok, ok := strings.Cut(v, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return "its Authorization is not a bearer token"
		}
		held = append(held, []byte(strings.TrimSpace(tok)))
	}
	if len(held) == 0 {
		return "it carries no key (X-Api-Key, or Authorization: Bearer)"
	}
	for _, v := range held {
		if subtle.ConstantTimeCompare(v, key) != 1 {
			return "its key is not this turn's"
		}
	}
	return ""
}

// writeRelayError answers in the shape both APIs' clients read: Anthropic's
// {"type": "error", "error": {"type", "message"}}, whose error.message is
// also where OpenAI's clients look.
func writeRelayError(w http.ResponseWriter, status int, kind, msg string) {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": kind, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// enter counts a request under way; false once the relay is closed.
func (k *Keyed) enter() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return false
	}
	k.handlers.Add(1)
	return true
}

// Close stops listening, ends the requests under way and waits for them
// and the server.
func (k *Keyed) Close() error {
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	err := k.srv.Close()
	k.served.Wait()
	k.handlers.Wait()
	k.tr.CloseIdleConnections()
	return err
}
