package modelapi_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages/modelapi"
)

// Every recorded reply in testdata/usage used the same: 135 tokens read
// (100 of them from a cache), 42 written. Anthropic's reply says 25 past
// the cache, 10 written to it and 100 read from it: all 135 are read.
var recorded = modelapi.Tokens{Input: 135, Output: 42, Cached: 100}

var shapes = map[string]modelapi.APIShape{"messages": modelapi.ShapeMessages, "chat": modelapi.ShapeChat, "responses": modelapi.ShapeResponses}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "usage", name)) // trust:outside the test's own fixtures
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
		if got, ok := modelapi.ParseUsage(s, body); !ok || got != recorded {
			t.Errorf("%s: %+v %v, want %+v", name, got, ok, recorded)
		}
		for other, o := range shapes {
			if o == s || (s != modelapi.ShapeMessages && o != modelapi.ShapeMessages) {
				continue // chat and responses share no keys that matter here
			}
			if got, ok := modelapi.ParseUsage(o, body); ok && got == recorded {
				t.Errorf("%s's reply read as %s's: %+v", name, other, got)
			}
		}
	}
	for _, c := range []struct {
		s    modelapi.APIShape
		body string
	}{
		{modelapi.ShapeChat, `{"usage": null}`},
		{modelapi.ShapeChat, `{"usage": {"prompt_tokens": "12", "completion_tokens": 3}}`},
		{modelapi.ShapeChat, `{"usage": {"prompt_tokens": 1.5, "completion_tokens": 3}}`},
		{modelapi.ShapeMessages, `{"usage": {"input_tokens": -1, "output_tokens": 3}}`},
		{modelapi.ShapeResponses, `{"usage": {"input_tokens": 1e3, "output_tokens": 3}}`},
		{modelapi.ShapeResponses, `not json`},
		{modelapi.ShapeNone, `{"usage": {"input_tokens": 1, "output_tokens": 3}}`},
	} {
		if got, ok := modelapi.ParseUsage(c.s, []byte(c.body)); ok {
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
				c := modelapi.NewUsageCounter(s, true)
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
		c := modelapi.NewUsageCounter(s, false)
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
	c := modelapi.NewUsageCounter(modelapi.ShapeMessages, true)
	c.Write(cut)
	if got, whole := c.Result(); whole || got.Input != 135 || got.Output != 1 {
		t.Errorf("cut Messages stream: %+v whole=%v, want 135 read and the 1 written so far, not whole", got, whole)
	}
	chat := fixture(t, "chat.sse")
	noUsage := bytes.ReplaceAll(chat, []byte(`"usage":{"prompt_tokens":135,"completion_tokens":42,"total_tokens":177,"prompt_tokens_details":{"cached_tokens":100}}`), []byte(`"usage":null`))
	c = modelapi.NewUsageCounter(modelapi.ShapeChat, true)
	c.Write(noUsage)
	if got, whole := c.Result(); whole || !got.IsZero() {
		t.Errorf("a chat stream without usage (no stream_options.include_usage): %+v whole=%v", got, whole)
	}
	resp := fixture(t, "responses.sse")
	c = modelapi.NewUsageCounter(modelapi.ShapeResponses, true)
	c.Write(resp[:bytes.Index(resp, []byte("event: response.completed"))])
	if _, whole := c.Result(); whole {
		t.Errorf("a Responses stream cut before response.completed reads whole")
	}
	// A line past the bound is not read, and the stream goes on after it.
	c = modelapi.NewUsageCounter(modelapi.ShapeChat, true)
	c.Write([]byte("data: " + strings.Repeat("x", modelapi.MaxAPIBodyLen) + "\n\n"))
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
	f.Add(uint8(modelapi.ShapeMessages), []byte(`{"usage":{"input_tokens":9007199254740991,"cache_read_input_tokens":9007199254740991,"output_tokens":1}}`))
	f.Fuzz(func(t *testing.T, shape uint8, body []byte) {
		s := modelapi.APIShape(shape % 4)
		got, ok := modelapi.ParseUsage(s, body)
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
		st := modelapi.NewUsageStream(modelapi.APIShape(shape % 4))
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
		s := modelapi.APIShape(shape % 4)
		one := modelapi.NewUsageCounter(s, stream)
		one.Write(b)
		want, wantWhole := one.Result()
		two := modelapi.NewUsageCounter(s, stream)
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

func checkTokens(t *testing.T, got modelapi.Tokens, ok bool) {
	t.Helper()
	if got.Cached > got.Input || got.Input > modelapi.MaxTokens || got.Output > modelapi.MaxTokens {
		t.Fatalf("not a count: %+v (ok %v)", got, ok)
	}
}
