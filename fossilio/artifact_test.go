package fossilio_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"pgregory.net/rapid"
)

var date = time.Date(2026, 11, 30, 8, 41, 24, 169e6, time.UTC)

// withZ appends a correct Z card, as Fossil computes it.
func withZ(body string) []byte {
	var w strings.Builder
	w.WriteString(body)
	sum := md5hex([]byte(body))
	w.WriteString("Z " + sum + "\n")
	return []byte(w.String())
}

const (
	h64a = "753e3fc5" + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" + "0000fa80"
	h64b = "60bf07ae" + "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" + "0000157e"
	h64c = "8b9cfa76" + "cccccccccccccccccccccccccccccccccccccccccccccccc" + "000067e1"
	h40  = "76d842cbc75e97ba" + "000000000000000000" + "00ab00"
)

func TestParseKinds(t *testing.T) {
	cases := []struct {
		name  string
		data  []byte
		want  fossilio.Type
		check func(t *testing.T, a *fossilio.Artifact)
	}{
		{"delete reply", withZ("D 2026-11-30T08:41:24.169\nG " + h64a + "\nI " + h64b + "\nN text/x-markdown\nP " + h64c + "\nU alice\nW 0\n\n"), fossilio.TypeForum,
			func(t *testing.T, a *fossilio.Artifact) {
				if a.ThreadRoot != h64a || a.InReplyTo != h64b || len(a.Parents) != 1 || a.User != "alice" || !a.HasText || len(a.Text) != 0 {
					t.Errorf("fields: %+v", a)
				}
				if !a.Date.Equal(date) {
					t.Errorf("date %v, want %v", a.Date, date)
				}
			}},
		{"check-in", withZ("C first\\sfile,\\swith\\s\"quotes\"\\sand\\sspace\nD 2026-11-30T08:44:56.309\nF a.txt " + h64a + "\nP " + h64b + "\nR 19099954149cf99f21b77ca980f071ee\nT *branch * feature\\sx\nU alice\n"), fossilio.TypeManifest,
			func(t *testing.T, a *fossilio.Artifact) {
				if a.Comment != `first file, with "quotes" and space` || len(a.Files) != 1 || a.Files[0].Name != "a.txt" {
					t.Errorf("fields: %+v", a)
				}
				if len(a.Tags) != 1 || a.Tags[0] != (fossilio.Tag{Op: '*', Name: "branch", Target: "", Value: "feature x"}) {
					t.Errorf("tags: %+v", a.Tags)
				}
			}},
		{"control", withZ("D 2026-11-30T08:28:45\nT +note " + h40 + " looks\\sgood\\\\\\sto\\sme\nT +sym-reviewed " + h40 + "\nU alice\n"), fossilio.TypeControl,
			func(t *testing.T, a *fossilio.Artifact) {
				if len(a.Tags) != 2 || a.Tags[0].Value != `looks good\ to me` || a.Tags[1].Name != "sym-reviewed" || a.Tags[1].Target != h40 {
					t.Errorf("tags: %+v", a.Tags)
				}
			}},
		{"ticket", withZ("D 2026-11-30T08:41:24\nJ +icomment appended\\stext\nJ status Closed\nK 3c57798b00000000000000000000000000000000\nU alice\n"), fossilio.TypeTicket,
			func(t *testing.T, a *fossilio.Artifact) {
				if len(a.Fields) != 2 || a.Fields[0] != (fossilio.Field{Name: "+icomment", Value: "appended text"}) {
					t.Errorf("fields: %+v", a.Fields)
				}
			}},
		{"empty user is anonymous", withZ("D 2026-11-30T08:28:45\nT +x " + h40 + "\nU\n"), fossilio.TypeControl,
			func(t *testing.T, a *fossilio.Artifact) {
				if a.User != "anonymous" {
					t.Errorf("user %q", a.User)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := fossilio.Parse(c.data)
			if err != nil {
				t.Fatalf("Parse: %v\n%s", err, c.data)
			}
			if a.Type != c.want {
				t.Fatalf("type %v, want %v", a.Type, c.want)
			}
			c.check(t, a)
		})
	}
}

func TestParseRefuses(t *testing.T) {
	good := "D 2026-11-30T08:28:45\nT +x " + h40 + "\nU alice\n"
	cases := map[string][]byte{
		"empty":               nil,
		"no final newline":    []byte("D 2026-11-30T08:28:45"),
		"bad Z":               []byte(good + "Z 00000000000000000000000000000000\n"),
		"no Z":                []byte(good),
		"cards out of order":  withZ("T +x " + h40 + "\nD 2026-11-30T08:28:45\nU alice\n"),
		"two spaces":          withZ("D  2026-11-30T08:28:45\nT +x " + h40 + "\nU alice\n"),
		"all-hex tag name":    withZ("D 2026-11-30T08:28:45\nT +cafe " + h40 + "\nU alice\n"),
		"tag order":           withZ("D 2026-11-30T08:28:45\nT +y " + h40 + "\nT +x " + h40 + "\nU alice\n"),
		"self tag in control": withZ("D 2026-11-30T08:28:45\nT +x *\nU alice\n"),
		"H and I":             withZ("D 2026-11-30T08:41:24\nG " + h64a + "\nH t\nI " + h64b + "\nU a\nW 0\n\n"),
		"short W":             withZ("D 2026-11-30T08:41:24\nH t\nU a\nW 10\nabc\n"),
		"blank line":          withZ("D 2026-11-30T08:28:45\n\nT +x " + h40 + "\nU alice\n"),
		"extra argument":      withZ("D 2026-11-30T08:28:45 extra\nT +x " + h40 + "\nU alice\n"),
		"bad date":            withZ("D yesterday\nT +x " + h40 + "\nU alice\n"),
		"two U cards":         withZ("D 2026-11-30T08:28:45\nT +x " + h40 + "\nU alice\nU bob\n"),
		"J out of order":      withZ("D 2026-11-30T08:41:24\nJ status Closed\nJ +icomment x\nK 3c57798b00000000000000000000000000000000\nU alice\n"),
		"short K":             withZ("D 2026-11-30T08:41:24\nJ status Closed\nK 3c57798b\nU alice\n"),
		"card not allowed":    withZ("D 2026-11-30T08:41:24\nH t\nJ x y\nU a\nW 0\n\n"),
		"missing D":           withZ("T +x " + h40 + "\nU alice\n"),
		"lowercase card":      withZ("D 2026-11-30T08:28:45\nt +x " + h40 + "\nU alice\n"),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			a, err := fossilio.Parse(data)
			if err == nil {
				t.Fatalf("Parse accepted it as a %v:\n%s", a.Type, data)
			}
			var pe *fossilio.ParseError
			if !errors.As(err, &pe) || !errors.Is(err, fossilio.ErrMalformed) {
				t.Fatalf("error %v is not a *ParseError wrapping ErrMalformed", err)
			}
		})
	}
}

