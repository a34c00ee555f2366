package modelapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// A request's bound on what the model may write (D79): the field each
// API reads it from, read as the body passes the model proxy so that the
// node can hold what the request may spend, and, under a session's
// limit, capped as it passes to what the limit left when the request was
// let in. Field names are compared as a server written in Go compares
// them, without case (encoding/json takes "MAX_TOKENS" for max_tokens),
// and a field named twice, in any case, is refused: a server might read
// either.

// OutputBound is what a request asks of the model's output.
type OutputBound struct {
	// Asked is the bound the request names (the largest, where it names
	// two); 0 when it names none.
	Asked uint64
	// Least is the least bound the API takes for this request: 1;
	// Responses' max_output_tokens 16; on Anthropic's API with thinking
	// enabled, 1025 (budget_tokens is at least 1024 and below max_tokens).
	Least uint64
}

// maxOutput is what a request naming no bound is taken to ask: the most a
// model of the APIs the node serves writes in one reply (128,000: Claude
// Code 2.1 says it of claude-sonnet-5-5, and OpenAI's gpt-5 the same).
// It is also what a request is let in with before its body is read: no
// request is forwarded with a bound above it under a limit. Such a
// request is forwarded as it is while the limit leaves that much, and
// with a bound added, what is left, once it leaves less: a bound added
// above a model's own maximum is one its API may refuse.
const maxOutput = 128000

// Ask is the bound the request asks: what it names, or maxOutput.
func (b OutputBound) Ask() uint64 {
	if b.Asked == 0 {
		return maxOutput
	}
	return b.Asked
}

// boundFields are the fields that bound a request's output, per shape:
// the first is the one written when the request names none. Chat
// completions' max_tokens is what every compatible server reads (OpenAI's
// reasoning models want max_completion_tokens, which is capped where a
// request names it).
var boundFields = map[APIShape][]string{
	ShapeMessages:  {"max_tokens"},
	ShapeChat:      {"max_tokens", "max_completion_tokens"},
	ShapeResponses: {"max_output_tokens"},
}

// Least bounds per API.
const (
	leastBound          = 1
	leastResponsesBound = 16
	leastThinking       = 1024
)

// LeastOutput is the least bound a request of shape s may be given,
// before its body says more (thinking).
func LeastOutput(s APIShape) uint64 {
	if s == ShapeResponses {
		return leastResponsesBound
	}
	return leastBound
}

// OutputCap reads the output bound of a request body of one shape as the
// body passes, through the scanner it makes (Scanner: the ObjectScanner
// the model proxy passes the body through), and caps it to n, what the
// session's limit granted the request before its body was read (0: no
// limit, nothing changed). Under a cap each bound field is passed as the
// least of what it names and n; a field set to null is set to n, and a
// body naming none gets the shape's first field added, n, before its
// closing brace, where n is below maxOutput (a body naming none asks
// maxOutput, and goes as it is when it may). On Anthropic's API, thinking
// enabled with a budget_tokens of n or more has it brought to n-1. Every
// other byte passes as it came. Memory is bounded: the scanner holds the
// bound's values (at most MaxScanValueLen each), nothing else.
type OutputCap struct {
	shape    APIShape
	n        uint64
	held     []string
	scan     *ObjectScanner
	asked    uint64
	thinking bool // Anthropic's thinking enabled with a budget
	err      error
}

// NewOutputCap caps the bound of a body of shape s (not ShapeNone) to n;
// 0: reads it only.
func NewOutputCap(s APIShape, n uint64) *OutputCap {
	c := &OutputCap{shape: s, n: n, held: slices.Clone(boundFields[s])}
	if n > 0 && s == ShapeMessages {
		c.held = append(c.held, "thinking")
	}
	return c
}

// Scanner is the scanner the body passes through (ObjectScanner.Pass),
// scanning for keys too.
func (c *OutputCap) Scanner(keys ...string) *ObjectScanner {
	c.scan = newObjectEditor(objectEdit{Held: c.held, Value: c.value, End: c.end}, keys...)
	return c.scan
}

// Shape is the shape of the body capped.
func (c *OutputCap) Shape() APIShape { return c.shape }

// Grows says the body may pass longer than it came: under a cap below
// maxOutput, where a bound is added or set over a null. Otherwise it
// passes at its own length, a bound lowered padded with spaces, so that
// the length the client declared holds.
func (c *OutputCap) Grows() bool { return c.n > 0 && c.n < maxOutput }

