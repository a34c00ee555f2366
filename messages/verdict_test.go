package messages

import (
	"strings"
	"testing"
)

func TestParseWall(t *testing.T) {
	for s, ok := range map[string]bool{"2h": true, "45m": true, "1d": true, "90s": true, "0s": false, "h": false, "2": false,
		"2w": false, "-2h": false, "02h": false, "2.5h": false, "99999999999h": false, " 2h": false} {
		if _, err := ParseWall("wall", s); (err == nil) != ok {
			t.Errorf("ParseWall(%q): %v", s, err)
		}
	}
}

func TestVerdictRoundTrip(t *testing.T) {
	for _, v := range []Verdict{{true, "every command is documented", "PLAN.md"}, {false, "a (nested) reason", "0123456789abcdef0123456789abcdef01234567"}} {
		got, err := ParseVerdict(v.TagValue())
		if err != nil || got != v {
			t.Errorf("%q: %+v, %v", v.TagValue(), got, err)
		}
	}
	// Issue 22 item 5: what a verdict names is a record's full hash or a
	// path the status can show (at most MaxPathLen, clean, relative): a
	// tag naming 5 KB is no verdict, and every reader passes over it.
	long := "pass: ok (against " + strings.Repeat("x", 5000) + ")"
	for _, bad := range []string{"", "ok", "pass: r", "pass: (against X)", "fail: r (against )", "PASS: r (against X)",
		long, "pass: r (against /etc/passwd)", "pass: r (against ../up)", "pass: r (against a//b)"} {
		if _, err := ParseVerdict(bad); err == nil {
			t.Errorf("ParseVerdict(%q) accepted", bad)
		}
	}
}
