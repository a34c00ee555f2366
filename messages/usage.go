package messages

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/messages/modelapi"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// A session's use of the node (D50): the tokens its model read and wrote,
// as the node's model proxy counted them (what limits.tokens decides by),
// and each turn as the session measured it (its wall and CPU time, and
// what its runner said of itself). Each has one home: the node's count in
// AGENTS/LOGIN/mcp/PROJECT/usage.json (ModelUsage, the proxy's to write),
// the turns in the session's own directory (SessionTurns, the session's),
// summed on the status and in the end note (SessionUsage).

// LimitTokens names the tokens limit: a session definition's
// limits.tokens, a protocol v1 record's budget.tokens (D50): the tokens
// its model may read and write, as the node's model proxy counts them.
const LimitTokens = "tokens"

// CostUSD is an amount of US dollars as a decimal string, at most six
// places ("0.0123"): what a runner's CLI says a turn cost. A string, so
// that no reader rounds money; "" when nothing was said.
type CostUSD string

// CostOf is usd as a CostUSD, rounded to a millionth of a dollar; "" for
// an amount that is not one (below 0, NaN, past 10^12).
func CostOf(usd float64) CostUSD {
	if math.IsNaN(usd) || usd < 0 || usd >= 1e12 {
		return ""
	}
	return costOfMicros(uint64(math.Round(usd * 1e6)))
}

func costOfMicros(m uint64) CostUSD {
	s := strconv.FormatUint(m/1e6, 10)
	if frac := m % 1e6; frac != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%06d", frac), "0")
	}
	return CostUSD(s)
}

// micros reads the amount in millionths of a dollar.
func (c CostUSD) micros() (uint64, bool) {
	whole, frac, dotted := strings.Cut(string(c), ".")
	if whole == "" || len(whole) > 12 || (dotted && (frac == "" || len(frac) > 6)) {
		return 0, false
	}
	w, err := strconv.ParseUint(whole, 10, 64)
	if err != nil || strings.ContainsAny(whole, "+-") {
		return 0, false
	}
	var f uint64
	if dotted {
		if strings.ContainsAny(frac, "+-") {
			return 0, false
		}
		if f, err = strconv.ParseUint(frac+strings.Repeat("0", 6-len(frac)), 10, 64); err != nil {
			return 0, false
		}
	}
	return w*1e6 + f, true
}

// Micros is the amount in millionths of a dollar; ok is false for ""
// and for a string that is not an amount.
func (c CostUSD) Micros() (m uint64, ok bool) { return c.micros() }

// CostOfMicros is m millionths of a dollar as a CostUSD.
func CostOfMicros(m uint64) CostUSD { return costOfMicros(m) }

// Plus is c and d added; an amount that does not read counts as none.
func (c CostUSD) Plus(d CostUSD) CostUSD {
	a, aok := c.micros()
	b, bok := d.micros()
	switch {
	case !aok && !bok:
		return ""
	case !aok:
		return d
	case !bok:
		return c
	}
	return costOfMicros(a + b)
}

func (c CostUSD) validate(f string) error {
	if c == "" {
		return nil
	}
	if _, ok := c.micros(); !ok {
		return strictjson.FieldErr(f, strictjson.ErrInvalid, fmt.Sprintf("%s is not an amount of dollars: digits, and at most six places after a point, as 0.0123", strictjson.QuoteShort(string(c))))
	}
	return nil
}

// ModelCount is the node's count of a session's model (D50): what its
// model proxy forwarded and read back. A runner cannot change it: the
// proxy runs outside the sandbox and counts each reply as it passes.
type ModelCount struct {
	// Requests are the requests forwarded to the model's API.
	Requests uint64 `json:"requests" why:"the node's count says how many requests it forwarded"`
	// Tokens are what the replies said the model read and wrote.
	modelapi.Tokens
	// Unread counts the replies (a success) whose usage could not be
	// read: no usage, a stream cut short, a reply that is not the API's
	// shape. Under a tokens limit one spends the budget: the node cannot
	// count what it does not see.
	Unread uint64 `json:"unread,omitempty"`
	// Refused counts the requests refused because the budget was spent.
	Refused uint64 `json:"refused,omitempty"`
}

