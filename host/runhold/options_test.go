package runhold

import (
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/host/unixhost"
)

func TestParseCommand(t *testing.T) {
	for _, c := range []struct {
		line string
		want command
		err  string
	}{
		{"attach", command{Verb: "attach"}, ""},
		{"attach 24 80", command{Verb: "attach", Size: unixhost.WindowSize{Rows: 24, Cols: 80}}, ""},
		{"attach 24", command{}, "ROWS COLS"},
		{"attach x y", command{}, "ROWS COLS"},
		{`type {"post":"a"}`, command{Verb: "type", Line: `{"post":"a"}`}, ""},
		{"type ", command{Verb: "type"}, ""},
		{"type a\x04", command{}, "control character"},
		{"type a\x7f", command{}, "control character"},
		{"status", command{Verb: "status"}, ""},
		{"status x", command{}, "nothing"},
		{"kill", command{}, "not a request"},
	} {
		got, err := parseCommand(c.line)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want an error naming %q", c.line, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %+v, %v", c.line, got, err)
		}
	}
}

// The first line must fit a canonical-mode terminal's line whole.
func TestCheckLine(t *testing.T) {
	if err := CheckLine(strings.Repeat("x", unixhost.MaxCanonicalLine-1)); err != nil {
		t.Error(err)
	}
	if err := CheckLine(strings.Repeat("x", unixhost.MaxCanonicalLine)); err == nil {
		t.Error("a line the terminal would cut was taken")
	}
}

func TestTail(t *testing.T) {
	tl := newTail(4)
	if tl.wrote {
		t.Fatal("wrote before a write")
	}
	tl.Write([]byte("ab"))
	tl.Write([]byte("cde"))
	if got := string(tl.Bytes()); got != "bcde" {
		t.Errorf("%q", got)
	}
	tl.Write([]byte("123456"))
	if got := string(tl.Bytes()); got != "3456" {
		t.Errorf("%q", got)
	}
	z := newTail(0)
	z.Write([]byte("x"))
	if !z.wrote || len(z.Bytes()) != 0 {
		t.Error("a tail of 0 bytes keeps nothing but that it was written")
	}
}

// The command line Start hands a holder reads back as the options.
func TestFlagsRoundTrip(t *testing.T) {
	o := Options{Socket: "/r/t.sock", Status: "/r/s.json", StdoutLog: "/w/stdout.log", StderrLog: "/w/stderr.log",
		KeepStdout: 10, KeepStderr: 20, FirstLine: `{"run":"a b","objective":"-- x"}`, Dir: "/w",
		Argv: []string{"bwrap", "--ro-bind", "/", "/", "--", "sh", "-c", "echo --socket"}}
	f, err := parseFlags(o.args(0, 0), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Options, o) {
		t.Errorf("\n got %+v\nwant %+v", f.Options, o)
	}
	f, err = parseFlags(o.args(3, 4), io.Discard)
	if err != nil || f.ListenFD != 3 || f.FirstLineFD != 4 || f.FirstLine != "" {
		t.Errorf("%+v, %v", f, err)
	}
	for _, o := range []Options{
		{Socket: "/r/t.sock", Status: "/r/s.json", Terminal: true, Spec: "/r/spec.json"},
		{Socket: "/r/t.sock", Status: "/r/s.json", Feed: true, Spec: "/r/spec.json"},
	} {
		f, err := parseFlags(o.args(0, 0), io.Discard)
		if err != nil || !reflect.DeepEqual(f.Options, o) {
			t.Errorf("\n got %+v, %v\nwant %+v", f.Options, err, o)
		}
	}
	for _, bad := range [][]string{
		{"--status", "/s", "--", "sh"},
		{"--socket", "rel.sock", "--status", "/s", "--", "sh"},
		{"--socket", "/t.sock", "--status", "/s"},
		{"--socket", "/t.sock", "--status", "/s", "sh"},
		{"--socket", "/t.sock", "--status", "/s", "--first-line", "a\x03", "--", "sh"},
		{"--socket", "/t.sock", "--status", "/s", "--spec", "/spec", "--", "sh"},
		{"--socket", "/t.sock", "--status", "/s", "--spec", "/spec", "--dir", "/w"},
		{"--socket", "/t.sock", "--status", "/s", "--spec", "spec"},
		{"--socket", "/t.sock", "--status", "/s", "--terminal", "--feed", "--", "sh"},
	} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%q taken", bad)
		}
	}
}
