package modelapi

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// scanAll scans b in writes of at most chunk bytes, then closes.
func scanAll(b []byte, chunk int, keys ...string) (*ObjectScanner, error) {
	s := NewObjectScanner(keys...)
	for len(b) > 0 {
		n := min(chunk, len(b))
		if _, err := s.Write(b[:n]); err != nil {
			return s, err
		}
		b = b[n:]
	}
	return s, s.Close()
}

// A top-level key's value is found wherever it comes, after any other;
// a key inside another value is not it; an escaped key is the key it
// decodes to; the errors say where.
func TestObjectScanner(t *testing.T) {
	huge := `"` + strings.Repeat("x", 1<<20) + `"`
	for _, c := range []struct {
		in    string
		raw   string
		seen  int
		long  bool
		err   string
		other string // "id"'s raw value
	}{
		{in: `{"model":"m"}`, raw: `"m"`, seen: 1},
		{in: ` {"messages":[` + huge + `,{"model":"inner"}],"model" : "m", "id": 7 } `, raw: `"m"`, seen: 1, other: `7`},
		{in: `{"mod\u0065l":"m"}`, raw: `"m"`, seen: 1},
		{in: `{"model":"a","model":"b"}`, raw: `"a"`, seen: 2},
		// A key matched as encoding/json matches a struct's field: without
		// case (the Kelvin sign is a k).
		{in: `{"MODEL":"m"}`, raw: `"m"`, seen: 1},
		{in: `{"model":"a","Model":"b","mod\u0045l":"c"}`, raw: `"a"`, seen: 3},
		{in: `{"model":"a","ID":1,"\u212a":2}`, raw: `"a"`, seen: 1, other: `1`},
		// A value kept as it came, its white space too.
		{in: `{"model": [ 1 , {"a" : 2 } ] ,"id":{ }}`, raw: `[ 1 , {"a" : 2 } ]`, seen: 1, other: `{ }`},
		{in: `{"model":{"x":[1,2.5e-3,true,null]},"id":"q"}`, raw: `{"x":[1,2.5e-3,true,null]}`, seen: 1, other: `"q"`},
		{in: `{"model":-0.5E+2}`, raw: `-0.5E+2`, seen: 1},
		{in: `{"model":` + huge + `}`, seen: 1, long: true},
		{in: `{"a":{"model":"m"}}`},
		{in: `{}`},
		{in: `[{"model":"m"}]`, err: `at byte 0: invalid character '[' looking for the beginning of the object`},
		{in: `{"model":"m"`, err: `the end, before the object is whole`},
		{in: ``, err: `the end, before any object`},
		{in: `{"model":"m"}x`, err: `at byte 13: invalid character 'x' after the object`},
		{in: `{"model":01}`, err: `at byte 10: invalid character '1' after an object key:value pair`},
		{in: `{"model":"a\qb"}`, err: `in a string escape code`},
		{in: "{\"model\":\"a\nb\"}", err: `in a string literal`},
		{in: `{"model":tru}`, err: `in the literal true`},
		{in: `{"a":[1,]}`, err: `looking for the beginning of a value`},
		{in: `{"a":1,}`, err: `looking for the beginning of an object key string`},
		{in: `{"a" 1}`, err: `after an object key`},
		{in: `{"a":"\u12g4"}`, err: `hexadecimal`},
		{in: `{"a":1.}`, err: `after a decimal point`},
		{in: `{"a":1e}`, err: `exponent`},
		{in: `{"a":` + strings.Repeat("[", maxScanDepth) + `}`, err: `nested deeper than 10000`},
	} {
		for _, chunk := range []int{1, 3, 1 << 16} {
			s, err := scanAll([]byte(c.in), chunk, "model", "id")
			name := c.in[:min(len(c.in), 60)]
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Errorf("%s (by %d): %v, want %q", name, chunk, err, c.err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s (by %d): %v", name, chunk, err)
				continue
			}
			v := s.Value("model")
			if string(v.Raw) != c.raw || v.Seen != c.seen || v.Long != c.long {
				t.Errorf("%s (by %d): model %+v, want raw %s seen %d long %v", name, chunk, v, c.raw, c.seen, c.long)
			}
			if got := string(s.Value("id").Raw); got != c.other {
				t.Errorf("%s (by %d): id %s, want %s", name, chunk, got, c.other)
			}
		}
	}
}

// The scanner keeps nothing of what it is not asked for: 32 MiB read
// in 32 KiB writes allocates a few KiB.
func TestObjectScannerHoldsNothing(t *testing.T) {
	chunk := bytes.Repeat([]byte(`"abc\"def",12.5,{"k":[true,null]},`), 1000)
	allocs := testing.AllocsPerRun(1, func() {
		s := NewObjectScanner("model")
		s.Write([]byte(`{"messages":[`))
		for n := 0; n < 32<<20; n += len(chunk) {
			if _, err := s.Write(chunk); err != nil {
				t.Fatal(err)
			}
		}
		s.Write([]byte(`0],"model":"m"}`))
		if err := s.Close(); err != nil || string(s.Value("model").Raw) != `"m"` {
			t.Fatalf("%v %+v", err, s.Value("model"))
		}
	})
	if allocs > 50 {
		t.Fatalf("%v allocations reading 32 MiB", allocs)
	}
}

