package messages

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/messages/modelapi"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// TestCostUSD: an amount is rounded to a millionth of a dollar and added
// exactly, and one that does not read is refused by name.
func TestCostUSD(t *testing.T) {
	for _, c := range []struct {
		usd  float64
		want CostUSD
	}{{0.0123, "0.0123"}, {0, "0"}, {1.5, "1.5"}, {0.0000004, "0"}, {0.0000006, "0.000001"}, {12.3456789, "12.345679"}, {-1, ""}} {
		if got := CostOf(c.usd); got != c.want {
			t.Errorf("CostOf(%v) = %q, want %q", c.usd, got, c.want)
		}
	}
	if got := CostUSD("0.1").Plus("0.2"); got != "0.3" {
		t.Errorf("0.1 + 0.2 = %q, want 0.3 exactly", got)
	}
	if got := CostUSD("").Plus("1.25"); got != "1.25" {
		t.Errorf(`"" + 1.25 = %q`, got)
	}
	for _, bad := range []CostUSD{"1.", ".5", "1.1234567", "-1", "+1", "1e3", "1,5", "0x10", "1.-5"} {
		if err := bad.validate("cost_usd"); err == nil {
			t.Errorf("%q accepted as an amount", bad)
		}
	}
}

// TestTokens: the cached are some of the read, the total what a limit
// counts, and sums never pass 2^53-1.
func TestTokens(t *testing.T) {
	tk := modelapi.Tokens{Input: 120, Output: 40, Cached: 20}
	if tk.Total() != 160 || tk.String() != "120 in (20 cached), 40 out" {
		t.Errorf("%v: total %d", tk, tk.Total())
	}
	if err := (modelapi.Tokens{Input: 1, Cached: 2}).ValidateAt("t"); err == nil || !strings.Contains(err.Error(), "t.cached") {
		t.Errorf("more cached than read: %v", err)
	}
	big := modelapi.Tokens{Input: modelapi.MaxTokens, Output: modelapi.MaxTokens}
	if s := big.Plus(big); s.Input != modelapi.MaxTokens || s.Total() != modelapi.MaxTokens {
		t.Errorf("capped sum: %+v, total %d", s, s.Total())
	}
}

