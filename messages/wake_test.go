package messages

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages/strictjson"
)

func fieldOf(err error) string {
	var fe *strictjson.FieldError
	if errors.As(err, &fe) {
		return fe.Field
	}
	return ""
}

func TestHearsFile(t *testing.T) {
	for _, h := range [][]string{{}, {"*"}, {"alice"}, {"alice", "Pat Q. Public", "ci-1"}} {
		b, err := HearsFileContent(h)
		if err != nil {
			t.Fatalf("%q: %v", h, err)
		}
		back, err := ParseHearsFile(b)
		if err != nil || strings.Join(back, "|") != strings.Join(h, "|") || back == nil {
			t.Errorf("%q: %q reads back as %q, %v", h, b, back, err)
		}
	}
	for _, bad := range []string{"alice", "alice\n\n", "\n", "*\nalice\n", "alice\nalice\n", " alice\n", "al\x00ice\n"} {
		if h, err := ParseHearsFile([]byte(bad)); err == nil {
			t.Errorf("%q read as %q", bad, h)
		}
	}
	if Hears([]string{"*"}, "") || !Hears([]string{"*"}, "anyone") || Hears([]string{"alice"}, "bob") || !Hears([]string{"bob", "alice"}, "alice") || Hears(nil, "alice") {
		t.Error("Hears gives the wrong answer")
	}
}

func TestSessionDefinitionHears(t *testing.T) {
	for _, c := range []struct {
		hears string
		want  []string
		err   string
	}{
		{``, nil, ""},
		{`,"hears":[]`, []string{}, ""},
		{`,"hears":["*"]`, []string{"*"}, ""},
		{`,"hears":["pat","alice"]`, []string{"pat", "alice"}, ""},
		{`,"hears":["pat","pat"]`, nil, "hears[1]"},
		{`,"hears":["*","pat"]`, nil, "hears[0]"},
		{`,"hears":[""]`, nil, "hears[0]"},
		{`,"hears":"pat"`, nil, "hears"},
		{`,"hears":[3]`, nil, "hears[0]"},
	} {
		text := "```json\n{\"ocx\":\"session\",\"kind\":\"mechanical\",\"command\":[\"true\"],\"lifetime\":\"stays\"" + c.hears + "}\n```\n"
		n, err := ReadPost([]byte(text))
		if c.err != "" {
			if err == nil || fieldOf(err) != c.err {
				t.Errorf("%s: %v, want a refusal naming %s", c.hears, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.hears, err)
		}
		d := n.(*SessionDefinition)
		if (d.Hears == nil) != (c.want == nil) || strings.Join(d.Hears, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s: hears %q, want %q", c.hears, d.Hears, c.want)
		}
		// The encoding keeps absent and empty apart.
		enc, err := d.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(enc), `"hears"`); got != (c.want != nil) {
			t.Errorf("%s: encoded as %s", c.hears, enc)
		}
	}
}

func TestClaims(t *testing.T) {
	text := "two launches\n\n```json\n{\"ocx\":\"launch\",\"login\":\"agent-1\",\"project\":\"demo\"}\n```\n\n```json\n{\"ocx\":\"launch\",\"login\":7}\n```\n```json\n[1]\n```\n"
	got := Claims([]byte(text))
	if len(got) != 2 || got[0].Kind != KindLaunch || got[0].Login != "agent-1" || got[0].Project != "demo" || got[0].Line != 3 || got[1].Login != "" {
		t.Errorf("claims: %+v", got)
	}
	if _, err := ReadPost([]byte(text)); !errors.Is(err, strictjson.ErrSeveralNotes) {
		t.Errorf("the post reads as %v", err)
	}
}

func FuzzParseHearsFile(f *testing.F) {
	f.Add([]byte(""))
	f.Add([]byte("*\n"))
	f.Add([]byte("alice\nbob\n"))
	f.Add([]byte("alice\nalice\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParseHearsFile(data)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		enc, err := HearsFileContent(h)
		if err != nil || !bytes.Equal(enc, data) {
			t.Fatalf("%q reads as %q, which writes %q (%v)", data, h, enc, err)
		}
	})
}

func TestCheckinsFile(t *testing.T) {
	for _, bs := range [][]string{{}, {"trunk"}, {"feature x", "trunk", "v1.2"}} {
		b, err := CheckinsFileContent(bs)
		if err != nil {
			t.Fatalf("%q: %v", bs, err)
		}
		back, err := ParseCheckinsFile(b)
		if err != nil || strings.Join(back, "|") != strings.Join(bs, "|") || back == nil {
			t.Errorf("%q: %q reads back as %q, %v", bs, b, back, err)
		}
	}
	for _, bad := range []string{"trunk", "trunk\n\n", "\n", "trunk\ntrunk\n", "tr\x00unk\n"} {
		if bs, err := ParseCheckinsFile([]byte(bad)); err == nil {
			t.Errorf("%q read as %q", bad, bs)
		}
	}
}

func FuzzParseCheckinsFile(f *testing.F) {
	f.Add([]byte(""))
	f.Add([]byte("trunk\n"))
	f.Add([]byte("feature\ntrunk\n"))
	f.Add([]byte("trunk\ntrunk\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		bs, err := ParseCheckinsFile(data)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		enc, err := CheckinsFileContent(bs)
		if err != nil || !bytes.Equal(enc, data) {
			t.Fatalf("%q reads as %q, which writes %q (%v)", data, bs, enc, err)
		}
	})
}
