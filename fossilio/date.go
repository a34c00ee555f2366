package fossilio

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Fossil reads a D or E card's date with SQLite's julianday() and takes any
// value it returns above 0 (src/manifest.c: `SELECT julianday(%Q)`). So a
// card may say "2024-01-01T12:00:00+02:00", "2460000.5" or even "now", and
// Fossil stores the artifact as what its cards make it. A reader that
// refused such a date would see a tag change, a post or a ticket change
// where it can read nothing, and before issue 22 that failed every read
// of a batch holding it. parseDate reads exactly what julianday() reads
// (SQLite's src/date.c, parseDateOrTime, as of 3.40), so the node and
// Fossil take the same artifacts for what they are.

// julianMax is the first Julian day SQLite no longer takes as a date
// number (setRawDateNumber): 9999-12-31 23:59:59.999 and a half.
const julianMax = 5373484.5

// parseDate reads a card's date as julianday() does: YYYY-MM-DD, with an
// optional time after spaces or a T (HH:MM, HH:MM:SS, HH:MM:SS.FFF, then
// an optional time zone: Z, +HH:MM or -HH:MM), a time alone (on
// 2000-01-01), a Julian day number, or "now" in any case. now is true for
// the last, whose time is the moment Fossil parsed it, which no reader can
// know: t is then zero. A date at or before the start of the Julian
// period, which Fossil refuses, is refused too.
func parseDate(s string) (t time.Time, now bool, err error) {
	bad := func() (time.Time, bool, error) {
		return time.Time{}, false, fmt.Errorf("fossilio: cannot parse date %q", s)
	}
	if t, ok := parseYMD(s); ok {
		if julianOf(t) <= 0 {
			return bad()
		}
		return t, false, nil
	}
	if c, ok := parseHMS(s); ok {
		return time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Add(c), false, nil
	}
	if strings.EqualFold(s, "now") {
		return time.Time{}, true, nil
	}
	if jd, ok := sqliteNumber(s); ok && jd >= 0 && jd < julianMax {
		// SQLite keeps whole milliseconds; a day number that rounds to
		// none is julianday 0, which Fossil refuses.
		if math.Round(jd*86400000) <= 0 {
			return bad()
		}
		return julianToTime(jd), false, nil
	}
	return bad()
}

// julianOf is the Julian day of t.
func julianOf(t time.Time) float64 {
	return float64(t.UnixMilli())/86400000 + 2440587.5
}

// isSpace is sqlite3Isspace: space, \t, \n, \v, \f and \r.
func isSpace(c byte) bool { return c == ' ' || c >= '\t' && c <= '\r' }

// digits reads exactly n decimal digits at the start of s, as SQLite's
// getDigits reads one field, and checks min <= value <= max.
func digits(s string, n, min, max int) (int, bool) {
	if len(s) < n {
		return 0, false
	}
	v := 0
	for i := 0; i < n; i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		v = v*10 + int(s[i]-'0')
	}
	return v, v >= min && v <= max
}

// parseYMD is SQLite's parseYyyyMmDd: [-]YYYY-MM-DD, then spaces or T's,
// then a time (parseHMS) or nothing. A day past the month's end rolls
// into the next month, as SQLite's computeJD counts it.
func parseYMD(s string) (time.Time, bool) {
	neg := false
	if strings.HasPrefix(s, "-") {
		s, neg = s[1:], true
	}
	y, ok1 := digits(s, 4, 0, 14712)
	m, ok2 := digits(s[min(len(s), 5):], 2, 1, 12)
	d, ok3 := digits(s[min(len(s), 8):], 2, 1, 31)
	if !ok1 || !ok2 || !ok3 || s[4] != '-' || s[7] != '-' {
		return time.Time{}, false
	}
	rest := s[10:]
	for rest != "" && (isSpace(rest[0]) || rest[0] == 'T') {
		rest = rest[1:]
	}
	var clock time.Duration
	if rest != "" {
		c, ok := parseHMS(rest)
		if !ok {
			return time.Time{}, false
		}
		clock = c
	}
	if neg {
		y = -y
	}
	// computeJD refuses a year outside -4713 to 9999.
	if y < -4713 || y > 9999 {
		return time.Time{}, false
	}
	return time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC).Add(clock), true
}