// TestUsageFiles: each usage file renders and reads back the same, its
// kind and keys read strictly.
func TestUsageFiles(t *testing.T) {
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	m := &ModelUsage{Launch: h40, Count: ModelCount{Requests: 3, Tokens: modelapi.Tokens{Input: 120, Output: 40}}, Limit: 100,
		Reached: TokensReached(ModelCount{Tokens: modelapi.Tokens{Input: 120, Output: 40}}, 100), Updated: at}
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeModelUsage(b)
	if err != nil || back.Count != m.Count || back.Reached != m.Reached || !back.Updated.Equal(at) {
		t.Fatalf("model usage %s read back as %+v, %v", b, back, err)
	}
	if !strings.Contains(m.Reached, "counted 160 tokens") || !strings.Contains(m.Reached, "limits.tokens of 100") {
		t.Errorf("reached: %q", m.Reached)
	}
	st := &SessionTurns{Launch: h40}
	for i := range maxTurnsKept + 5 {
		st.Add(TurnUsage{Post: h40, Started: at, WallMS: 1000, CPUMS: 10, Runner: &RunnerReport{Tokens: modelapi.Tokens{Input: 1, Output: 2}, Cost: "0.01"}})
		_ = i
	}
	if len(st.Turns) != maxTurnsKept || st.Total.Turns != maxTurnsKept+5 || st.Total.WallMS != 105000 || st.Total.Runner.Cost != "1.05" {
		t.Fatalf("turns kept %d, total %+v %+v", len(st.Turns), st.Total, st.Total.Runner)
	}
	b, err = st.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxUsageFileLen {
		t.Errorf("%d turns take %d bytes, past the file's bound %d", maxTurnsKept, len(b), MaxUsageFileLen)
	}
	tb, err := DecodeSessionTurns(b)
	if err != nil || tb.Total.Turns != st.Total.Turns || len(tb.Turns) != maxTurnsKept {
		t.Fatalf("turns read back: %v", err)
	}
	u, reached := UsageOf(back, tb)
	if u.Model == nil || u.Model.Requests != 3 || u.Turns != maxTurnsKept+5 || u.Limit != 100 || reached == "" {
		t.Errorf("usage of both: %+v (%s)", u, reached)
	}
	if s := u.String(); !strings.Contains(s, "160 of its 100 tokens") || !strings.Contains(s, "105 turns") {
		t.Errorf("in words: %s", s)
	}
	for _, c := range []struct{ name, file, want string }{
		{"another kind", `{"ocx": "turns", "count": {"requests": 0, "input": 0, "output": 0}, "updated": "2026-11-30T09:00:00Z"}`, "ocx"},
		{"a count as a string", `{"ocx": "model-usage", "count": {"requests": "3", "input": 0, "output": 0}, "updated": "2026-11-30T09:00:00Z"}`, "count.requests"},
		{"a key twice", `{"ocx": "model-usage", "count": {"requests": 1, "requests": 2, "input": 0, "output": 0}, "updated": "2026-11-30T09:00:00Z"}`, "requests"},
		{"no time", `{"ocx": "model-usage", "count": {"requests": 1, "input": 0, "output": 0}}`, "updated"},
		{"reached with no limit", `{"ocx": "model-usage", "count": {"requests": 1, "input": 0, "output": 0}, "reached": "x", "updated": "2026-11-30T09:00:00Z"}`, "reached"},
	} {
		if _, err := DecodeModelUsage([]byte(c.file)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
	}
	r, err := DecodeRunnerReport([]byte(`{"ocx": "runner-usage", "input": 10, "output": 20, "cached": 5, "cost_usd": "0.0123"}`))
	if err != nil || r.Input != 10 || r.Cached != 5 || r.Cost != "0.0123" {
		t.Errorf("runner report: %+v %v", r, err)
	}
	if _, err := DecodeRunnerReport([]byte(`{"ocx": "runner-usage", "input": 10, "output": 20, "cost_usd": 0.0123}`)); err == nil {
		t.Errorf("a cost as a number accepted")
	}
}

// TestLimitsTokens: limits.tokens is an llm session's, at least 1, and
// limits name at least one limit; a reader before D50 (closed limits
// knowing wall alone) refuses a definition with it.
func TestLimitsTokens(t *testing.T) {
	llm := `{"ocx": "session", "kind": "llm", "runner": "native", "model": "m", "lifetime": "stays", "limits": `
	for _, c := range []struct{ name, block, want string }{
		{"tokens alone", llm + `{"tokens": 1000}}`, ""},
		{"tokens and wall", llm + `{"wall": "2h", "tokens": 1000}}`, ""},
		{"tokens 0", llm + `{"tokens": 0}}`, "limits.tokens"},
		{"no limit", llm + `{}}`, "limits"},
		{"tokens negative", llm + `{"tokens": -1}}`, "limits.tokens"},
		{"tokens on a mechanical session", `{"ocx": "session", "kind": "mechanical", "command": ["true"], "lifetime": "stays", "limits": {"tokens": 10}}`, "limits.tokens"},
	} {
		n, err := decodeNote([]byte(c.block))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v (%v), want an error naming %q", c.name, err, n, c.want)
		}
	}
	d, err := DecodeNoteAs[*SessionDefinition]([]byte(llm + `{"tokens": 1000}}`))
	if err != nil || d.Tokens() != 1000 || d.Wall() != "" || !strings.Contains(d.String(), "tokens=1000") {
		t.Fatalf("%v %v", d, err)
	}
	// A reader before D50 knew wall alone inside limits, and refused any
	// other key: it refuses this definition rather than drop the limit.
	old := strictjson.Obj{Map: map[string]any{"tokens": nil}}
	if err := old.OnlyKeys("limits", "wall"); err == nil {
		t.Errorf("a reader knowing wall alone accepts tokens")
	}
}