// String renders "3 requests, 120 in (20 cached), 40 out".
func (c ModelCount) String() string {
	s := plural(c.Requests, "request") + ", " + c.Tokens.String()
	if c.Unread > 0 {
		s += ", " + plural(c.Unread, "reply") + " unread"
	}
	if c.Refused > 0 {
		s += ", " + strconv.FormatUint(c.Refused, 10) + " refused"
	}
	return s
}

func (c *ModelCount) validate(f string) error {
	for k, n := range map[string]uint64{"requests": c.Requests, "unread": c.Unread, "refused": c.Refused} {
		if n > modelapi.MaxTokens {
			return strictjson.FieldErr(strictjson.JoinField(f, k), strictjson.ErrInvalid, fmt.Sprintf("%d is past 2^53-1", n))
		}
	}
	return c.Tokens.ValidateAt(f)
}

func plural(n uint64, word string) string {
	s := strconv.FormatUint(n, 10) + " " + word
	if n != 1 {
		if strings.HasSuffix(word, "y") {
			return s[:len(s)-1] + "ies"
		}
		return s + "s"
	}
	return s
}

// RunnerReport is what a runner says a turn used (D50): the tokens its
// CLI reported (claude's result, codex's turn.completed, the native
// runner's replies) and, where its CLI says it, the cost. Its own word:
// shown beside the node's count, never deciding anything.
type RunnerReport struct {
	modelapi.Tokens
	Cost CostUSD `json:"cost_usd,omitempty"`
}

// Plus is r and s added.
func (r RunnerReport) Plus(s RunnerReport) RunnerReport {
	return RunnerReport{Tokens: r.Tokens.Plus(s.Tokens), Cost: r.Cost.Plus(s.Cost)}
}

// String renders "100 in, 30 out, $0.0123".
func (r RunnerReport) String() string {
	s := r.Tokens.String()
	if r.Cost != "" {
		s += ", $" + string(r.Cost)
	}
	return s
}

func (r *RunnerReport) validate(f string) error {
	if err := r.Tokens.ValidateAt(f); err != nil {
		return err
	}
	return r.Cost.validate(strictjson.JoinField(f, "cost_usd"))
}

// Validate checks the counts and the cost.
func (r *RunnerReport) Validate() error { return strictjson.At("runner-usage", r.validate("")) }

// Encode renders the runner's report as the file a runner writes for its
// session ($OCX_TURN_USAGE, "ocx": "runner-usage").
func (r *RunnerReport) Encode() ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return encodeHostFile("runner-usage", r)
}

// MaxUsageFileLen bounds each usage file: the runner's report, the
// session's turns, the node's count.
const MaxUsageFileLen = 64 << 10

// DecodeRunnerReport reads a runner's report strictly.
func DecodeRunnerReport(data []byte) (*RunnerReport, error) {
	r := &RunnerReport{}
	if err := decodeUsageFile("runner-usage", data, r); err != nil {
		return nil, err
	}
	return r, r.Validate()
}

func decodeUsageFile(kind string, data []byte, v any) error {
	if len(data) > MaxUsageFileLen {
		return &strictjson.FieldError{Where: kind, Problem: fmt.Sprintf("is %d bytes; at most %d", len(data), MaxUsageFileLen), Err: strictjson.ErrTooLong}
	}
	o, err := hostFileObject(kind, kind, data)
	if err != nil {
		return err
	}
	return strictjson.At(kind, Fill(o, v))
}

