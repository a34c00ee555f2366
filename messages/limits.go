package messages

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// The limits a run, a session and a node write, and the sizes they write
// them in (seed 004, tables 7 and 8; D82).

// RunSize is a size as a run writes it (section 8, keep): a whole number of
// bytes, held as its digits ("65536"), or a whole number and K, M or G
// ("64K"). It is kept as written, so started and a re-encoded run say it the
// same way.
type RunSize string

// Bytes is the size in bytes.
func (s RunSize) Bytes() (uint64, error) { return ParseSize("size", string(s), false) }

// MarshalJSON writes digits as a JSON number and the rest as a string.
func (s RunSize) MarshalJSON() ([]byte, error) {
	if _, err := ParseSize("size", string(s), true); err == nil {
		return []byte(s), nil
	}
	return json.Marshal(string(s))
}

// ParseSize reads a size; number says it was written as a JSON number.
func ParseSize(field, s string, number bool) (uint64, error) {
	bad := strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s is not a size: a whole number of bytes, or text, a whole number and K, M or G, as \"64K\"", strictjson.QuoteShort(s)))
	if s == "" || len(s) > 24 {
		return 0, bad
	}
	digits, mul := s, uint64(1)
	if !number {
		switch s[len(s)-1] {
		case 'K':
			mul = 1 << 10
		case 'M':
			mul = 1 << 20
		case 'G':
			mul = 1 << 30
		default:
			if n, err := parseDigits(s); err == nil {
				return n, nil
			}
			return 0, bad
		}
		digits = s[:len(s)-1]
	}
	n, err := parseDigits(digits)
	if err != nil || n > (1<<63)/mul {
		return 0, bad
	}
	return n * mul, nil
}

// parseDigits reads a whole number written with digits alone, no sign, no
// leading zero but 0 itself.
func parseDigits(s string) (uint64, error) {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return 0, strconv.ErrSyntax
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, strconv.ErrSyntax
		}
	}
	return strconv.ParseUint(s, 10, 64)
}

func isDigits(s string) bool { _, err := parseDigits(s); return err == nil }

// The limits of table 7, in its order (LimitWall is stop.go's, the same
// wall).
const (
	LimitCPU       = "cpu"
	LimitProcesses = "processes"
	LimitMemory    = "memory"
	// LimitDisk is this node's row beyond table 7 (D82): the size of
	// the file system a run's workspace, or a session's, is made on.
	LimitDisk = "disk"
)

// The bounds of a disk (D82): below minDisk an ext4 file system holds
// little beyond its own journal and tables; maxDisk is ext4's 16 TiB
// with 4 KiB blocks.
const (
	minDisk = 16 << 20
	maxDisk = 16 << 40
)

// ParseDisk reads a disk's size as node.json and a session definition
// write it, a string: a whole number and K, M or G, or bytes; from minDisk
// to maxDisk.
func ParseDisk(field, s string) (uint64, error) {
	n, err := ParseSize(field, s, false)
	if err != nil {
		return 0, err
	}
	return n, CheckDiskSize(field, s, n)
}

// CheckDiskSize checks a disk's size in bytes against minDisk and
// maxDisk, naming field.
func CheckDiskSize(field, written string, n uint64) error {
	if n < minDisk || n > maxDisk {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s is not a disk's size: from %d bytes (16M) to %d (16384G)", strictjson.QuoteShort(written), uint64(minDisk), uint64(maxDisk)))
	}
	return nil
}

// MaxLimit bounds cpu and processes: what an rlimit takes and more than any
// host has.
const MaxLimit = 1<<32 - 1

// Parse reads the size as a run's limits write it: digits alone as a
// number of bytes, or a whole number and K, M or G.
func (s RunSize) Parse(field string) (uint64, error) {
	return ParseSize(field, string(s), isDigits(string(s)))
}
