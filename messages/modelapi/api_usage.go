package modelapi

import (
	"bytes"
	"encoding/json"
)

// A reply's usage, as each API writes it (D50). The parsers are pure:
// bytes in, tokens out, a reply that does not say what it used read as
// saying nothing. UsageCounter applies them to a reply as it passes, whole or
// streamed.

// MaxAPIBodyLen bounds a request or reply of a model's API that the node
// reads: a body, or one line of a stream.
const MaxAPIBodyLen = 32 << 20

// APIShape is the shape of an endpoint's replies.
type APIShape int

// The shapes the proxy counts.
const (
	// ShapeNone: an endpoint whose replies carry no usage (the proxy's
	// own, or one it does not know).
	ShapeNone APIShape = iota
	// ShapeMessages is Anthropic's Messages API (POST /v1/messages): the
	// body's usage, or in a stream message_start's message.usage and
	// message_delta's usage.
	ShapeMessages
	// ShapeChat is OpenAI's chat completions (POST /v1/chat/completions):
	// the body's usage, or in a stream the last chunk's usage, present
	// when the request asked for it (stream_options.include_usage).
	ShapeChat
	// ShapeResponses is OpenAI's Responses API (POST /v1/responses): the
	// body's usage, or in a stream response.completed's response.usage.
	ShapeResponses
)

// APIShapeOf is the shape of the replies to a request for path.
func APIShapeOf(path string) APIShape {
	switch path {
	case "/v1/messages":
		return ShapeMessages
	case "/v1/chat/completions":
		return ShapeChat
	case "/v1/responses":
		return ShapeResponses
	}
	return ShapeNone
}

func (s APIShape) String() string {
	switch s {
	case ShapeMessages:
		return "messages"
	case ShapeChat:
		return "chat"
	case ShapeResponses:
		return "responses"
	}
	return "none"
}

// tokenCount is a JSON number read as a count of tokens: a whole number from 0
// to 2^53-1, else nothing.
type tokenCount struct {
	n  uint64
	ok bool
}

// UnmarshalJSON reads b, a JSON value that is valid: a count only when
// it is digits alone (null, a string, a fraction or an exponent are not).
func (c *tokenCount) UnmarshalJSON(b []byte) error {
	*c = tokenCount{}
	var v uint64
	for _, r := range b {
		if r < '0' || r > '9' || v > (MaxTokens-9)/10 {
			return nil
		}
		v = v*10 + uint64(r-'0')
	}
	if len(b) > 0 {
		*c = tokenCount{n: v, ok: true}
	}
	return nil
}

// anthropicUsage is Anthropic's usage object: input_tokens are those read
// past the cache; cache_creation_input_tokens and cache_read_input_tokens
// are read too.
type anthropicUsage struct {
	Input         tokenCount `json:"input_tokens"`
	Output        tokenCount `json:"output_tokens"`
	CacheCreation tokenCount `json:"cache_creation_input_tokens"`
	CacheRead     tokenCount `json:"cache_read_input_tokens"`
}

// over writes what u says over t: a stream's message_delta counts are
// cumulative, and say only what they name.
func (u *anthropicUsage) over(t Tokens, cr *tokenCount) Tokens {
	if u.CacheRead.ok {
		*cr = u.CacheRead
	}
	in := u.Input.n + u.CacheCreation.n
	if u.Input.ok || u.CacheCreation.ok {
		t.Input = cappedTokens(in)
	}
	if u.Output.ok {
		t.Output = u.Output.n
	}
	return t
}

func (u *anthropicUsage) any() bool {
	return u.Input.ok || u.Output.ok || u.CacheCreation.ok || u.CacheRead.ok
}

