package fossilio

import (
	"database/sql"
	"math"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// dateCases are D-card values Fossil reads with julianday(), those it takes
// and those it refuses: the forms SQLite's date.c knows, their edges, and
// look-alikes.
var dateCases = []string{
	"2024-01-01", "2024-01-01T12:00", "2024-01-01T12:00:00", "2024-01-01T12:00:00.123", "2024-01-01 12:00:00.123456",
	"2024-01-01T12:00:00Z", "2024-01-01T12:00:00z", "2024-01-01T12:00:00+02:00", "2024-01-01T12:00:00-14:00",
	"2024-01-01T12:00:00+15:00", "2024-01-01TT12:00", "2024-01-01T", "2024-01-01T24:00", "2024-01-01T25:00",
	"2024-02-31", "2024-13-01", "2024-00-10", "2024-01-32", "2024-1-01", "24-01-01", "-0044-03-15", "-4713-11-24",
	"-4714-01-01", "9999-12-31T23:59:59.999", "0000-01-01", "12:34", "12:34:56.5", "12:34Z", "now", "NOW", "Now ",
	"2460000.5", "2460000", "+2460000.5", ".5", "5.", "1e6", "1e", "0", "-1", "5373484.49", "5373484.5", "0x10",
	"inf", "nan", "", " ", "2024-01-01x", "2024-01-01T12:00:00.", "2024-01-01T12:00:60", "2024-01-01T12:60",
	"2024-01-01\t12:00", "2024-01-01T12:00 Z", "2024-01-01T12:00:00+0200", "subsec", "1.5e-10",
}

// julianday asks SQLite itself.
func julianday(t interface{ Fatal(...any) }, db *sql.DB, s string) (float64, bool) {
	var v sql.NullFloat64
	if err := db.QueryRow(`SELECT julianday(?)`, s).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v.Float64, v.Valid && v.Float64 > 0
}

// TestParseDateAgreesWithSQLite (D47, issue 22 item 5): parseDate takes a
// D card's date exactly when Fossil does (SQLite's julianday() above 0),
// at the same moment to the millisecond, "now" aside (its moment is the
// parse's); before, a tag change dated "now" or "+02:00", which Fossil
// stores as one, failed every read of a batch holding it.
func TestParseDateAgreesWithSQLite(t *testing.T) {
	db, err := sql.Open("sqlite", "file::memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	check := func(t interface {
		Fatal(...any)
		Fatalf(string, ...any)
	}, s string) {
		checkDate(t, db, s)
	}
	for _, s := range dateCases {
		if s == "subsec" {
			continue // a modifier SQLite 3.42 added after Fossil 2.21's
		}
		check(t, s)
	}
	rapid.Check(t, func(rt *rapid.T) {
		// Dates built from the grammar's own pieces, some of them broken.
		s := rapid.SampledFrom([]string{"", "-"}).Draw(rt, "sign") +
			rapid.StringMatching(`[0-9]{3,5}-[0-9]{1,2}-[0-9]{2}`).Draw(rt, "ymd") +
			rapid.SampledFrom([]string{"", "T", " ", "TT", "x"}).Draw(rt, "sep") +
			rapid.StringMatching(`([0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{0,4})?)?)?`).Draw(rt, "hms") +
			rapid.SampledFrom([]string{"", "Z", "+01:30", "-14:00", "+15:00", " ", "q"}).Draw(rt, "zone")
		check(rt, s)
	})
}

// checkDate fails t unless parseDate reads s as SQLite's julianday() does.
func checkDate(t interface {
	Fatal(...any)
	Fatalf(string, ...any)
}, db *sql.DB, s string) {
	jd, fossil := julianday(t, db, s)
	got, now, err := parseDate(s)
	switch {
	case (err == nil) != fossil:
		t.Fatalf("parseDate(%q): %v, now %v; SQLite's julianday says %v (%v)", s, err, now, jd, fossil)
	case err != nil || now:
		return
	}
	want := time.UnixMilli(int64(math.Round((jd - 2440587.5) * 86400000))).UTC()
	if d := got.Sub(want); d > time.Millisecond || d < -time.Millisecond {
		t.Fatalf("parseDate(%q) = %s; SQLite's julianday gives %s", s, got, want)
	}
}

// FuzzParseDate: whatever a D card holds, parseDate takes it exactly when
// SQLite's julianday() does, at the same moment.
func FuzzParseDate(f *testing.F) {
	db, err := sql.Open("sqlite", "file::memory:")
	if err != nil {
		f.Fatal(err)
	}
	defer db.Close()
	for _, s := range dateCases {
		if s != "subsec" {
			f.Add(s)
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.Contains(strings.ToLower(s), "subsec") {
			return // a modifier SQLite 3.42 added after Fossil 2.21's
		}
		if strings.ContainsRune(s, 0) {
			return // no card holds a NUL (Parse refuses it); SQLite would stop there
		}
		checkDate(t, db, s)
	})
}
