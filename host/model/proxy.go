package model

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ocx-go/ocx/host/relay"
	"github.com/ocx-go/ocx/messages/modelapi"
)

// InfoPath is the proxy's own endpoint: GET answers Info as JSON, so a
// runner learns which API to speak. It is never forwarded.
const InfoPath = "/ocx/model"

// Info is what InfoPath answers: the API the native runner speaks, and
// every API the proxy serves.
type Info struct {
	API  API   `json:"api"`
	APIs []API `json:"apis"`
}

// MaxBodyLen bounds a request the proxy forwards.
const MaxBodyLen = modelapi.MaxAPIBodyLen

// NewProxy is the model proxy for c, for a session whose definition names
// the model only. GET InfoPath answers c's APIs. A POST to one of an
// API's endpoints (API.Paths: Anthropic's Messages, OpenAI's chat
// completions and Responses, streamed or not) naming only as its model
// (RequestModel, Accepts) is forwarded to that API's base URL with the
// client's credential headers removed and its key added (Authorization:
// Bearer for openai, x-api-key for anthropic; none when keys holds none
// for it). A reply goes back as it comes, a stream event by event, with
// the key replaced by "[key]" wherever a line holds it. A POST naming
// another model, or none, is refused with 403 (400 for a body that does
// not say), naming it and only; anything else is refused with 404. Errors
// are JSON {"error": MESSAGE}.
func NewProxy(c *Config, keys map[API]string, only string, log *slog.Logger) (http.Handler, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if only == "" {
		return nil, errors.New("model proxy: no model named: a session's proxy serves the model its definition names")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	eps := c.Endpoints()
	var apis []API
	var paths []string
	for _, api := range []API{Anthropic, OpenAI} {
		e, ok := eps[api]
		if !ok {
			continue
		}
		apis = append(apis, api)
		fwd := forwarder(api, e, keys[api], log)
		for _, path := range api.Paths() {
			paths = append(paths, "POST "+path)
			mux.Handle("POST "+path, onlyModel(api, only, fwd, log))
		}
	}
	info, _ := json.Marshal(Info{API: c.Primary(), APIs: apis})
	mux.HandleFunc("GET "+InfoPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(info)
	})
	served := fmt.Sprintf("GET %s, %s", InfoPath, strings.Join(paths, ", "))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("the model proxy serves %s only", served))
	})
	return mux, nil
}

// forwarder is the reverse proxy to one API's endpoint e, adding key.
func forwarder(api API, e Endpoint, key string, log *slog.Logger) *httputil.ReverseProxy {
	target, _ := url.Parse(e.BaseURL) // validated
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.URL.RawQuery = "" // the path is the API's endpoint, nothing more
			// The allowed headers alone (headers.go): no credential, no
			// account, and no Accept-Encoding, so that the reply comes as
			// the API wrote it, the key found in it.
			var dropped []string
			pr.Out.Header, dropped = forwardedHeader(api, pr.In.Header)
			if len(dropped) > 0 {
				log.Info("model request's betas left out", slog.String("betas", strings.Join(dropped, ",")))
			}
			switch {
			case key == "":
			case api == Anthropic:
				pr.Out.Header.Set("X-Api-Key", key)
			default:
				pr.Out.Header.Set("Authorization", "Bearer "+key)
			}
		},
		// A stream goes on as it comes: each write is flushed.
		FlushInterval: -1,
		ModifyResponse: func(r *http.Response) error {
			filterReply(r.Header, key)
			if key == "" {
				return nil
			}
			r.Body = newRedactor(r.Body, key)
			r.ContentLength = -1
			r.Header.Del("Content-Length")
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// A body refused on the way (checkedBody): its refusal, the
			// rest of it read to nothing first.
			var f *refusal
			if errors.As(err, &f) {
				if b, ok := r.Body.(*checkedBody); ok {
					b.drain()
				}
				refuse(w, r, f, log)
				return
			}
			log.Warn("model request failed", slog.String("error", redact(err.Error(), key)))
			status := http.StatusBadGateway
			if errors.Is(err, context.DeadlineExceeded) {
				status = http.StatusGatewayTimeout
			}
			writeError(w, status, redact(fmt.Sprintf("the model's API at %s: %v", e.BaseURL, err), key))
		},
	}
}

// onlyModel passes a request to next only when its body names only's
// model (Accepts), reading the body as next forwards it (checkedBody,
// D80): a body whose first bytes say another model, or that is short and
// says none, is refused before next sees it; one that says so later is
// refused on the way (forwarder's ErrorHandler answers the refusal). A
// body declared over MaxBodyLen is refused unread. Behind the session's
// meter, the body passes through its grant's cap (D79): its output bound
// capped as it passes (forwarded without a length where the cap may
// lengthen it), refused likewise where the bound does not read.
func onlyModel(api API, only string, next http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > MaxBodyLen {
			w.Header().Set("Connection", "close")
			refuse(w, r, tooLarge(), log)
			return
		}
		rc := http.NewResponseController(w)
		rc.SetReadDeadline(time.Now().Add(bodyWait)) // not on a recorder: a test's
		m := meterOf(r.Context())
		b := newCheckedBody(http.MaxBytesReader(w, r.Body, MaxBodyLen), api, only, func() { rc.SetReadDeadline(time.Time{}) }, m)
		if f := b.start(); f != nil {
			b.drain()
			refuse(w, r, f, log)
			return
		}
		r.Body = b
		if b.cap != nil && b.cap.Grows() {
			r.ContentLength = -1 // sent chunked
		}
		log.Info("model request", slog.String("path", r.URL.Path), slog.String("model", only), slog.Int64("bytes", r.ContentLength))
		next.ServeHTTP(w, r)
	})
}

