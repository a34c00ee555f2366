package unixhost

import (
	"strconv"
	"testing"
	"time"
)

// TestParseFastClock: the tests' faster clock reads AT@FROM*RATE, runs
// RATE times as fast from AT, and refuses what does not read.
func TestParseFastClock(t *testing.T) {
	from := time.Now().Add(-time.Second)
	c, err := ParseFastClock("2026-12-08T09:00:00Z@" + strconv.FormatInt(from.UnixNano(), 10) + "*60")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Now().Sub(time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC)); got < 59*time.Second || got > 5*time.Minute {
		t.Fatalf("a second of the wall's read as %s", got)
	}
	for _, bad := range []string{"", "2026-12-08T09:00:00Z", "x@1*60", "2026-12-08T09:00:00Z@x*60", "2026-12-08T09:00:00Z@1*0", "2026-12-08T09:00:00Z@1*-2"} {
		if _, err := ParseFastClock(bad); err == nil {
			t.Errorf("%q read", bad)
		}
	}
}
