package protocol

import (
	"bytes"
	"testing"
)

// FuzzDecodeRunCare: the care file's reader never panics, and what it
// reads encodes and reads back to the same bytes.
func FuzzDecodeRunCare(f *testing.F) {
	for _, s := range []string{
		`{"run": "` + careRunHash + `", "repository": "/r.fossil", "since": "2026-01-02T03:04:05Z"}`,
		`{"run": "` + careRunHash + `", "repository": "/r", "since": "2026-01-02T03:04:05Z", "proc": 2, "process": {"pid": 7, "start": 99}, "launched_at": "2026-01-02T03:04:06Z", "given": {"receipt": 3, "row": 4}, "socket": "/s.sock", "workspace": "/w"}`,
		`{}`, `{"process": null}`, `[]`, `{"since": "yesterday"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeRunCare(data)
		if err != nil {
			return
		}
		enc, err := c.Encode()
		if err != nil {
			return // a time JSON cannot write (a year past 9999)
		}
		back, err := DecodeRunCare(enc)
		if err != nil {
			t.Fatalf("its encoding does not read back: %v\n%s", err, enc)
		}
		if again, _ := back.Encode(); !bytes.Equal(again, enc) {
			t.Fatalf("not stable:\n%s\n%s", enc, again)
		}
	})
}

const careRunHash = "0123456789abcdef0123456789abcdef01234567"
