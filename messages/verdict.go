package messages

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// ParseWall reads a wall limit as seed 004 section 7 writes it: a whole
// number above zero, then s, m, h or d.
func ParseWall(field, s string) (time.Duration, error) {
	bad := strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s is not a wall limit: a whole number above 0 and s, m, h or d, as 2h", strictjson.QuoteShort(s)))
	if len(s) < 2 || len(s) > 12 {
		return 0, bad
	}
	unit := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}[s[len(s)-1]]
	num := s[:len(s)-1]
	if unit == 0 || num[0] < '1' || num[0] > '9' {
		return 0, bad
	}
	n, err := strconv.ParseUint(num, 10, 32)
	if err != nil || time.Duration(n) > (1<<62)/unit {
		return 0, bad
	}
	return time.Duration(n) * unit, nil
}

// The two verdicts (E6).
const (
	VerdictPass = "pass"
	VerdictFail = "fail"
)

// AgainstRecord says whether a verdict's against names a record (hex
// digits, 10 or more) rather than a path.
func AgainstRecord(s string) bool {
	return len(s) >= minHashPrefix && len(s) <= 64 && checkHex("", strings.ToLower(s)) == nil
}

// CheckAgainst checks what a verdict is judged against: a record's hash
// (10 or more hex digits) or a path of the check-in.
func CheckAgainst(field, s string) error {
	if AgainstRecord(s) {
		return nil
	}
	return checkAgainstPath(field, s)
}

// checkAgainstPath checks a path as a verdict names it: relative to the
// check-in's root, clean, one line.
func checkAgainstPath(field, s string) error {
	if err := CheckLine(field, s, true, MaxPathLen); err != nil {
		return err
	}
	if strings.HasPrefix(s, "/") || path.Clean(s) != s || s == "." || s == ".." || strings.HasPrefix(s, "../") {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s is neither a record's hash (10 or more hex digits) nor a clean path inside the check-in, as PLAN.md", strictjson.QuoteShort(s)))
	}
	return nil
}

// minHashPrefix is the fewest hex digits a tool takes for a hash (E8).
const minHashPrefix = 10

// CheckHashPrefix checks a hash as a tool takes it: 10 to 64 hex digits.
// Whether it names one artifact is the repository's to say.
func CheckHashPrefix(field, s string) error {
	if s == "" {
		return strictjson.FieldErr(field, strictjson.ErrMissing, "is empty; give a hash, or 10 or more of its first hex digits")
	}
	if len(s) < minHashPrefix || len(s) > 64 {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s is %d characters; give a hash, or 10 or more of its first hex digits (at most 64)", strictjson.QuoteShort(s), len(s)))
	}
	return checkHex(field, strings.ToLower(s))
}

// AuditedTag is the raw name of a verdict's tag (E6).
const AuditedTag = "audited"

// Verdict is one verdict, as an audited tag's value says it: pass: or
// fail:, the reason on one line, then (against X).
type Verdict struct {
	Pass    bool
	Reason  string
	Against string // a record's full hash, or a path in the check-in
}

// TagValue renders the tag's value.
func (v Verdict) TagValue() string {
	word := VerdictFail
	if v.Pass {
		word = VerdictPass
	}
	return fmt.Sprintf("%s: %s (against %s)", word, v.Reason, v.Against)
}

// NamesRecord says whether the verdict's X names a record (a full hash)
// rather than the path of a file in the check-in (E6).
func (v Verdict) NamesRecord() bool { return CheckHash("", v.Against) == nil }

// ParseVerdict reads an audited tag's value.
func ParseVerdict(value string) (Verdict, error) {
	var v Verdict
	rest, ok := strings.CutPrefix(value, VerdictPass+": ")
	v.Pass = ok
	if !ok {
		if rest, ok = strings.CutPrefix(value, VerdictFail+": "); !ok {
			return Verdict{}, strictjson.FieldErr("audited", strictjson.ErrInvalid, fmt.Sprintf("%s does not start with pass: or fail:", strictjson.QuoteShort(value)))
		}
	}
	i := strings.LastIndex(rest, " (against ")
	if i < 0 || !strings.HasSuffix(rest, ")") {
		return Verdict{}, strictjson.FieldErr("audited", strictjson.ErrInvalid, fmt.Sprintf("%s does not end with (against X)", strictjson.QuoteShort(value)))
	}
	v.Reason, v.Against = rest[:i], rest[i+len(" (against "):len(rest)-1]
	if strings.TrimSpace(v.Reason) == "" || v.Against == "" || CheckLine("audited", value, true, MaxTextLen) != nil {
		return Verdict{}, strictjson.FieldErr("audited", strictjson.ErrInvalid, fmt.Sprintf("%s has no reason or no X", strictjson.QuoteShort(value)))
	}
	// X is a record's full hash or a path of the check-in (E6), as the
	// audit tool writes it and the status shows it: anything else (5 KB of
	// it, an absolute path) is no verdict, which every reader passes over.
	if CheckHash("audited", v.Against) != nil && checkAgainstPath("audited", v.Against) != nil {
		return Verdict{}, strictjson.FieldErr("audited", strictjson.ErrInvalid, fmt.Sprintf("%s names %s, which is neither a record's full hash nor a path of the check-in (at most %d bytes, relative, clean)",
			strictjson.QuoteShort(value), strictjson.QuoteShort(v.Against), MaxPathLen))
	}
	return v, nil
}
