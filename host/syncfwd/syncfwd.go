// Package syncfwd is the node's side of a session's sync socket
// (sync.sock, D49): it forwards Fossil's sync requests from inside a
// sandbox to the one server of the session's project, as node.json names
// it, adding nothing, so that a session whose sandbox has no network still
// reads and writes the record as its agent login. The bytes are the
// agent's own (its login card, its password); the node only carries them,
// and only when their first card is a login as the workspace's own agent
// login (D81).
package syncfwd

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/host/relay"
)

// Bounds on what one session may ask of the node through its socket.
const (
	// maxBody bounds a request's body and a reply's: fossilio's client
	// reads a reply up to 64 MiB, and Fossil sends one artifact whole.
	maxBody = 64 << 20
	// timeout bounds one request from its arrival to the reply's last byte
	// (Fossil's own server ends a request after 10 minutes).
	timeout = 10 * time.Minute
	// maxInFlight bounds the requests forwarded at once; more wait.
	maxInFlight = 4
	// maxFirstCard bounds the first card, the login card, of a request's
	// payload; maxCardInput the bytes of the body read to find it in a
	// compressed payload.
	maxFirstCard = 4 << 10
	maxCardInput = 64 << 10
)

// syncTypes are the content types of Fossil's sync protocol: the only
// requests forwarded.
var syncTypes = []string{"application/x-fossil", "application/x-fossil-uncompressed", "application/x-fossil-debug"}

// keptHeaders are the request headers carried to the server; every other
// (a cookie, an authorization, a forwarded-for) is dropped: a sync request
// authenticates by the login card in its body.
var keptHeaders = []string{"Content-Type", "User-Agent"}

// Forwarder forwards sync requests to Target alone, each logged in as
// Login.
type Forwarder struct {
	target *url.URL
	login  string
	rp     *httputil.ReverseProxy
	slots  chan struct{}
	log    *slog.Logger
	// maxBody is maxBody, smaller in tests.
	maxBody int64
}

