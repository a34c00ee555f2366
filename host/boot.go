package host

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// errNoBootTime is wrapped by ParseBootTime's errors.
var errNoBootTime = errors.New("host: no btime line in /proc/stat")

// ParseBootTime reads when the host booted from the contents of /proc/stat:
// its `btime` line, seconds since the epoch. A session launched before it
// went down with the host (D33).
func ParseBootTime(b []byte) (time.Time, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) != 2 || string(f[0]) != "btime" {
			continue
		}
		s, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil || s <= 0 {
			return time.Time{}, fmt.Errorf("%w: btime %q", errNoBootTime, f[1])
		}
		return time.Unix(s, 0).UTC(), nil
	}
	if err := sc.Err(); err != nil {
		return time.Time{}, fmt.Errorf("%w: %v", errNoBootTime, err)
	}
	return time.Time{}, errNoBootTime
}
