package messages

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/docs/design"
	"github.com/ocx-go/ocx/docs/design/validate"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// Fuzz targets, one per decoder. Each checks that the decoder never panics,
// that a refusal is a *FieldError whose message is one bounded line, and that
// what it accepts re-encodes canonically and reads back unchanged. The note
// decoders also check that the schema accepts whatever the Go reader accepts,
// so the two cannot drift apart on any input the fuzzer finds. The seed corpus
// is every example of notes.md and every hostile input of the tables.

// docSeeds returns the bodies of the fenced blocks of notes.md with an info
// string among infos.
func docSeeds(f *testing.F, infos ...string) []string {
	_, blocks := parseDoc(f, string(design.Notes()))
	var out []string
	for _, b := range blocks {
		for _, i := range infos {
			if b.info == i {
				out = append(out, b.body)
			}
		}
	}
	if len(out) == 0 {
		f.Fatalf("notes.md has no %v blocks", infos)
	}
	return out
}

func checkRefusal(t *testing.T, err error) {
	t.Helper()
	var fe *strictjson.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %T is not a *FieldError: %v", err, err)
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\n\r") || len(msg) > 4096 {
		t.Fatalf("error message is not one bounded line (%d bytes): %q", len(msg), msg)
	}
}

func FuzzDecodeNote(f *testing.F) {
	for _, s := range docSeeds(f, "json", "json-accepted", "json-refused") {
		f.Add([]byte(s))
	}
	for _, h := range hostileNotes {
		f.Add([]byte(h.block))
	}
	schemas, err := validate.Load()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := decodeNote(data)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		if serr := schemas.ValidateNote(data); serr != nil {
			t.Fatalf("the Go reader accepts what the schema refuses:\n%s\n%v", data, serr)
		}
		enc, err := n.Encode()
		if err != nil {
			t.Fatalf("accepted %v but cannot encode it: %v", n, err)
		}
		again, err := decodeNote(unfence(t, enc))
		if err != nil || !reflect.DeepEqual(again, n) {
			t.Fatalf("re-encoded note reads back as %v, %v; was %v", again, err, n)
		}
		if strings.ContainsAny(n.String(), "\n\r") {
			t.Fatalf("String spans lines: %q", n.String())
		}
	})
}

func FuzzReadPost(f *testing.F) {
	for _, s := range docSeeds(f, "post") {
		f.Add(s)
	}
	for _, s := range docSeeds(f, "json") {
		f.Add("Words.\n\n```json\n" + s + "\n```\n")
	}
	f.Add("OCX stop")
	f.Add("```text\n```json\n{}\n```\n")
	f.Add("```json\n{\"ocx\": \"stop\"}\n```\n```json\n{\"ocx\": \"stop\"}\n```\n")
	schemas, err := validate.Load()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string) {
		n, err := ReadPost([]byte(text))
		if err != nil {
			checkRefusal(t, err)
			return
		}
		enc, err := n.Encode()
		if err != nil {
			t.Fatalf("accepted %v but cannot encode it: %v", n, err)
		}
		if serr := schemas.ValidateNote(unfence(t, enc)); serr != nil {
			t.Fatalf("the schema refuses the encoding of an accepted note: %s: %v", enc, serr)
		}
		again, err := ReadPost(enc)
		if err != nil || !reflect.DeepEqual(again, n) {
			t.Fatalf("re-encoded note reads back as %v, %v; was %v", again, err, n)
		}
	})
}

