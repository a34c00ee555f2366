// Package keptlog filters a run's kept logs before anything of them leaves
// the node (D98): every occurrence of a mask (process.keep.mask, and the
// run's own secrets, always) is replaced by a marker, and with a match
// (process.keep.match) only the lines it matches are kept. It is pure: a
// Writer takes a stream line by line, in bounded memory, and writes what
// passes to the writer beneath it, the holder's kept tail.
package keptlog

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Spec is a filter as it is handed on (the holder's spec file): the
// strings masked, the run's own secrets among them, and the match, ""
// for none. It holds secrets: it is never a note, never a value.
type Spec struct {
	Mask  []string `json:"mask,omitempty"`
	Match string   `json:"match,omitempty"`
}

// Filter makes the spec's filter, lines held whole up to DefaultMaxLine.
func (s Spec) Filter() (*Filter, error) { return New(s.Mask, s.Match, 0) }

// DefaultMaxLine is the longest line the filter holds whole: a longer one
// is taken in pieces (Filter.MaxLine).
const DefaultMaxLine = 64 << 10

// Filter is a kept log's filter. Its zero value passes everything.
type Filter struct {
	masks [][]byte
	// hex says which masks are made of hex digits alone (a hash, a
	// shared secret, an obscured password): a line with no run of hex
	// digits as long is not searched for them.
	hex    []bool
	match  *regexp.Regexp
	marker []byte
	// maxLine is the longest line held whole, at least twice the longest
	// mask.
	maxLine int
	longest int
}

// New makes a filter: masks are replaced wherever they occur (an empty one
// is dropped, one listed twice counted once; none may hold a newline), match ("" for none) keeps
// only the lines it matches. maxLine is the longest line held whole (0 for
// DefaultMaxLine); a longer one is taken in pieces, each matched on its
// own.
func New(masks []string, match string, maxLine int) (*Filter, error) {
	f := &Filter{maxLine: maxLine}
	if f.maxLine <= 0 {
		f.maxLine = DefaultMaxLine
	}
	seen := map[string]bool{}
	for i, m := range masks {
		if strings.ContainsRune(m, '\n') {
			return nil, fmt.Errorf("keptlog: mask %d holds a newline: a kept log is filtered line by line", i)
		}
		if m == "" || seen[m] {
			continue
		}
		seen[m] = true
		f.masks = append(f.masks, []byte(m))
		f.longest = max(f.longest, len(m))
	}
	// Longest first: only the order of the search; what is covered is the
	// union of every occurrence of every mask, so a mask that is part of
	// another leaves nothing of either.
	slices.SortStableFunc(f.masks, func(a, b []byte) int { return len(b) - len(a) })
	for _, m := range f.masks {
		f.hex = append(f.hex, hexRun(m) == len(m))
	}
	f.maxLine = max(f.maxLine, 2*f.longest)
	if match != "" {
		re, err := regexp.Compile(match)
		if err != nil {
			return nil, fmt.Errorf("keptlog: match %q: %w", match, err)
		}
		f.match = re
	}
	f.marker = []byte(strings.Repeat(string(markerRune(masks)), 3))
	return f, nil
}

// Marker is what the filter writes in place of what it masks: *** unless a
// mask holds *, then three of the first character no mask holds. So no
// mask can be made of a marker and the text beside it: whatever part of a
// mask is masked, nothing of it is left, and no new one is formed.
func (f *Filter) Marker() string { return string(f.marker) }

// markerRune is the first of *, #, ~, then the runes from U+2731 (✱) on,
// that no mask holds.
func markerRune(masks []string) rune {
	held := func(r rune) bool {
		for _, m := range masks {
			if strings.ContainsRune(m, r) {
				return true
			}
		}
		return false
	}
	for _, r := range []rune{'*', '#', '~'} {
		if !held(r) {
			return r
		}
	}
	for r := rune(0x2731); ; r++ {
		if utf8.ValidRune(r) && !held(r) {
			return r
		}
	}
}

// Passes says whether the filter changes nothing: no mask, no match.
func (f *Filter) Passes() bool { return f == nil || (len(f.masks) == 0 && f.match == nil) }

// Apply filters a whole text at once, as a Writer given it and flushed.
func (f *Filter) Apply(b []byte) []byte {
	var out bytes.Buffer
	w := f.Writer(&out)
	w.Write(b)
	w.Flush()
	return out.Bytes()
}

// Writer filters what is written to it into w: line by line (a line ends
// with \n), a line longer than the filter's maxLine taken in pieces. It
// holds at most maxLine bytes. It is not safe for concurrent use.
type Writer struct {
	f   *Filter
	w   io.Writer
	buf []byte
	// carry is how many bytes at the start of buf a mask found before it
	// covers (a mask across the cut between two pieces of a line).
	carry int
	// covered says the last piece of this line ended masked, so a piece
	// beginning masked does not write the marker again.
	covered bool
	err     error
}

// Writer returns a writer filtering into w. A nil filter passes all.
func (f *Filter) Writer(w io.Writer) *Writer {
	if f == nil {
		f = &Filter{maxLine: DefaultMaxLine}
	}
	return &Writer{f: f, w: w}
}

// Write filters p; it fails only when the writer beneath fails.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.f.Passes() {
		_, w.err = w.w.Write(p)
		return len(p), w.err
	}
	written := len(p)
	for len(p) > 0 {
		// Never more than maxLine+1 bytes held: a line is whole once its
		// newline is within maxLine bytes, or cut.
		n := min(len(p), w.f.maxLine+1-len(w.buf))
		w.buf = append(w.buf, p[:n]...)
		p = p[n:]
		w.drain()
		if w.err != nil {
			return 0, w.err
		}
	}
	return written, nil
}