// TurnUsage is one turn as its session measured it: the post it
// answered, when it started, its wall time and the CPU time of its
// process and those it waited for, and what the runner reported.
type TurnUsage struct {
	Post    string        `json:"post" why:"a turn names the post it answered"`
	Started time.Time     `json:"started" why:"a turn says when it started, in UTC"`
	WallMS  uint64        `json:"wall_ms" why:"a turn says how long it took, in milliseconds"`
	CPUMS   uint64        `json:"cpu_ms" why:"a turn says the CPU time its process used, in milliseconds"`
	Runner  *RunnerReport `json:"runner,omitempty"`
}

func (t *TurnUsage) validate(f string) error {
	if err := CheckHash(strictjson.JoinField(f, "post"), t.Post); err != nil {
		return err
	}
	if err := checkTime(strictjson.JoinField(f, "started"), t.Started); err != nil {
		return err
	}
	if t.WallMS > strictjson.MaxSafeInt || t.CPUMS > strictjson.MaxSafeInt {
		return strictjson.FieldErr(strictjson.JoinField(f, "wall_ms"), strictjson.ErrInvalid, "is past 2^53-1")
	}
	if t.Runner != nil {
		return t.Runner.validate(strictjson.JoinField(f, "runner"))
	}
	return nil
}

// SessionUsage is a session's use of the node, summed (D50): on the
// status (a running session's) and in the end note.
type SessionUsage struct {
	// Model is the node's count of its model: what limits.tokens decides
	// by. Absent for a session with no model proxy (not llm), or whose
	// proxy counted nothing it could say.
	Model *ModelCount `json:"model,omitempty"`
	// Limit is the session's limits.tokens as its proxy held it; 0 for
	// none.
	Limit uint64 `json:"tokens_limit,omitempty"`
	// Turns, WallMS and CPUMS sum the turns as the session measured them.
	Turns  uint64 `json:"turns" why:"a usage says how many turns it sums"`
	WallMS uint64 `json:"wall_ms" why:"a usage says the turns' wall time, in milliseconds"`
	CPUMS  uint64 `json:"cpu_ms" why:"a usage says the turns' CPU time, in milliseconds"`
	// Runner sums what the runner reported of its turns: its own word.
	Runner *RunnerReport `json:"runner,omitempty"`
}

// AddTurn adds one turn to the sums.
func (u *SessionUsage) AddTurn(t TurnUsage) {
	u.Turns = strictjson.AddCapped(u.Turns, 1)
	u.WallMS = strictjson.AddCapped(u.WallMS, t.WallMS)
	u.CPUMS = strictjson.AddCapped(u.CPUMS, t.CPUMS)
	if t.Runner != nil {
		r := t.Runner.Plus(RunnerReport{})
		if u.Runner != nil {
			r = u.Runner.Plus(*t.Runner)
		}
		u.Runner = &r
	}
}

// String renders the usage in words: "its model: 3 requests, 120 in, 40
// out (limit 1000); 2 turns, 5.4 s wall, 0.8 s CPU; its runner reported
// 100 in, 30 out, $0.0123".
func (u SessionUsage) String() string {
	var parts []string
	if u.Model != nil {
		s := "its model: " + u.Model.String()
		if u.Limit > 0 {
			s += fmt.Sprintf(", %d of its %d tokens", u.Model.Total(), u.Limit)
		}
		parts = append(parts, s)
	}
	parts = append(parts, fmt.Sprintf("%s, %s wall, %s CPU", plural(u.Turns, "turn"), seconds(u.WallMS), seconds(u.CPUMS)))
	if u.Runner != nil {
		parts = append(parts, "its runner reported "+u.Runner.String())
	}
	return strings.Join(parts, "; ")
}

func seconds(ms uint64) string {
	return strconv.FormatFloat(float64(ms)/1000, 'f', 1, 64) + " s"
}

