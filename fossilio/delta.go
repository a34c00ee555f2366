package fossilio

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// maxDeltaOutput bounds what one delta may claim to produce, so that a corrupt
// header cannot make the reader allocate without limit.
const maxDeltaOutput = 1 << 30

// deltaDigit maps a byte to its value in Fossil's base-64 integer alphabet
// (0-9 A-Z _ a-z ~), or -1.
var deltaDigit = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz~"
	for i := 0; i < len(alphabet); i++ {
		t[alphabet[i]] = int8(i)
	}
	return t
}()

var errDelta = errors.New("fossilio: malformed delta")

// ApplyDelta reconstructs a file from its source and a Fossil delta
// (www/delta_format.wiki): a size line, then copy ("N@OFFSET,") and insert
// ("N:BYTES") commands, then the checksum ("SUM;"). Integers are base-64,
// most significant digit first. The output's size and checksum are verified.
func ApplyDelta(src, delta []byte) ([]byte, error) {
	d := deltaReader{b: delta}
	limit, ok := d.int()
	if !ok || !d.take('\n') {
		return nil, fmt.Errorf("%w: size line not terminated", errDelta)
	}
	if limit > maxDeltaOutput {
		return nil, fmt.Errorf("%w: output size %d too large", errDelta, limit)
	}
	out := make([]byte, 0, min(limit, uint64(len(src)+len(delta))))
	for d.pos < len(d.b) {
		cnt, ok := d.int()
		if !ok {
			return nil, fmt.Errorf("%w: expected a count at byte %d", errDelta, d.pos)
		}
		if d.pos >= len(d.b) {
			break
		}
		op := d.b[d.pos]
		d.pos++
		switch op {
		case '@':
			ofs, ok := d.int()
			if !ok || !d.take(',') {
				return nil, fmt.Errorf("%w: copy command not terminated at byte %d", errDelta, d.pos)
			}
			if uint64(len(out))+cnt > limit {
				return nil, fmt.Errorf("%w: copy exceeds the output size", errDelta)
			}
			if ofs+cnt > uint64(len(src)) {
				return nil, fmt.Errorf("%w: copy extends past the end of the source", errDelta)
			}
			out = append(out, src[ofs:ofs+cnt]...)
		case ':':
			if uint64(len(out))+cnt > limit {
				return nil, fmt.Errorf("%w: insert exceeds the output size", errDelta)
			}
			if cnt > uint64(len(d.b)-d.pos) {
				return nil, fmt.Errorf("%w: insert extends past the end of the delta", errDelta)
			}
			out = append(out, d.b[d.pos:d.pos+int(cnt)]...)
			d.pos += int(cnt)
		case ';':
			if uint64(len(out)) != limit {
				return nil, fmt.Errorf("%w: output is %d bytes, header said %d", errDelta, len(out), limit)
			}
			if sum := deltaChecksum(out); uint64(sum) != cnt {
				return nil, fmt.Errorf("%w: checksum %d, delta says %d", errDelta, sum, cnt)
			}
			return out, nil
		default:
			return nil, fmt.Errorf("%w: unknown command %q at byte %d", errDelta, op, d.pos-1)
		}
	}
	return nil, fmt.Errorf("%w: no checksum at the end", errDelta)
}

type deltaReader struct {
	b   []byte
	pos int
}

// int reads one base-64 integer; ok is false when there is no digit or the
// value overflows 32 bits, as Fossil's integers are unsigned 32-bit.
func (d *deltaReader) int() (v uint64, ok bool) {
	start := d.pos
	for d.pos < len(d.b) {
		c := deltaDigit[d.b[d.pos]]
		if c < 0 {
			break
		}
		v = v<<6 | uint64(c)
		if v > 0xffffffff {
			return 0, false
		}
		d.pos++
	}
	return v, d.pos > start
}

func (d *deltaReader) take(c byte) bool {
	if d.pos < len(d.b) && d.b[d.pos] == c {
		d.pos++
		return true
	}
	return false
}

// deltaChecksum is Fossil's delta checksum: the 32-bit sum of the output read
// as big-endian words, the last one padded with zeros.
func deltaChecksum(b []byte) uint32 {
	var sum uint32
	n := len(b) &^ 3
	for i := 0; i < n; i += 4 {
		sum += binary.BigEndian.Uint32(b[i:])
	}
	var last [4]byte
	copy(last[:], b[n:])
	return sum + binary.BigEndian.Uint32(last[:])
}
