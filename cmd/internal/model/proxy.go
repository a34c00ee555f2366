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
	"strconv"
	"time"
)

// InfoPath is the proxy's own endpoint: GET answers Info as JSON, so a
// runner learns which API to speak. It is never forwarded.
const InfoPath = "/ocx/model"

// Info is what InfoPath answers.
type Info struct {
	API API `json:"api"`
}

// MaxBodyLen bounds a request the proxy forwards and a reply it reads.
const MaxBodyLen = 32 << 20

// credentialHeaders are the headers a client's request loses: the proxy
// alone says who is calling.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "Proxy-Authorization", "Cookie", "Api-Key"}

// NewProxy is the model proxy for c, for a session whose definition names
// the model only: GET InfoPath answers c's API; a POST to the API's one
// endpoint (API.Path) naming only as its model (RequestModel) is forwarded
// to c.BaseURL with the client's credential headers removed and key added
// (Authorization: Bearer for openai, x-api-key for anthropic; none when
// key is ""), the key replaced by "[key]" in any reply that holds it; a
// POST naming another model, or none, is refused with 403 (400 for a body
// that does not say), naming it and only; anything else is refused with
// 404. Errors are JSON {"error": MESSAGE}.
func NewProxy(c *Config, key, only string, log *slog.Logger) (http.Handler, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if only == "" {
		return nil, errors.New("model proxy: no model named: a session's proxy serves the model its definition names")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	target, _ := url.Parse(c.BaseURL) // validated
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			for _, h := range credentialHeaders {
				pr.Out.Header.Del(h)
			}
			switch {
			case key == "":
			case c.API == Anthropic:
				pr.Out.Header.Set("X-Api-Key", key)
			default:
				pr.Out.Header.Set("Authorization", "Bearer "+key)
			}
		},
		ModifyResponse: func(r *http.Response) error {
			if key == "" {
				return nil
			}
			return redactBody(r, key)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Warn("model request failed", slog.String("error", redact(err.Error(), key)))
			status := http.StatusBadGateway
			if errors.Is(err, context.DeadlineExceeded) {
				status = http.StatusGatewayTimeout
			}
			writeError(w, status, redact(fmt.Sprintf("the model's API at %s: %v", c.BaseURL, err), key))
		},
	}
	info, _ := json.Marshal(Info{API: c.API})
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+InfoPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(info)
	})
	mux.HandleFunc("POST "+c.API.Path(), func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyLen))
		if err != nil {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request does not read: %v", err))
			return
		}
		if status, why := checkModel(body, only); status != 0 {
			log.Warn("model request refused", slog.String("path", r.URL.Path), slog.String("why", why))
			writeError(w, status, why)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		log.Info("model request", slog.String("path", r.URL.Path), slog.String("model", only), slog.Int("bytes", len(body)))
		rp.ServeHTTP(w, r)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("the model proxy serves GET %s and POST %s only", InfoPath, c.API.Path()))
	})
	return mux, nil
}

// checkModel says whether a request's body may be forwarded for a session
// whose definition names only: 0 when it names only, else the status and
// why, naming what the body names and only.
func checkModel(body []byte, only string) (int, string) {
	got, err := RequestModel(body)
	if err != nil {
		return http.StatusBadRequest, fmt.Sprintf("the request is refused: %v; this session's definition names the model %q, which the request must name", err, only)
	}
	if got != only {
		return http.StatusForbidden, fmt.Sprintf("the request names the model %q; this session's definition names %q, the only model its proxy serves", got, only)
	}
	return 0, ""
}

// RequestModel is the model a request to either API names: the "model"
// key of the body's top-level object (the same key in openai's and
// anthropic's requests). A body that is not one JSON object, has no
// "model", has it twice (which a server might read either way) or not as
// a string is an error saying so.
func RequestModel(body []byte) (string, error) {
	d := json.NewDecoder(bytes.NewReader(body))
	notObject := errors.New("its body is not a JSON object")
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return "", notObject
	}
	var model string
	seen := false
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return "", notObject
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return "", notObject
		}
		if k != "model" {
			continue
		}
		if seen {
			return "", errors.New(`its body names "model" twice`)
		}
		seen = true
		if err := json.Unmarshal(v, &model); err != nil {
			return "", fmt.Errorf(`its "model" is not a string`)
		}
	}
	if t, err := d.Token(); err != nil || t != json.Delim('}') {
		return "", notObject
	}
	if _, err := d.Token(); err != io.EOF {
		return "", notObject
	}
	if !seen {
		return "", errors.New("it names no model")
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

// redactBody replaces the key in the reply's body: an API that echoes a
// key it refuses must not hand it to the sandbox.
func redactBody(r *http.Response, key string) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyLen+1))
	r.Body.Close()
	if err != nil {
		return err
	}
	if len(b) > MaxBodyLen {
		return fmt.Errorf("the reply is longer than %d bytes", MaxBodyLen)
	}
	b = bytes.ReplaceAll(b, []byte(key), []byte("[key]"))
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	r.Header.Set("Content-Length", strconv.Itoa(len(b)))
	r.Header.Del("Content-Encoding")
	return nil
}

func redact(s, key string) string {
	if key == "" {
		return s
	}
	return string(bytes.ReplaceAll([]byte(s), []byte(key), []byte("[key]")))
}

// Serve serves h on every connection ln accepts until ctx ends; it then
// closes ln, lets requests under way finish for a few seconds, and
// returns nil (or the listener's failure). accept, when set, may refuse a
// connection before it is served (unixhost.SameUser).
func Serve(ctx context.Context, ln net.Listener, h http.Handler, accept func(net.Conn) error, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if accept != nil {
		ln = &acceptingListener{Listener: ln, accept: accept, log: log}
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("model proxy: %w", err)
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
	log    *slog.Logger
}

func (l *acceptingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if err := l.accept(c); err != nil {
			l.log.Warn("model connection refused", slog.String("error", err.Error()))
			c.Close()
			continue
		}
		return c, nil
	}
}