func FuzzDecodeState(f *testing.F) {
	for _, s := range docSeeds(f, "json") {
		if strings.Contains(s, `"ocx": "state"`) {
			f.Add([]byte(s))
		}
	}
	f.Add([]byte(`{"ocx": "state", "hooks": [], "logins": [], "workspaces": [], "sessions": [], "listeners": []}`))
	f.Add([]byte(`{"ocx": "state", "version": 2, "hooks": [], "logins": [], "workspaces": [], "sessions": [], "listeners": []}`))
	f.Add([]byte(`{"ocx": "state", "hooks": [], "logins": [], "workspaces": [], "sessions": [], "listeners": [], "daemon": {"running": false}}`))
	f.Add([]byte(`{"ocx": "state", "hooks": [], "logins": [], "workspaces": [], "sessions": [], "listeners": [], "daemon": {"running": true, "pid": 42, "release": "3f2a9c", "reexec": {"at": "2026-12-01T10:00:00Z", "pid": 42, "target": "/var/lib/ocx/release/releases/3f2a9c/ocxd", "release": "3f2a9c", "ok": true}}}`))
	f.Add([]byte(`{"ocx": "state", "hooks": [], "logins": [], "workspaces": [], "sessions": [], "listeners": [], "daemon": {"running": true, "pid": 42, "reexec": {"at": "2026-12-01T10:00:00Z", "pid": 42, "ok": false, "error": "ask it for its hand-off version: exit status 1"}}}`))
	f.Add([]byte(`{"ocx": "state", "hooks": [], "logins": [], "workspaces": [], "sessions": [], "listeners": [], "daemon": {"running": true, "pid": 43, "release": "3f2a9c", "reexec": {"at": "2026-12-01T10:00:00Z", "pid": 42, "target": "/var/lib/ocx/release/releases/7c41/ocxd", "release": "7c41", "from": "3f2a9c", "ok": false, "state": "rolled_back", "error": "release 7c41 was rolled back to 3f2a9c: its daemon ended before it recorded its outcome"}}}`))
	f.Add([]byte(`{"ocx": "state", "hooks": [], "logins": [], "workspaces": [], "sessions": [], "listeners": [], "daemon": {"running": false, "pid": 42}}`))
	f.Add([]byte(`{"ocx": "state", "hooks": [], "logins": [], "workspaces": [], "sessions": [], "listeners": [], "look_alikes": [{"login": "u0", "project": "p", "pid": 7, "start_time": 9, "command": "bwrap -c", "why": "its command line names 330 workspaces", "claims": 330}], "look_alikes_left_out": 12}`))
	f.Add([]byte(`{"ocx": "state", "hooks": [], "logins": [], "workspaces": [], "sessions": [], "listeners": [], "look_alikes": [{"login": "u0", "project": "p", "pid": 7, "start_time": 9, "command": "bwrap -c", "why": "w", "claims": 1}]}`))
	schemas, err := validate.Load()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeState(data)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		if serr := schemas.Validate(design.SchemaFile(string(kindState)), data); serr != nil {
			t.Fatalf("the Go reader accepts what the schema refuses:\n%s\n%v", data, serr)
		}
		enc, err := s.Encode()
		if err != nil {
			t.Fatalf("accepted but cannot encode: %v", err)
		}
		again, err := DecodeState(enc)
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("re-encoded state reads back as %v, %v", again, err)
		}
	})
}

func FuzzParseCITag(f *testing.F) {
	for _, s := range docSeeds(f, "ci-tag", "ci-tag-refused") {
		for _, l := range strings.Split(s, "\n") {
			f.Add(l)
		}
	}
	f.Add("red: a: b")
	f.Fuzz(func(t *testing.T, v string) {
		tag, err := parseCITag(v)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		if tag.String() != v {
			t.Fatalf("%q renders as %q", v, tag.String())
		}
	})
}

func FuzzParseListeningFile(f *testing.F) {
	f.Add("branch-release%2F2.0", []byte("branch\n"))
	f.Add("branch-100%25 done", []byte("branch\n"))
	f.Add(h40, []byte("ticket\n"))
	f.Add(h64, []byte("thread\n"))
	f.Add("branch-%2f", []byte("branch\n"))
	f.Add(h64, []byte("thread 4711\n"))
	f.Add(h64, []byte("thread 0\n"))
	f.Add(h64, []byte("thread 007\n"))
	f.Add(h40, []byte("ticket 1 2\n"))
	f.Fuzz(func(t *testing.T, name string, content []byte) {
		e, err := ParseListeningFile(name, content)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		back, err := ListeningFileName(e.Kind, e.Names)
		if err != nil || back != name || !bytes.Equal(ListeningFileContent(e.Kind, e.After), content) {
			t.Fatalf("%q %q reads as %+v, which names %q (%v)", name, content, e, back, err)
		}
	})
}

func FuzzParseWorkspaceKey(f *testing.F) {
	f.Add("ci-ocx/ollama")
	f.Add("../x/y")
	f.Add("nobody/ollama")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseWorkspaceKey(s)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		if k.String() != s {
			t.Fatalf("%q renders as %q", s, k.String())
		}
	})
}