func (u *SessionUsage) validate(f string) error {
	if u.Model != nil {
		if err := u.Model.validate(strictjson.JoinField(f, "model")); err != nil {
			return err
		}
	}
	for k, n := range map[string]uint64{"tokens_limit": u.Limit, "turns": u.Turns, "wall_ms": u.WallMS, "cpu_ms": u.CPUMS} {
		if n > strictjson.MaxSafeInt {
			return strictjson.FieldErr(strictjson.JoinField(f, k), strictjson.ErrInvalid, fmt.Sprintf("%d is past 2^53-1", n))
		}
	}
	if u.Runner != nil {
		return u.Runner.validate(strictjson.JoinField(f, "runner"))
	}
	return nil
}

// ModelUsage is a session's model count as the node keeps it:
// AGENTS/LOGIN/mcp/PROJECT/usage.json ("ocx": "model-usage"), written by
// the session's MCP server (its model proxy) after each reply, outside
// every sandbox; its own sandbox sees it read-only.
type ModelUsage struct {
	// Launch is the launch the session serves, "" when the server was
	// started without one (by hand).
	Launch string `json:"launch,omitempty"`
	// Count is what the proxy counted since the session's server started.
	Count ModelCount `json:"count" why:"the model's usage holds the node's count"`
	// Limit is the session's limits.tokens; 0 for none.
	Limit uint64 `json:"limit,omitempty"`
	// Reached says, in words, why the budget is spent; "" while it is not.
	Reached string `json:"reached,omitempty"`
	// Updated is when the count last changed.
	Updated time.Time `json:"updated" why:"the model's usage says when it was counted"`
}

// Validate checks the launch, the counts and the time.
func (m *ModelUsage) Validate() error {
	if err := checkOptHash("launch", m.Launch); err != nil {
		return strictjson.At("model-usage", err)
	}
	if err := m.Count.validate("count"); err != nil {
		return strictjson.At("model-usage", err)
	}
	if m.Limit > modelapi.MaxTokens {
		return strictjson.At("model-usage", strictjson.FieldErr("limit", strictjson.ErrInvalid, "is past 2^53-1"))
	}
	if m.Reached != "" && m.Limit == 0 {
		return strictjson.At("model-usage", strictjson.FieldErr("reached", strictjson.ErrInvalid, "a count with no limit reaches none"))
	}
	if err := CheckLine("reached", m.Reached, false, MaxShortLen); err != nil {
		return strictjson.At("model-usage", err)
	}
	return strictjson.At("model-usage", checkTime("updated", m.Updated))
}

// Encode renders the file.
func (m *ModelUsage) Encode() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	c := *m
	c.Updated = c.Updated.UTC()
	return encodeHostFile("model-usage", &c)
}

// DecodeModelUsage reads the file strictly.
func DecodeModelUsage(data []byte) (*ModelUsage, error) {
	m := &ModelUsage{}
	if err := decodeUsageFile("model-usage", data, m); err != nil {
		return nil, err
	}
	return m, m.Validate()
}

// maxTurnsKept is how many turns a session's usage file keeps one by
// one; its total sums every turn.
const maxTurnsKept = 100

// SessionTurns is a session's own account of its turns:
// WS/session/usage.json ("ocx": "turns"), written by the session after
// each turn. The session's to write, so it is believed of nothing but its
// own session, and decides nothing (D50).
type SessionTurns struct {
	// Launch is the launch the session serves; "" at a terminal.
	Launch string `json:"launch,omitempty"`
	// Total sums every turn (Model is never set here).
	Total SessionUsage `json:"total" why:"the session's turns hold their total"`
	// Turns are the last maxTurnsKept, oldest first.
	Turns []TurnUsage `json:"turns" why:"the session's turns are listed, even none"`
}

// Add adds a turn: kept, and summed.
func (s *SessionTurns) Add(t TurnUsage) {
	s.Total.AddTurn(t)
	s.Turns = append(s.Turns, t)
	if n := len(s.Turns); n > maxTurnsKept {
		s.Turns = append(s.Turns[:0:0], s.Turns[n-maxTurnsKept:]...)
	}
}

