package pipe

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/modelapi"
	"github.com/ocx-go/ocx/messages/strictjson"
	"pgregory.net/rapid"
)

// hostileLines are pipe lines the daemon refuses, with the field named.
var hostileLines = []struct {
	name  string
	line  string
	err   error
	field string
	words string
}{
	{"5000 bytes", "post /srv/" + strings.Repeat("a", 4917) + ".fossil " + h64, strictjson.ErrTooLong, "", "is 5000 bytes with its newline"},
	{"4097 with newline", "stop " + strings.Repeat("a", 4091), strictjson.ErrTooLong, "", "is 4097 bytes"},
	{"empty", "", strictjson.ErrSyntax, "", "is empty"},
	{"unknown verb", "launch a b", strictjson.ErrInvalid, "verb", `"launch" is not a verb`},
	{"capital verb", "POST /srv/a.fossil " + h64, strictjson.ErrInvalid, "verb", `"POST"`},
	{"leading space", " reexec", strictjson.ErrSyntax, "", "field 1 is empty"},
	{"trailing space", "reexec ", strictjson.ErrSyntax, "", "field 2 is empty"},
	{"two spaces", "stop a  b", strictjson.ErrSyntax, "", "field 3 is empty"},
	{"tab", "stop a\tb", strictjson.ErrSyntax, "", `control character '\t'`},
	{"CR", "reexec\r", strictjson.ErrSyntax, "", `control character '\r'`},
	{"NUL", "stop a\x00 b", strictjson.ErrSyntax, "", `'\x00'`},
	{"two newlines", "reexec\n\n", strictjson.ErrSyntax, "", `control character '\n'`},
	{"invalid UTF-8", "stop \xff b", strictjson.ErrSyntax, "", "not valid UTF-8"},
	{"reexec with argument", "reexec now", strictjson.ErrSyntax, "", "reexec takes 0 argument(s)"},
	{"post short", "post /srv/a.fossil", strictjson.ErrSyntax, "", "post takes 2 argument(s)"},
	{"relative repository", "post srv/a.fossil " + h64, strictjson.ErrInvalid, "repository", "not an absolute path"},
	{"unclean repository", "post /srv/../a.fossil " + h64, strictjson.ErrInvalid, "repository", "not a clean path"},
	{"not a .fossil", "post /srv/a.db " + h64, strictjson.ErrInvalid, "repository", "does not end in .fossil"},
	{"bad project file", "post /srv/.fossil " + h64, strictjson.ErrInvalid, "repository", "does not name a project"},
	{"no-break space in path", "post /srv/a\u00a0b/c.fossil " + h64, strictjson.ErrInvalid, "repository", "whitespace"},
	{"short hash", "post /srv/a.fossil abc", strictjson.ErrInvalid, "hash", "is 3 characters"},
	{"uppercase hash", "post /srv/a.fossil " + strings.ToUpper(h40), strictjson.ErrInvalid, "hash", "not lowercase hex"},
	{"login ../x", "stop ../x ollama", strictjson.ErrInvalid, "login", `"../x" is not a login`},
	{"login with slash", "stop a/b ollama", strictjson.ErrInvalid, "login", `'/' is not allowed`},
	{"login anonymous", "stop anonymous ollama", strictjson.ErrInvalid, "login", "pseudo-users"},
	{"project dotdot", "stop ci ..", strictjson.ErrInvalid, "project", "must start with a letter or digit"},
	{"project too long", "stop ci " + strings.Repeat("p", 65), strictjson.ErrTooLong, "project", "at most 64"},
}

func TestHostileLines(t *testing.T) {
	for _, tc := range hostileLines {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Parse([]byte(tc.line))
			if err == nil {
				t.Fatalf("accepted: %v", l)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("error %q is not %v", err, tc.err)
			}
			var fe *strictjson.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Errorf("error %q names field %q, want %q", err, fe.Field, tc.field)
			}
			if !strings.Contains(err.Error(), tc.words) {
				t.Errorf("error %q does not say %q", err, tc.words)
			}
			if len(err.Error()) > 400 {
				t.Errorf("a %d-byte input made a %d-byte message", len(tc.line), len(err.Error()))
			}
			// Fed to the splitter with its newline, it is refused the same way
			// (an empty line included), and nothing else comes out.
			if strings.Contains(tc.line, "\n") {
				return // the splitter sees two lines there
			}
			var s pipeSplitter
			reads := s.Feed([]byte(tc.line + "\n"))
			if len(reads) != 1 || reads[0].Err == nil || reads[0].Line != nil {
				t.Errorf("splitter: %v", reads)
			}
		})
	}
}

func TestPipeLineRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := genPipeLine().Draw(t, "line")
		enc, err := l.Encode()
		if err != nil {
			t.Fatalf("encode %v: %v", l, err)
		}
		if len(enc) > pipeBuf || enc[len(enc)-1] != '\n' {
			t.Fatalf("encoded %d bytes: %q", len(enc), enc)
		}
		got, err := Parse(enc)
		if err != nil {
			t.Fatalf("parse %q: %v", enc, err)
		}
		if !reflect.DeepEqual(got, l) || got.String()+"\n" != string(enc) {
			t.Fatalf("round trip: %#v -> %q -> %#v", l, enc, got)
		}
	})
}

