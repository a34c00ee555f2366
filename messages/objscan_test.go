package messages

import (
	"bytes"
	"encoding/json"
	"io"
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
		if t == key {
			if seen++; seen == 1 {
				raw = v
			}
		}
	}
	return true, raw, seen
}

// The scanner reads as encoding/json does, in writes of any size.
func FuzzObjectScanner(f *testing.F) {
	for _, s := range []string{`{"model":"m"}`, `{"a":[1,{"model":2}],"model":"x","model":null}`, `{"mod\u0065l":"m"}`,
		` {"a":-1.5e+3,"b":"\ud83d\ude00"} `, `{"a":tru}`, `[1]`, `{"a":01}`, "{\"a\":\"\x01\"}", `{"model":"\u00e9\ufffd"}`} {
		f.Add([]byte(s), uint8(1))
		f.Add([]byte(s), uint8(7))
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
	})
}

var _ io.Writer = (*ObjectScanner)(nil)
