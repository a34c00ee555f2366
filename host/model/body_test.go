package model_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host/model"
	"github.com/ocx-go/ocx/host/unixhost"
)

// bulkBody is a request body of n bytes of "x" in "messages", between
// head and tail, made as it is read.
type bulkBody struct {
	head, tail string
	n          int
	at         int
}

func newBulkBody(head string, n int, tail string) *bulkBody {
	return &bulkBody{head: head, tail: tail, n: n}
}

func (b *bulkBody) Len() int { return len(b.head) + b.n + len(b.tail) }

func (b *bulkBody) Read(p []byte) (int, error) {
	switch {
	case b.at < len(b.head):
		n := copy(p, b.head[b.at:])
		b.at += n
		return n, nil
	case b.at < len(b.head)+b.n:
		n := min(len(p), len(b.head)+b.n-b.at, len(xs))
		copy(p, xs[:n])
		b.at += n
		return n, nil
	case b.at < b.Len():
		n := copy(p, b.tail[b.at-len(b.head)-b.n:])
		b.at += n
		return n, nil
	}
	return 0, io.EOF
}

var xs = []byte(strings.Repeat("x", 64<<10))

// countingAPI is a model's API that reads each body as it comes, keeping
// none, and counts the bodies read whole and those cut off.
type countingAPI struct {
	whole, broken, bytes atomic.Int64
}

func (a *countingAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, r.Body)
	a.bytes.Add(n)
	if err != nil {
		a.broken.Add(1)
		return
	}
	a.whole.Add(1)
	io.WriteString(w, `{"choices":[]}`)
}

// postBody sends body (of length n, -1 for chunked) through the proxy at url
// and returns the status and the proxy's error, and how many bytes the
// test's process allocated meanwhile.
func postBody(t *testing.T, url string, body io.Reader, n int64) (int, string, uint64) {
	t.Helper()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", body)
	req.ContentLength = n
	// The body waits for the proxy's 100 Continue, which it sends once it
	// reads: a body refused by its declared length is then never sent,
	// and the refusal never races the client's write (a reset instead of
	// the 413, once under make test).
	req.Header.Set("Expect", "100-continue")
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, ExpectContinueTimeout: time.Minute}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	runtime.ReadMemStats(&after)
	var e model.ErrorReply
	json.Unmarshal(b, &e)
	return resp.StatusCode, e.Error, after.TotalAlloc - before.TotalAlloc
}

// proxyTo is the proxy of a session whose model is small-model, to api,
// served on 127.0.0.1.
func proxyTo(t *testing.T, api http.Handler) (*httptest.Server, *countingAPI) {
	t.Helper()
	up := httptest.NewServer(api)
	t.Cleanup(up.Close)
	h := onlyModelProxy(t, &model.Config{API: model.OpenAI, BaseURL: up.URL}, "sk-key", "small-model")
	p := httptest.NewServer(h)
	t.Cleanup(p.Close)
	ca, _ := api.(*countingAPI)
	return p, ca
}

// TestProxyStreamsTheBody is issue 39 item 4's model proxy (D80): a body
// of 31 MiB whose model comes after its messages is forwarded as it is
// read, whole to the API, the proxy's process allocating a few MiB for
// it (it held the body whole: 31 MiB and more); one naming another model
// there is refused 403 naming both once it is read, and the API never
// has it whole; one naming "model" twice, the second after the bulk, is
// refused on the way; one over the API's 32 MiB is refused, declared so
// or not.
func TestProxyStreamsTheBody(t *testing.T) {
	api := &countingAPI{}
	p, _ := proxyTo(t, api)
	const bulk = 31 << 20

	b := newBulkBody(`{"messages": [{"role": "user", "content": "`, bulk, `"}], "model": "small-model"}`)
	code, msg, alloc := postBody(t, p.URL, b, int64(b.Len()))
	if code != http.StatusOK || api.whole.Load() != 1 || api.bytes.Load() != int64(b.Len()) {
		t.Fatalf("the session's model after 31 MiB: %d %s; the API read %d bodies whole, %d bytes of %d", code, msg, api.whole.Load(), api.bytes.Load(), b.Len())
	}
	t.Logf("31 MiB forwarded: %d KiB allocated", alloc>>10)
	if alloc > 8<<20 {
		t.Errorf("forwarding 31 MiB allocated %d MiB: the body is held, not streamed", alloc>>20)
	}

	b = newBulkBody(`{"messages": [{"role": "user", "content": "`, bulk, `"}], "model": "huge-model"}`)
	code, msg, alloc = postBody(t, p.URL, b, int64(b.Len()))
	if code != http.StatusForbidden || !strings.Contains(msg, `"huge-model"`) || !strings.Contains(msg, `"small-model"`) {
		t.Errorf("another model after 31 MiB: %d %s, want 403 naming both", code, msg)
	}
	if alloc > 8<<20 {
		t.Errorf("refusing 31 MiB allocated %d MiB", alloc>>20)
	}

	b = newBulkBody(`{"model": "small-model", "messages": "`, 4<<20, `", "model": "small-model"}`)
	if code, msg, _ := postBody(t, p.URL, b, -1); code != http.StatusBadRequest || !strings.Contains(msg, `"model" twice`) {
		t.Errorf(`"model" twice, the second after 4 MiB: %d %s`, code, msg)
	}

	b = newBulkBody(`{"model": "small-model", "messages": "`, 33<<20, `"}`)
	if code, msg, _ := postBody(t, p.URL, b, int64(b.Len())); code != http.StatusRequestEntityTooLarge || !strings.Contains(msg, "over 32 MiB") {
		t.Errorf("33 MiB declared: %d %s", code, msg)
	}
	// Chunked, the bound is found by reading: 64 KiB over it, which the
	// server reads after the refusal (it discards up to 256 KiB of a body
	// a handler left), so the client's write ends before the answer.
	b = newBulkBody(`{"model": "small-model", "messages": "`, 32<<20+64<<10, `"}`)
	if code, msg, _ := postBody(t, p.URL, b, -1); code != http.StatusRequestEntityTooLarge || !strings.Contains(msg, "over 32 MiB") {
		t.Errorf("33 MiB chunked: %d %s", code, msg)
	}
	if w := api.whole.Load(); w != 1 {
		t.Errorf("the API read %d bodies whole, want the one of the session's model", w)
	}
}

// TestProxyConnectionsBounded: the model socket serves at most
// model.MaxConns connections at once; one past them is answered 503
// naming the bound, and once one closes another is served.
func TestProxyConnectionsBounded(t *testing.T) {
	h := onlyModelProxy(t, &model.Config{API: model.OpenAI, BaseURL: "http://127.0.0.1:1"}, "", "small-model")
	sock := filepath.Join(t.TempDir(), "model.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { model.Serve(ctx, ln, h, unixhost.SameUser, nil) }) // SameUser reads through the bound's wrapper
	defer func() { cancel(); wg.Wait() }()
	info := func() (*http.Response, string, net.Conn) {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: model\r\n\r\n", model.InfoPath)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b), c
	}
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for i := range model.MaxConns {
		resp, _, c := info()
		open = append(open, c)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("connection %d: %s", i, resp.Status)
		}
	}
	resp, body, c := info()
	c.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("X-Ocx-Proxy") == "" || !strings.Contains(body, fmt.Sprintf("at most %d connections", model.MaxConns)) {
		t.Fatalf("one past the bound: %s %s", resp.Status, body)
	}
	open[0].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The place frees once the server has seen the close.
		resp, _, c := info()
		c.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a connection after one closed: %s", resp.Status)
		}
	}
}