// refuse answers a refusal: the meter's in the API's own error shape,
// 429 with Retry-After.
func refuse(w http.ResponseWriter, r *http.Request, f *refusal, log *slog.Logger) {
	log.Warn("model request refused", slog.String("path", r.URL.Path), slog.String("why", f.why))
	if f.shape == modelapi.ShapeNone {
		writeError(w, f.status, f.why)
		return
	}
	if f.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeAPIError(w, f.shape, f.status, f.why)
}

// claudeAliases are the model names Claude Code takes for a family and
// sends expanded: "sonnet" goes out as "claude-sonnet-5-5".
var claudeAliases = []string{"sonnet", "opus", "haiku"}

// Accepts says whether a request naming model got may go on for a session
// whose definition names only: the same name; or, on Anthropic's API, a
// definition naming one of Claude Code's aliases (sonnet, opus, haiku) and
// a request naming a Claude model of that family (claude-sonnet-..., or
// the older claude-3-5-sonnet-...), as the CLI expands it.
func Accepts(api API, only, got string) bool {
	if got == only {
		return true
	}
	if api != Anthropic || !slices.Contains(claudeAliases, only) || !strings.HasPrefix(got, "claude-") {
		return false
	}
	return slices.Contains(strings.Split(got, "-"), only)
}

// requestModel is the model a request to either API names: the "model"
// key of the body's top-level object (the same key in openai's and
// anthropic's requests), its name compared without case, as a server
// written in Go reads it. A body that is not one JSON object, has no
// "model", has it twice (which a server might read either way) or not as
// a string is an error saying so. It reads as the proxy does
// (checkedBody).
func requestModel(body []byte) (string, error) {
	s := modelapi.NewObjectScanner("model")
	s.Write(body)
	if err := s.Close(); err != nil {
		return "", fmt.Errorf("its body is not a JSON object (%v)", err)
	}
	v := s.Value("model")
	var model string
	switch {
	case v.Seen == 0:
		return "", errors.New("it names no model")
	case v.Seen > 1:
		return "", errors.New(`its body names "model" twice`)
	case v.Long:
		return "", fmt.Errorf(`its "model" is longer than %d bytes`, modelapi.MaxScanValueLen)
	case json.Unmarshal(v.Raw, &model) != nil:
		return "", errors.New(`its "model" is not a string`)
	}
	return model, nil
}

// Refusing is the proxy of a node whose model.json does not read: every
// request, InfoPath too, is refused with 503 and err's text, so that a
// runner says why there is no model.
func Refusing(err error) http.Handler {
	msg := err.Error()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusServiceUnavailable, msg)
	})
}

// ErrorReply is the proxy's own error body.
type ErrorReply struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(ErrorReply{Error: msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Ocx-Proxy", "1")
	w.WriteHeader(status)
	w.Write(b)
}

// redactor is a reply's body with the key replaced by "[key]": an API
// that echoes a key it refuses must not hand it to the sandbox. It passes
// each line on once it is whole (so a stream's events go on as they
// come), and a line longer than holdMax on all but its last bytes, which
// a key could begin in.
type redactor struct {
	body    io.ReadCloser
	key     []byte
	pending []byte
	out     []byte
	err     error
	buf     [32 << 10]byte
}

// holdMax bounds what the redactor holds back waiting for a line's end.
const holdMax = 64 << 10

func newRedactor(body io.ReadCloser, key string) *redactor {
	return &redactor{body: body, key: []byte(key)}
}

func (r *redactor) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.err != nil {
			if len(r.pending) > 0 {
				r.out = bytes.ReplaceAll(r.pending, r.key, []byte("[key]"))
				r.pending = nil
				continue
			}
			return 0, r.err
		}
		n, err := r.body.Read(r.buf[:])
		r.pending = append(r.pending, r.buf[:n]...)
		r.err = err
		if i := bytes.LastIndexByte(r.pending, '\n'); i >= 0 {
			r.out = bytes.ReplaceAll(r.pending[:i+1], r.key, []byte("[key]"))
			r.pending = append([]byte(nil), r.pending[i+1:]...)
		} else if len(r.pending) > holdMax {
			done := bytes.ReplaceAll(r.pending, r.key, []byte("[key]"))
			keep := len(r.key) - 1
			r.out = done[:len(done)-keep]
			r.pending = append([]byte(nil), done[len(done)-keep:]...)
		}
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

func (r *redactor) Close() error { return r.body.Close() }

func redact(s, key string) string {
	if key == "" {
		return s
	}
	return string(bytes.ReplaceAll([]byte(s), []byte(key), []byte("[key]")))
}

// MaxConns bounds the connections a session's model socket serves at
// once (D80): far more than a runner's CLI opens (its requests in
// parallel), few enough that what a sandbox opens holds little.
const MaxConns = 32

// idleWait closes a connection idle between requests.
const idleWait = 2 * time.Minute

// Serve serves h on every connection ln accepts until ctx ends
// (relay.ServeHTTP), at most MaxConns at once (relay.Bounded: one past
// them is answered 503, once its request has come, and closed): accept, when set, may refuse a
// connection before it is served (unixhost.SameUser). A request's headers
// must come within 10 s, its body within bodyWait (onlyModel), and an
// idle connection is closed after idleWait.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, accept func(net.Conn) error, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln = relay.Bounded(ln, MaxConns, func(c net.Conn) {
		relay.AwaitRequest(c)
		msg := fmt.Sprintf("this session's model socket serves at most %d connections at once; one must close before another is served", MaxConns)
		log.Warn("model proxy: connection refused", slog.String("why", msg))
		b, _ := json.Marshal(ErrorReply{Error: msg})
		fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nX-Ocx-Proxy: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: idleWait}
	return relay.ServeHTTP(ctx, "model proxy", ln, srv, accept, log)
}
