package pipe

import (
	"bytes"
	"testing"
)

// BenchmarkParsePipeLine: one `post REPOSITORY HASH` line, validated.
func BenchmarkParsePipeLine(b *testing.B) {
	line := []byte("post /srv/fossil/ollama.fossil " + h64 + "\n")
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(line); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPipeSplitter: 100 lines read in 4 KiB chunks that cut lines
// anywhere; the figure is per line.
func BenchmarkPipeSplitter(b *testing.B) {
	var stream bytes.Buffer
	for i := 0; i < 100; i++ {
		stream.WriteString("post /srv/fossil/ollama.fossil " + h64 + "\n")
	}
	data := stream.Bytes()
	b.SetBytes(int64(len(data)) / 100)
	b.ReportAllocs()
	var s pipeSplitter
	lines := 0
	for b.Loop() {
		if lines%100 == 0 {
			for off := 0; off < len(data); off += 4096 {
				for _, r := range s.Feed(data[off:min(off+4096, len(data))]) {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
			}
		}
		lines++
	}
}
