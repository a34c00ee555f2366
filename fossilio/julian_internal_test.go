package fossilio

import (
	"testing"
	"time"
)

// TestJulianToTimeIsExactToTheMillisecond: a time Fossil stores (SQLite's
// julianday of a D card: whole milliseconds since the Julian epoch, divided
// by a day's) reads back as the same millisecond.
func TestJulianToTimeIsExactToTheMillisecond(t *testing.T) {
	const julianEpochMs = 210866760000000 // SQLite's iJD of the Unix epoch
	start := time.Date(2026, 11, 30, 8, 41, 24, 0, time.UTC).UnixMilli()
	for ms := start; ms < start+5000; ms++ {
		jd := float64(ms+julianEpochMs) / 86400000.0
		if got := julianToTime(jd).UnixMilli(); got != ms {
			t.Fatalf("julianToTime(%v) = %d ms, want %d", jd, got, ms)
		}
	}
	if !julianToTime(0).IsZero() {
		t.Error("julianToTime(0) is not the zero time")
	}
}