// New is the forwarder to target, the project's server URL from node.json
// (http or https, a host, maybe a path; no user, query or fragment), for
// the workspace whose agent login is login. It forwards a request only
// when it is a POST of Fossil's sync protocol with a Content-Length of at
// most maxBody, to target's path, either in origin form (POST /PATH, as
// fossilio's client sends it over the socket) or in proxy form naming
// target itself (POST http://HOST/PATH, as the fossil command sends it
// with --proxy; a user name there is dropped), and whose payload's first
// card is `login LOGIN NONCE SIGNATURE` with LOGIN the workspace's own:
// a request with no login card would be answered as nobody, or as setup
// by a server that trusts its loopback (--localauth, `fossil ui`), and
// one with another login's card is not this workspace's (D81). Anything
// else is refused, naming what it serves: another host, port, path or
// scheme 403, another method 405 (CONNECT too: no tunnel), another
// content type 415, no length 411, a longer body 413, another first card
// 403. A reply longer than maxBody is cut, and the connection ended.
// transport may be nil.
func New(target, login string, transport http.RoundTripper, log *slog.Logger) (*Forwarder, error) {
	if login == "" || strings.ContainsAny(login, " \t\r\n\\") {
		return nil, fmt.Errorf("sync forwarder: the workspace's login %q is not one a login card names", login)
	}
	u, err := url.Parse(target)
	switch {
	case err != nil:
		return nil, fmt.Errorf("sync forwarder: the server's URL %q: %w", target, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("sync forwarder: the server's URL %q is not http or https", target)
	case u.Host == "":
		return nil, fmt.Errorf("sync forwarder: the server's URL %q names no host", target)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("sync forwarder: the server's URL %q holds a user, a query or a fragment", target)
	}
	if u.Path == "" {
		u.Path = "/"
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if transport == nil {
		// Never the node's own proxy settings: the one server, directly.
		transport = &http.Transport{Proxy: nil, DisableKeepAlives: true, ResponseHeaderTimeout: timeout,
			DialContext: (&net.Dialer{Timeout: 30 * time.Second}).DialContext}
	}
	f := &Forwarder{target: u, login: login, slots: make(chan struct{}, maxInFlight), log: log, maxBody: maxBody}
	f.rp = &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			out := pr.Out
			out.URL = &url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
			out.Host = u.Host
			kept := http.Header{}
			for _, h := range keptHeaders {
				if v := pr.In.Header.Values(h); len(v) > 0 {
					kept[h] = v
				}
			}
			out.Header = kept
		},
		ModifyResponse: func(r *http.Response) error {
			if r.ContentLength > f.maxBody {
				return fmt.Errorf("the server's reply is %d bytes, more than the %d a session's socket carries", r.ContentLength, f.maxBody)
			}
			if r.ContentLength >= 0 {
				r.Body = &boundedBody{rc: r.Body, left: f.maxBody}
				return nil
			}
			// A reply that does not say its length is read whole first, so
			// that one past the bound is refused rather than cut (an
			// HTTP/1.0 client, as fossil is, would take a cut reply ended
			// by a close for whole).
			b, err := io.ReadAll(io.LimitReader(r.Body, f.maxBody+1))
			r.Body.Close()
			if err != nil {
				return fmt.Errorf("the server's reply: %w", err)
			}
			if int64(len(b)) > f.maxBody {
				return fmt.Errorf("the server's reply is more than the %d bytes a session's socket carries", f.maxBody)
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
			r.ContentLength = int64(len(b))
			r.TransferEncoding = nil
			r.Header.Set("Content-Length", strconv.Itoa(len(b)))
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Warn("sync request failed", slog.String("error", err.Error()))
			status := http.StatusBadGateway
			if errors.Is(err, context.DeadlineExceeded) {
				status = http.StatusGatewayTimeout
			}
			refuse(w, status, fmt.Sprintf("the server at %s: %v", u, err))
		},
	}
	return f, nil
}

// Target is the one URL the forwarder forwards to.
func (f *Forwarder) Target() string { return f.target.String() }

func (f *Forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if status, why := f.check(r); status != 0 {
		f.log.Warn("sync request refused", slog.String("method", r.Method), slog.String("target", r.RequestURI), slog.String("why", why))
		refuse(w, status, why)
		return
	}
	body, why := f.loggedIn(r)
	if why != "" {
		f.log.Warn("sync request refused", slog.String("method", r.Method), slog.String("target", r.RequestURI), slog.String("why", why))
		refuse(w, http.StatusForbidden, why)
		return
	}
	r.Body = body
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	select {
	case f.slots <- struct{}{}:
		defer func() { <-f.slots }()
	case <-ctx.Done():
		refuse(w, http.StatusServiceUnavailable, "no slot to forward the request in time")
		return
	}
	t0 := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	f.rp.ServeHTTP(sw, r.WithContext(ctx))
	f.log.Info("sync request", slog.Int64("bytes", r.ContentLength), slog.Int("status", sw.status), slog.Duration("took", time.Since(t0)))
}

// check says whether r may be forwarded: 0, or the status and why.
func (f *Forwarder) check(r *http.Request) (int, string) {
	serves := "this socket forwards Fossil's sync requests (POST) to " + f.target.String() + " only"
	if r.Method != http.MethodPost {
		return http.StatusMethodNotAllowed, fmt.Sprintf("%s is refused: %s", r.Method, serves)
	}
	if r.URL.IsAbs() {
		if !strings.EqualFold(r.URL.Scheme, f.target.Scheme) || !sameHost(r.URL, f.target) {
			return http.StatusForbidden, fmt.Sprintf("a request for %s://%s is refused: %s", r.URL.Scheme, r.URL.Host, serves)
		}
	}
	path := r.URL.Path
	if path == "" {
		path = "/"
	}
	if path != f.target.Path || r.URL.RawQuery != "" || r.URL.Fragment != "" {
		return http.StatusForbidden, fmt.Sprintf("a request for the path %q is refused: %s", r.URL.RequestURI(), serves)
	}
	ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || !contains(syncTypes, ct) {
		return http.StatusUnsupportedMediaType, fmt.Sprintf("content type %q is refused: %s", r.Header.Get("Content-Type"), serves)
	}
	if r.ContentLength < 0 || len(r.TransferEncoding) > 0 {
		return http.StatusLengthRequired, "a request must say its length (Content-Length)"
	}
	if r.ContentLength > f.maxBody {
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("a request of %d bytes is refused: a session's socket carries at most %d", r.ContentLength, f.maxBody)
	}
	return 0, ""
}

// loggedIn reads the first card of r's payload (firstCard) and says why
// it is not a login as the workspace's own login, "" when it is; the body
// returned is r's whole, what was read to find the card first.
func (f *Forwarder) loggedIn(r *http.Request) (io.ReadCloser, string) {
	serves := fmt.Sprintf("this socket forwards the sync requests of %s to %s only, each opening with its login card", f.login, f.target)
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	card, read, err := firstCard(ct, r.Body)
	switch {
	case err != nil:
		return nil, fmt.Sprintf("%v: %s", err, serves)
	case len(card) == 0 || card[0] != "login":
		first := ""
		if len(card) > 0 {
			first = card[0]
		}
		return nil, fmt.Sprintf("the request's first card is %q, not a login card: %s", clip(first), serves)
	case len(card) != 4:
		return nil, fmt.Sprintf("the request's login card has %d fields, not 4 (login USER NONCE SIGNATURE): %s", len(card), serves)
	case card[1] != f.login:
		return nil, fmt.Sprintf("the request logs in as %q, not as the workspace's own login: %s", clip(card[1]), serves)
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(read), r.Body), r.Body}, ""
}

