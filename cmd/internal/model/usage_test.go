package model_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ocx-go/ocx/cmd/internal/model"
	"github.com/ocx-go/ocx/messages"
)

// Every recorded reply in testdata used the same: 135 tokens read (100 of
// them from a cache), 42 written. Anthropic's reply says 25 past the cache,
// 10 written to it and 100 read from it: all 135 are read.
var recorded = messages.Tokens{Input: 135, Output: 42, Cached: 100}

var shapes = map[string]model.Shape{"messages": model.ShapeMessages, "chat": model.ShapeChat, "responses": model.ShapeResponses}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name)) // trust:outside the test's own fixtures
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseUsageRecorded: each API's whole reply says its usage in its own
// shape; the parser reads it, and reads nothing from another shape's.
func TestParseUsageRecorded(t *testing.T) {
	for name, s := range shapes {
		body := fixture(t, name+".json")
		if got, ok := model.ParseUsage(s, body); !ok || got != recorded {
			t.Errorf("%s: %+v %v, want %+v", name, got, ok, recorded)
		}
		for other, o := range shapes {
			if o == s || (s != model.ShapeMessages && o != model.ShapeMessages) {
				continue // chat and responses share no keys that matter here
			}
			if got, ok := model.ParseUsage(o, body); ok && got == recorded {
				t.Errorf("%s's reply read as %s's: %+v", name, other, got)
			}
		}
	}
	for _, c := range []struct {
		s    model.Shape
		body string
	}{
		{model.ShapeChat, `{"usage": null}`},
		{model.ShapeChat, `{"usage": {"prompt_tokens": "12", "completion_tokens": 3}}`},
		{model.ShapeChat, `{"usage": {"prompt_tokens": 1.5, "completion_tokens": 3}}`},
		{model.ShapeMessages, `{"usage": {"input_tokens": -1, "output_tokens": 3}}`},
		{model.ShapeResponses, `{"usage": {"input_tokens": 1e3, "output_tokens": 3}}`},
		{model.ShapeResponses, `not json`},
		{model.ShapeNone, `{"usage": {"input_tokens": 1, "output_tokens": 3}}`},
	} {
		if got, ok := model.ParseUsage(c.s, []byte(c.body)); ok {
			t.Errorf("%s %s: read %+v", c.s, c.body, got)
		}
	}
}

// TestCounterRecordedStreams: each API's stream, as recorded, counted as
// its bytes pass in pieces of every size, with \n, \r\n or \r line ends:
// the same usage, said whole.
func TestCounterRecordedStreams(t *testing.T) {
	for name, s := range shapes {
		stream := fixture(t, name+".sse")
		for _, nl := range []string{"\n", "\r\n", "\r"} {
			b := bytes.ReplaceAll(stream, []byte("\n"), []byte(nl))
			for _, piece := range []int{1, 2, 7, 64, 4096, len(b)} {
				c := model.NewCounter(s, true)
				for rest := b; len(rest) > 0; {
					n := min(piece, len(rest))
					if w, err := c.Write(rest[:n]); w != n || err != nil {
						t.Fatalf("Write took %d of %d: %v", w, n, err)
					}
					rest = rest[n:]
				}
				if got, whole := c.Result(); !whole || got != recorded {
					t.Errorf("%s, lines ending %q, pieces of %d: %+v whole=%v, want %+v", name, nl, piece, got, whole, recorded)
				}
			}
		}
		// A whole reply counted as it passes reads as the parser reads it.
		c := model.NewCounter(s, false)
		c.Write(fixture(t, name+".json"))
		if got, whole := c.Result(); !whole || got != recorded {
			t.Errorf("%s body: %+v %v", name, got, whole)
		}
	}
}

