package messages

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestOutputBound: each API's bound read, and written capped, every other
// member kept byte for byte; a field named twice in any case, or not as a
// whole number, refused naming it; Anthropic's thinking brought below the
// bound.
func TestOutputBound(t *testing.T) {
	for _, c := range []struct {
		shape APIShape
		body  string
		want  OutputBound
		n     uint64
		out   string
	}{
		{ShapeMessages, `{"model": "m", "max_tokens": 128000, "stream": true}`, OutputBound{128000, 1}, 2000,
			`{"model": "m", "max_tokens": 2000, "stream": true}`},
		{ShapeMessages, `{"model":"m"}`, OutputBound{0, 1}, 50, `{"model":"m","max_tokens":50}`},
		{ShapeMessages, `{}`, OutputBound{0, 1}, 7, `{"max_tokens":7}`},
		{ShapeMessages, `{"max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":3000}}`, OutputBound{4096, 1025}, 2000,
			`{"max_tokens":2000,"thinking":{"budget_tokens":1999,"type":"enabled"}}`},
		{ShapeMessages, `{"thinking":{"type":"adaptive"},"MAX_TOKENS":9}`, OutputBound{9, 1}, 5, `{"thinking":{"type":"adaptive"},"MAX_TOKENS":5}`},
		{ShapeMessages, `{"max\u005ftokens": 300 }`, OutputBound{300, 1}, 20, `{"max\u005ftokens": 20 }`},
		{ShapeChat, `{"model": "m", "max_tokens": null}`, OutputBound{0, 1}, 9, `{"model": "m", "max_tokens": 9}`},
		{ShapeChat, `{"max_completion_tokens": 100, "max_tokens": 50}`, OutputBound{100, 1}, 60, `{"max_completion_tokens": 60, "max_tokens": 60}`},
		{ShapeChat, `{"messages": [{"content": "max_tokens"}]}`, OutputBound{0, 1}, 9, `{"messages": [{"content": "max_tokens"}],"max_tokens":9}`},
		{ShapeResponses, `{"input": "x", "max_output_tokens": 99999999999999999999}`, OutputBound{MaxTokens, 16}, 16,
			`{"input": "x", "max_output_tokens": 16}`},
		{ShapeResponses, "{\"a\":{\"b\":[1,\"}\\\"\"]}}\n", OutputBound{0, 16}, 16, "{\"a\":{\"b\":[1,\"}\\\"\"]},\"max_output_tokens\":16}\n"},
	} {
		got, err := ReadOutputBound(c.shape, []byte(c.body))
		if err != nil || got != c.want {
			t.Errorf("%s %s: read %+v, %v; want %+v", c.shape, c.body, got, err, c.want)
			continue
		}
		out, err := WithOutputBound(c.shape, []byte(c.body), c.n)
		if err != nil || string(out) != c.out {
			t.Errorf("%s %s capped to %d:\n got %s (%v)\nwant %s", c.shape, c.body, c.n, out, err, c.out)
		}
	}
	for _, c := range []struct {
		shape APIShape
		body  string
		why   string
	}{
		{ShapeMessages, `{"max_tokens": 1, "Max_Tokens": 100000}`, `names "max_tokens" twice`},
		{ShapeChat, `{"max_completion_tokens": 1, "max_completion_tokens": 2}`, `names "max_completion_tokens" twice`},
		{ShapeMessages, `{"max_tokens": "100"}`, `"max_tokens" is not a whole number`},
		{ShapeResponses, `{"max_output_tokens": 1.5}`, "not a whole number"},
		{ShapeChat, `{"max_tokens": -1}`, "not a whole number"},
		{ShapeMessages, `{"max_tokens": 10, "thinking": {"type": "enabled", "budget_tokens": "x"}}`, "thinking.budget_tokens"},
		{ShapeMessages, `{"thinking": [1]}`, `"thinking" is not an object`},
		{ShapeMessages, `[1]`, "not a JSON object"},
		{ShapeMessages, `{"a": 1} {}`, "not a JSON object"},
		{ShapeMessages, `{"a": }`, "not a JSON object"},
		{ShapeMessages, `{"a": "`, "not a JSON object"},
	} {
		if _, err := ReadOutputBound(c.shape, []byte(c.body)); err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s %s: %v, want an error saying %q", c.shape, c.body, err, c.why)
		}
	}
}