// firstCard reads the first card of a sync request's payload from body,
// of content type ct: its fields as Fossil splits them, and the bytes of
// body it read to find it (at most 64 KiB), which the request goes on
// with. A payload of application/x-fossil is its length in four bytes and
// a zlib stream, decompressed as far as the card; the others are plain.
// A card that does not end within maxFirstCard bytes is an error.
func firstCard(ct string, body io.Reader) ([]string, []byte, error) {
	var read bytes.Buffer
	in := io.TeeReader(io.LimitReader(body, maxCardInput), &read)
	payload := in
	if strings.EqualFold(ct, "application/x-fossil") {
		var size [4]byte
		_, err := io.ReadFull(in, size[:])
		var z io.ReadCloser
		if err == nil {
			z, err = zlib.NewReader(in)
		}
		if err != nil {
			return nil, read.Bytes(), fmt.Errorf("the request's payload is not compressed as application/x-fossil says (%v)", err)
		}
		defer z.Close()
		payload = z
	}
	line, err := bufio.NewReaderSize(io.LimitReader(payload, maxFirstCard), maxFirstCard).ReadString('\n')
	if err != nil {
		return nil, read.Bytes(), fmt.Errorf("the request's first card does not end within %d bytes (%v)", maxFirstCard, err)
	}
	return strings.Fields(line), read.Bytes(), nil
}

// clip is s cut for a refusal.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// sameHost compares two URLs' hosts and ports, the scheme's default port
// standing in for one left out.
func sameHost(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if strings.EqualFold(u.Scheme, "https") {
			return "443"
		}
		return "80"
	}
	return strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// refuse answers with the forwarder's own error: plain text, since a
// Fossil client shows what it gets.
func refuse(w http.ResponseWriter, status int, why string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Ocx-Sync", "refused")
	w.WriteHeader(status)
	io.WriteString(w, "ocx sync socket: "+why+"\n")
}

// errReplyTooLong ends a reply past maxBody.
var errReplyTooLong = errors.New("the server's reply is longer than a session's socket carries")

// boundedBody is a reply's body cut at its bound: reading past it fails,
// so the reply copied to the sandbox ends there and its connection is
// ended rather than the reply taken for whole.
type boundedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, errReplyTooLong
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }

// statusWriter keeps the status written, for the log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

// Flush passes a flush on, so a streamed reply is not held back.
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// maxConns bounds the connections a session's sync socket serves at
// once (D80): fossil opens one per sync, and maxInFlight of them are
// forwarded at a time.
const maxConns = 16

// Serve serves h on every connection ln accepts until ctx ends
// (relay.ServeHTTP), at most MaxConns at once (relay.Bounded: one past
// them is answered 503, naming the bound, and closed): accept, when set,
// may refuse a connection before it is served (unixhost.SameUser).
func Serve(ctx context.Context, ln net.Listener, h http.Handler, accept func(net.Conn) error, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln = relay.Bounded(ln, maxConns, func(c net.Conn) {
		relay.AwaitRequest(c)
		why := fmt.Sprintf("this session's sync socket serves at most %d connections at once; one must close before another is served", maxConns)
		log.Warn("sync socket: connection refused", slog.String("why", why))
		body := "ocx sync socket: " + why + "\n"
		fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nX-Ocx-Sync: refused\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	})
	return relay.ServeHTTP(ctx, "sync socket", ln, &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10}, accept, log)
}
