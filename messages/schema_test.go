package messages

import (
	"strings"
	"testing"

	"github.com/ocx-go/ocx/docs/design"
	"github.com/ocx-go/ocx/docs/design/validate"
	"pgregory.net/rapid"
)

// TestSchemaKeysMatchGo fails when a schema names a key the Go type never
// writes, or the Go type writes a key its schema does not name: the schemas
// allow unknown keys at the top (E9), so validation alone would not notice.
func TestSchemaKeysMatchGo(t *testing.T) {
	for _, kind := range noteKinds() {
		t.Run(string(kind), func(t *testing.T) {
			checkSchemaKeys(t, design.SchemaFile(string(kind)), func(rt *rapid.T) []byte {
				enc, err := genNote(kind).Draw(rt, "note").Encode()
				if err != nil {
					rt.Fatal(err)
				}
				return unfence(rt, enc)
			})
		})
	}
	t.Run("response", func(t *testing.T) {
		checkSchemaKeys(t, design.SchemaFile(responseKind), func(rt *rapid.T) []byte {
			enc, err := genResponse().Draw(rt, "response").Encode()
			if err != nil {
				rt.Fatal(err)
			}
			return unfence(rt, enc)
		})
	})
	t.Run("state", func(t *testing.T) {
		checkSchemaKeys(t, design.SchemaFile(string(kindState)), func(rt *rapid.T) []byte {
			enc, err := genState().Draw(rt, "state").Encode()
			if err != nil {
				rt.Fatal(err)
			}
			return enc
		})
	})
}

// TestSchemaFilesAreKnown fails on a schema file no kind uses, so a schema
// cannot be added (or left behind) without its Go type.
func TestSchemaFilesAreKnown(t *testing.T) {
	known := map[string]bool{"common.schema.json": true, design.SchemaFile(string(kindState)): true, design.SchemaFile(responseKind): true}
	for _, k := range noteKinds() {
		known[design.SchemaFile(string(k))] = true
	}
	s, err := validate.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range s.Files() {
		if strings.HasPrefix(f, "tool-") || f == design.MessageSchemaFile("run") || strings.HasPrefix(f, "run-") {
			continue // messages/toolio's and messages/runmsg's
		}
		if !known[f] {
			t.Errorf("%s belongs to no kind of note", f)
		}
		delete(known, f)
	}
	for f := range known {
		t.Errorf("no schema file %s", f)
	}
}

// checkSchemaKeys fails when the schema file names a key the documents
// draw writes never write, or they write a key it does not name.
func checkSchemaKeys(t *testing.T, file string, draw func(*rapid.T) []byte) {
	written := map[string]bool{}
	rapid.Check(t, func(rt *rapid.T) {
		keys, err := validate.DocKeys(draw(rt))
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
}