// parseHMS is SQLite's parseHhMmSs: HH:MM (hours 0 to 24), then :SS and
// .FFF..., then a time zone; it returns the time of day, in UTC, as a
// duration from midnight (negative or past a day when the zone moves it).
func parseHMS(s string) (time.Duration, bool) {
	h, ok1 := digits(s, 2, 0, 24)
	m, ok2 := digits(s[min(len(s), 3):], 2, 0, 59)
	if !ok1 || !ok2 || s[2] != ':' {
		return 0, false
	}
	s = s[5:]
	var sec int
	var frac time.Duration
	if strings.HasPrefix(s, ":") {
		v, ok := digits(s[1:], 2, 0, 59)
		if !ok {
			return 0, false
		}
		sec, s = v, s[3:]
		if len(s) >= 2 && s[0] == '.' && s[1] >= '0' && s[1] <= '9' {
			i := 1
			scale := time.Second
			for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
				scale /= 10
				frac += time.Duration(s[i]-'0') * scale
			}
			s = s[i:]
		}
	}
	tz, ok := parseZone(s)
	if !ok {
		return 0, false
	}
	return time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(sec)*time.Second + frac - tz, true
}

// parseZone is SQLite's parseTimezone: spaces, then nothing, Z (or z), or
// +HH:MM / -HH:MM (hours 0 to 14), then spaces and nothing else. It
// returns the zone's offset from UTC.
func parseZone(s string) (time.Duration, bool) {
	s = strings.TrimLeftFunc(s, func(r rune) bool { return r < 0x80 && isSpace(byte(r)) })
	if s == "" {
		return 0, true
	}
	var off time.Duration
	switch s[0] {
	case 'Z', 'z':
		s = s[1:]
	case '+', '-':
		h, ok1 := digits(s[1:], 2, 0, 14)
		m, ok2 := digits(s[min(len(s), 4):], 2, 0, 59)
		if !ok1 || !ok2 || s[3] != ':' {
			return 0, false
		}
		off = time.Duration(h)*time.Hour + time.Duration(m)*time.Minute
		if s[0] == '-' {
			off = -off
		}
		s = s[6:]
	default:
		return 0, false
	}
	for s != "" && isSpace(s[0]) {
		s = s[1:]
	}
	return off, s == ""
}

// sqliteNumber reads s as sqlite3AtoF reads a whole number: spaces, an
// optional sign, digits with at most one point (a digit somewhere), an
// optional exponent, spaces; nothing else (no hex, no inf, no nan).
func sqliteNumber(s string) (float64, bool) {
	i, n := 0, len(s)
	for i < n && isSpace(s[i]) {
		i++
	}
	for n > i && isSpace(s[n-1]) {
		n--
	}
	body := s[i:n]
	j := 0
	if j < len(body) && (body[j] == '+' || body[j] == '-') {
		j++
	}
	mant := 0
	for j < len(body) && body[j] >= '0' && body[j] <= '9' {
		j, mant = j+1, mant+1
	}
	if j < len(body) && body[j] == '.' {
		j++
		for j < len(body) && body[j] >= '0' && body[j] <= '9' {
			j, mant = j+1, mant+1
		}
	}
	if mant == 0 {
		return 0, false
	}
	if j < len(body) && (body[j] == 'e' || body[j] == 'E') {
		k := j + 1
		if k < len(body) && (body[k] == '+' || body[k] == '-') {
			k++
		}
		e := 0
		for k < len(body) && body[k] >= '0' && body[k] <= '9' {
			k, e = k+1, e+1
		}
		if e == 0 {
			return 0, false
		}
		j = k
	}
	if j != len(body) {
		return 0, false
	}
	v, err := strconv.ParseFloat(body, 64)
	if err != nil && !strings.Contains(err.Error(), "range") {
		return 0, false
	}
	return v, true
}
