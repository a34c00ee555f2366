package runmsg

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/docs/design"
	"github.com/ocx-go/ocx/docs/design/validate"
	"pgregory.net/rapid"
)

// TestSchemaKeysMatchGo fails when a message schema names a key the Go type
// never writes, or the Go type writes a key its schema does not name.
func TestSchemaKeysMatchGo(t *testing.T) {
	for _, kind := range []MessageKind{MsgRun, MsgStop, MsgStarted, MsgEnded, MsgFired} {
		t.Run("message_"+string(kind), func(t *testing.T) {
			file := design.MessageSchemaFile(string(kind))
			written := map[string]bool{}
			rapid.Check(t, func(rt *rapid.T) {
				enc, err := genMessage(kind).Draw(rt, "message").Encode()
				if err != nil {
					rt.Fatal(err)
				}
				keys, err := validate.DocKeys(freeKeys(rt, unfence(rt, enc), "process.env", "values"))
				if err != nil {
					rt.Fatal(err)
				}
				for k := range keys {
					written[k] = true
				}
			})
			extra, unseen, err := validate.CompareKeys(file, written)
			if err != nil {
				t.Fatal(err)
			}
			if len(extra) > 0 {
				t.Errorf("%s: Go writes keys the schema does not name: %v", file, extra)
			}
			if len(unseen) > 0 {
				t.Errorf("%s: the schema names keys Go never wrote: %v", file, unseen)
			}
		})
	}
}

// TestSchemaFilesAreKnown: each kind of message has its schema file, and
// each run message schema file is a kind's (messages' own test leaves
// run.schema.json and run-* to this one).
func TestSchemaFilesAreKnown(t *testing.T) {
	known := map[string]bool{}
	for _, k := range []MessageKind{MsgRun, MsgStop, MsgStarted, MsgEnded, MsgFired} {
		known[design.MessageSchemaFile(string(k))] = true
	}
	s, err := validate.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range s.Files() {
		if f != design.MessageSchemaFile("run") && !strings.HasPrefix(f, "run-") {
			continue
		}
		if !known[f] {
			t.Errorf("%s belongs to no kind of message", f)
		}
		delete(known, f)
	}
	for f := range known {
		t.Errorf("no schema file %s", f)
	}
}

// freeKeys renames the keys of the objects at the given paths (an object
// of text, such as process.env) to "*", as their schema names them.
func freeKeys(t *rapid.T, doc []byte, paths ...string) []byte {
	var v map[string]any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		parts := strings.Split(p, ".")
		m := v
		for _, k := range parts[:len(parts)-1] {
			m, _ = m[k].(map[string]any)
		}
		last := parts[len(parts)-1]
		if obj, ok := m[last].(map[string]any); ok && len(obj) > 0 {
			for _, e := range obj {
				m[last] = map[string]any{"*": e}
				break
			}
		}
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
