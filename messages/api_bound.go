package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A request's bound on what the model may write (D79): the field each
// API reads it from, read so that the node can reserve it, and written so
// that the node can cap it to what a session's budget has left. Field
// names are compared as a server written in Go compares them, without
// case (encoding/json takes "MAX_TOKENS" for max_tokens), and a field
// named twice, in any case, is refused: a server might read either.

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

// MaxOutput is what a request naming no bound is taken to ask: the most a
// model of the APIs the node serves writes in one reply (128,000: Claude
// Code 2.1 says it of claude-sonnet-5-5, and OpenAI's gpt-5 the same).
// Such a request is forwarded as it is while the limit leaves that much,
// and with a bound added, what is left, once it leaves less: a bound
// added above a model's own maximum is one its API may refuse.
const MaxOutput = 128000

// Ask is the bound the request asks: what it names, or MaxOutput.
func (b OutputBound) Ask() uint64 {
	if b.Asked == 0 {
		return MaxOutput
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

// member is one of a JSON object's members: its key and the span of its
// value in the body.
type member struct {
	key        string
	start, end int
}

// ReadOutputBound reads the bound a request body of shape s asks (s not
// ShapeNone). An error says what is wrong: a body that is not one JSON
// object, a bound field named twice or not a whole number (null counts as
// not named), thinking that does not read.
func ReadOutputBound(s APIShape, body []byte) (OutputBound, error) {
	ms, _, err := objectMembers(body)
	if err != nil {
		return OutputBound{}, err
	}
	b := OutputBound{Least: leastBound}
	if s == ShapeResponses {
		b.Least = leastResponsesBound
	}
	for _, f := range boundFields[s] {
		i, err := find(ms, f)
		if err != nil || i < 0 {
			if err != nil {
				return OutputBound{}, err
			}
			continue
		}
		n, err := wholeNumber(body[ms[i].start:ms[i].end])
		if err != nil {
			return OutputBound{}, fmt.Errorf("its %q %v", f, err)
		}
		b.Asked = max(b.Asked, n)
	}
	if s == ShapeMessages {
		th, err := thinkingOf(body, ms)
		if err != nil {
			return OutputBound{}, err
		}
		if th != nil {
			b.Least = leastThinking + 1
		}
	}
	return b, nil
}

// WithOutputBound is body with its output bounded by n: each bound field
// it names set to n, or, where it names none, the first of its shape's
// fields added; on Anthropic's API, thinking's budget_tokens brought below
// n. Every other member is kept byte for byte. The body must read
// (ReadOutputBound).
func WithOutputBound(s APIShape, body []byte, n uint64) ([]byte, error) {
	ms, end, err := objectMembers(body)
	if err != nil {
		return nil, err
	}
	type edit struct {
		start, end int
		value      []byte
	}
	num := []byte(strconv.FormatUint(n, 10))
	var edits []edit
	for _, f := range boundFields[s] {
		i, err := find(ms, f)
		if err != nil {
			return nil, err
		}
		if i >= 0 {
			edits = append(edits, edit{ms[i].start, ms[i].end, num})
		}
	}
	if s == ShapeMessages {
		th, err := thinkingOf(body, ms)
		if err != nil {
			return nil, err
		}
		if th != nil && th.budget >= n {
			v, err := th.withBudget(n - 1)
			if err != nil {
				return nil, err
			}
			edits = append(edits, edit{th.start, th.end, v})
		}
	}
	if !namesBound(ms, s) {
		add := `"` + boundFields[s][0] + `":` + string(num)
		if len(ms) > 0 {
			add = "," + add
		}
		edits = append(edits, edit{end, end, []byte(add)})
	}
	// In the body's order, so that each edit's span is the body's.
	for i := 1; i < len(edits); i++ {
		for j := i; j > 0 && edits[j].start < edits[j-1].start; j-- {
			edits[j], edits[j-1] = edits[j-1], edits[j]
		}
	}
	out := make([]byte, 0, len(body)+32)
	at := 0
	for _, e := range edits {
		out = append(out, body[at:e.start]...)
		out = append(out, e.value...)
		at = e.end
	}
	return append(out, body[at:]...), nil
}

// namesBound says whether the members name one of s's bound fields.
func namesBound(ms []member, s APIShape) bool {
	for _, f := range boundFields[s] {
		if i, _ := find(ms, f); i >= 0 {
			return true
		}
	}
	return false
}

// find is the index of the member named name, without case; -1 when there
// is none, an error when there are two.
func find(ms []member, name string) (int, error) {
	at := -1
	for i, m := range ms {
		if !strings.EqualFold(m.key, name) {
			continue
		}
		if at >= 0 {
			return -1, fmt.Errorf("its body names %q twice", name)
		}
		at = i
	}
	return at, nil
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

// thinking is an Anthropic request's extended thinking, when enabled
// with a budget.
type thinking struct {
	raw        []byte
	start, end int
	budget     uint64
}

func thinkingOf(body []byte, ms []member) (*thinking, error) {
	i, err := find(ms, "thinking")
	if err != nil || i < 0 {
		return nil, err
	}
	raw := body[ms[i].start:ms[i].end]
	var v struct {
		Type   string          `json:"type"`
		Budget json.RawMessage `json:"budget_tokens"`
	}
	if string(raw) == "null" {
		return nil, nil
	}
	if json.Unmarshal(raw, &v) != nil {
		return nil, errors.New(`its "thinking" is not an object`)
	}
	if v.Type != "enabled" || v.Budget == nil {
		return nil, nil
	}
	n, err := wholeNumber(v.Budget)
	if err != nil {
		return nil, fmt.Errorf(`its "thinking.budget_tokens" %v`, err)
	}
	return &thinking{raw: raw, start: ms[i].start, end: ms[i].end, budget: n}, nil
}

// withBudget is thinking's object with budget_tokens n, its other keys
// kept.
func (t *thinking) withBudget(n uint64) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(t.raw, &m); err != nil {
		return nil, errors.New(`its "thinking" is not an object`)
	}
	for k := range m {
		if strings.EqualFold(k, "budget_tokens") {
			delete(m, k)
		}
	}
	m["budget_tokens"] = json.RawMessage(strconv.FormatUint(n, 10))
	return json.Marshal(m)
}

var errNotObject = errors.New("its body is not a JSON object")

// objectMembers are the members of the one JSON object body holds, each
// key unescaped, and the index of its closing brace. It walks the body
// once, without decoding the values: the proxy has read the body as JSON
// already (its model), and the bound is read on every request, bodies of
// a hundred kilobytes among them.
func objectMembers(body []byte) ([]member, int, error) {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, 0, errNotObject
	}
	i = skipSpace(body, i+1)
	var ms []member
	if i < len(body) && body[i] == '}' {
		return ms, i, tail(body, i+1)
	}
	for {
		if i >= len(body) || body[i] != '"' {
			return nil, 0, errNotObject
		}
		kend := skipString(body, i)
		if kend < 0 {
			return nil, 0, errNotObject
		}
		key, err := keyOf(body[i:kend])
		if err != nil {
			return nil, 0, err
		}
		i = skipSpace(body, kend)
		if i >= len(body) || body[i] != ':' {
			return nil, 0, errNotObject
		}
		start := skipSpace(body, i+1)
		end := skipValue(body, start)
		if end < 0 {
			return nil, 0, errNotObject
		}
		ms = append(ms, member{key: key, start: start, end: end})
		i = skipSpace(body, end)
		if i >= len(body) {
			return nil, 0, errNotObject
		}
		switch body[i] {
		case ',':
			i = skipSpace(body, i+1)
		case '}':
			return ms, i, tail(body, i+1)
		default:
			return nil, 0, errNotObject
		}
	}
}

// tail checks that nothing but white space follows the object.
func tail(body []byte, i int) error {
	if skipSpace(body, i) != len(body) {
		return errNotObject
	}
	return nil
}

// keyOf unescapes a key as encoding/json does (a byte of invalid UTF-8
// read as U+FFFD too).
func keyOf(raw []byte) (string, error) {
	plain := true
	for _, c := range raw {
		plain = plain && c != '\\' && c < utf8.RuneSelf
	}
	if plain {
		return string(raw[1 : len(raw)-1]), nil
	}
	var k string
	if err := json.Unmarshal(raw, &k); err != nil {
		return "", errNotObject
	}
	return k, nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString is the index just past the string opening at b[i], -1 when
// it does not close.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); {
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			return -1
		}
		j += q
		// Escaped when an odd number of backslashes stands before it.
		n := 0
		for k := j - 1; k > i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		j++
	}
	return -1
}

// skipValue is the index just past the value starting at b[i], -1 when
// there is none. Objects and arrays are skipped by their brackets, their
// strings by their quotes.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				if j = skipString(b, j); j < 0 {
					return -1
				}
				j--
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for ; j < len(b); j++ {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			if j == i {
				return -1
			}
			return j
		}
	}
	if j == i {
		return -1
	}
	return j
}