// chatUsage is chat completions' usage object.
type chatUsage struct {
	Prompt     tokenCount `json:"prompt_tokens"`
	Completion tokenCount `json:"completion_tokens"`
	Details    *struct {
		Cached tokenCount `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (u *chatUsage) tokens() (Tokens, bool) {
	if u == nil || !u.Prompt.ok || !u.Completion.ok {
		return Tokens{}, false
	}
	t := Tokens{Input: u.Prompt.n, Output: u.Completion.n}
	if u.Details != nil {
		t.Cached = min(u.Details.Cached.n, t.Input)
	}
	return t, true
}

// responsesUsage is the Responses API's usage object.
type responsesUsage struct {
	Input   tokenCount `json:"input_tokens"`
	Output  tokenCount `json:"output_tokens"`
	Details *struct {
		Cached tokenCount `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

func (u *responsesUsage) tokens() (Tokens, bool) {
	if u == nil || !u.Input.ok || !u.Output.ok {
		return Tokens{}, false
	}
	t := Tokens{Input: u.Input.n, Output: u.Output.n}
	if u.Details != nil {
		t.Cached = min(u.Details.Cached.n, t.Input)
	}
	return t, true
}

func cappedTokens(n uint64) uint64 { return min(n, MaxTokens) }

// ParseUsage reads the usage of a whole reply (not streamed) of shape s:
// the top-level "usage" of the body. ok is false when the body says none,
// or is not the shape's.
func ParseUsage(s APIShape, body []byte) (t Tokens, ok bool) {
	switch s {
	case ShapeMessages:
		var r struct {
			Usage *anthropicUsage `json:"usage"`
		}
		if json.Unmarshal(body, &r) != nil || r.Usage == nil || !r.Usage.Input.ok || !r.Usage.Output.ok {
			return t, false
		}
		var cr tokenCount
		t = r.Usage.over(t, &cr)
		t.Input = cappedTokens(t.Input + cr.n)
		t.Cached = cr.n
		return t, true
	case ShapeChat:
		var r struct {
			Usage *chatUsage `json:"usage"`
		}
		if json.Unmarshal(body, &r) != nil {
			return t, false
		}
		return r.Usage.tokens()
	case ShapeResponses:
		var r struct {
			Usage *responsesUsage `json:"usage"`
		}
		if json.Unmarshal(body, &r) != nil {
			return t, false
		}
		return r.Usage.tokens()
	}
	return t, false
}

// usageStream is a streamed reply's usage so far: the events of one reply of
// shape s, each given to Event as its data. Done says the stream said
// what it used, whole: for Messages a message_delta with its usage after
// message_start's; for chat a chunk's usage; for Responses the final
// response's.
type usageStream struct {
	shape APIShape
	t     Tokens
	// cacheRead is Anthropic's cache_read_input_tokens, added to the read.
	cacheRead tokenCount
	started   bool
	done      bool
}

// NewUsageStream is the usage of a stream of shape s, nothing seen yet.
func NewUsageStream(s APIShape) *usageStream { return &usageStream{shape: s} }

// Event reads one event's data (its data lines joined). An event that
// carries no usage, or does not read, changes nothing.
func (st *usageStream) Event(data []byte) {
	if !bytes.Contains(data, []byte(`"usage"`)) {
		return // most events are text; only these say what was used
	}
	switch st.shape {
	case ShapeMessages:
		var e struct {
			Type    string `json:"type"`
			Message *struct {
				Usage *anthropicUsage `json:"usage"`
			} `json:"message"`
			Usage *anthropicUsage `json:"usage"`
		}
		if json.Unmarshal(data, &e) != nil {
			return
		}
		switch {
		case e.Type == "message_start" && e.Message != nil && e.Message.Usage != nil && e.Message.Usage.any():
			st.t = e.Message.Usage.over(Tokens{}, &st.cacheRead)
			st.started = true
		case e.Type == "message_delta" && e.Usage != nil && e.Usage.Output.ok:
			st.t = e.Usage.over(st.t, &st.cacheRead)
			st.done = st.started
		}
	case ShapeChat:
		var e struct {
			Usage *chatUsage `json:"usage"`
		}
		if json.Unmarshal(data, &e) != nil {
			return
		}
		if t, ok := e.Usage.tokens(); ok {
			st.t, st.done = t, true
		}
	case ShapeResponses:
		var e struct {
			Type     string `json:"type"`
			Response *struct {
				Usage *responsesUsage `json:"usage"`
			} `json:"response"`
		}
		if json.Unmarshal(data, &e) != nil || e.Response == nil {
			return
		}
		switch e.Type {
		case "response.completed", "response.incomplete", "response.failed":
			if t, ok := e.Response.Usage.tokens(); ok {
				st.t, st.done = t, true
			}
		}
	}
}

// Usage is what the stream said it used, and whether it said it whole.
func (st *usageStream) Usage() (Tokens, bool) {
	t := st.t
	if st.shape == ShapeMessages {
		t.Input = cappedTokens(t.Input + st.cacheRead.n)
		t.Cached = min(st.cacheRead.n, t.Input)
	}
	return t, st.done
}

// UsageCounter counts one reply of a shape as its bytes pass through Write,
// which never changes them and never fails: a whole body (kept, at most
// MaxAPIBodyLen, and read at the end) or a stream of server-sent events (read
// an event at a time, each line at most MaxAPIBodyLen). Result says what the
// reply used.
type UsageCounter struct {
	shape  APIShape
	stream *usageStream
	// buf is the body so far, or the stream's unfinished line.
	buf []byte
	// data is the event's data lines so far.
	data    []byte
	hasData bool
	// over says a body or a line went past MaxAPIBodyLen: not read.
	over bool
	// cr says the last byte was '\r', so a '\n' after it ends no line.
	cr bool
}

// NewUsageCounter counts a reply of shape s; stream says it is a stream of
// server-sent events (Content-Type text/event-stream).
func NewUsageCounter(s APIShape, stream bool) *UsageCounter {
	c := &UsageCounter{shape: s}
	if stream {
		c.stream = NewUsageStream(s)
	}
	return c
}

// Write takes the next bytes of the reply.
func (c *UsageCounter) Write(p []byte) (int, error) {
	if c.shape == ShapeNone {
		return len(p), nil
	}
	if c.stream == nil {
		if !c.over {
			if len(c.buf)+len(p) > MaxAPIBodyLen {
				c.over, c.buf = true, nil
			} else {
				c.buf = append(c.buf, p...)
			}
		}
		return len(p), nil
	}
	for _, b := range p {
		switch {
		case b == '\n' && c.cr:
			c.cr = false
		case b == '\n' || b == '\r':
			c.cr = b == '\r'
			c.line()
		default:
			c.cr = false
			if c.over {
				continue
			}
			if len(c.buf) >= MaxAPIBodyLen {
				c.over, c.buf = true, nil
				continue
			}
			c.buf = append(c.buf, b)
		}
	}
	return len(p), nil
}

// line ends a line of the stream (the server-sent events format: a blank
// line dispatches the event; "data:" lines are its data; others are not
// usage).
func (c *UsageCounter) line() {
	l := c.buf
	c.buf = c.buf[:0]
	if c.over {
		c.over = false // that line is lost; the next is read
		c.data, c.hasData = c.data[:0], false
		return
	}
	if len(l) == 0 {
		c.dispatch()
		return
	}
	field, value, _ := bytes.Cut(l, []byte(":"))
	if string(field) != "data" {
		return
	}
	value = bytes.TrimPrefix(value, []byte(" "))
	if c.hasData {
		c.data = append(c.data, '\n')
	}
	if len(c.data)+len(value) > MaxAPIBodyLen {
		c.data, c.hasData = c.data[:0], false
		return
	}
	c.data, c.hasData = append(c.data, value...), true
}

func (c *UsageCounter) dispatch() {
	if c.hasData {
		c.stream.Event(c.data)
	}
	c.data, c.hasData = c.data[:0], false
}

// Result is what the reply used, and whether it said it whole: a body
// with its usage, or a stream that said it to the end (an event not yet
// ended by a blank line at the end counts too).
func (c *UsageCounter) Result() (Tokens, bool) {
	switch {
	case c.shape == ShapeNone:
		return Tokens{}, false
	case c.stream == nil:
		if c.over {
			return Tokens{}, false
		}
		return ParseUsage(c.shape, c.buf)
	}
	if len(c.buf) > 0 && !c.over {
		c.line()
	}
	c.dispatch()
	return c.stream.Usage()
}
