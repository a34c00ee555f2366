package model

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/modelapi"
)

// Meter is the node's count of one session's model (D50): it wraps the
// proxy (Handler), counts every reply of the model's API as it passes to
// the sandbox, without changing a byte of it, and holds the session to its
// tokens limit (D79): a request is forwarded only while what is counted
// and what the requests under way may still write stay under the limit.
// Before the first byte of its body is forwarded, a request reserves
// what its output may be: modelapi's maxOutput, or what the limit leaves
// when that is less; its body passes through the grant's
// modelapi.OutputCap, its bound capped to the grant as it passes (the
// body is never held whole, D80), and once read whole it keeps of the
// grant what it asks. At most messages.MaxInFlight requests are under way
// at once; once the budget is spent, or a reply's usage could not be
// read under a limit, every further request is refused, naming the
// limit. The count lives here, outside every sandbox: what a runner says
// of its own use changes nothing. Its decisions are messages.Ledger's;
// the meter applies them.
type Meter struct {
	log *slog.Logger
	// changed is told the count and, once it is spent, why, after every
	// change: the file the status and the end note read, the line that
	// tells the daemon. It is called with no lock held, one call at a time.
	changed func(c messages.ModelCount, reached string)
	// wait bounds how long a request waits for a slot, or for what the
	// requests under way hold (AdmitWait).
	wait time.Duration

	mu     sync.Mutex
	ledger messages.Ledger
	// wake is closed, and made anew, whenever a request gives back its
	// slot or its grant: a waiting request asks again.
	wake chan struct{}
	// tell serialises the calls to changed, in the order of the changes.
	tell sync.Mutex
	seq  uint64
	told uint64
}

// admitWait bounds how long a request waits for one of its session's
// messages.MaxInFlight slots, or for the requests under way to give back
// what the limit has left, before it is refused with 429; it waits before
// its body is read.
const admitWait = 2 * time.Minute

// NewMeter counts for a session whose limits.tokens is limit (0: none),
// telling changed after each change (nil: nobody).
func NewMeter(limit uint64, changed func(c messages.ModelCount, reached string), log *slog.Logger) *Meter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if changed == nil {
		changed = func(messages.ModelCount, string) {}
	}
	return &Meter{ledger: messages.Ledger{Limit: limit}, changed: changed, log: log, wait: admitWait, wake: make(chan struct{})}
}

// Count is the count so far and why the budget is spent ("" while it is
// not).
func (m *Meter) Count() (messages.ModelCount, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ledger.Count, m.ledger.Reached
}

// Handler wraps next, the proxy: a POST to an endpoint whose replies say
// their usage (APIShapeOf) takes one of the session's slots first
// (waiting for one at most AdmitWait), then reserves what its output may
// be (waiting while the requests under way hold what the limit leaves,
// as long), both before its body is read; it is refused with 403 once
// the budget is spent. It goes to next with its Accept-Encoding removed
// (so that the reply comes as the API wrote it, which the counter reads;
// the proxy's own client still asks for and undoes gzip) and the ticket
// in its context, which the proxy's body passes through (bodyMeter:
// its bound capped as it passes, the grant kept down to what it asks);
// its reply is counted as it is written. A reply the proxy wrote itself
// (a refusal, an API it could not reach: X-Ocx-Proxy) is no request
// forwarded. Anything else goes to next as it came.
func (m *Meter) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		shape := modelapi.APIShapeOf(r.URL.Path)
		if r.Method != http.MethodPost || shape == modelapi.ShapeNone {
			next.ServeHTTP(w, r)
			return
		}
		// A refusal reads the request first: a reply written over a body
		// still being sent closes the connection under the client's
		// write, which then fails with a broken pipe instead of reading
		// the refusal.
		drain := func() { _, _ = io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, MaxBodyLen)) }
		if v := m.enter(r.Context()); v != messages.LedgerGo {
			drain()
			m.refuse(w, r.URL.Path, shape, v, "")
			return
		}
		t := &ticket{m: m, shape: shape}
		cw := &countingWriter{ResponseWriter: w, shape: shape}
		// Counted even when next panics: the reverse proxy aborts with
		// http.ErrAbortHandler when the client goes before the reply's
		// last bytes, after the usage it read has passed (a CLI that
		// closes once it has its completed event).
		defer t.done(r.URL.Path, cw)
		if v, why := t.reserve(r.Context()); v != messages.LedgerGo {
			drain()
			m.refuse(w, r.URL.Path, shape, v, why)
			return
		}
		r.Header.Del("Accept-Encoding")
		next.ServeHTTP(cw, r.WithContext(context.WithValue(r.Context(), meterKey{}, t)))
	})
}