// TestCounterCutStreams: a stream cut before it said its usage whole is
// not whole: what it said is kept (Anthropic's read tokens come first),
// and the meter counts it unread.
func TestCounterCutStreams(t *testing.T) {
	msgs := fixture(t, "messages.sse")
	cut := msgs[:bytes.Index(msgs, []byte("event: message_delta"))]
	c := model.NewCounter(model.ShapeMessages, true)
	c.Write(cut)
	if got, whole := c.Result(); whole || got.Input != 135 || got.Output != 1 {
		t.Errorf("cut Messages stream: %+v whole=%v, want 135 read and the 1 written so far, not whole", got, whole)
	}
	chat := fixture(t, "chat.sse")
	noUsage := bytes.ReplaceAll(chat, []byte(`"usage":{"prompt_tokens":135,"completion_tokens":42,"total_tokens":177,"prompt_tokens_details":{"cached_tokens":100}}`), []byte(`"usage":null`))
	c = model.NewCounter(model.ShapeChat, true)
	c.Write(noUsage)
	if got, whole := c.Result(); whole || !got.IsZero() {
		t.Errorf("a chat stream without usage (no stream_options.include_usage): %+v whole=%v", got, whole)
	}
	resp := fixture(t, "responses.sse")
	c = model.NewCounter(model.ShapeResponses, true)
	c.Write(resp[:bytes.Index(resp, []byte("event: response.completed"))])
	if _, whole := c.Result(); whole {
		t.Errorf("a Responses stream cut before response.completed reads whole")
	}
	// A line past the bound is not read, and the stream goes on after it.
	c = model.NewCounter(model.ShapeChat, true)
	c.Write([]byte("data: " + strings.Repeat("x", model.MaxBodyLen) + "\n\n"))
	c.Write(chat)
	if got, whole := c.Result(); !whole || got != recorded {
		t.Errorf("after a line past the bound: %+v %v", got, whole)
	}
}

// FuzzParseUsage: whatever the bytes, the parser never panics and what it
// reads is a count: the cached some of the read, each within 2^53-1.
func FuzzParseUsage(f *testing.F) {
	for name := range shapes {
		f.Add(uint8(shapes[name]), fixture(f, name+".json"))
	}
	f.Add(uint8(model.ShapeMessages), []byte(`{"usage":{"input_tokens":9007199254740991,"cache_read_input_tokens":9007199254740991,"output_tokens":1}}`))
	f.Fuzz(func(t *testing.T, shape uint8, body []byte) {
		s := model.Shape(shape % 4)
		got, ok := model.ParseUsage(s, body)
		checkTokens(t, got, ok)
	})
}

// FuzzStreamEvent: an event's data, whatever it holds, changes a stream's
// usage only to a count.
func FuzzStreamEvent(f *testing.F) {
	for name := range shapes {
		for _, l := range bytes.Split(fixture(f, name+".sse"), []byte("\n")) {
			if d, ok := bytes.CutPrefix(l, []byte("data: ")); ok {
				f.Add(uint8(shapes[name]), d, d)
			}
		}
	}
	f.Fuzz(func(t *testing.T, shape uint8, first, second []byte) {
		st := model.NewStream(model.Shape(shape % 4))
		st.Event(first)
		st.Event(second)
		got, whole := st.Usage()
		checkTokens(t, got, whole)
	})
}

// FuzzCounter: a reply counted in two pieces, split anywhere, counts as
// the same reply counted whole: the counter never depends on how the
// bytes arrive.
func FuzzCounter(f *testing.F) {
	for name, s := range shapes {
		f.Add(uint8(s), true, fixture(f, name+".sse"), uint16(100))
		f.Add(uint8(s), false, fixture(f, name+".json"), uint16(7))
	}
	f.Fuzz(func(t *testing.T, shape uint8, stream bool, b []byte, at uint16) {
		s := model.Shape(shape % 4)
		one := model.NewCounter(s, stream)
		one.Write(b)
		want, wantWhole := one.Result()
		two := model.NewCounter(s, stream)
		cut := int(at) % (len(b) + 1)
		two.Write(b[:cut])
		two.Write(b[cut:])
		got, whole := two.Result()
		if got != want || whole != wantWhole {
			t.Fatalf("split at %d: %+v %v, whole: %+v %v", cut, got, whole, want, wantWhole)
		}
		checkTokens(t, got, whole)
	})
}

