package protocol

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages"
)

var testSpawned = Spawned{Workspace: messages.WorkspaceKey{Login: "ana", Project: "demo"}, Launch: strings.Repeat("3f", 20), Proc: ProcID{PID: 4242, Start: 918273}, Release: "/srv/ocx/releases/r7"}

// TestSpawnedRoundTrip: a spawned record reads back as written; a field
// missing or at fault, a key twice, something after the object, and bytes
// past the bound are refused, naming what is wrong; a key it does not know
// is passed over.
func TestSpawnedRoundTrip(t *testing.T) {
	b, err := testSpawned.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"workspace":"ana/demo","launch":"`+testSpawned.Launch+`","proc":{"pid":4242,"start":918273},"release":"/srv/ocx/releases/r7"}`+"\n" {
		t.Errorf("encoded: %s", b)
	}
	if got, err := DecodeSpawned(b); err != nil || got != testSpawned {
		t.Fatalf("read back: %+v %v", got, err)
	}
	if got, err := DecodeSpawned([]byte(`{"workspace":"ana/demo","launch":"` + testSpawned.Launch + `","proc":{"pid":4242,"start":918273},"release":"/srv/ocx/releases/r7","later":1}`)); err != nil || got != testSpawned {
		t.Errorf("a key it does not know: %+v %v", got, err)
	}
	for _, c := range []struct{ in, want string }{
		{`{"launch":"` + testSpawned.Launch + `","proc":{"pid":1,"start":2}}`, "workspace"},
		{`{"workspace":"ana/demo","proc":{"pid":1,"start":2}}`, "launch"},
		{`{"workspace":"ana/demo","launch":"3f3f","proc":{"pid":1,"start":2}}`, "launch"},
		{`{"workspace":"ana/demo","launch":"` + testSpawned.Launch + `","proc":{"pid":1,"start":0}}`, "start"},
		{`{"workspace":"ana/demo","launch":"` + testSpawned.Launch + `","proc":{"pid":-1,"start":2}}`, "pid"},
		{`{"workspace":"../x","launch":"` + testSpawned.Launch + `","proc":{"pid":1,"start":2}}`, "workspace"},
		{`{"workspace":"ana/demo","workspace":"bob/demo","launch":"` + testSpawned.Launch + `","proc":{"pid":1,"start":2}}`, "workspace"},
		{string(b) + `{}`, "after"},
		{`{"workspace":"ana/demo","launch":"` + testSpawned.Launch + `","proc":{"pid":1,"start":2},"release":"r7"}`, "release"},
		{`{"workspace":"ana/demo","launch":"` + testSpawned.Launch + `","proc":{"pid":1,"start":2},"release":"/a/../b"}`, "release"},
		{`[]`, "spawned"},
		{`{"workspace":"` + strings.Repeat("a", 5000) + `"}`, "bytes"},
	} {
		if _, err := DecodeSpawned([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("DecodeSpawned(%.60q) = %v, want an error naming %q", c.in, err, c.want)
		}
	}
	if _, err := (Spawned{Workspace: testSpawned.Workspace, Launch: testSpawned.Launch}).Encode(); err == nil {
		t.Errorf("a record naming no process encodes")
	}
}

// FuzzDecodeSpawned: the reader never panics, and what it reads encodes
// and reads back to the same bytes.
func FuzzDecodeSpawned(f *testing.F) {
	b, _ := testSpawned.Encode()
	for _, s := range []string{string(b), `{}`, `[]`, `{"proc":null}`, `{"workspace":"ana/demo","launch":"x","proc":{"pid":1,"start":1}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeSpawned(data)
		if err != nil {
			return
		}
		enc, err := s.Encode()
		if err != nil {
			t.Fatalf("a record that reads does not encode: %v (%+v)", err, s)
		}
		back, err := DecodeSpawned(enc)
		if err != nil || back != s {
			t.Fatalf("its encoding does not read back: %+v %v\n%s", back, err, enc)
		}
		if again, _ := back.Encode(); !bytes.Equal(again, enc) {
			t.Fatalf("not stable:\n%s\n%s", enc, again)
		}
	})
}
