package keptlog

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// chunked writes in through a filter's Writer in the chunks given, and
// flushes it.
func chunked(f *Filter, in []byte, cuts []int) []byte {
	var out bytes.Buffer
	w := f.Writer(&out)
	for _, c := range cuts {
		c = min(c, len(in))
		if n, err := w.Write(in[:c]); err != nil || n != c {
			panic("a write to a buffer failed")
		}
		in = in[c:]
	}
	w.Write(in)
	w.Flush()
	return out.Bytes()
}

// reference is the filter as its doc says it, on the whole text at once:
// each line (up to and with its newline, or the last without) masked where
// any occurrence of any mask lies (their union), a run of masked bytes one
// marker; a line longer than maxLine cut in pieces of maxLine-(longest-1)
// bytes from its start until what is left is at most maxLine; with a
// match, each piece a line of its own, kept when it matches (its newline,
// and a carriage return before it, left out of the match), ending with a
// newline.
func reference(f *Filter, in []byte) []byte {
	var out []byte
	for _, l := range bytes.SplitAfter(in, []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		cov := make([]bool, len(l))
		for _, m := range f.masks {
			for s := 0; s+len(m) <= len(l); s++ {
				if bytes.Equal(l[s:s+len(m)], m) {
					for j := s; j < s+len(m); j++ {
						cov[j] = true
					}
				}
			}
		}
		render := func(a, b int) []byte {
			var r []byte
			for i := a; i < b; i++ {
				if cov[i] {
					if i == a || !cov[i-1] {
						r = append(r, f.marker...)
					}
					continue
				}
				r = append(r, l[i])
			}
			return r
		}
		if f.match == nil {
			out = append(out, render(0, len(l))...)
			continue
		}
		piece := f.maxLine - max(f.longest-1, 0)
		for pos := 0; pos < len(l); {
			end := len(l)
			if len(l)-pos > f.maxLine {
				end = pos + piece
			}
			r := render(pos, end)
			body := bytes.TrimSuffix(bytes.TrimSuffix(r, []byte("\n")), []byte("\r"))
			if f.match.Match(body) {
				if !bytes.HasSuffix(r, []byte("\n")) {
					r = append(r, '\n')
				}
				out = append(out, r...)
			}
			pos = end
		}
	}
	return out
}

func genCuts() *rapid.Generator[[]int] {
	return rapid.SliceOfN(rapid.IntRange(0, 40), 0, 30)
}

// TestNoSecretSurvives is the filter's promise as a property: for random
// logs and random secrets (some part of others, some next to each other,
// some across a line too long to hold, written in random chunks), no byte
// of any occurrence of a secret is left in the output, nor in any tail of
// it the holder keeps (its END, cut anywhere). The log's letters and the
// secrets' are apart, so a byte of a secret's alphabet in the output is a
// byte of a secret that survived, whole or in part.
func TestNoSecretSurvives(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		secretChars := rapid.SampledFrom([]rune("XYZ0*#~"))
		secret := rapid.StringOfN(secretChars, 1, 12, -1)
		secrets := rapid.SliceOfN(secret, 1, 4).Draw(t, "secrets")
		// Parts of others: a value that is a substring of another.
		for _, s := range secrets[:len(secrets):len(secrets)] {
			if len(s) > 2 && rapid.Bool().Draw(t, "part") {
				i := rapid.IntRange(0, len(s)-2).Draw(t, "from")
				j := rapid.IntRange(i+1, len(s)).Draw(t, "to")
				secrets = append(secrets, s[i:j])
			}
		}
		var in []byte
		for range rapid.IntRange(0, 40).Draw(t, "pieces") {
			if rapid.IntRange(0, 2).Draw(t, "kind") == 0 {
				in = append(in, rapid.SampledFrom(secrets).Draw(t, "a secret")...)
			} else {
				in = append(in, rapid.StringOfN(rapid.SampledFrom([]rune("ab \n\r")), 0, 30, -1).Draw(t, "text")...)
			}
		}
		match := rapid.SampledFrom([]string{"", "a", "^b", "X", `\*`}).Draw(t, "match")
		maxLine := rapid.SampledFrom([]int{0, 1, 8, 24, 64}).Draw(t, "maxLine")
		f, err := New(secrets, match, maxLine)
		if err != nil {
			t.Fatal(err)
		}
		out := chunked(f, in, genCuts().Draw(t, "cuts"))
		if ref := reference(f, in); !bytes.Equal(out, ref) {
			t.Fatalf("streamed %q, the reference %q (marker %q, maxLine %d)", out, ref, f.Marker(), f.maxLine)
		}
		if one := f.Apply(in); !bytes.Equal(out, one) {
			t.Fatalf("chunked %q, at once %q", out, one)
		}
		rest := strings.ReplaceAll(string(out), f.Marker(), "")
		if i := strings.IndexAny(rest, "XYZ0*#~"); i >= 0 {
			t.Fatalf("a byte of a secret survived at %d: %q (secrets %q, marker %q)", i, out, secrets, f.Marker())
		}
		// The holder keeps the END of the output: any tail of it.
		cut := rapid.IntRange(0, len(out)).Draw(t, "tail")
		tail := string(out[cut:])
		for _, s := range secrets {
			if strings.Contains(tail, s) {
				t.Fatalf("the tail %q holds the secret %q", tail, s)
			}
		}
	})
}