func TestDraftsParse(t *testing.T) {
	post, err := fossilio.PostDraft{Date: date, User: "bob smith", Title: "Title with spaces\\and backslash", Text: "body\n```json\n{}\n```\n"}.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	a, err := fossilio.Parse(post)
	if err != nil || a.Type != fossilio.TypeForum || a.ThreadTitle != "Title with spaces\\and backslash" || a.User != "bob smith" || string(a.Text) != "body\n```json\n{}\n```\n" || a.Mimetype != fossilio.MarkdownMimetype {
		t.Fatalf("post round trip: %+v %v\n%s", a, err, post)
	}
	tkt, err := fossilio.TicketDraft{Date: date, User: "alice", Ticket: strings.Repeat("ab", 20), Fields: []fossilio.Field{{Name: "status", Value: "Open"}, {Name: "+icomment", Value: "line one\nline two"}, {Name: "title", Value: ""}}}.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	a, err = fossilio.Parse(tkt)
	if err != nil || a.Type != fossilio.TypeTicket || len(a.Fields) != 3 || a.Fields[0].Name != "+icomment" || a.Fields[0].Value != "line one\nline two" || a.Fields[2] != (fossilio.Field{Name: "title"}) {
		t.Fatalf("ticket round trip: %+v %v\n%s", a, err, tkt)
	}
	ctl, err := fossilio.ControlDraft{Date: date, User: "ci", Tags: []fossilio.Tag{{Op: '+', Name: "ci", Target: h64a, Value: "green: ok 3 tests"}, {Op: '+', Name: "audited", Target: h64a, Value: "pass: fine (against PLAN.md)"}}}.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	a, err = fossilio.Parse(ctl)
	if err != nil || a.Type != fossilio.TypeControl || len(a.Tags) != 2 || a.Tags[0].Name != "audited" || a.Tags[1].Value != "green: ok 3 tests" {
		t.Fatalf("control round trip: %+v %v\n%s", a, err, ctl)
	}
}

