package model

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
)

// chunks is a reader giving b in the pieces of sizes, then the rest.
type chunks struct {
	b     []byte
	sizes []int
}

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := len(c.b)
	if len(c.sizes) > 0 {
		n = min(max(c.sizes[0], 1), n)
		c.sizes = c.sizes[1:]
	}
	n = copy(p, c.b[:n])
	c.b = c.b[n:]
	return n, nil
}

// FuzzRedactor: however a reply is cut into reads, what the redactor
// passes on is the reply with every whole key replaced, as if it had been
// read at once.
func FuzzRedactor(f *testing.F) {
	f.Add([]byte("data: {\"error\":\"bad key sk-live-1\"}\n\n"), "sk-live-1", []byte{3, 7, 1})
	f.Add([]byte("sk-live-1sk-live-1\nsk-live"), "sk-live-1", []byte{4, 4, 4, 4})
	f.Add(bytes.Repeat([]byte("k"), holdMax+5), "kk", []byte{200, 13})
	f.Fuzz(func(t *testing.T, reply []byte, key string, cuts []byte) {
		if key == "" || strings.Contains(key, "\n") {
			return // a key is one line, never empty
		}
		sizes := make([]int, len(cuts))
		for i, c := range cuts {
			sizes[i] = int(c)
		}
		got, err := io.ReadAll(newRedactor(io.NopCloser(&chunks{b: reply, sizes: sizes}), key))
		if err != nil {
			t.Fatal(err)
		}
		want := bytes.ReplaceAll(reply, []byte(key), []byte("[key]"))
		// A key that only appears once earlier replacements join parts is
		// beyond what one pass over the whole reply finds either: compare
		// that no key is left where the whole-reply pass left none.
		if !bytes.Equal(got, want) && !bytes.Contains(want, []byte(key)) {
			t.Fatalf("redacted %q as %q, want %q", reply, got, want)
		}
		if !bytes.Contains(reply, []byte(key)) && !bytes.Equal(got, reply) {
			t.Fatalf("changed a reply without the key: %q -> %q", reply, got)
		}
	})
}

// A stream goes through the proxy event by event: the client reads an
// event before the API has written the next, the key is out of each.
func TestProxyStreamsEventByEvent(t *testing.T) {
	const key = "sk-live-STREAM"
	next := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != key {
			http.Error(w, "no key", 401)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message_start\ndata: {\"echo\":\"%s\"}\n\n", key)
		w.(http.Flusher).Flush()
		<-next
		fmt.Fprint(w, "event: message_stop\ndata: {}\n\n")
	}))
	defer upstream.Close()
	h, err := NewProxy(&Config{API: Anthropic, BaseURL: upstream.URL}, map[API]string{Anthropic: key}, "sonnet", nil)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(h)
	defer proxy.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", proxy.URL+"/v1/messages", strings.NewReader(`{"model":"claude-sonnet-5-5","stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var first []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the first event did not come whole: %q %v", first, err)
		}
		first = append(first, line)
		if line == "\n" {
			break
		}
	}
	if got := strings.Join(first, ""); got != "event: message_start\ndata: {\"echo\":\"[key]\"}\n\n" {
		t.Fatalf("the first event: %q", got)
	}
	close(next)
	rest, _ := io.ReadAll(br)
	if string(rest) != "event: message_stop\ndata: {}\n\n" {
		t.Fatalf("the rest: %q", rest)
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestRedactorReadsLikeAnyReader(t *testing.T) {
	in := "one sk-x\ntwo\nthree sk-x"
	if err := iotest.TestReader(newRedactor(io.NopCloser(strings.NewReader(in)), "sk-x"), []byte("one [key]\ntwo\nthree [key]")); err != nil {
		t.Fatal(err)
	}
}
