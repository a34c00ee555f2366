package messages

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/docs/design"
	"github.com/ocx-go/ocx/docs/design/validate"
	"pgregory.net/rapid"
)

// unfence returns the JSON of a canonical block.
func unfence(t interface{ Fatalf(string, ...any) }, block []byte) []byte {
	body, ok := bytes.CutPrefix(block, []byte("```json\n"))
	body, ok2 := bytes.CutSuffix(body, []byte("\n```\n"))
	if !ok || !ok2 {
		t.Fatalf("not a canonical block: %q", block)
	}
	return body
}

// TestNoteRoundTrip checks decode(encode(x)) == x for every kind of note, that
// the encoding is valid under the kind's schema, that it reads the same from a
// post among other words, and that String is one stable line.
func TestNoteRoundTrip(t *testing.T) {
	schemas, err := validate.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range noteKinds() {
		t.Run(string(kind), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				n := genNote(kind).Draw(t, "note")
				if err := n.Validate(); err != nil {
					t.Fatalf("generated an invalid note: %v", err)
				}
				enc, err := n.Encode()
				if err != nil {
					t.Fatalf("encode %v: %v", n, err)
				}
				got, err := decodeNote(unfence(t, enc))
				if err != nil {
					t.Fatalf("decode %s: %v", enc, err)
				}
				if !reflect.DeepEqual(got, n) {
					t.Fatalf("round trip changed the note:\n have %#v\n want %#v", got, n)
				}
				post, err := ReadPost([]byte("Before.\r\n\r\n" + strings.ReplaceAll(string(enc), "\n", "\r\n") + "\r\nAfter ```json in a line.\r\n"))
				if err != nil || !reflect.DeepEqual(post, n) {
					t.Fatalf("as a CRLF post: %v, %v", post, err)
				}
				if err := schemas.Validate(design.SchemaFile(string(kind)), unfence(t, enc)); err != nil {
					t.Fatalf("the schema refuses the Go encoding %s: %#v", enc, err)
				}
				s := n.String()
				if strings.ContainsAny(s, "\n\r") || !strings.HasPrefix(s, string(kind)) || s != got.String() {
					t.Fatalf("String is not one stable line: %q vs %q", s, got.String())
				}
				again, err := got.Encode()
				if err != nil || !bytes.Equal(again, enc) {
					t.Fatalf("encoding is not canonical: %s then %s", enc, again)
				}
			})
		})
	}
}

func TestStateRoundTrip(t *testing.T) {
	schemas, err := validate.Load()
	if err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(t *rapid.T) {
		s := genState().Draw(t, "state")
		enc, err := s.Encode()
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		got, err := DecodeState(enc)
		if err != nil {
			t.Fatalf("decode %s: %v", enc, err)
		}
		if !reflect.DeepEqual(got, s) {
			t.Fatalf("round trip changed the state:\n have %#v\n want %#v", got, s)
		}
		// Its framing holds, and fails once it is cut short (D70).
		if err := CheckStateDoc(enc); err != nil {
			t.Fatalf("the framing of %s: %v", enc, err)
		}
		cut := rapid.IntRange(0, len(enc)-1).Draw(t, "cut")
		if err := CheckStateDoc(enc[:cut]); err == nil {
			t.Fatalf("a document cut at %d of %d passes: %q", cut, len(enc), enc[:cut])
		}
		if err := schemas.Validate(design.SchemaFile(string(kindState)), enc); err != nil {
			t.Fatalf("the schema refuses the Go encoding %s: %#v", enc, err)
		}
		if strings.Contains(s.String(), "\n") {
			t.Fatalf("String spans lines: %q", s.String())
		}
	})
}

// TestReexecOutcomeRoundTrip: AGENTS/ocxd.reexec reads back as written, in
// one canonical encoding; an outcome whose error does not match its ok is
// refused both ways.
func TestReexecOutcomeRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := genReexecOutcome().Draw(t, "outcome")
		enc, err := r.Encode()
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		got, err := DecodeReexecOutcome(enc)
		if err != nil {
			t.Fatalf("decode %s: %v", enc, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip changed the outcome:\n have %#v\n want %#v", got, r)
		}
		if again, err := got.Encode(); err != nil || !bytes.Equal(again, enc) {
			t.Fatalf("encoding is not canonical: %s then %s", enc, again)
		}
		if strings.Contains(r.String(), "\n") {
			t.Fatalf("String spans lines: %q", r.String())
		}
		bad := *r
		if bad.OK {
			bad.Error = "but it failed"
		} else {
			bad.Error = ""
		}
		if _, err := bad.Encode(); err == nil {
			t.Fatalf("%v encoded: ok and error disagree", &bad)
		}
	})
	for _, doc := range []string{
		`{"ocx": "reexec", "at": "2026-12-01T10:00:00Z", "pid": 42, "ok": false}`,
		`{"ocx": "reexec", "at": "2026-12-01T10:00:00Z", "pid": 42, "ok": true, "error": "x"}`,
		`{"ocx": "reexec", "at": "2026-12-01T10:00:00+01:00", "pid": 42, "ok": true}`,
		`{"ocx": "reexec", "at": "2026-12-01T10:00:00Z", "pid": 0, "ok": true}`,
		`{"ocx": "reexec", "at": "2026-12-01T10:00:00Z", "pid": 42, "ok": true, "target": "ocxd"}`,
		`{"ocx": "state", "at": "2026-12-01T10:00:00Z", "pid": 42, "ok": true}`,
		`{"ocx": "reexec", "at": "2026-12-01T10:00:00Z", "pid": 42, "ok": true, "state": "pending"}`,
		`{"ocx": "reexec", "at": "2026-12-01T10:00:00Z", "pid": 42, "ok": false, "error": "x", "state": "gone"}`,
		`{"ocx": "reexec", "at": "2026-12-01T10:00:00Z", "pid": 42, "ok": false, "error": "x", "state": ""}`,
		`{"ocx": "reexec", "at": "2026-12-01T10:00:00Z", "pid": 42, "ok": true, "from": ""}`,
	} {
		if r, err := DecodeReexecOutcome([]byte(doc)); err == nil {
			t.Errorf("%s read as %v", doc, r)
		}
	}
}

func TestCITagRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tag := genCITag().Draw(t, "tag")
		v, err := tag.Value()
		if err != nil {
			t.Fatalf("value of %#v: %v", tag, err)
		}
		got, err := parseCITag(v)
		if err != nil || got != tag {
			t.Fatalf("%q reads back as %#v, %v", v, got, err)
		}
	})
}

func TestListeningFileRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := genListener().Draw(t, "listener")
		name, err := ListeningFileName(l.Kind, l.Names)
		if err != nil {
			if l.Kind == ListenBranch && strings.Contains(err.Error(), "a file name is at most 255") {
				return // many '/' or '%' in a long name: refused, as documented
			}
			t.Fatalf("file name of %v: %v", l, err)
		}
		if strings.ContainsRune(name, '/') || name == "." || name == ".." || len(name) > maxFileNameLen {
			t.Fatalf("%q is not a file name", name)
		}
		after := rapid.Int64Range(0, 1<<62).Draw(t, "after")
		e, err := ParseListeningFile(name, ListeningFileContent(l.Kind, after))
		if err != nil || e.Kind != l.Kind || e.Names != l.Names || e.After != after {
			t.Fatalf("%q reads back as %+v, %v", name, e, err)
		}
	})
}

func TestWorkspaceKeyRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := WorkspaceKey{Login: genLogin().Draw(t, "login"), Project: genName().Draw(t, "project")}
		got, err := ParseWorkspaceKey(k.String())
		if err != nil || got != k {
			t.Fatalf("%q reads back as %v, %v", k, got, err)
		}
	})
}

// TestHookStatusLine: `ocx status` prints each hook on one line, with the
// mark and Fossil's embargo when there are.
func TestHookStatusLine(t *testing.T) {
	mark := uint64(4182)
	until := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		h    HookStatus
		want string
	}{
		{HookStatus{Project: "demo", Repository: "/srv/demo.fossil", Installed: false},
			"hook demo repository=/srv/demo.fossil installed=false newest=0"},
		{HookStatus{Project: "demo", Repository: "/srv/demo.fossil", Installed: true, Newest: 4190, Mark: &mark, HeldUntil: &until},
			"hook demo repository=/srv/demo.fossil installed=true newest=4190 mark=4182 held_until=2026-11-30T14:00:00Z"},
	} {
		if got := c.h.String(); got != c.want {
			t.Errorf("%+v renders %q, want %q", c.h, got, c.want)
		}
	}
}

// The look-alikes' counts (D78): a look-alike claiming one workspace says
// nothing of it, one claiming more counts them all; the processes left
// out are counted once. Each refused naming the field.
func TestStateLookAlikeCounts(t *testing.T) {
	const head = `{"ocx": "state", "hooks": [], "logins": [], "workspaces": [], "sessions": [], "listeners": [], `
	la := func(claims string) string {
		return `"look_alikes": [{"login": "u0", "project": "p", "pid": 7, "start_time": 9, "command": "bwrap", "why": "w"` + claims + `}]`
	}
	s, err := DecodeState([]byte(head + la(`, "claims": 20000`) + `, "look_alikes_left_out": 3}`))
	if err != nil || s.LookAlikes[0].Claims != 20000 || s.LookAlikesLeftOut != 3 {
		t.Fatalf("DecodeState = %+v, %v", s, err)
	}
	if !strings.HasSuffix(s.LookAlikes[0].String(), " claims=20000") {
		t.Errorf("String = %q", s.LookAlikes[0].String())
	}
	for doc, field := range map[string]string{
		head + la(`, "claims": 1`) + `}`:                  "look_alikes[0].claims",
		head + la(`, "claims": -2`) + `}`:                 "look_alikes[0].claims",
		head + la(``) + `, "look_alikes_left_out": -1}`:   "look_alikes_left_out",
		head + la(``) + `, "look_alikes_left_out": "12"}`: "look_alikes_left_out",
		head + la(`, "claims": 2.5`) + `}`:                "look_alikes[0].claims",
	} {
		if _, err := DecodeState([]byte(doc)); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("DecodeState(%s) = %v; want it refused naming %s", doc, err, field)
		}
	}
}