// Flush filters what is held: the last line, which has no newline.
func (w *Writer) Flush() error {
	if w.err != nil || w.f.Passes() {
		return w.err
	}
	w.drain()
	if len(w.buf) > 0 {
		w.line(len(w.buf), true)
	}
	return w.err
}

// drain writes the lines held whole, and the pieces of a line too long.
func (w *Writer) drain() {
	for w.err == nil {
		if i := bytes.IndexByte(w.buf[:min(len(w.buf), w.f.maxLine)], '\n'); i >= 0 {
			w.line(i+1, true)
			continue
		}
		if len(w.buf) > w.f.maxLine {
			// A piece: its cut leaves room after it for any mask that
			// begins before it, so what is masked before the cut is known.
			w.line(w.f.maxLine-max(w.f.longest-1, 0), false)
			continue
		}
		return
	}
}

// line filters buf[:n], a line (end) or a piece of one (!end), and drops
// it from buf.
func (w *Writer) line(n int, end bool) {
	text := w.buf[:n]
	// What is masked of buf[:n]: the carry, and every occurrence of a mask
	// that begins in it (those found here end within buf, held whole).
	cov := make([]bool, n)
	for i := 0; i < w.carry && i < n; i++ {
		cov[i] = true
	}
	reach := n // how far the masks found reach: past n is the next carry
	// What a mask beginning before n may reach.
	region := w.buf[:min(len(w.buf), n+w.f.longest)]
	hexes := hexRun(region)
	for mi, m := range w.f.masks {
		if w.f.hex[mi] && len(m) > hexes {
			continue
		}
		for at := 0; at < n; {
			i := bytes.Index(region[at:], m)
			if i < 0 || at+i >= n {
				break
			}
			s := at + i
			for j := s; j < s+len(m) && j < n; j++ {
				cov[j] = true
			}
			reach = max(reach, s+len(m))
			at = s + 1 // overlapping occurrences too
		}
	}
	next := max(w.carry-n, 0, reach-n)
	var out []byte
	prev := w.covered
	for i := 0; i < n; i++ {
		if cov[i] {
			if !(i == 0 && prev && w.f.match == nil) && (i == 0 || !cov[i-1]) {
				out = append(out, w.f.marker...)
			}
			continue
		}
		out = append(out, text[i])
	}
	lastCovered := n > 0 && cov[n-1]
	keep := true
	if w.f.match != nil {
		body := bytes.TrimSuffix(bytes.TrimSuffix(out, []byte("\n")), []byte("\r"))
		keep = w.f.match.Match(body)
		if keep && !bytes.HasSuffix(out, []byte("\n")) {
			out = append(out, '\n')
		}
	}
	if keep && len(out) > 0 {
		_, w.err = w.w.Write(out)
	}
	w.buf = append(w.buf[:0], w.buf[n:]...)
	if end {
		w.carry, w.covered = 0, false
	} else {
		w.carry, w.covered = next, lastCovered
	}
}

// hexRun is the length of the longest run of hex digits in b.
func hexRun(b []byte) int {
	longest, run := 0, 0
	for _, c := range b {
		if '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return longest
}
