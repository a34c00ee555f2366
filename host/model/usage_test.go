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
	"time"

	"github.com/ocx-go/ocx/host/model"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/modelapi"
)

// Every recorded reply in messages/modelapi/testdata/usage used the same: 135 tokens read (100 of
// them from a cache), 42 written. Anthropic's reply says 25 past the cache,
// 10 written to it and 100 read from it: all 135 are read.
var recorded = modelapi.Tokens{Input: 135, Output: 42, Cached: 100}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "messages", "modelapi", "testdata", "usage", name)) // trust:outside the test's own fixtures
	if err != nil {
		t.Fatal(err)
	}
	return b
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

// TestMeterCountsAReplyItsClientLeft: a client that closes its connection
// once it has the stream's last event, while the API still holds the
// reply open, makes the real proxy abort its handler (http.ErrAbortHandler);
// the reply that passed is counted all the same, usage and all, and so
// reaches the budget it spent.
func TestMeterCountsAReplyItsClientLeft(t *testing.T) {
	reply := fixture(t, "chat.sse")
	u := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(reply)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the proxy went: its client did
	}))
	t.Cleanup(u.Close)
	h, err := model.NewProxy(&model.Config{API: model.OpenAI, BaseURL: u.URL}, map[model.API]string{model.OpenAI: "sk-KEY"}, "m", nil)
	if err != nil {
		t.Fatal(err)
	}
	told := make(chan messages.ModelCount, 4)
	m := model.NewMeter(100, func(c messages.ModelCount, reached string) { told <- c }, nil)
	srv := httptest.NewServer(m.Handler(h))
	t.Cleanup(srv.Close)

	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(`{"model": "m", "stream": true}`))
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(reply))
	if _, err := io.ReadFull(resp.Body, got); err != nil || !bytes.Equal(got, reply) {
		t.Fatalf("the stream before the client left: %v\n%s", err, got)
	}
	resp.Body.Close() // unread to its end: the connection closes

	var c messages.ModelCount
	select {
	case c = <-told:
	case <-time.After(10 * time.Second):
		t.Fatal("the reply its client left was never counted")
	}
	want := messages.ModelCount{Requests: 1, Tokens: recorded}
	if c != want {
		t.Fatalf("the reply its client left counted %+v, want %+v", c, want)
	}
	if _, reached := m.Count(); reached == "" {
		t.Errorf("the reply spent %d of a budget of 100, and the budget is not reached", c.Total())
	}
}