// FuzzDecodeUsageFiles: what a usage file decoder accepts renders back to a
// file that decodes the same. The session's turns and the runner's report
// are written inside the sandbox: their reader must refuse anything else
// by name, never panic.
func FuzzDecodeUsageFiles(f *testing.F) {
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	st := &SessionTurns{Launch: h40}
	st.Add(TurnUsage{Post: h40, Started: at, WallMS: 5, Runner: &RunnerReport{Tokens: modelapi.Tokens{Input: 3}, Cost: "0.5"}})
	for _, v := range []interface{ Encode() ([]byte, error) }{
		&ModelUsage{Count: ModelCount{Requests: 1}, Updated: at}, st, &RunnerReport{Tokens: modelapi.Tokens{Input: 1, Output: 2}},
	} {
		b, err := v.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"ocx": "runner-usage", "input": 1e3, "output": 2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		same := func(a, c []byte) {
			if !bytes.Equal(a, c) {
				t.Fatalf("%q re-encodes as %q, which encodes as %q", b, a, c)
			}
		}
		if m, err := DecodeModelUsage(b); err == nil {
			e, err := m.Encode()
			if err != nil {
				t.Fatalf("accepted %q, cannot encode it: %v", b, err)
			}
			m2, err := DecodeModelUsage(e)
			if err != nil {
				t.Fatalf("%q does not read back: %v", e, err)
			}
			e2, _ := m2.Encode()
			same(e, e2)
		} else {
			checkRefusal(t, err)
		}
		if s, err := DecodeSessionTurns(b); err == nil {
			e, err := s.Encode()
			if err != nil {
				t.Fatalf("accepted %q, cannot encode it: %v", b, err)
			}
			s2, err := DecodeSessionTurns(e)
			if err != nil {
				t.Fatalf("%q does not read back: %v", e, err)
			}
			e2, _ := s2.Encode()
			same(e, e2)
		} else {
			checkRefusal(t, err)
		}
		if r, err := DecodeRunnerReport(b); err == nil {
			e, err := r.Encode()
			if err != nil {
				t.Fatalf("accepted %q, cannot encode it: %v", b, err)
			}
			r2, err := DecodeRunnerReport(e)
			if err != nil || *r2 != *r {
				t.Fatalf("%q reads back as %+v, %v", e, r2, err)
			}
		} else {
			checkRefusal(t, err)
		}
	})
}

// TestUsageSumsProperty: the total of a session's turns is the sum of the
// turns added, however many the file keeps.
func TestUsageSumsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var st SessionTurns
		var wall, cpu, in uint64
		for i := range rapid.IntRange(0, 150).Draw(t, "n") {
			tu := TurnUsage{Post: h40, Started: time.Unix(int64(i), 0).UTC(), WallMS: rapid.Uint64Range(0, 1e6).Draw(t, "wall"), CPUMS: rapid.Uint64Range(0, 1e6).Draw(t, "cpu")}
			if rapid.Bool().Draw(t, "reported") {
				tu.Runner = &RunnerReport{Tokens: modelapi.Tokens{Input: rapid.Uint64Range(0, 1e6).Draw(t, "in")}}
				in += tu.Runner.Input
			}
			wall, cpu = wall+tu.WallMS, cpu+tu.CPUMS
			st.Add(tu)
		}
		if st.Total.WallMS != wall || st.Total.CPUMS != cpu || len(st.Turns) > maxTurnsKept {
			t.Fatalf("total %+v, want wall %d cpu %d", st.Total, wall, cpu)
		}
		if in > 0 && (st.Total.Runner == nil || st.Total.Runner.Input != in) {
			t.Fatalf("runner total %+v, want %d in", st.Total.Runner, in)
		}
		if err := st.Validate(); err != nil {
			t.Fatal(err)
		}
	})
}
