package model_test

import (
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// tailAPI is Anthropic's API reading each body as it comes, keeping only
// its last bytes and the length it was sent with, and counting the bodies
// read whole and those cut off; each reply says it read 10 tokens and
// wrote 100.
type tailAPI struct {
	mu            sync.Mutex
	whole, broken int
	tails         []string
	lengths       []int64
}

func (a *tailAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	buf := make([]byte, 100+32<<10)
	k := 0 // buf[:k] holds the last bytes read
	var err error
	for {
		var n int
		n, err = r.Body.Read(buf[k:])
		if k += n; k > 100 {
			k = copy(buf, buf[k-100:k])
		}
		if err != nil {
			break
		}
	}
	tail := buf[:k]
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != io.EOF {
		a.broken++
		return
	}
	a.whole++
	a.tails = append(a.tails, string(tail))
	a.lengths = append(a.lengths, r.ContentLength)
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"type": "message", "content": [], "usage": {"input_tokens": 10, "output_tokens": 100}}`)
}

func (a *tailAPI) seen() (whole, broken int, tails []string, lengths []int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.whole, a.broken, append([]string(nil), a.tails...), append([]int64(nil), a.lengths...)
}

// postMessagesBody sends body (of length n, -1 for chunked) to the
// metered proxy's Messages endpoint and returns the status, the reply's
// body and how many bytes the test's process allocated meanwhile.
func postMessagesBody(t *testing.T, url string, body io.Reader, n int64) (int, string, uint64) {
	t.Helper()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	req, _ := http.NewRequest("POST", url+"/v1/messages", body)
	req.ContentLength = n
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	runtime.ReadMemStats(&after)
	return resp.StatusCode, string(b), after.TotalAlloc - before.TotalAlloc
}

// TestMeterCapsTheBodyAsItPasses is the meter on the streaming proxy (D79
// with D80): a body of 31 MiB whose bound comes after its messages is
// forwarded as it is read, its bound capped to what the limit left when
// it was let in (5000 of 128000 asked), the proxy's process allocating a
// few MiB for it; one naming no bound gets it added before its closing
// brace, sent without a length; where the limit leaves MaxOutput, one
// asking more is capped to it at the body's own length (padded), the
// length its client declared kept; one naming the bound twice, the
// second after the bulk, is refused 400 in Anthropic's error shape, the
// API never having it whole, the grant given back.
func TestMeterCapsTheBodyAsItPasses(t *testing.T) {
	const bulk = 31 << 20
	head := `{"model": "m", "messages": [{"role": "user", "content": "`
	api := &tailAPI{}
	srv, m := meteredAnthropic(t, api, 5000)

	b := newBulkBody(head, bulk, `"}], "max_tokens": 128000}`)
	code, msg, alloc := postMessagesBody(t, srv.URL, b, int64(b.Len()))
	whole, _, tails, lengths := api.seen()
	if code != http.StatusOK || whole != 1 || !strings.HasSuffix(tails[0], `"}], "max_tokens": 5000}`) {
		t.Fatalf("a bound after 31 MiB: %d %s; the API read %d whole, ending %q", code, msg, whole, tails)
	}
	t.Logf("31 MiB forwarded, its bound capped at its end: %d KiB allocated", alloc>>10)
	if alloc > 8<<20 {
		t.Errorf("forwarding 31 MiB capped allocated %d MiB: the body is held, not streamed", alloc>>20)
	}

	// 5000 - 110 counted: 4890 left.
	b = newBulkBody(head, bulk, `"}]}`)
	code, msg, alloc = postMessagesBody(t, srv.URL, b, int64(b.Len()))
	whole, _, tails, lengths = api.seen()
	if code != http.StatusOK || whole != 2 || !strings.HasSuffix(tails[1], `"}],"max_tokens":4890}`) || lengths[1] != -1 {
		t.Fatalf("no bound after 31 MiB: %d %s; the API read %d whole, ending %q, sent with lengths %v", code, msg, whole, tails, lengths)
	}
	if alloc > 8<<20 {
		t.Errorf("forwarding 31 MiB with a bound added allocated %d MiB", alloc>>20)
	}

	b = newBulkBody(head, bulk, `"}], "max_tokens": 10, "MAX_TOKENS": 100000}`)
	code, msg, _ = postMessagesBody(t, srv.URL, b, -1)
	var e struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	json.Unmarshal([]byte(msg), &e)
	if code != http.StatusBadRequest || e.Type != "error" || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, `names "max_tokens" twice`) {
		t.Errorf("a bound twice after 31 MiB: %d %s", code, msg)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		// The API hears of the cut as the proxy's request ends.
		whole, broken, _, _ := api.seen()
		if whole+broken == 3 {
			if whole != 2 {
				t.Errorf("the API read %d bodies whole, want 2", whole)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API read %d bodies whole and %d cut off, want 2 and 1", whole, broken)
		}
		time.Sleep(time.Millisecond)
	}
	if c, _ := m.Count(); c.Requests != 2 || c.Total() != 220 {
		t.Errorf("count %+v", c)
	}

	// A million: MaxOutput is left, the body keeps its length.
	api2 := &tailAPI{}
	srv2, _ := meteredAnthropic(t, api2, 1000000)
	b = newBulkBody(head, bulk, `"}], "max_tokens": 9999999}`)
	code, msg, _ = postMessagesBody(t, srv2.URL, b, int64(b.Len()))
	whole, _, tails, lengths = api2.seen()
	if code != http.StatusOK || whole != 1 || !strings.HasSuffix(tails[0], `"}], "max_tokens": 128000 }`) || lengths[0] != int64(b.Len()) {
		t.Fatalf("a bound past MaxOutput: %d %s; the API read %d whole, ending %q, sent with lengths %v (the body's %d)", code, msg, whole, tails, lengths, b.Len())
	}
}

// TestMeterThinkingNeedsItsLeast: Anthropic's thinking needs an output
// bound over 1024, known only once the body is read. A body asking more
// than its grant, with thinking, is forwarded with both capped when the
// grant allows it (budget_tokens below the bound); where the grant is
// under 1025 it is refused before its last byte: 429 Retry-After 1
// while another request holds what is left (it may be given back), and
// as spent once nothing is under way and too little is left.
func TestMeterThinkingNeedsItsLeast(t *testing.T) {
	thinking := `{"model": "m", "max_tokens": 4000, "thinking": {"type": "enabled", "budget_tokens": 3000}}`
	c := &http.Client{}
	defer c.CloseIdleConnections()

	up := &greedy{}
	srv, _ := meteredAnthropic(t, up, 3000)
	if code, body, err := postMessages(srv, c, thinking); err != nil || code != 200 {
		t.Fatalf("thinking with 3000 left: %d %s %v", code, body, err)
	}
	if _, bodies, _ := up.seen(); string(bodies[0]) != `{"model": "m", "max_tokens": 3000, "thinking": {"type": "enabled", "budget_tokens": 2999}}` {
		t.Fatalf("thinking with 3000 left reached the API as %s", bodies[0])
	}

	held := &greedy{hold: make(chan struct{}), stop: make(chan struct{}), arrived: make(chan struct{}, 10)}
	srv, m := meteredAnthropic(t, held, 10000)
	t.Cleanup(func() { close(held.stop) })
	first := make(chan int, 1)
	go func() {
		code, _, _ := postMessages(srv, c, `{"model": "m", "max_tokens": 9000}`)
		first <- code
	}()
	<-held.arrived // it holds 9000: 1000 left
	resp, err := c.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(thinking))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(body), `"rate_limit_error"`) ||
		!strings.Contains(string(body), "at least 1025") {
		t.Fatalf("thinking with 1000 left and 9000 held: %s %s %s", resp.Status, resp.Header, body)
	}
	held.hold <- struct{}{}
	if code := <-first; code != 200 {
		t.Fatalf("the first: %d", code)
	}
	// 9010 counted, 990 left, nothing under way: spent, saying why.
	code, b, err := postMessages(srv, c, thinking)
	if err != nil || code != http.StatusForbidden || !strings.Contains(b, "the 990 left are fewer than the least a request may ask (1025)") {
		t.Fatalf("thinking with 990 left: %d %s %v", code, b, err)
	}
	if bounds, _, _ := held.seen(); len(bounds) != 1 {
		t.Fatalf("the API saw %d requests", len(bounds))
	}
	if c, reached := m.Count(); c.Refused != 1 || c.Requests != 1 || reached == "" {
		t.Fatalf("count %+v, %q", c, reached)
	}
}

// TestMeterRefusesABoundThatDoesNotRead: without a limit too, a bound
// that is not a whole number is refused, naming it, in the API's shape,
// and nothing reaches the API.
func TestMeterRefusesABoundThatDoesNotRead(t *testing.T) {
	up := &greedy{}
	srv, m := meteredAnthropic(t, up, 0)
	c := &http.Client{}
	defer c.CloseIdleConnections()
	for _, body := range []string{`{"model": "m", "max_tokens": "lots"}`, `{"model": "m", "max_tokens": 1.5}`} {
		code, b, err := postMessages(srv, c, body)
		if err != nil || code != http.StatusBadRequest || !strings.Contains(b, `\"max_tokens\" is not a whole number`) || !strings.Contains(b, `"invalid_request_error"`) {
			t.Errorf("%s: %d %s %v", body, code, b, err)
		}
	}
	if bounds, _, _ := up.seen(); len(bounds) != 0 {
		t.Fatalf("the API saw %d requests", len(bounds))
	}
	if c, _ := m.Count(); c.Requests != 0 {
		t.Fatalf("count %+v", c)
	}
}
