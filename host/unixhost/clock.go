package unixhost

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/host"
)

// Clock is the system clock.
type Clock struct{}

var _ host.Clock = Clock{}

// Now is time.Now.
func (Clock) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (Clock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// FastClock is the system clock run faster, for the integration tests'
// schedules (D101): at the wall time From it reads At, and it runs Rate
// times as fast; its timers wait the wall time their duration is at that
// rate. Two daemons given the same three read the same time.
type FastClock struct {
	At, From time.Time
	Rate     float64
}

var _ host.Clock = FastClock{}

// Now is At plus Rate times the wall time since From.
func (c FastClock) Now() time.Time {
	return c.At.Add(time.Duration(float64(time.Since(c.From)) * c.Rate))
}

// AfterFunc calls f once d has passed on this clock.
func (c FastClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(time.Duration(float64(d)/c.Rate), f).Stop
}

// ParseFastClock reads "AT@FROM*RATE": AT an RFC 3339 time, FROM the wall
// time in Unix nanoseconds, RATE a number above 0.
func ParseFastClock(s string) (FastClock, error) {
	at, rest, ok1 := strings.Cut(s, "@")
	from, rate, ok2 := strings.Cut(rest, "*")
	if !ok1 || !ok2 {
		return FastClock{}, fmt.Errorf("%q is not AT@FROM*RATE", s)
	}
	var c FastClock
	var err error
	if c.At, err = time.Parse(time.RFC3339Nano, at); err != nil {
		return FastClock{}, fmt.Errorf("%q: AT: %w", s, err)
	}
	ns, err := strconv.ParseInt(from, 10, 64)
	if err != nil {
		return FastClock{}, fmt.Errorf("%q: FROM: %w", s, err)
	}
	c.From = time.Unix(0, ns)
	if c.Rate, err = strconv.ParseFloat(rate, 64); err != nil || c.Rate <= 0 {
		return FastClock{}, fmt.Errorf("%q: RATE is not a number above 0", s)
	}
	return c, nil
}
