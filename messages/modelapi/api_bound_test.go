package modelapi

import (
	"strings"
	"testing"
)

// passCapped passes body through an OutputCap of shape s capping to n, in
// writes of at most chunk bytes, as the model proxy does.
func passCapped(s APIShape, n uint64, body []byte, chunk int) ([]byte, OutputBound, error) {
	c := NewOutputCap(s, n)
	sc := c.Scanner("model")
	var out []byte
	for len(body) > 0 {
		k := min(chunk, len(body))
		var err error
		if out, err = sc.Pass(out, body[:k]); err != nil {
			if cerr := c.Err(); cerr != nil {
				return nil, OutputBound{}, cerr
			}
			return nil, OutputBound{}, err
		}
		if err := c.Err(); err != nil {
			return nil, OutputBound{}, err
		}
		body = body[k:]
	}
	if err := sc.Close(); err != nil {
		return nil, OutputBound{}, err
	}
	return out, c.Bound(), nil
}

// TestOutputCap: each API's bound read as the body passes, and passed
// capped, every other byte as it came, in writes of any size: a field
// above the cap set to it (padded to its length at maxOutput, where the
// body keeps its length), null or none set where the cap is below
// maxOutput, a body naming none at maxOutput left as it is, nothing
// changed without a limit; Anthropic's thinking brought below the cap; a
// field named twice in any case, not a whole number or too long refused
// naming it.
func TestOutputCap(t *testing.T) {
	long := `{"max_tokens": 1` + strings.Repeat("0", MaxScanValueLen) + `}`
	for _, c := range []struct {
		shape APIShape
		body  string
		n     uint64
		want  OutputBound
		out   string
	}{
		{ShapeMessages, `{"model": "m", "max_tokens": 128000, "stream": true}`, 2000, OutputBound{128000, 1},
			`{"model": "m", "max_tokens": 2000, "stream": true}`},
		{ShapeMessages, `{"model":"m"}`, 50, OutputBound{0, 1}, `{"model":"m","max_tokens":50}`},
		{ShapeMessages, `{}`, 7, OutputBound{0, 1}, `{"max_tokens":7}`},
		{ShapeMessages, " { } \n", 7, OutputBound{0, 1}, " { \"max_tokens\":7} \n"},
		{ShapeMessages, `{"max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":3000}}`, 2000, OutputBound{4096, 1025},
			`{"max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":1999}}`},
		{ShapeMessages, `{"thinking": { "BUDGET_tokens" : 5000, "type" : "enabled" } , "max_tokens": 6000}`, 3000, OutputBound{6000, 1025},
			`{"thinking": { "BUDGET_tokens" : 2999, "type" : "enabled" } , "max_tokens": 3000}`},
		{ShapeMessages, `{"thinking":{"type":"enabled","budget_tokens":1024},"max_tokens":2000}`, 5000, OutputBound{2000, 1025},
			`{"thinking":{"type":"enabled","budget_tokens":1024},"max_tokens":2000}`},
		{ShapeMessages, `{"thinking":{"type":"adaptive"},"MAX_TOKENS":9}`, 5, OutputBound{9, 1}, `{"thinking":{"type":"adaptive"},"MAX_TOKENS":5}`},
		{ShapeMessages, `{"max\u005ftokens": 300 }`, 20, OutputBound{300, 1}, `{"max\u005ftokens": 20 }`},
		// At maxOutput the body keeps its length.
		{ShapeMessages, `{"max_tokens": 9999999, "model": "m"}`, maxOutput, OutputBound{9999999, 1}, `{"max_tokens": 128000 , "model": "m"}`},
		{ShapeMessages, `{"max_tokens":300000,"thinking":{"type":"enabled","budget_tokens":200000}}`, maxOutput, OutputBound{300000, 1025},
			`{"max_tokens":128000,"thinking":{"type":"enabled","budget_tokens":127999}}`},
		{ShapeMessages, `{"model":"m"}`, maxOutput, OutputBound{0, 1}, `{"model":"m"}`},
		{ShapeChat, `{"max_tokens":null}`, maxOutput, OutputBound{0, 1}, `{"max_tokens":null}`},
		// Without a limit, read only.
		{ShapeMessages, `{"max_tokens": 999999999, "thinking": 7}`, 0, OutputBound{999999999, 1}, `{"max_tokens": 999999999, "thinking": 7}`},
		{ShapeChat, `{"model": "m", "max_tokens": null}`, 9, OutputBound{0, 1}, `{"model": "m", "max_tokens": 9}`},
		{ShapeChat, `{"max_completion_tokens": 100, "max_tokens": 50}`, 60, OutputBound{100, 1}, `{"max_completion_tokens": 60, "max_tokens": 50}`},
		{ShapeChat, `{"messages": [{"content": "max_tokens"}]}`, 9, OutputBound{0, 1}, `{"messages": [{"content": "max_tokens"}],"max_tokens":9}`},
		{ShapeResponses, `{"input": "x", "max_output_tokens": 99999999999999999999}`, 16, OutputBound{MaxTokens, 16},
			`{"input": "x", "max_output_tokens": 16}`},
		{ShapeResponses, "{\"a\":{\"b\":[1,\"}\\\"\"]}}\n", 16, OutputBound{0, 16}, "{\"a\":{\"b\":[1,\"}\\\"\"]},\"max_output_tokens\":16}\n"},
	} {
		for _, chunk := range []int{1, 3, 1 << 16} {
			out, got, err := passCapped(c.shape, c.n, []byte(c.body), chunk)
			if err != nil || got != c.want || string(out) != c.out {
				t.Errorf("%s %s capped to %d (by %d): read %+v, %v; want %+v\n got %s\nwant %s", c.shape, c.body, c.n, chunk, got, err, c.want, out, c.out)
			}
		}
	}
	for _, c := range []struct {
		shape APIShape
		body  string
		n     uint64
		why   string
	}{
		{ShapeMessages, `{"max_tokens": 1, "Max_Tokens": 100000}`, 0, `names "max_tokens" twice`},
		{ShapeChat, `{"max_completion_tokens": 1, "max_completion_tokens": 2}`, 9, `names "max_completion_tokens" twice`},
		{ShapeMessages, `{"max_tokens": "100"}`, 9, `"max_tokens" is not a whole number`},
		{ShapeResponses, `{"max_output_tokens": 1.5}`, 0, "not a whole number"},
		{ShapeChat, `{"max_tokens": -1}`, 9, "not a whole number"},
		{ShapeMessages, long, 9, `"max_tokens" is longer than 4096 bytes`},
		{ShapeMessages, `{"max_tokens": 10, "thinking": {"type": "enabled", "budget_tokens": "x"}}`, 9, "thinking.budget_tokens"},
		{ShapeMessages, `{"thinking": {"type": "enabled", "type": "enabled"}}`, 9, `"thinking" names "type" twice`},
		{ShapeMessages, `{"thinking": [1]}`, 9, `"thinking" is not an object`},
		{ShapeMessages, `{"thinking": {}, "thinking": null}`, 9, `names "thinking" twice`},
		{ShapeMessages, `[1]`, 9, "invalid character '['"},
		{ShapeMessages, `{"a": 1} {}`, 9, "after the object"},
		{ShapeMessages, `{"a": }`, 9, "looking for the beginning of a value"},
	} {
		for _, chunk := range []int{1, 3, 1 << 16} {
			if _, _, err := passCapped(c.shape, c.n, []byte(c.body), chunk); err == nil || !strings.Contains(err.Error(), c.why) {
				t.Errorf("%s %s (by %d): %v, want an error saying %q", c.shape, c.body, chunk, err, c.why)
			}
		}
	}
}