func checkTokens(t *testing.T, got messages.Tokens, ok bool) {
	t.Helper()
	if got.Cached > got.Input || got.Input > messages.MaxTokens || got.Output > messages.MaxTokens {
		t.Fatalf("not a count: %+v (ok %v)", got, ok)
	}
}

// upstream is a stand-in for a model's API playing one recorded reply per
// request, streamed (with a flush after each event) or whole, gzipped when
// the request asks for it; it counts what reached it.
type upstream struct {
	mu       sync.Mutex
	requests int
	enc      []string
	reply    []byte
	stream   bool
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.requests++
	u.enc = append(u.enc, r.Header.Get("Accept-Encoding"))
	u.mu.Unlock()
	io.Copy(io.Discard, r.Body)
	var out io.Writer = w
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w.Header().Set("Content-Encoding", "gzip")
		gz := gzip.NewWriter(w)
		defer gz.Close()
		out = gz
	}
	if !u.stream {
		w.Header().Set("Content-Type", "application/json")
		out.Write(u.reply)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, ev := range bytes.SplitAfter(u.reply, []byte("\n\n")) {
		out.Write(ev)
		if gz, ok := out.(*gzip.Writer); ok {
			gz.Flush()
		}
		w.(http.Flusher).Flush()
	}
}

// metered is the real proxy for api behind a meter with limit, and the
// server in front of it; changed records what the meter told.
func metered(t *testing.T, api model.API, key string, up *upstream, limit uint64) (*httptest.Server, *model.Meter, func() []messages.ModelCount) {
	t.Helper()
	u := httptest.NewServer(up)
	t.Cleanup(u.Close)
	h, err := model.NewProxy(&model.Config{API: api, BaseURL: u.URL}, map[model.API]string{api: key}, "m", nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var told []messages.ModelCount
	m := model.NewMeter(limit, func(c messages.ModelCount, reached string) {
		mu.Lock()
		told = append(told, c)
		mu.Unlock()
	}, nil)
	srv := httptest.NewServer(m.Handler(h))
	t.Cleanup(srv.Close)
	return srv, m, func() []messages.ModelCount {
		mu.Lock()
		defer mu.Unlock()
		return append([]messages.ModelCount(nil), told...)
	}
}

func post(t *testing.T, srv *httptest.Server, path string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(`{"model": "m", "stream": true}`))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestMeterCountsAStreamUnchanged: a streamed reply through the real proxy
// reaches the client byte for byte as the API wrote it, with and without
// a key to redact, and the node's count is the stream's usage. A client
// that asks for gzip gets the stream as written all the same: the proxy
// asks for it and undoes it, so the count reads the API's own bytes.
func TestMeterCountsAStreamUnchanged(t *testing.T) {
	for _, c := range []struct {
		api  model.API
		path string
		name string
	}{{model.Anthropic, "/v1/messages", "messages"}, {model.OpenAI, "/v1/chat/completions", "chat"}} {
		for _, key := range []string{"", "sk-KEY"} {
			up := &upstream{reply: fixture(t, c.name+".sse"), stream: true}
			srv, m, told := metered(t, c.api, key, up, 0)
			resp, got := post(t, srv, c.path, map[string]string{"Accept-Encoding": "gzip"})
			if resp.StatusCode != 200 || !bytes.Equal(got, up.reply) || resp.Header.Get("Content-Encoding") != "" {
				t.Fatalf("%s, key %q: %d %q, the stream changed:\n%s", c.name, key, resp.StatusCode, resp.Header.Get("Content-Encoding"), got)
			}
			count, reached := m.Count()
			want := messages.ModelCount{Requests: 1, Tokens: recorded}
			if count != want || reached != "" {
				t.Errorf("%s, key %q: counted %+v (%q), want %+v", c.name, key, count, reached, want)
			}
			if ts := told(); len(ts) != 1 || ts[0] != want {
				t.Errorf("%s: told %+v", c.name, ts)
			}
			if up.enc[0] == "" {
				t.Errorf("the proxy asked the API for no compression at all; its own client asks gzip")
			}
		}
	}
}

// TestMeterRefusesPastItsBudget: the reply that reaches the limit is
// delivered whole; every request after it is refused with 403 naming the
// limit, and never reaches the API.
func TestMeterRefusesPastItsBudget(t *testing.T) {
	up := &upstream{reply: fixture(t, "chat.json")}
	srv, m, _ := metered(t, model.OpenAI, "sk-test-KEY", up, 150)
	resp, b := post(t, srv, "/v1/chat/completions", nil)
	if resp.StatusCode != 200 || !bytes.Equal(b, up.reply) {
		t.Fatalf("the first request: %d %s", resp.StatusCode, b)
	}
	resp, b = post(t, srv, "/v1/chat/completions", nil)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "limits.tokens of 150") || !strings.Contains(string(b), "177 tokens") {
		t.Fatalf("past the budget: %d %s", resp.StatusCode, b)
	}
	if up.requests != 1 {
		t.Errorf("the API saw %d requests, want 1", up.requests)
	}
	count, reached := m.Count()
	if count.Requests != 1 || count.Refused != 1 || count.Total() != 177 || reached == "" {
		t.Errorf("count %+v, reached %q", count, reached)
	}
	// A request of many megabytes past the budget is read, then refused:
	// the client reads the 403, never a broken pipe under its write.
	big := `{"model": "m", "messages": [{"role": "user", "content": "` + strings.Repeat("x", 8<<20) + `"}]}`
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	for i := 0; i < 3; i++ {
		r3, err := (&http.Client{Transport: tr}).Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(big))
		if err != nil {
			t.Fatalf("a large request past the budget: %v", err)
		}
		b3, _ := io.ReadAll(r3.Body)
		r3.Body.Close()
		if r3.StatusCode != http.StatusForbidden || !strings.Contains(string(b3), "limits.tokens of 150") {
			t.Fatalf("a large request past the budget: %d %s", r3.StatusCode, b3)
		}
	}
	// GET /ocx/model is no request to the model: it is never refused.
	r2, err := http.Get(srv.URL + model.InfoPath)
	if err != nil || r2.StatusCode != 200 {
		t.Errorf("the info endpoint past the budget: %v %v", r2, err)
	}
	if r2 != nil {
		r2.Body.Close()
	}
}