func TestDraftsRefuseBadInput(t *testing.T) {
	cases := map[string]func() ([]byte, error){
		"thread without title": func() ([]byte, error) { return fossilio.PostDraft{Date: date, User: "a", Text: "x"}.Bytes() },
		"reply without root": func() ([]byte, error) {
			return fossilio.PostDraft{Date: date, User: "a", InReplyTo: h64a, Text: "x"}.Bytes()
		},
		"short root": func() ([]byte, error) {
			return fossilio.PostDraft{Date: date, User: "a", Root: "abc", InReplyTo: h64a}.Bytes()
		},
		"no user": func() ([]byte, error) { return fossilio.PostDraft{Date: date, Title: "t"}.Bytes() },
		"no date": func() ([]byte, error) { return fossilio.PostDraft{User: "a", Title: "t"}.Bytes() },
		"hex tag": func() ([]byte, error) {
			return fossilio.ControlDraft{Date: date, User: "a", Tags: []fossilio.Tag{{Op: '+', Name: "cafe", Target: h64a}}}.Bytes()
		},
		"reserved tag": func() ([]byte, error) {
			return fossilio.ControlDraft{Date: date, User: "a", Tags: []fossilio.Tag{{Op: '+', Name: "tkt-x", Target: h64a}}}.Bytes()
		},
		"tag target prefix": func() ([]byte, error) {
			return fossilio.ControlDraft{Date: date, User: "a", Tags: []fossilio.Tag{{Op: '+', Name: "ci", Target: h64a[:20]}}}.Bytes()
		},
		"field with space": func() ([]byte, error) {
			return fossilio.TicketDraft{Date: date, User: "a", Ticket: h40, Fields: []fossilio.Field{{Name: "a b"}}}.Bytes()
		},
		"field twice": func() ([]byte, error) {
			return fossilio.TicketDraft{Date: date, User: "a", Ticket: h40, Fields: []fossilio.Field{{Name: "x"}, {Name: "x"}}}.Bytes()
		},
		"bad ticket id": func() ([]byte, error) {
			return fossilio.TicketDraft{Date: date, User: "a", Ticket: h64a, Fields: []fossilio.Field{{Name: "x"}}}.Bytes()
		},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := f()
			if err == nil {
				t.Fatalf("accepted:\n%s", b)
			}
			if !errors.Is(err, fossilio.ErrBadInput) {
				t.Fatalf("error %v does not wrap ErrBadInput", err)
			}
		})
	}
}

func TestFossilizeRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.String().Draw(t, "s")
		if strings.IndexByte(s, 0) >= 0 {
			s = strings.ReplaceAll(s, "\x00", "")
		}
		enc := fossilio.Fossilize(s)
		if strings.ContainsAny(enc, " \n\t\r\v\f") {
			t.Fatalf("Fossilize(%q) = %q holds a separator", s, enc)
		}
		if got := fossilio.Defossilize(enc); got != s {
			t.Fatalf("Defossilize(Fossilize(%q)) = %q", s, got)
		}
	})
	if got := fossilio.Fossilize("release candidate"); got != `release\scandidate` {
		t.Errorf("Fossilize: %q", got)
	}
	if got := fossilio.Fossilize(`value with spaces\and backslash`); got != `value\swith\sspaces\\and\sbackslash` {
		t.Errorf("Fossilize: %q", got)
	}
	if got := fossilio.Defossilize(`a\qb\`); got != `aqb\` {
		t.Errorf("Defossilize of an unknown escape and a trailing backslash: %q", got)
	}
}

// FuzzParse: Parse never panics, and what it accepts has a known type and is
// accepted again.
func FuzzParse(f *testing.F) {
	f.Add(withZ("D 2026-11-30T08:41:24.169\nG " + h64a + "\nI " + h64b + "\nN text/x-markdown\nP " + h64c + "\nU alice\nW 5\nhello\n"))
	f.Add(withZ("D 2026-11-30T08:28:45\nT +note " + h40 + " looks\\sgood\nU alice\n"))
	f.Add(withZ("D 2026-11-30T08:41:24\nJ +icomment x\nK 3c57798b00000000000000000000000000000000\nU alice\n"))
	f.Add(withZ("C c\nD 2026-11-30T08:44:56.309\nF a.txt " + h64a + "\nP " + h64b + "\nR 19099954149cf99f21b77ca980f071ee\nU alice\n"))
	f.Add([]byte("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA1\n\nD 2026-11-30T08:28:45\n-----BEGIN PGP SIGNATURE-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := fossilio.Parse(data)
		if err != nil {
			if !errors.Is(err, fossilio.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if a.Type < fossilio.TypeManifest || a.Type > fossilio.TypeForum {
			t.Fatalf("accepted with type %v", a.Type)
		}
		if _, err := fossilio.Parse(data); err != nil {
			t.Fatalf("second parse failed: %v", err)
		}
	})
}