func genPipeLine() *rapid.Generator[Line] {
	return rapid.OneOf(
		rapid.Custom(func(t *rapid.T) Line {
			dir := rapid.SliceOfN(rapid.StringMatching(`[A-Za-z0-9._-]{1,12}`).Filter(func(s string) bool { return s != "." && s != ".." }), 0, 4).Draw(t, "dir")
			repo := "/" + strings.Join(append(dir, genName().Draw(t, "project")+".fossil"), "/")
			return PostLine{Repository: repo, Hash: genHash().Draw(t, "hash")}
		}),
		rapid.Custom(func(t *rapid.T) Line {
			return StopLine{Login: genLogin().Draw(t, "login"), Project: genName().Draw(t, "project")}
		}),
		rapid.Just[Line](ReexecLine{}),
		rapid.Custom(func(t *rapid.T) Line {
			return BudgetLine{Login: genLogin().Draw(t, "login"), Project: genName().Draw(t, "project"), Launch: genHash().Draw(t, "launch"),
				Limit: messages.LimitTokens, Used: rapid.Uint64Range(0, modelapi.MaxTokens).Draw(t, "used")}
		}),
	)
}

func FuzzParsePipeLine(f *testing.F) {
	for _, s := range docSeeds(f, "pipe", "pipe-refused") {
		for _, l := range strings.Split(s, "\n") {
			f.Add([]byte(l))
		}
	}
	for _, h := range hostileLines {
		f.Add([]byte(h.line))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		l, err := Parse(line)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		enc, err := l.Encode()
		if err != nil {
			t.Fatalf("accepted %v but cannot encode it: %v", l, err)
		}
		want := line
		if !bytes.HasSuffix(want, []byte("\n")) {
			want = append(bytes.Clone(want), '\n')
		}
		if !bytes.Equal(enc, want) || l.String()+"\n" != string(enc) {
			t.Fatalf("%q re-encodes as %q, renders %q", line, enc, l.String())
		}
	})
}

func FuzzPipeSplitter(f *testing.F) {
	f.Add([]byte("post /srv/a.fossil "+h40+"\nstop ci ollama\nreexec\n"), uint16(7))
	f.Add([]byte(strings.Repeat("x", 5000)+"\nreexec\n"), uint16(4095))
	f.Add([]byte("\n\n\nstop a b"), uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		// Whole, and cut in two anywhere: the same reads.
		var whole, parts pipeSplitter
		a := render(whole.Feed(data))
		if whole.Pending() >= pipeBuf {
			t.Fatalf("holds %d bytes", whole.Pending())
		}
		c := int(cut) % (len(data) + 1)
		b := render(append(parts.Feed(data[:c]), parts.Feed(data[c:])...))
		if a != b {
			t.Fatalf("cut at %d changes the reads:\n%s\n----\n%s", c, a, b)
		}
		fw, fp := whole.Flush(), parts.Flush()
		if (fw == nil) != (fp == nil) || fw != nil && fw.String() != fp.String() {
			t.Fatalf("flush differs: %v vs %v", fw, fp)
		}
		// Every read names its fault on one line, or is a line that re-encodes.
		for _, r := range whole.Feed(append(bytes.Clone(data), '\n')) {
			if r.Err != nil {
				checkRefusal(t, r.Err)
			} else if enc, err := r.Line.Encode(); err != nil || !bytes.Equal(enc[:len(enc)-1], r.Raw) {
				t.Fatalf("line %q re-encodes as %q, %v", r.Raw, enc, err)
			}
		}
	})
}

func render(rs []pipeRead) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// TestBudgetLine: the proxy's line names the session by its launch, the
// limit tokens alone, and reads back as written.
func TestBudgetLine(t *testing.T) {
	l := BudgetLine{Login: "native-7", Project: "demo", Launch: h40, Limit: messages.LimitTokens, Used: 1042}
	b, err := l.Encode()
	if err != nil || string(b) != "budget native-7 demo "+h40+" tokens 1042\n" {
		t.Fatalf("%q %v", b, err)
	}
	back, err := Parse(b)
	if err != nil || back != l {
		t.Fatalf("read back %v %v", back, err)
	}
	for _, bad := range []string{
		"budget native-7 demo " + h40 + " wall 1",
		"budget native-7 demo " + h40[:10] + " tokens 1",
		"budget native-7 demo " + h40 + " tokens 01",
		"budget native-7 demo " + h40 + " tokens -1",
		"budget native-7 demo " + h40 + " tokens",
		"budget ../x demo " + h40 + " tokens 1",
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestStringsAreOneLine(t *testing.T) {
	nasty := "a\nb \"c\"\x00"
	for _, s := range []interface{ String() string }{
		PostLine{Repository: nasty, Hash: nasty},
		StopLine{Login: nasty},
		RunStartLine{Repository: nasty, Hash: nasty, By: nasty},
		BudgetLine{Login: nasty, Project: nasty, Launch: nasty, Limit: nasty},
		WakeLine{Post: nasty, From: nasty},
	} {
		if got := s.String(); strings.ContainsAny(got, "\n\x00") || got == "" {
			t.Errorf("%T renders %q", s, got)
		}
	}
}
