package fossilio

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// A reply's file cards are read by their sizes: a card may follow an
// artifact's last byte directly.
func TestParseFetchReply(t *testing.T) {
	a := []byte("C x\nD 2026-11-30T00:00:00\nU a\nZ 00000000000000000000000000000000\n")
	b := []byte("not ending in a newline")
	ha, hb := HashOf(a), HashOf(b)
	src := strings.Repeat("cd", 32)
	reply := "pragma server-version 22100\n" +
		"file " + ha + " " + strconv.Itoa(len(a)) + "\n" + string(a) +
		"file " + hb + " " + strconv.Itoa(len(b)) + "\n" + string(b) +
		"file " + strings.Repeat("ef", 32) + " " + src + " 3\nxyz" +
		"igot " + strings.Repeat("12", 20) + "\n" +
		"# timestamp 2026-11-30T00:00:00 errors 0\n"
	r, err := parseFetchReply([]byte(reply))
	if err != nil {
		t.Fatal(err)
	}
	if string(r.files[ha].data) != string(a) || string(r.files[hb].data) != string(b) {
		t.Errorf("files read: %q", r.files)
	}
	if d := r.files[strings.Repeat("ef", 32)]; d.source != src || string(d.data) != "xyz" {
		t.Errorf("the delta card read as %+v", d)
	}
	if !r.igot[strings.Repeat("12", 20)] {
		t.Errorf("igot not read: %v", r.igot)
	}

	refused, err := parseFetchReply([]byte("error not\\sauthorized\\sto\\sread\n# timestamp 2026-11-30T00:00:00 errors 1\n"))
	if err != nil || len(refused.reasons) != 1 || refused.reasons[0] != "not authorized to read" {
		t.Errorf("an error card: %+v, %v", refused, err)
	}

	for name, bad := range map[string]string{
		"content not of its hash": "file " + strings.Repeat("ab", 32) + " 3\nabc# timestamp x errors 0\n",
		"size beyond the reply":   "file " + ha + " 999\nabc",
		"size not a number":       "file " + ha + " many\n# timestamp x errors 0\n",
		"name not a hash":         "file ABC 3\nabc# timestamp x errors 0\n",
		"source not a hash":       "file " + ha + " nope 3\nabc# timestamp x errors 0\n",
		"no timestamp line":       "file " + hb + " " + strconv.Itoa(len(b)) + "\n" + string(b) + "\n",
		"cut inside a card":       "# timestamp x errors 0\nfile " + ha,
	} {
		if _, err := parseFetchReply([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

// FuzzParseFetchReply: no reply makes the reader panic, and every whole
// artifact it returns is of the hash its card names.
func FuzzParseFetchReply(f *testing.F) {
	a := []byte("C x\nU a\n")
	f.Add([]byte("file " + HashOf(a) + " " + strconv.Itoa(len(a)) + "\n" + string(a) + "# timestamp x errors 0\n"))
	f.Add([]byte("error login\\sfailed\n# timestamp x errors 1\n"))
	f.Add([]byte("file " + HashOf(a) + " -1\n"))
	f.Fuzz(func(t *testing.T, reply []byte) {
		r, err := parseFetchReply(reply)
		if err != nil {
			return
		}
		for h, fc := range r.files {
			if fc.source == "" && !hashMatches(h, fc.data) {
				t.Fatalf("file %s returned with content of another hash", h)
			}
		}
	})
}
