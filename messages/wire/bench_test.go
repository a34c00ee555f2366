package wire

import (
	"encoding/json"
	"os"
	"testing"
)

// BenchmarkDecodeStatusReply: the daemon's status reply for 100
// workspaces, 100 sessions and 300 listeners (testdata, as the console's
// benchmark keeps it), read as a caller of the socket reads it, beside
// encoding/json alone.
func BenchmarkDecodeStatusReply(b *testing.B) {
	line, err := os.ReadFile("testdata/status-reply-100.json")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("ocx", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		for b.Loop() {
			r, err := DecodeReply(line)
			if err != nil {
				b.Fatal(err)
			}
			if len(r.State.Sessions) != 100 || len(r.State.Listeners) != 300 {
				b.Fatalf("%d sessions, %d listeners", len(r.State.Sessions), len(r.State.Listeners))
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		for b.Loop() {
			var r Reply
			if err := json.Unmarshal(line, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
