package messages

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// The field checks the notes and the host files share: a process's
// identity, a signal's name, a time.

// maxPID bounds process identities: Linux's PID_MAX_LIMIT on 64-bit hosts.
const maxPID = 1 << 22

func checkPID(field string, pid int) error {
	if pid < 1 || pid > maxPID {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%d is not a PID (1 to %d)", pid, maxPID))
	}
	return nil
}

func checkStartTime(field string, t uint64) error {
	if t > strictjson.MaxSafeInt {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%d is past 2^53-1, which not every JSON reader reads exactly", t))
	}
	return nil
}

// checkSignal checks a signal's name: SIG, then capitals and digits, and for a
// real-time signal an offset, as SIGRTMIN+3.
func checkSignal(field, s string) error {
	rest, ok := strings.CutPrefix(s, "SIG")
	bad := !ok || rest == "" || len(s) > 32
	if !bad {
		name, off, hasOff := strings.Cut(rest, "+")
		if !hasOff {
			name, off, hasOff = strings.Cut(rest, "-")
		}
		bad = name == "" || name[0] < 'A' || name[0] > 'Z'
		for i := 0; !bad && i < len(name); i++ {
			c := name[i]
			bad = !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9')
		}
		if !bad && hasOff {
			_, err := strconv.ParseUint(off, 10, 8)
			bad = off == "" || err != nil || off[0] == '+'
		}
	}
	if bad {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s is not a signal's name, as SIGTERM or SIGRTMIN+3", strictjson.QuoteShort(s)))
	}
	return nil
}

func checkTime(field string, t time.Time) error {
	if t.IsZero() {
		return strictjson.FieldErr(field, strictjson.ErrMissing, "is missing; it is when the end was seen, in UTC")
	}
	if y := t.UTC().Year(); y < 1970 || y > 9999 {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("year %d is out of range (1970 to 9999)", y))
	}
	return nil
}

// parseUTC reads an RFC 3339 time in UTC, written with Z.
func parseUTC(field, s string) (time.Time, error) {
	// Go's RFC 3339 readers take forms RFC 3339 does not (a one-digit hour,
	// a comma before the fraction), so the shape is checked first.
	var t time.Time
	perr := t.UnmarshalText([]byte(s))
	if perr != nil || !utcShape(s) {
		return time.Time{}, strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s is not a time in UTC as RFC 3339 writes it (2026-10-13T09:30:00Z)", strictjson.QuoteShort(s)))
	}
	return t.UTC(), nil
}

// utcShape says whether s is YYYY-MM-DDTHH:MM:SS, an optional fraction of one
// to nine digits after '.', and Z: the one form an end note's time takes.
func utcShape(s string) bool {
	const shape = "dddd-dd-ddTdd:dd:dd"
	if len(s) < len(shape)+1 || s[len(s)-1] != 'Z' {
		return false
	}
	for i := 0; i < len(shape); i++ {
		if shape[i] == 'd' {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		} else if s[i] != shape[i] {
			return false
		}
	}
	frac := s[len(shape) : len(s)-1]
	if frac == "" {
		return true
	}
	if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
		return false
	}
	for i := 1; i < len(frac); i++ {
		if frac[i] < '0' || frac[i] > '9' {
			return false
		}
	}
	return true
}