// Validate checks each turn and the total.
func (s *SessionTurns) Validate() error {
	if err := checkOptHash("launch", s.Launch); err != nil {
		return strictjson.At("turns", err)
	}
	if s.Total.Model != nil {
		return strictjson.At("turns", strictjson.FieldErr("total.model", strictjson.ErrInvalid, "a session's own account holds no count of the node's"))
	}
	if err := s.Total.validate("total"); err != nil {
		return strictjson.At("turns", err)
	}
	if len(s.Turns) > maxTurnsKept {
		return strictjson.At("turns", strictjson.FieldErr("turns", strictjson.ErrInvalid, fmt.Sprintf("holds %d turns; at most %d", len(s.Turns), maxTurnsKept)))
	}
	for i := range s.Turns {
		if err := s.Turns[i].validate(strictjson.IndexField("turns", i)); err != nil {
			return strictjson.At("turns", err)
		}
	}
	return nil
}

// Encode renders the file.
func (s *SessionTurns) Encode() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	c := *s
	if c.Turns == nil {
		c.Turns = []TurnUsage{}
	}
	return encodeHostFile("turns", &c)
}

// DecodeSessionTurns reads the file strictly.
func DecodeSessionTurns(data []byte) (*SessionTurns, error) {
	s := &SessionTurns{}
	if err := decodeUsageFile("turns", data, s); err != nil {
		return nil, err
	}
	return s, s.Validate()
}

// UsageOf sums a session's usage from the node's count of its model
// (nil: none) and its own account of its turns (nil: none), and says
// whether its tokens budget is spent and why.
func UsageOf(m *ModelUsage, t *SessionTurns) (u SessionUsage, reached string) {
	if t != nil {
		u = t.Total
		u.Model = nil
	}
	if m != nil {
		c := m.Count
		u.Model, u.Limit, reached = &c, m.Limit, m.Reached
	}
	return u, reached
}

// TokensReached words why a session's tokens budget is spent, for the
// node's count c under limit: its total reached the limit, or a reply
// could not be counted.
func TokensReached(c ModelCount, limit uint64) string {
	switch {
	case limit == 0:
		return ""
	case c.Total() >= limit:
		return fmt.Sprintf("its model proxy counted %d tokens (%s) against its limits.tokens of %d", c.Total(), c.Tokens, limit)
	case c.Unread > 0:
		return fmt.Sprintf("its model proxy could not read the usage of %s, so it cannot hold the session to its limits.tokens of %d (%d counted)", plural(c.Unread, "reply"), limit, c.Total())
	}
	return ""
}

// fields renders the usage as key=value pairs after a status line's:
// " requests=3 tokens_in=120 tokens_out=40 tokens_limit=1000 turns=2
// wall_ms=5400 cpu_ms=800 runner_in=100 runner_out=30 runner_cost_usd=0.0123".
func (u SessionUsage) fields() string {
	var b strings.Builder
	kv := func(k string, n uint64) { fmt.Fprintf(&b, " %s=%d", k, n) }
	if m := u.Model; m != nil {
		kv("requests", m.Requests)
		kv("tokens_in", m.Input)
		kv("tokens_out", m.Output)
		if m.Cached > 0 {
			kv("tokens_cached", m.Cached)
		}
		if m.Unread > 0 {
			kv("unread", m.Unread)
		}
		if m.Refused > 0 {
			kv("refused", m.Refused)
		}
	}
	if u.Limit > 0 {
		kv("tokens_limit", u.Limit)
	}
	kv("turns", u.Turns)
	kv("wall_ms", u.WallMS)
	kv("cpu_ms", u.CPUMS)
	if r := u.Runner; r != nil {
		kv("runner_in", r.Input)
		kv("runner_out", r.Output)
		if r.Cost != "" {
			b.WriteString(" runner_cost_usd=" + Token(string(r.Cost)))
		}
	}
	return b.String()
}
