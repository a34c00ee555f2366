package runmsg

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/ocx-go/ocx/docs/design/validate"
	"github.com/ocx-go/ocx/messages"
)

// FuzzReadMessage: the run engine's reader never panics; a refusal is a
// bounded one-line *FieldError (a malformed message's too); a message it
// accepts the schema accepts, and it re-encodes canonically and reads
// back the same.
func FuzzReadMessage(f *testing.F) {
	for _, s := range []string{seedEcho, seedClaude,
		`{"ocx": 1, "kind": "stop", "node": "lab-1", "run": "` + testRunHash + `"}`,
		`{"ocx": 1, "kind": "started", "node": "lab-1", "run": "` + testRunHash + `", "values": {"root": "/r"}, "limits": {"wall": "1h", "memory": 65536}}`,
		`{"ocx": 1, "kind": "ended", "node": "lab-1", "run": "` + testRunHash + `", "outcome": "exited", "exit": 137}`,
		`{"ocx": 1, "kind": "ended", "node": "lab-1", "run": "` + testRunHash + `", "outcome": "refused", "note": "row 1"}`,
		`{"ocx": 1, "kind": "run", "node": "n", "objective": "x", "workspace": [{"step": "shell"}], "process": {"user": "u", "command": ["x"], "keep": {"stderr": "1K", "stdout": 10}}}`,
		`{"ocx": 1, "kind": "run", "node": "n", "objective": "x", "process": {"user": "u", "command": ["x"], "keep": {"mask": ["pw", "tok-$$run$$", "a*b"], "match": "^(ERROR|FATAL)\\b"}}}`,
		`{"ocx": 1, "kind": "run", "node": "n", "objective": "x", "workspace": [{"step": "directory", "at": "/w"}, {"step": "command", "run": ["make", "$$workspace$$"], "in": "$$workspace$$/t"}], "process": {"user": "u", "command": ["x"]}}`,
		`{"ocx": 1, "kind": "run", "node": "n", "objective": "x", "process": {"user": "u", "command": ["x"], "on": {"checkin": ["trunk", "dev"]}}}`,
		`{"ocx": 1, "kind": "run", "node": "n", "objective": "x", "process": {"user": "u", "command": ["x"], "on": {"schedule": "*/5 1-3 * * MON"}}}`,
		`{"ocx": 1, "kind": "fired", "node": "lab-1", "run": "` + testRunHash + `", "checkin": "` + testRunHash + `"}`,
		`{"ocx": 1, "kind": "fired", "node": "lab-1", "run": "` + testRunHash + `", "at": "2026-12-08T00:05:00Z"}`,
		`{"ocx": 2, "kind": "run"}`, `{"ocx": 1, "kind": "nope"}`, `{"ocx": "stop"}`,
	} {
		f.Add([]byte("```json\n" + s + "\n```\n"))
	}
	schemas, err := validate.Load()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		m, err := ReadMessage(text)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		if m.Kind() == MsgRecord {
			return
		}
		b, _, _ := messages.NoteBlock(text)
		if err := schemas.ValidateMessage(b.JSON); err != nil {
			t.Fatalf("Go accepts what the schema refuses: %v\n%s", err, b.JSON)
		}
		if r, ok := m.(*Run); ok {
			for _, s := range r.Workspace {
				if !s.KnownStep() {
					return // row 3 refuses it; no writer writes it
				}
			}
			_ = CheckRunValues(r, nil)
			_ = RunRefusal(r, nil, RefusalFacts{SenderPrivileged: true})
		}
		enc, err := m.Encode()
		if err != nil {
			t.Fatalf("accepted but does not encode: %v", err)
		}
		back, err := ReadMessage(enc)
		if err != nil {
			t.Fatalf("its encoding does not read back: %v\n%s", err, enc)
		}
		if !reflect.DeepEqual(normMessage(back), normMessage(m)) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", back, m)
		}
		if again, _ := back.Encode(); !bytes.Equal(again, enc) {
			t.Fatalf("not canonical:\n%s\n%s", enc, again)
		}
	})
}

// FuzzExpandValues: the values scanner finds exactly what section 2's
// regular expression finds, a string naming no value expands to itself,
// and an unset name is reported, never dropped.
func FuzzExpandValues(f *testing.F) {
	for _, s := range []string{"", "$", "$$", "$$$$", "${HOME}", "$$a$$", "$$$a$$", "$$a$$b$$", "x$$root$$/$$user$$/y", "$$é$$"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want []string
		for _, m := range valueRef.FindAllStringSubmatch(s, -1) {
			want = append(want, m[1])
		}
		if got := valueRefs(s); !reflect.DeepEqual(got, want) {
			t.Fatalf("ValueRefs(%q) = %q, regexp %q", s, got, want)
		}
		if len(want) == 0 {
			if got, _, ok := expandString(s, RunValues{"a": "b"}); !ok || got != s {
				t.Fatalf("ExpandString(%q) = %q", s, got)
			}
			return
		}
		if _, missing, ok := expandString(s, RunValues{}); ok || missing != want[0] {
			t.Fatalf("ExpandString(%q) with nothing set: missing %q, ok %v", s, missing, ok)
		}
		vals := RunValues{}
		for _, n := range want {
			vals[n] = "<" + n + ">"
		}
		if got, _, ok := expandString(s, vals); !ok || got != valueRef.ReplaceAllString(s, "<$1>") {
			t.Fatalf("ExpandString(%q) = %q", s, got)
		}
	})
}