// FuzzOutputBound: on any JSON object the members found are
// encoding/json's, in order; what reads is written back as JSON whose
// bound is n and whose other members are the body's own bytes.
func FuzzOutputBound(f *testing.F) {
	for _, s := range []string{`{"model": "m", "max_tokens": 128000}`, `{}`, `{"max_completion_tokens": 5, "x": [1, {"y": "}"}]}`,
		`{"thinking": {"type": "enabled", "budget_tokens": 2000}, "max_tokens": 4000}`, `{"max_output_tokens": null, "\u006dax": 1}`} {
		f.Add(s, uint8(0), uint64(100))
	}
	f.Fuzz(func(t *testing.T, body string, shape uint8, n uint64) {
		s := []APIShape{ShapeMessages, ShapeChat, ShapeResponses}[int(shape)%3]
		ms, _, merr := objectMembers([]byte(body))
		keys, ok := jsonKeys([]byte(body))
		if ok != (merr == nil) && ok {
			t.Fatalf("%q is a JSON object, yet: %v", body, merr)
		}
		if !ok {
			return // not JSON: the proxy has refused it before (RequestModel)
		}
		for i, m := range ms {
			if m.key != keys[i] {
				t.Fatalf("%q: member %d is %q, encoding/json says %q", body, i, m.key, keys[i])
			}
		}
		b, err := ReadOutputBound(s, []byte(body))
		if err != nil {
			return
		}
		n = max(n%MaxTokens, b.Least)
		out, err := WithOutputBound(s, []byte(body), n)
		if err != nil {
			t.Fatalf("%q read, yet not written: %v", body, err)
		}
		if !json.Valid(out) {
			t.Fatalf("%q capped to %d is not JSON: %s", body, n, out)
		}
		again, err := ReadOutputBound(s, out)
		if err != nil || again.Asked != n {
			t.Fatalf("%q capped to %d reads back %+v, %v: %s", body, n, again, err, out)
		}
		oms, _, _ := objectMembers(out)
		kept := 0
		for _, m := range oms {
			if isBound(s, m.key) || strings.EqualFold(m.key, "thinking") {
				continue
			}
			for _, o := range ms {
				if o.key == m.key && bytes.Equal([]byte(body)[o.start:o.end], out[m.start:m.end]) {
					kept++
					break
				}
			}
		}
		others := 0
		for _, m := range ms {
			if !isBound(s, m.key) && !strings.EqualFold(m.key, "thinking") {
				others++
			}
		}
		if kept != others {
			t.Fatalf("%q capped: %d of its %d other members kept as they were: %s", body, kept, others, out)
		}
	})
}

func isBound(s APIShape, key string) bool {
	for _, f := range boundFields[s] {
		if strings.EqualFold(f, key) {
			return true
		}
	}
	return false
}

// jsonKeys are the keys of the JSON object b as encoding/json reads them,
// in order; false when b is not one JSON object.
func jsonKeys(b []byte) ([]string, bool) {
	if !json.Valid(b) {
		return nil, false
	}
	d := json.NewDecoder(bytes.NewReader(b))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var keys []string
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, false
		}
		keys = append(keys, t.(string))
		var v json.RawMessage
		if d.Decode(&v) != nil {
			return nil, false
		}
	}
	d.Token()
	if _, err := d.Token(); err != io.EOF {
		return nil, false
	}
	return keys, true
}