// enter takes a slot for a request, waiting for one while MaxInFlight are
// under way, at most m.wait or until the client goes.
func (m *Meter) enter(ctx context.Context) messages.LedgerVerdict {
	var timeout <-chan time.Time
	for {
		m.mu.Lock()
		v := m.ledger.Enter()
		wake := m.wake
		m.mu.Unlock()
		if v == messages.LedgerSpent {
			m.changedNow()
		}
		if v != messages.LedgerWait {
			return v
		}
		if timeout == nil {
			m.log.Info("model request waits for a slot", slog.Int("under_way", messages.MaxInFlight))
			t := time.NewTimer(m.wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return v
		case <-timeout:
			return v
		}
	}
}

// refuse answers a request the ledger refused, in its API's error shape:
// 403 once the budget is spent, 429 (Retry-After 1) when it waited past
// AdmitWait; why says what it waited for.
func (m *Meter) refuse(w http.ResponseWriter, path string, shape modelapi.APIShape, v messages.LedgerVerdict, why string) {
	if v == messages.LedgerSpent {
		_, reached := m.Count()
		m.log.Warn("model request refused: the session's tokens are spent", slog.String("path", path), slog.String("why", reached))
		writeAPIError(w, shape, http.StatusForbidden, spentWhy(reached))
		return
	}
	if why == "" {
		why = fmt.Sprintf("%d of this session's requests are under way, as many as the node's model proxy forwards at once", messages.MaxInFlight)
	}
	msg := fmt.Sprintf("the request waited %s and is refused: %s; try again", m.wait, why)
	m.log.Warn("model request refused", slog.String("path", path), slog.String("why", msg))
	w.Header().Set("Retry-After", "1")
	writeAPIError(w, shape, http.StatusTooManyRequests, msg)
}

// spentWhy is the refusal of a request once the budget is spent.
func spentWhy(reached string) string {
	return fmt.Sprintf("this session's tokens are spent: %s; the node's model proxy forwards no more of its requests", reached)
}

// meterKey is the request context's key for the meter's ticket, which the
// proxy's body passes through (meterOf).
type meterKey struct{}

// meterOf is the meter's ticket in ctx; nil for a proxy no meter wraps.
func meterOf(ctx context.Context) bodyMeter {
	t, _ := ctx.Value(meterKey{}).(*ticket)
	if t == nil {
		return nil
	}
	return t
}

// ticket is one request's way through the meter: its slot, and once
// reserved, its grant.
type ticket struct {
	m     *Meter
	shape modelapi.APIShape
	// Under m.mu: the grant reserved, then kept; settled once the
	// request is done (a body still read after, by an API that answered
	// early, changes nothing).
	reserved bool
	grant    uint64
	settled  bool
}

// reserve reserves, before the body is read, what the request's output
// may be (messages.Ledger Reserve: MaxOutput, capped to what the limit
// leaves), waiting while the requests under way hold what is left, at
// most m.wait or until the client goes; why says what it waited for.
func (t *ticket) reserve(ctx context.Context) (v messages.LedgerVerdict, why string) {
	m := t.m
	var timeout <-chan time.Time
	for {
		m.mu.Lock()
		grant, _, v := m.ledger.Reserve(modelapi.OutputBound{Least: modelapi.LeastOutput(t.shape)})
		if v == messages.LedgerGo {
			t.reserved, t.grant = true, grant
		}
		left, wake := m.ledger.Left(), m.wake
		m.mu.Unlock()
		switch v {
		case messages.LedgerGo:
			return v, ""
		case messages.LedgerSpent:
			m.changedNow()
			return v, ""
		}
		if timeout == nil {
			m.log.Info("model request waits for what the requests under way hold", slog.Uint64("left", left))
			tm := time.NewTimer(m.wait)
			defer tm.Stop()
			timeout = tm.C
		}
		select {
		case <-wake:
			continue
		case <-ctx.Done():
		case <-timeout:
		}
		return v, fmt.Sprintf("the requests under way hold what its limits.tokens leaves (%d tokens)", left)
	}
}

// outputCap is the cap the request's body passes through: its grant
// (none without a limit).
func (t *ticket) outputCap() *modelapi.OutputCap {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	return modelapi.NewOutputCap(t.shape, t.grant)
}

// bounded keeps of the grant what the body, read whole, asks
// (messages.Ledger Bound), giving back the rest to the requests waiting;
// a refusal when the body cannot go (its thinking needs more than the
// grant its bound was capped to).
func (t *ticket) bounded(b modelapi.OutputBound) *refusal {
	m := t.m
	m.mu.Lock()
	if t.settled {
		m.mu.Unlock()
		return nil
	}
	grant := t.grant
	kept, v := m.ledger.Bound(grant, b)
	t.grant = kept
	limit := m.ledger.Limit
	if kept < grant {
		m.wakeAll()
	}
	m.mu.Unlock()
	switch v {
	case messages.LedgerGo:
		if limit > 0 && b.Ask() > kept {
			m.log.Info("model request's output bounded by what its tokens limit leaves", slog.Uint64("asked", b.Asked), slog.Uint64("bound", kept))
		}
		return nil
	case messages.LedgerSpent:
		m.changedNow()
		_, reached := m.Count()
		return &refusal{status: http.StatusForbidden, why: spentWhy(reached), shape: t.shape}
	}
	return &refusal{status: http.StatusTooManyRequests, shape: t.shape,
		why: fmt.Sprintf("the request is refused: its thinking needs an output bound of at least %d, and its limits.tokens left %d when it was let in, the rest held by the requests under way; try again", b.Least, grant)}
}

// done gives back the request's slot, and with it, once reserved, its
// grant, counting its reply (messages.Ledger Settle).
func (t *ticket) done(path string, cw *countingWriter) {
	m := t.m
	m.mu.Lock()
	t.settled = true
	if !t.reserved {
		m.ledger.Leave()
		m.wakeAll()
		m.mu.Unlock()
		return
	}
	if cw.counter == nil { // nothing written: the handler wrote no header
		cw.start(http.StatusOK)
	}
	tk, whole := cw.counter.Result()
	ok := cw.status >= 200 && cw.status < 300
	was := m.ledger.Reached
	m.ledger.Settle(t.grant, messages.LedgerReply{Forwarded: !cw.proxys, Tokens: tk, Whole: whole, OK: ok})
	c, reached := m.ledger.Count, m.ledger.Reached
	m.wakeAll()
	m.mu.Unlock()
	if cw.proxys {
		return
	}
	attrs := []any{slog.String("path", path), slog.Int("status", cw.status), slog.String("shape", cw.shape.String()),
		slog.Bool("stream", cw.stream), slog.Uint64("input", tk.Input), slog.Uint64("output", tk.Output), slog.Uint64("cached", tk.Cached),
		slog.Uint64("total", c.Total())}
	switch {
	case ok && !whole:
		m.log.Warn("model reply counted, its usage unread", attrs...)
	default:
		m.log.Info("model reply counted", attrs...)
	}
	if was == "" && reached != "" {
		m.log.Warn("the session's tokens are spent; its proxy refuses its further requests", slog.String("why", reached))
	}
	m.changedNow()
}

// wakeAll tells the waiting requests to ask again; m.mu is held.
func (m *Meter) wakeAll() {
	close(m.wake)
	m.wake = make(chan struct{})
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
	c, reached, now := m.ledger.Count, m.ledger.Reached, m.seq
	m.mu.Unlock()
	m.told = now
	m.changed(c, reached)
}

// countingWriter is the reply's writer, which hands every byte written to
// the client to the reply's counter too.
type countingWriter struct {
	http.ResponseWriter
	shape   modelapi.APIShape
	status  int
	stream  bool
	proxys  bool
	counter *modelapi.UsageCounter
}

func (w *countingWriter) start(status int) {
	w.status = status
	w.proxys = w.Header().Get("X-Ocx-Proxy") != ""
	mt, _, _ := mime.ParseMediaType(w.Header().Get("Content-Type"))
	w.stream = mt == "text/event-stream"
	shape := w.shape
	if enc := w.Header().Get("Content-Encoding"); enc != "" && enc != "identity" {
		shape = modelapi.ShapeNone // not the API's own bytes: counted as unread
	}
	w.counter = modelapi.NewUsageCounter(shape, w.stream)
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

// writeAPIError answers with the proxy's own refusal (X-Ocx-Proxy) in the
// error shape of the API the request was for, which its client reads:
// Anthropic's {"type": "error", "error": {"type", "message"}}, OpenAI's
// {"error": {"message", "type", "code"}}.
func writeAPIError(w http.ResponseWriter, shape modelapi.APIShape, status int, msg string) {
	kind := map[int]string{http.StatusBadRequest: "invalid_request_error", http.StatusForbidden: "permission_error",
		http.StatusTooManyRequests: "rate_limit_error"}[status]
	var v any
	if shape == modelapi.ShapeMessages {
		v = map[string]any{"type": "error", "error": map[string]string{"type": kind, "message": msg}}
	} else {
		v = map[string]any{"error": map[string]any{"message": msg, "type": kind, "code": nil}}
	}
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Ocx-Proxy", "1")
	w.WriteHeader(status)
	w.Write(b)
}
