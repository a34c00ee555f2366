package model

import (
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"sync"

	"github.com/ocx-go/ocx/messages"
)

// Meter is the node's count of one session's model (D50): it wraps the
// proxy (Handler), counts every reply of the model's API as it passes to
// the sandbox, without changing a byte of it, and holds the session to its
// tokens limit: once the count reaches it, or a reply's usage could not be
// read under a limit, every further request is refused, naming the limit.
// The count lives here, outside every sandbox: what a runner says of its
// own use changes nothing.
type Meter struct {
	limit uint64
	log   *slog.Logger
	// changed is told the count and, once it is spent, why, after every
	// change: the file the status and the end note read, the line that
	// tells the daemon. It is called with no lock held, one call at a time.
	changed func(c messages.ModelCount, reached string)

	mu      sync.Mutex
	count   messages.ModelCount
	reached string
	// tell serialises the calls to changed, in the order of the changes.
	tell sync.Mutex
	seq  uint64
	told uint64
}

// NewMeter counts for a session whose limits.tokens is limit (0: none),
// telling changed after each change (nil: nobody).
func NewMeter(limit uint64, changed func(c messages.ModelCount, reached string), log *slog.Logger) *Meter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if changed == nil {
		changed = func(messages.ModelCount, string) {}
	}
	return &Meter{limit: limit, changed: changed, log: log}
}

// Count is the count so far and why the budget is spent ("" while it is
// not).
func (m *Meter) Count() (messages.ModelCount, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.count, m.reached
}

// Handler wraps next, the proxy: a POST to an endpoint whose replies say
// their usage (ShapeOf) is refused with 403 once the budget is spent;
// otherwise it goes to next with its Accept-Encoding removed (so that the
// reply comes as the API wrote it, which the counter reads; the proxy's
// own client still asks for and undoes gzip), and its reply is counted as
// it is written. A reply the proxy wrote itself (a refusal, an API it
// could not reach: X-Ocx-Proxy) is no request forwarded. Anything else
// goes to next as it came.
func (m *Meter) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		shape := messages.APIShapeOf(r.URL.Path)
		if r.Method != http.MethodPost || shape == messages.ShapeNone {
			next.ServeHTTP(w, r)
			return
		}
		m.mu.Lock()
		reached := m.reached
		if reached != "" {
			m.count.Refused++
		}
		m.mu.Unlock()
		if reached != "" {
			// Read the request before answering it: a reply written over a
			// body still being sent closes the connection under the
			// client's write, which then fails with a broken pipe instead
			// of reading the refusal.
			_, _ = io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, MaxBodyLen))
			m.log.Warn("model request refused: the session's tokens are spent", slog.String("path", r.URL.Path), slog.String("why", reached))
			m.changedNow()
			writeError(w, http.StatusForbidden, fmt.Sprintf("this session's tokens are spent: %s; the node's model proxy forwards no more of its requests", reached))
			return
		}
		r.Header.Del("Accept-Encoding")
		cw := &countingWriter{ResponseWriter: w, shape: shape}
		// Counted even when next panics: the reverse proxy aborts with
		// http.ErrAbortHandler when the client goes before the reply's
		// last bytes, after the usage it read has passed (a CLI that
		// closes once it has its completed event).
		defer m.add(r.URL.Path, cw)
		next.ServeHTTP(cw, r)
	})
}

// add counts one reply, and spends the budget when it reaches the limit.
func (m *Meter) add(path string, cw *countingWriter) {
	if cw.counter == nil { // nothing written: the handler wrote no header
		cw.start(http.StatusOK)
	}
	if cw.proxys {
		return
	}
	t, whole := cw.counter.Result()
	ok := cw.status >= 200 && cw.status < 300
	m.mu.Lock()
	m.count.Requests++
	m.count.Tokens = m.count.Tokens.Plus(t)
	if ok && !whole {
		m.count.Unread++
	}
	first := false
	if m.reached == "" {
		m.reached = messages.TokensReached(m.count, m.limit)
		first = m.reached != ""
	}
	c, reached := m.count, m.reached
	m.mu.Unlock()
	attrs := []any{slog.String("path", path), slog.Int("status", cw.status), slog.String("shape", cw.shape.String()),
		slog.Bool("stream", cw.stream), slog.Uint64("input", t.Input), slog.Uint64("output", t.Output), slog.Uint64("cached", t.Cached),
		slog.Uint64("total", c.Total())}
	switch {
	case ok && !whole:
		m.log.Warn("model reply counted, its usage unread", attrs...)
	default:
		m.log.Info("model reply counted", attrs...)
	}
	if first {
		m.log.Warn("the session's tokens are spent; its proxy refuses its further requests", slog.String("why", reached))
	}
	m.changedNow()
}

// changedNow tells changed the count as it is now. Calls are serialised
// and a call that finds a later one done skips, so that what changed is
// told last is the latest count.
func (m *Meter) changedNow() {
	m.mu.Lock()
	m.seq++
	seq := m.seq
	m.mu.Unlock()
	m.tell.Lock()
	defer m.tell.Unlock()
	if seq <= m.told {
		return
	}
	m.mu.Lock()
	c, reached, now := m.count, m.reached, m.seq
	m.mu.Unlock()
	m.told = now
	m.changed(c, reached)
}

// countingWriter is the reply's writer, which hands every byte written to
// the client to the reply's counter too.
type countingWriter struct {
	http.ResponseWriter
	shape   messages.APIShape
	status  int
	stream  bool
	proxys  bool
	counter *messages.UsageCounter
}

func (w *countingWriter) start(status int) {
	w.status = status
	w.proxys = w.Header().Get("X-Ocx-Proxy") != ""
	mt, _, _ := mime.ParseMediaType(w.Header().Get("Content-Type"))
	w.stream = mt == "text/event-stream"
	shape := w.shape
	if enc := w.Header().Get("Content-Encoding"); enc != "" && enc != "identity" {
		shape = messages.ShapeNone // not the API's own bytes: counted as unread
	}
	w.counter = messages.NewUsageCounter(shape, w.stream)
}

func (w *countingWriter) WriteHeader(status int) {
	if w.counter == nil && status >= 200 {
		w.start(status)
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *countingWriter) Write(p []byte) (int, error) {
	if w.counter == nil {
		w.start(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(p)
	w.counter.Write(p[:n])
	return n, err
}

// Flush passes a flush on: a stream reaches the sandbox as it comes.
func (w *countingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the writer beneath.
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