// TestLedgerProperties drives the meter's core through random
// interleavings of requests entering, reserving (asking any bound, or
// none), being replied to (an output within what was granted, as an API
// holds to max_tokens, and any input) or refused by the proxy, under a
// limit or none. Always: no more than MaxInFlight under way; the output
// counted and the grants under way never pass the limit; a grant is
// given only while the count and the grants stay under the limit, and is
// what was asked unless it is capped to what was left; a request waits
// only while another is under way that will give back (no request waits
// for nothing); once spent, every request is refused and counted.
func TestLedgerProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := &Ledger{Limit: rapid.SampledFrom([]uint64{0, 1, 100, 2000, 100000, 1000000}).Draw(t, "limit")}
		type req struct {
			reserved bool
			grant    uint64
		}
		var entered []req
		refused := uint64(0)
		check := func() {
			if l.InFlight != len(entered) || l.InFlight > MaxInFlight {
				t.Fatalf("%d in flight, %d entered", l.InFlight, len(entered))
			}
			var held uint64
			for _, r := range entered {
				if r.reserved && l.Limit > 0 {
					held += r.grant
				}
			}
			if held != l.Reserved {
				t.Fatalf("reserved %d, the grants under way %d", l.Reserved, held)
			}
			if l.Limit > 0 && l.Count.Output+l.Reserved > l.Limit {
				t.Fatalf("output %d and reserved %d pass the limit %d", l.Count.Output, l.Reserved, l.Limit)
			}
			if l.Count.Refused != refused {
				t.Fatalf("counted %d refused, %d were", l.Count.Refused, refused)
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"enter": func(t *rapid.T) {
				switch v := l.Enter(); v {
				case LedgerGo:
					entered = append(entered, req{})
				case LedgerWait:
					if l.InFlight < MaxInFlight {
						t.Fatalf("a request waits with %d in flight", l.InFlight)
					}
				case LedgerSpent:
					if l.Reached == "" {
						t.Fatal("refused as spent, with nothing reached")
					}
					refused++
				}
			},
			"reserve": func(t *rapid.T) {
				i := -1
				for j, r := range entered {
					if !r.reserved {
						i = j
					}
				}
				if i < 0 {
					t.Skip("nothing entered unreserved")
				}
				b := OutputBound{Asked: rapid.SampledFrom([]uint64{0, 1, 16, 500, 4096, 128000}).Draw(t, "asked"),
					Least: rapid.SampledFrom([]uint64{1, 16, 1025}).Draw(t, "least")}
				before, left, reserved := l.Count.Total(), l.Left(), l.Reserved
				grant, capped, v := l.Reserve(b)
				switch v {
				case LedgerGo:
					entered[i] = req{reserved: true, grant: grant}
					if l.Limit == 0 {
						if capped || grant != b.Asked {
							t.Fatalf("no limit, yet %d asked was granted %d (capped %v)", b.Asked, grant, capped)
						}
						return
					}
					if before+reserved+grant > l.Limit || grant == 0 {
						t.Fatalf("granted %d with %d counted and %d reserved under %d", grant, before, reserved, l.Limit)
					}
					if capped != (b.Ask() > left) || !capped && grant != b.Ask() || capped && grant != left {
						t.Fatalf("asked %d with %d left: granted %d, capped %v", b.Asked, left, grant, capped)
					}
				case LedgerWait:
					if reserved == 0 {
						t.Fatal("a request waits while nothing under way will give back")
					}
				case LedgerSpent:
					refused++
					entered = append(entered[:i], entered[i+1:]...)
					l.Leave()
					if l.Reached == "" {
						t.Fatal("spent, with nothing reached")
					}
				}
			},
			"reply": func(t *rapid.T) {
				if len(entered) == 0 {
					t.Skip("nothing under way")
				}
				i := rapid.IntRange(0, len(entered)-1).Draw(t, "which")
				r := entered[i]
				entered = append(entered[:i], entered[i+1:]...)
				if !r.reserved {
					l.Leave() // refused by the proxy: another model, a 404
					return
				}
				out := r.grant
				if l.Limit == 0 || out == 0 {
					out = 5000
				}
				rep := LedgerReply{Forwarded: rapid.Bool().Draw(t, "forwarded"), OK: true, Whole: rapid.IntRange(0, 9).Draw(t, "whole") > 0,
					Tokens: Tokens{Input: rapid.Uint64Range(0, 3000).Draw(t, "input"), Output: rapid.Uint64Range(0, out).Draw(t, "output")}}
				wasReached := l.Reached
				l.Settle(r.grant, rep)
				if wasReached != "" && l.Reached != wasReached {
					t.Fatalf("the reason the budget is spent changed: %q to %q", wasReached, l.Reached)
				}
			},
			"": func(t *rapid.T) { check() },
		})
		// Once spent, nothing more is let in.
		if l.Reached != "" {
			if v := l.Enter(); v != LedgerSpent {
				t.Fatalf("spent (%s), yet a request enters: %s", l.Reached, v)
			}
		}
	})
}