// TestMeterUnreadSpendsTheBudget: under a limit, a successful reply whose
// usage does not read spends the budget (the node cannot hold the session
// to a limit it cannot count); without a limit it is counted unread and
// nothing is refused. A reply the proxy wrote itself is no request.
func TestMeterUnreadSpendsTheBudget(t *testing.T) {
	for _, limit := range []uint64{0, 1000} {
		up := &upstream{reply: []byte(`{"choices": []}`)}
		srv, m, _ := metered(t, model.OpenAI, "", up, limit)
		post(t, srv, "/v1/chat/completions", nil)
		resp, b := post(t, srv, "/v1/chat/completions", nil)
		count, reached := m.Count()
		switch limit {
		case 0:
			if resp.StatusCode != 200 || count.Unread != 2 || reached != "" {
				t.Errorf("no limit: %d %s, %+v %q", resp.StatusCode, b, count, reached)
			}
		default:
			if resp.StatusCode != http.StatusForbidden || count.Unread != 1 || !strings.Contains(reached, "could not read the usage of 1 reply") {
				t.Errorf("limit %d: %d %s, %+v %q", limit, resp.StatusCode, b, count, reached)
			}
		}
		// Another model, refused by the proxy: not forwarded, not counted.
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(`{"model": "other"}`))
		r3, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r3.Body.Close()
		if c2, _ := m.Count(); c2.Requests != count.Requests {
			t.Errorf("a refusal of the proxy's own counted as a request: %+v", c2)
		}
	}
}