// Err is what is wrong with the bound read so far: a field not a whole
// number or longer than MaxScanValueLen, a field named twice (in any
// case), thinking that does not read. A body with an error is not to be
// passed whole.
func (c *OutputCap) Err() error {
	if c.err != nil {
		return c.err
	}
	for _, f := range c.held {
		if c.scan.Value(f).Seen > 1 {
			return fmt.Errorf("its body names %q twice", f)
		}
	}
	return nil
}

// Bound is what the body, read whole, asks.
func (c *OutputCap) Bound() OutputBound {
	b := OutputBound{Asked: c.asked, Least: LeastOutput(c.shape)}
	if c.thinking {
		b.Least = leastThinking + 1
	}
	return b
}

// value is what passes for a held field's value raw.
func (c *OutputCap) value(key string, raw []byte) ([]byte, error) {
	if raw == nil {
		return nil, c.fail(fmt.Errorf("its %q is longer than %d bytes", key, MaxScanValueLen))
	}
	if key == "thinking" {
		return c.thinkingValue(raw)
	}
	n, err := wholeNumber(raw)
	if err != nil {
		return nil, c.fail(fmt.Errorf("its %q %v", key, err))
	}
	c.asked = max(c.asked, n)
	switch {
	case c.n == 0:
	case n == 0 && c.Grows(): // null: not named, set
		return strconv.AppendUint(nil, c.n, 10), nil
	case n > c.n:
		return c.fit(c.n, raw), nil
	}
	return raw, nil
}

// fit is n written in place of raw: padded with spaces to raw's length
// where the body is to keep its length (n is then never longer: it is
// less than raw's number).
func (c *OutputCap) fit(n uint64, raw []byte) []byte {
	out := strconv.AppendUint(make([]byte, 0, len(raw)), n, 10)
	for !c.Grows() && len(out) < len(raw) {
		out = append(out, ' ')
	}
	return out
}

// thinkingValue reads Anthropic's thinking, {"type": "enabled",
// "budget_tokens": N} among others, and brings its budget below the cap.
func (c *OutputCap) thinkingValue(raw []byte) ([]byte, error) {
	if string(raw) == "null" {
		return raw, nil
	}
	s := NewObjectScanner("type", "budget_tokens")
	s.Write(raw)
	if s.Close() != nil {
		return nil, c.fail(errors.New(`its "thinking" is not an object`))
	}
	typ, budget := s.Value("type"), s.Value("budget_tokens")
	switch {
	case typ.Seen > 1:
		return nil, c.fail(errors.New(`its "thinking" names "type" twice`))
	case budget.Seen > 1:
		return nil, c.fail(errors.New(`its "thinking" names "budget_tokens" twice`))
	}
	var t string
	if typ.Raw != nil && json.Unmarshal(typ.Raw, &t) != nil {
		return nil, c.fail(errors.New(`its "thinking.type" is not a string`))
	}
	if t != "enabled" || budget.Seen == 0 {
		return raw, nil
	}
	n, err := wholeNumber(budget.Raw)
	if err != nil {
		return nil, c.fail(fmt.Errorf(`its "thinking.budget_tokens" %v`, err))
	}
	c.thinking = true
	if n < c.n {
		return raw, nil
	}
	e := newObjectEditor(objectEdit{Held: []string{"budget_tokens"}, Value: func(_ string, r []byte) ([]byte, error) {
		return c.fit(c.n-1, r), nil
	}})
	return e.Pass(make([]byte, 0, len(raw)+8), raw)
}

// end is what passes before the body's closing brace: the bound, where
// the body names none and the cap is below maxOutput.
func (c *OutputCap) end(empty bool) []byte {
	if !c.Grows() {
		return nil
	}
	for _, f := range boundFields[c.shape] {
		if c.scan.Value(f).Seen > 0 {
			return nil
		}
	}
	var add []byte
	if !empty {
		add = append(add, ',')
	}
	add = append(add, `"`+boundFields[c.shape][0]+`":`...)
	return strconv.AppendUint(add, c.n, 10)
}

func (c *OutputCap) fail(err error) error {
	if c.err == nil {
		c.err = err
	}
	return c.err
}

// wholeNumber reads a bound: a JSON whole number, at most MaxTokens (past
// it, MaxTokens); null is 0, not named.
func wholeNumber(raw []byte) (uint64, error) {
	if string(raw) == "null" {
		return 0, nil
	}
	n, err := strconv.ParseUint(string(raw), 10, 64)
	var ne *strconv.NumError
	switch {
	case errors.As(err, &ne) && ne.Err == strconv.ErrRange:
		return MaxTokens, nil
	case err != nil:
		return 0, errors.New("is not a whole number")
	}
	return min(n, MaxTokens), nil
}