// TestLedgerHundredAtOnce: 100 requests asking 4096 tokens under a limit
// of 2000, each API reply writing all it was granted and reading 10: one
// is forwarded, capped to 2000; the others wait while it is under way and
// are refused once it has spent the budget; the count passes the limit
// by the 10 it read, never by an output.
func TestLedgerHundredAtOnce(t *testing.T) {
	l := &Ledger{Limit: 2000}
	var grants []uint64
	waited, spent := 0, 0
	for range 100 {
		switch l.Enter() {
		case LedgerWait:
			waited++
			continue
		case LedgerSpent:
			spent++
			continue
		}
		switch g, capped, v := l.Reserve(OutputBound{Asked: 4096, Least: 1}); v {
		case LedgerGo:
			if !capped || g != 2000 {
				t.Fatalf("granted %d (capped %v)", g, capped)
			}
			grants = append(grants, g)
		case LedgerWait:
			waited++
			l.Leave()
		default:
			t.Fatalf("refused while the first is under way: %s", l.Reached)
		}
	}
	for _, g := range grants {
		l.Settle(g, LedgerReply{Forwarded: true, OK: true, Whole: true, Tokens: Tokens{Input: 10, Output: g}})
	}
	for range 100 - len(grants) {
		if l.Enter() != LedgerSpent {
			t.Fatal("a request entered past the budget")
		}
	}
	if len(grants) != 1 || l.Count.Total() != 2010 || l.Count.Refused != uint64(100-len(grants)) || !strings.Contains(l.Reached, "2010 tokens") {
		t.Fatalf("%d forwarded, count %+v, %q (waited %d)", len(grants), l.Count, l.Reached, waited)
	}
}

// TestLedgerTooLittleLeft: what is left below the least a request may ask
// (Responses' 16) spends the budget once nothing is under way, and says
// so.
func TestLedgerTooLittleLeft(t *testing.T) {
	l := &Ledger{Limit: 100}
	l.Enter()
	g, _, _ := l.Reserve(OutputBound{Asked: 90, Least: 16})
	l.Enter()
	if _, _, v := l.Reserve(OutputBound{Least: 16}); v != LedgerWait {
		t.Fatalf("10 left while 90 are reserved: %s", v)
	}
	l.Leave()
	l.Settle(g, LedgerReply{Forwarded: true, OK: true, Whole: true, Tokens: Tokens{Input: 0, Output: 90}})
	l.Enter()
	if _, _, v := l.Reserve(OutputBound{Least: 16}); v != LedgerSpent || !strings.Contains(l.Reached, "the 10 left are fewer than the least a request may ask (16)") {
		t.Fatalf("%s: %q", v, l.Reached)
	}
	if s := strconv.FormatUint(l.Count.Refused, 10); s != "1" {
		t.Fatalf("refused %s", s)
	}
}

// BenchmarkOutputBound is the pure part of the meter's reservation on a
// request of about 77 KB, as Claude Code's first: its bound read, then
// capped and written.
func BenchmarkOutputBound(b *testing.B) {
	body := []byte(`{"model": "m", "max_tokens": 128000, "stream": true, "thinking": {"type": "adaptive"}, "system": "` +
		strings.Repeat(`You are an agent, \"quoted\". `, 250) + `", "tools": [` +
		strings.TrimSuffix(strings.Repeat(`{"name": "t", "description": "`+strings.Repeat("Does a thing {braced}. ", 60)+`", "input_schema": {"type": "object"}},`, 40), ",") +
		`], "messages": [{"role": "user", "content": [{"type": "text", "text": "` + strings.Repeat("hello ", 1500) + `"}]}]}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		bd, err := ReadOutputBound(ShapeMessages, body)
		if err != nil || bd.Asked != 128000 {
			b.Fatal(bd, err)
		}
		if _, err := WithOutputBound(ShapeMessages, body, 2000); err != nil {
			b.Fatal(err)
		}
	}
}
