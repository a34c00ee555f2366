package pipe

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages/strictjson"
)

func TestWakeLines(t *testing.T) {
	for _, ok := range []WakeLine{
		{Post: h64},
		{Post: h64, From: "alice"},
		{Post: h40, From: "Pat Q. Public"}, // Fossil holds logins with spaces
		{Post: h64, From: "agent-1"},
	} {
		b, err := ok.Encode()
		if err != nil {
			t.Fatalf("%v: %v", ok, err)
		}
		back, err := ParseWakeLine(b)
		if err != nil || back != ok {
			t.Errorf("%q reads back as %+v, %v", b, back, err)
		}
		if back2, err := ParseWakeLine(bytes.TrimSuffix(b, []byte("\n"))); err != nil || back2 != ok {
			t.Errorf("%q without its newline reads as %+v, %v", b, back2, err)
		}
	}
	for _, bad := range []struct {
		line, field string
		err         error
	}{
		{"", "post", strictjson.ErrMissing},
		{"nothex", "post", strictjson.ErrInvalid},
		{h64[:20], "post", strictjson.ErrInvalid},
		{h64 + " ", "from", strictjson.ErrSyntax},
		{h64 + "  alice", "from", strictjson.ErrInvalid},
		{h64 + " alice ", "from", strictjson.ErrInvalid},
		{h64 + " al\x01ice", "from", strictjson.ErrInvalid},
		{h64 + " al\xffice", "from", strictjson.ErrInvalid},
		{h64 + " " + strings.Repeat("a", pipeBuf), "", strictjson.ErrTooLong},
		{h64 + " alice\nbob", "from", strictjson.ErrInvalid},
	} {
		_, err := ParseWakeLine([]byte(bad.line))
		var fe *strictjson.FieldError
		if !errors.As(err, &fe) || !errors.Is(err, bad.err) || fe.Field != bad.field || !strings.Contains(err.Error(), "wake line") {
			t.Errorf("%q: %v (field %q), want %v naming %q", bad.line, err, fieldOf(err), bad.err, bad.field)
		}
	}
}

func FuzzParseWakeLine(f *testing.F) {
	f.Add([]byte(h64))
	f.Add([]byte(h64 + " alice\n"))
	f.Add([]byte(h40 + " Pat Q. Public"))
	f.Add([]byte(h64 + " "))
	f.Add([]byte(h64 + "  x"))
	f.Fuzz(func(t *testing.T, line []byte) {
		l, err := ParseWakeLine(line)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		enc, err := l.Encode()
		if err != nil {
			t.Fatalf("accepted %+v but cannot encode it: %v", l, err)
		}
		want := line
		if !bytes.HasSuffix(want, []byte("\n")) {
			want = append(bytes.Clone(want), '\n')
		}
		if !bytes.Equal(enc, want) {
			t.Fatalf("%q re-encodes as %q", line, enc)
		}
	})
}