// refScan is what encoding/json reads of b: whether it is one JSON
// object, and the top-level key's first value and how many times it is
// there.
func refScan(b []byte, key string) (ok bool, raw []byte, seen int) {
	if !json.Valid(b) || !bytes.HasPrefix(bytes.TrimLeft(b, " \t\r\n"), []byte("{")) {
		return false, nil, 0
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.Token()
	for d.More() {
		t, _ := d.Token()
		var v json.RawMessage
		d.Decode(&v)
		if k, _ := t.(string); strings.EqualFold(k, key) {
			if seen++; seen == 1 {
				raw = v
			}
		}
	}
	return true, raw, seen
}

// The scanner reads as encoding/json does, in writes of any size; and a
// body passed through an OutputCap (the model proxy's meter, D79) comes
// out as encoding/json reads the body, but for its bound: refused exactly
// when encoding/json finds the bound named twice or not as a whole
// number, or thinking that does not read; else JSON whose members are
// the body's, in order, each as it came but for the bound fields, set to
// the least of theirs and the cap, and the bound added where the body
// names none (refOutputCap).
func FuzzObjectScanner(f *testing.F) {
	for _, s := range []string{`{"model":"m"}`, `{"a":[1,{"model":2}],"model":"x","model":null}`, `{"mod\u0065l":"m"}`,
		` {"a":-1.5e+3,"b":"\ud83d\ude00"} `, `{"a":tru}`, `[1]`, `{"a":01}`, "{\"a\":\"\x01\"}", `{"model":"\u00e9\ufffd"}`,
		`{"model": "m", "max_tokens": 128000}`, `{}`, `{"max_completion_tokens": 5, "x": [1, {"y": "}"}]}`, "{\"\x92\":[]}",
		`{"thinking": {"type": "enabled", "budget_tokens": 2000}, "max_tokens": 4000}`, `{"max_output_tokens": null, "\u006dax": 1}`,
		`{"max_tokens": 9999999,"max_output_tokens":1e3}`, `{"max_tokens":300000,"thinking":{"type":"enabled","budget_tokens":2000000}}`} {
		for _, c := range []uint8{0, 1, 7, 10, 14, 16, 200} {
			f.Add([]byte(s), c)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, chunk uint8) {
		ok, raw, seen := refScan(b, "model")
		s, err := scanAll(b, int(chunk)+1, "model")
		if (err == nil) != ok {
			t.Fatalf("%q: scanner %v, encoding/json valid %v", b, err, ok)
		}
		if !ok {
			return
		}
		v := s.Value("model")
		if v.Seen != seen || !v.Long && !bytes.Equal(v.Raw, raw) || v.Long && len(raw) <= MaxScanValueLen {
			t.Fatalf("%q: scanner %+v, encoding/json %s (%d)", b, v, raw, seen)
		}
		// The shape and the cap from the write size, which the cap does
		// not change.
		shape := []APIShape{ShapeMessages, ShapeChat, ShapeResponses}[chunk%3]
		n := []uint64{0, 1, 20, 1025, 5000, maxOutput}[int(chunk/3)%6]
		out, bound, err := passCapped(shape, n, b, int(chunk)+1)
		want, wantBound, budget, why := refOutputCap(shape, n, b)
		if (err == nil) != (why == "") {
			t.Fatalf("%q (%s capped to %d): %v; encoding/json finds %q", b, shape, n, err, why)
		}
		if err != nil {
			return
		}
		if !json.Valid(out) || bound != wantBound || n >= maxOutput && len(out) != len(b) {
			t.Fatalf("%q (%s capped to %d) passed as %q, reading %+v, want %+v", b, shape, n, out, bound, wantBound)
		}
		got := refMembers(out)
		if len(got) != len(want) {
			t.Fatalf("%q (%s capped to %d) passed as %q: members %q, want %q", b, shape, n, out, got, want)
		}
		for i, g := range got {
			w := want[i]
			same := g.key == w.key && bytes.Equal(g.raw, w.raw)
			switch {
			case g.key != w.key:
			case isBound(shape, g.key):
				same = compact(g.raw) == compact(w.raw) // padded at MaxOutput
			case budget >= 0 && strings.EqualFold(g.key, "thinking"):
				gt, wt := refMembers(g.raw), refMembers(w.raw)
				same = len(gt) == len(wt)
				for j := 0; same && j < len(gt); j++ {
					if strings.EqualFold(gt[j].key, "budget_tokens") {
						wt[j].raw = []byte(strconv.FormatInt(budget, 10))
						gt[j].raw = []byte(compact(gt[j].raw))
					}
					same = gt[j].key == wt[j].key && bytes.Equal(gt[j].raw, wt[j].raw)
				}
			}
			if !same {
				t.Fatalf("%q (%s capped to %d) passed as %q: member %d is %s: %s, want %s: %s", b, shape, n, out, i, g.key, g.raw, w.key, w.raw)
			}
		}
	})
}

func compact(b []byte) string {
	var c bytes.Buffer
	json.Compact(&c, b)
	return c.String()
}

func isBound(s APIShape, key string) bool {
	return slices.ContainsFunc(boundFields[s], func(f string) bool { return strings.EqualFold(f, key) })
}

// refWhole is a bound as encoding/json reads it: a whole number (past
// MaxTokens, MaxTokens), null 0; false when it is not one.
func refWhole(raw []byte) (uint64, bool) {
	if string(raw) == "null" {
		return 0, true
	}
	var f json.Number
	if json.Unmarshal(raw, &f) != nil || strings.ContainsAny(string(f), ".eE-") {
		return 0, false
	}
	if u, err := strconv.ParseUint(string(f), 10, 64); err == nil {
		return min(u, MaxTokens), true
	}
	return MaxTokens, true
}

// refMember is one member of a JSON object as encoding/json reads it.
type refMember struct {
	key string
	raw []byte
}

// refMembers are the members of the JSON object b, in order.
func refMembers(b []byte) []refMember {
	d := json.NewDecoder(bytes.NewReader(b))
	d.Token()
	var ms []refMember
	for d.More() {
		t, _ := d.Token()
		var v json.RawMessage
		d.Decode(&v)
		ms = append(ms, refMember{t.(string), v})
	}
	return ms
}

// refOutputCap is what encoding/json makes of a body of shape s capped
// to n (0: none): the members it should pass as, what it asks, the
// thinking budget it should have (-1: as it came), or why it is refused.
func refOutputCap(s APIShape, n uint64, b []byte) (ms []refMember, bound OutputBound, budget int64, why string) {
	ms, budget = refMembers(b), -1
	held := append([]string(nil), boundFields[s]...)
	if n > 0 && s == ShapeMessages {
		held = append(held, "thinking")
	}
	bound = OutputBound{Least: LeastOutput(s)}
	for _, h := range held {
		if seen := slices.IndexFunc(ms, func(m refMember) bool { return strings.EqualFold(m.key, h) }); seen >= 0 &&
			slices.ContainsFunc(ms[seen+1:], func(m refMember) bool { return strings.EqualFold(m.key, h) }) {
			return nil, bound, 0, "twice"
		}
	}
	named := false
	for i, m := range ms {
		switch {
		case isBound(s, m.key):
			named = true
			if len(m.raw) > MaxScanValueLen {
				return nil, bound, 0, "long"
			}
			v, ok := refWhole(m.raw)
			if !ok {
				return nil, bound, 0, "not a whole number"
			}
			bound.Asked = max(bound.Asked, v)
			if n > 0 && (v == 0 && n < maxOutput || v > n) {
				ms[i].raw = []byte(strconv.FormatUint(n, 10))
			}
		case n > 0 && s == ShapeMessages && strings.EqualFold(m.key, "thinking"):
			if len(m.raw) > MaxScanValueLen {
				return nil, bound, 0, "long"
			}
			if string(m.raw) == "null" {
				continue
			}
			if m.raw[0] != '{' {
				return nil, bound, 0, "thinking not an object"
			}
			th := refMembers(m.raw)
			var typ, bud []refMember
			for _, tm := range th {
				if strings.EqualFold(tm.key, "type") {
					typ = append(typ, tm)
				}
				if strings.EqualFold(tm.key, "budget_tokens") {
					bud = append(bud, tm)
				}
			}
			if len(typ) > 1 || len(bud) > 1 {
				return nil, bound, 0, "thinking twice"
			}
			var tv string
			if len(typ) == 1 && json.Unmarshal(typ[0].raw, &tv) != nil {
				return nil, bound, 0, "thinking.type"
			}
			if tv != "enabled" || len(bud) == 0 {
				continue
			}
			bv, ok := refWhole(bud[0].raw)
			if !ok {
				return nil, bound, 0, "thinking.budget_tokens"
			}
			bound.Least = leastThinking + 1
			if bv >= n {
				budget = int64(n) - 1
			}
		}
	}
	if !named && n > 0 && n < maxOutput {
		ms = append(ms, refMember{boundFields[s][0], []byte(strconv.FormatUint(n, 10))})
	}
	return ms, bound, budget, ""
}

var _ io.Writer = (*ObjectScanner)(nil)
