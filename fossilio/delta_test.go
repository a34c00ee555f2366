package fossilio_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ocx-go/ocx/fossilio"
)

// fossilDelta makes a delta with Fossil's own encoder (fossil
// test-delta-create), so the decoder is checked against the real format.
func fossilDelta(t testing.TB, src, dst []byte) []byte {
	t.Helper()
	dir := t.TempDir()
	s, d, out := filepath.Join(dir, "src"), filepath.Join(dir, "dst"), filepath.Join(dir, "delta")
	if err := os.WriteFile(s, src, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d, dst, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(context.Background(), "fossil", "test-delta-create", s, d, out)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "FOSSIL_HOME=" + dir}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fossil test-delta-create: %v: %s", err, b)
	}
	delta, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return delta
}

func TestApplyDeltaMatchesFossil(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randText := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + rng.IntN(26))
			if rng.IntN(20) == 0 {
				b[i] = '\n'
			}
		}
		return b
	}
	for i, size := range []int{0, 1, 3, 17, 100, 1000, 20000} {
		src := randText(size)
		// The target shares runs of the source, with edits between them.
		var dst bytes.Buffer
		for p := 0; p < len(src); {
			n := min(len(src)-p, 1+rng.IntN(300))
			dst.Write(src[p : p+n])
			p += n
			if rng.IntN(3) == 0 {
				dst.Write(randText(rng.IntN(40)))
			}
			if rng.IntN(4) == 0 {
				p += rng.IntN(50)
			}
		}
		dst.Write(randText(rng.IntN(7)))
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			delta := fossilDelta(t, src, dst.Bytes())
			got, err := fossilio.ApplyDelta(src, delta)
			if err != nil {
				t.Fatalf("ApplyDelta: %v (delta %q)", err, delta)
			}
			if !bytes.Equal(got, dst.Bytes()) {
				t.Fatalf("ApplyDelta gave %d bytes, want %d", len(got), dst.Len())
			}
		})
	}
}

func TestApplyDeltaRefuses(t *testing.T) {
	src := []byte("hello world, this is the source text\nline two\nline three\n")
	good := []byte("10\nP@0,6:targetK@V,D:3\nextra line\niR3Yu;")
	if out, err := fossilio.ApplyDelta(src, good); err != nil || string(out) != "hello world, this is the target text\nline two\nline 3\nextra line\n" {
		t.Fatalf("good delta: %q %v", out, err)
	}
	bad := map[string]string{
		"no size line":     "10",
		"copy past source": "10\nP@z,6:targetK@V,D:3\nextra line\niR3Yu;",
		"bad checksum":     "10\nP@0,6:targetK@V,D:3\nextra line\niR3Yv;",
		"size mismatch":    "11\nP@0,6:targetK@V,D:3\nextra line\niR3Yu;",
		"insert past end":  "10\nP@0,6:targetK@V,z:3\n",
		"unknown command":  "10\nP!0,",
		"no checksum":      "10\nP@0,6:targetK@V,D:3\nextra line\n",
		"copy not ended":   "10\nP@0;",
	}
	for name, d := range bad {
		t.Run(name, func(t *testing.T) {
			if out, err := fossilio.ApplyDelta(src, []byte(d)); err == nil {
				t.Fatalf("accepted, gave %q", out)
			}
		})
	}
}

// FuzzApplyDelta: the decoder never panics, and never produces more than
// the size its header claims.
func FuzzApplyDelta(f *testing.F) {
	f.Add([]byte("hello world, this is the source text\nline two\nline three\n"), []byte("10\nP@0,6:targetK@V,D:3\nextra line\niR3Yu;"))
	f.Add([]byte(""), []byte("0\n0;"))
	f.Add([]byte("abc"), []byte("3\n3@0,0;"))
	f.Fuzz(func(t *testing.T, src, delta []byte) {
		out, err := fossilio.ApplyDelta(src, delta)
		if err != nil {
			if out != nil {
				t.Fatalf("error %v with output", err)
			}
			return
		}
		if len(out) > len(src)*len(delta)+len(delta) {
			t.Fatalf("output of %d bytes from %d+%d", len(out), len(src), len(delta))
		}
	})
}

func TestFencedJSON(t *testing.T) {
	text := "Intro\n```json\n{\"ocx\": \"launch\"}\n```\nmiddle\n```\nnot json\n```\n  ```json  \r\n{\"a\": 1,\r\n \"b\": 2}\r\n```\r\n```json\n{\"unclosed\": true}\n"
	got := fossilio.FencedJSON(text)
	want := []string{"{\"ocx\": \"launch\"}\n", "{\"a\": 1,\n \"b\": 2}\n"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("FencedJSON = %q, want %q", got, want)
	}
	if got := fossilio.FencedJSON("no blocks here\n"); len(got) != 0 {
		t.Fatalf("FencedJSON of plain text = %q", got)
	}
	if got := fossilio.FencedJSON("```json\n```"); len(got) != 1 || got[0] != "" {
		t.Fatalf("FencedJSON of an empty block = %q", got)
	}
}

func TestObscure(t *testing.T) {
	// fossil test-obscure hunter2 printed ce019a915981ecd0 (salt 0xce).
	if got := fossilio.Unobscure("ce019a915981ecd0"); got != "hunter2" {
		t.Fatalf("Unobscure = %q", got)
	}
	for _, s := range []string{"", "x", "a longer password, past sixteen bytes", "ed4dbf7b5dd82e82c8d7710faeb95a6930749e4a"} {
		for _, salt := range []byte{0, 0x5a, 0xff} {
			if got := fossilio.Unobscure(fossilio.Obscure(s, salt)); got != s {
				t.Errorf("Unobscure(Obscure(%q, %d)) = %q", s, salt, got)
			}
		}
	}
	if got := fossilio.Unobscure("not hex"); got != "not hex" {
		t.Errorf("Unobscure of plain text = %q", got)
	}
}
