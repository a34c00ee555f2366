package pipe

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/messages/strictjson"
)

func TestSplitterChunks(t *testing.T) {
	var s pipeSplitter
	var got []string
	for _, chunk := range []string{"post /srv/a.fos", "sil " + h40 + "\nstop ci oll", "ama\nree", "xec\n", "\n"} {
		for _, r := range s.Feed([]byte(chunk)) {
			got = append(got, r.String())
		}
	}
	want := []string{"post /srv/a.fossil " + h40, "stop ci ollama", "reexec", "refused: pipe line: is empty"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if s.Pending() != 0 || s.Flush() != nil {
		t.Fatal("something left after whole lines")
	}
}

func TestSplitterOverlong(t *testing.T) {
	var s pipeSplitter
	long := "stop " + strings.Repeat("x", 6000)
	var reads []pipeRead
	// The long line arrives in pieces; the splitter must not keep them all.
	for i := 0; i < len(long); i += 1000 {
		reads = append(reads, s.Feed([]byte(long[i:min(i+1000, len(long))]))...)
		if s.Pending() >= pipeBuf {
			t.Fatalf("holds %d bytes", s.Pending())
		}
	}
	reads = append(reads, s.Feed([]byte("\nreexec\n"))...)
	if len(reads) != 2 {
		t.Fatalf("got %d reads: %v", len(reads), reads)
	}
	if !errors.Is(reads[0].Err, strictjson.ErrTooLong) || !strings.Contains(reads[0].Err.Error(), "is 6006 bytes with its newline") {
		t.Errorf("first read: %v", reads[0])
	}
	if _, ok := reads[1].Line.(ReexecLine); !ok {
		t.Errorf("second read: %v", reads[1])
	}
}

func TestSplitterEdgeOfPipeBuf(t *testing.T) {
	// 4095 bytes and a newline is a line; 4096 and a newline is not.
	exact := "post /" + strings.Repeat("d", 4015) + "/a.fossil " + h64
	if len(exact) != pipeBuf-1 {
		t.Fatalf("test line is %d bytes", len(exact))
	}
	var s pipeSplitter
	r := s.Feed([]byte(exact[:4000]))
	r = append(r, s.Feed([]byte(exact[4000:]+"\n"))...)
	if len(r) != 1 || r[0].Err != nil || r[0].Line.String() != exact {
		t.Fatalf("4096 bytes with its newline: %v", r)
	}
	over := "post /" + strings.Repeat("d", 4016) + "/a.fossil " + h64
	r = s.Feed([]byte(over + "\n"))
	if len(r) != 1 || !errors.Is(r[0].Err, strictjson.ErrTooLong) || !strings.Contains(r[0].Err.Error(), "is 4097 bytes with its newline") {
		t.Fatalf("4097 bytes: %v", r)
	}
	if _, err := Parse([]byte(over)); !errors.Is(err, strictjson.ErrTooLong) {
		t.Fatalf("Parse of 4096 bytes without newline: %v", err)
	}
	enc, err := (PostLine{Repository: "/" + strings.Repeat("d", 4016) + "/a.fossil", Hash: h64}).Encode()
	if !errors.Is(err, strictjson.ErrTooLong) || enc != nil {
		t.Fatalf("Encode of a line past PIPE_BUF: %q, %v", enc, err)
	}
}

func TestSplitterFlush(t *testing.T) {
	var s pipeSplitter
	if r := s.Feed([]byte("reexec\nstop ci")); len(r) != 1 {
		t.Fatalf("reads: %v", r)
	}
	r := s.Flush()
	if r == nil || !strings.Contains(r.Err.Error(), "7 byte(s) ended without a newline") || string(r.Raw) != "stop ci" {
		t.Fatalf("flush: %v", r)
	}
	if s.Flush() != nil || s.Pending() != 0 {
		t.Fatal("flush did not reset")
	}
	s.Feed(bytes.Repeat([]byte("x"), 5000))
	if r := s.Flush(); r == nil || !strings.Contains(r.Err.Error(), "ran to 5000 bytes without a newline") {
		t.Fatalf("flush while skipping: %v", r)
	}
	if r := s.Feed([]byte("reexec\n")); len(r) != 1 || r[0].Err != nil {
		t.Fatalf("after flush: %v", r)
	}
}

// TestSplitterAnyChunking: however a stream of lines is cut into reads, the
// splitter says of each line what Parse says of it, in order.
func TestSplitterAnyChunking(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lines := rapid.SliceOfN(rapid.OneOf(
			rapid.Map(genPipeLine(), func(l Line) string { return l.String() }),
			rapid.StringOfN(rapid.SampledFrom([]rune("post stop /ab.fosil\x00\r é")), 0, 40, -1),
			rapid.Map(rapid.IntRange(4090, 5000), func(n int) string { return "stop " + strings.Repeat("y", n) }),
		), 0, 8).Draw(t, "lines")
		var stream bytes.Buffer
		var want []string
		for _, l := range lines {
			stream.WriteString(l)
			stream.WriteByte('\n')
			if len(l)+1 > pipeBuf {
				want = append(want, "refused: "+overlong(len(l)+1, true).Error())
				continue
			}
			pl, err := Parse([]byte(l))
			want = append(want, pipeRead{Line: pl, Err: err}.String())
		}
		var s pipeSplitter
		var got []string
		data := stream.Bytes()
		for len(data) > 0 {
			n := rapid.IntRange(1, len(data)).Draw(t, "chunk")
			for _, r := range s.Feed(data[:n]) {
				got = append(got, r.String())
			}
			data = data[n:]
		}
		if s.Flush() != nil {
			t.Fatal("a tail was left")
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}