// TestOutputCapHoldsNothing: a 32 MiB body whose bound comes after its
// messages passes capped, in 32 KiB writes, allocating a few KiB.
func TestOutputCapHoldsNothing(t *testing.T) {
	chunk := []byte(strings.Repeat(`"abc\"def",12.5,{"k":[true,null]},`, 1000))
	out := make([]byte, 0, 64<<10)
	var got []byte
	allocs := testing.AllocsPerRun(1, func() {
		c := NewOutputCap(ShapeMessages, 2000)
		s := c.Scanner("model")
		s.Pass(out[:0], []byte(`{"model":"m","messages":[`))
		for n := 0; n < 32<<20; n += len(chunk) {
			if _, err := s.Pass(out[:0], chunk); err != nil {
				t.Fatal(err)
			}
		}
		got, _ = s.Pass(out[:0], []byte(`0],"max_tokens":128000}`))
		if err := s.Close(); err != nil || c.Err() != nil || c.Bound().Asked != 128000 {
			t.Fatalf("%v %v %+v", err, c.Err(), c.Bound())
		}
	})
	if string(got) != `0],"max_tokens":2000}` {
		t.Fatalf("the end passed as %s", got)
	}
	t.Logf("32 MiB passed capped: %v allocations", allocs)
	if allocs > 50 {
		t.Fatalf("%v allocations passing 32 MiB", allocs)
	}
}

// BenchmarkOutputCap is the pure part of the meter's cap on a request of
// about 77 KB, as Claude Code's first, passed in 32 KiB writes: the body
// scanned for its model alone, as the proxy does without a meter, and
// with its bound read and capped as it passes.
func BenchmarkOutputCap(b *testing.B) {
	body := []byte(`{"model": "m", "stream": true, "thinking": {"type": "adaptive"}, "system": "` +
		strings.Repeat(`You are an agent, \"quoted\". `, 250) + `", "tools": [` +
		strings.TrimSuffix(strings.Repeat(`{"name": "t", "description": "`+strings.Repeat("Does a thing {braced}. ", 60)+`", "input_schema": {"type": "object"}},`, 40), ",") +
		`], "messages": [{"role": "user", "content": [{"type": "text", "text": "` + strings.Repeat("hello ", 1500) + `"}]}], "max_tokens": 128000}`)
	out := make([]byte, 0, 40<<10)
	for _, capped := range []bool{false, true} {
		name := "model"
		if capped {
			name = "capped"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				c := NewOutputCap(ShapeMessages, 2000)
				s := NewObjectScanner("model")
				if capped {
					s = c.Scanner("model")
				}
				for p := body; len(p) > 0; {
					k := min(32<<10, len(p))
					out, _ = s.Pass(out[:0], p[:k])
					p = p[k:]
				}
				if s.Close() != nil || capped && (c.Err() != nil || c.Bound().Asked != 128000) {
					b.Fatal(c.Err())
				}
			}
		})
	}
}