// TestNoMaskSurvives: over one alphabet for the log and the masks (masks
// overlapping the text and each other, holding the marker's own *), no
// mask is left in the output and the stream is the reference's.
func TestNoMaskSurvives(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		chars := rapid.SampledFrom([]rune("ab*\n"))
		masks := rapid.SliceOfN(rapid.StringOfN(rapid.SampledFrom([]rune("ab*")), 1, 5, -1), 0, 4).Draw(t, "masks")
		in := []byte(rapid.StringOfN(chars, 0, 200, -1).Draw(t, "log"))
		match := rapid.SampledFrom([]string{"", "a", "b$", "^$"}).Draw(t, "match")
		f, err := New(masks, match, rapid.SampledFrom([]int{0, 3, 10}).Draw(t, "maxLine"))
		if err != nil {
			t.Fatal(err)
		}
		out := chunked(f, in, genCuts().Draw(t, "cuts"))
		if ref := reference(f, in); !bytes.Equal(out, ref) {
			t.Fatalf("streamed %q, the reference %q", out, ref)
		}
		for _, m := range masks {
			if bytes.Contains(out, []byte(m)) {
				t.Fatalf("the mask %q is left in %q (marker %q)", m, out, f.Marker())
			}
		}
	})
}

func TestFilter(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
		masks          []string
		match          string
		maxLine        int
	}{
		{"nothing", "a\nb", "a\nb", nil, "", 0},
		{"a mask", "pw=hunter2 ok\nhunter2", "pw=*** ok\n***", []string{"hunter2"}, "", 0},
		{"a part of another", "abcdef", "***", []string{"cd", "abcdef"}, "", 0},
		{"overlapping", "xabcdy", "x***y", []string{"abc", "bcd"}, "", 0},
		{"next to each other", "abcabc", "***", []string{"abc"}, "", 0},
		{"a mask holding *", "a*b and a", "### and a", []string{"a*b"}, "", 0},
		{"a match", "ok 1\nERROR: x\nok 2\nERROR: pw\r\n", "ERROR: x\nERROR: ***\r\n", []string{"pw"}, "^ERROR", 0},
		{"a match on the masked line", "key=s3cret\n", "", []string{"s3cret"}, "s3", 0},
		{"the last line matched gets its newline", "ERROR", "ERROR\n", nil, "ERROR", 0},
		{"a long line across a mask", "xxxxxxxsecretxxxxx\n", "xxxxxxx***xxxxx\n", []string{"secret"}, "", 12},
		{"a long line matched in pieces", "aaaaaaaaaaaaERRORaaaaaaaaaa\n", "ERRORaaaaaaa\n", nil, "ERROR", 12},
		{"empty masks dropped", "a", "a", []string{""}, "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := New(c.masks, c.match, c.maxLine)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(f.Apply([]byte(c.in))); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
	if _, err := New([]string{"a\nb"}, "", 0); err == nil {
		t.Error("a mask holding a newline was taken")
	}
	if _, err := New(nil, "(", 0); err == nil {
		t.Error("a match that is no regular expression was taken")
	}
	if f, _ := New([]string{"*", "#", "~"}, "", 0); f.Marker() != "✱✱✱" {
		t.Errorf("marker %q", f.Marker())
	}
	if !(*Filter)(nil).Passes() {
		t.Error("a nil filter does not pass all")
	}
}

// TestBoundedMemory: a line of many megabytes is held at most maxLine
// bytes at a time.
func TestBoundedMemory(t *testing.T) {
	f, _ := New([]string{"secret"}, "", 1024)
	var out bytes.Buffer
	w := f.Writer(&out)
	chunk := []byte(strings.Repeat("x", 4096) + "secret")
	for range 1000 {
		w.Write(chunk)
		if len(w.buf) > f.maxLine+1 || cap(w.buf) > 4*f.maxLine {
			t.Fatalf("holds %d bytes (capacity %d), more than a line of %d", len(w.buf), cap(w.buf), f.maxLine)
		}
	}
	w.Flush()
	if bytes.Contains(out.Bytes(), []byte("secret")) || out.Len() != 1000*(4096+3) {
		t.Errorf("%d bytes out", out.Len())
	}
}

// FuzzFilter: any log, any secret and its halves, any chunking: no secret
// is left, and the stream is the filter of the whole text.
func FuzzFilter(f *testing.F) {
	f.Add([]byte("pw=hunter2\nok"), "hunter2", "", uint8(3), 0)
	f.Add([]byte("a*b*a*b"), "*a*", "a", uint8(1), 4)
	f.Add([]byte(strings.Repeat("s3cr3t", 50)), "3cr3", "^s", uint8(7), 8)
	f.Fuzz(func(t *testing.T, in []byte, secret, match string, step uint8, maxLine int) {
		if len(in) > 1<<16 || strings.ContainsRune(secret, '\n') || maxLine < 0 || maxLine > 1<<12 {
			return // not an input the filter takes: none to check
		}
		masks := []string{secret, secret[:len(secret)/2], secret[len(secret)/2:]}
		if _, err := regexp.Compile(match); err != nil {
			match = ""
		}
		flt, err := New(masks, match, maxLine)
		if err != nil {
			t.Fatal(err)
		}
		var cuts []int
		for i := 0; i < len(in); i += int(step) + 1 {
			cuts = append(cuts, int(step)+1)
		}
		out := chunked(flt, in, cuts)
		if ref := reference(flt, in); !bytes.Equal(out, ref) {
			t.Fatalf("streamed %q, the reference %q", out, ref)
		}
		for _, m := range masks {
			if m != "" && bytes.Contains(out, []byte(m)) {
				t.Fatalf("%q left in %q", m, out)
			}
		}
	})
}

// BenchmarkFilterRunSecrets: a run's filter as Prepare makes it (a few
// masks, and 512 obscured forms of 46 and 82 hex digits) over log lines,
// some holding 64-hex hashes.
func BenchmarkFilterRunSecrets(b *testing.B) {
	masks := []string{"pw-0123456789abcdefghij", "tok-x"}
	for s := range 512 {
		n := 46
		if s >= 256 {
			n = 82
		}
		masks = append(masks, strings.Repeat(string("0123456789abcdef"[s%16]), n-1)+"f")
	}
	f, err := New(masks, "", 0)
	if err != nil {
		b.Fatal(err)
	}
	var in []byte
	for i := range 1000 {
		if i%10 == 0 {
			in = append(in, "checkout: 5d1f0e2c4b3a29180716f5e4d3c2b1a09f8e7d6c5b4a392817160f5e4d3c2b1a 2026-12-08\n"...)
		} else {
			in = append(in, "compiling package github.com/ocx-go/ocx/host/keptlog: ok 0.039s\n"...)
		}
	}
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		f.Writer(io.Discard).Write(in)
	}
}
