package model

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// FuzzCheckedBody: however a body is cut into reads, the proxy's checked
// body passes it on whole exactly when the body read whole names the
// session's model (requestModel, Accepts), and a body refused never
// passes whole: its last byte waits for the verdict.
func FuzzCheckedBody(f *testing.F) {
	for _, s := range []string{`{"model":"m"}`, `{"messages":[1,2],"model":"m"}`, `{"model":"n"}`, `{"model":"m","model":"m"}`,
		`{"model":"m"`, `{"model":"m"} x`, `{"model":7}`, `{}`, ``, `{"mod\u0065l":"m"}`} {
		f.Add([]byte(s), []byte{1, 3})
	}
	f.Add([]byte(`{"messages":"`+strings.Repeat("x", prefixLen+100)+`","model":"m"}`), []byte{255, 0, 7})
	f.Fuzz(func(t *testing.T, body []byte, cuts []byte) {
		sizes := make([]int, len(cuts))
		for i, c := range cuts {
			sizes[i] = int(c) * 97
		}
		got, err := requestModel(body)
		want := err == nil && Accepts(OpenAI, "m", got)
		b := newCheckedBody(&chunks{b: body, sizes: sizes}, OpenAI, "m", nil, nil)
		var out []byte
		ok := b.start() == nil
		if ok {
			out, err = io.ReadAll(b)
			ok = err == nil
		}
		if ok != want {
			t.Fatalf("%q: passed %v, want %v (%q %v)", body, ok, want, got, err)
		}
		if ok && !bytes.Equal(out, body) {
			t.Fatalf("%q: passed on %q", body, out)
		}
		if !ok && len(body) > 0 && len(out) >= len(body) {
			t.Fatalf("%q: refused, but passed on whole", body)
		}
	})
}
