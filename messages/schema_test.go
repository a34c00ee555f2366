package messages

import (
	"encoding/json"
	"io/fs"
	"sort"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/docs/design"
	"github.com/ocx-go/ocx/docs/design/validate"
	"github.com/ocx-go/ocx/messages/strictjson"
	"pgregory.net/rapid"
)

// schemaKeys collects the key paths a schema names ("sandbox.read_only",
// "sessions.*.pid"), following $ref into common.schema.json and through allOf
// and if/then/else. A property whose schema is false (a limit-bearing key the
// note refuses) is left out: no value may carry it.
func schemaKeys(t *testing.T, docs map[string]map[string]any, node any, prefix string, out map[string]bool, depth int) {
	if depth > 20 {
		t.Fatalf("schema nests too deep at %s", prefix)
	}
	m, ok := node.(map[string]any)
	if !ok {
		return
	}
	if ref, ok := m["$ref"].(string); ok {
		file, ptr, _ := strings.Cut(ref, "#")
		doc := docs[file]
		if doc == nil {
			t.Fatalf("unresolved $ref %s", ref)
		}
		var target any = doc
		for _, p := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
			if p == "" {
				continue
			}
			target = target.(map[string]any)[p]
		}
		schemaKeys(t, docs, target, prefix, out, depth+1)
	}
	if props, ok := m["properties"].(map[string]any); ok {
		for k, v := range props {
			if b, isBool := v.(bool); isBool && !b {
				continue
			}
			out[strictjson.JoinField(prefix, k)] = true
			schemaKeys(t, docs, v, strictjson.JoinField(prefix, k), out, depth+1)
		}
	}
	if add, ok := m["additionalProperties"].(map[string]any); ok {
		out[strictjson.JoinField(prefix, "*")] = true
		schemaKeys(t, docs, add, strictjson.JoinField(prefix, "*"), out, depth+1)
	}
	if items, ok := m["items"]; ok {
		schemaKeys(t, docs, items, strictjson.JoinField(prefix, "*"), out, depth+1)
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		if subs, ok := m[k].([]any); ok {
			for _, s := range subs {
				schemaKeys(t, docs, s, prefix, out, depth+1)
			}
		}
	}
	for _, k := range []string{"if", "then", "else"} {
		if sub, ok := m[k]; ok {
			schemaKeys(t, docs, sub, prefix, out, depth+1)
		}
	}
}

// instanceKeys collects the key paths of a JSON value.
func instanceKeys(v any, prefix string, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			out[strictjson.JoinField(prefix, k)] = true
			instanceKeys(e, strictjson.JoinField(prefix, k), out)
		}
	case []any:
		for _, e := range x {
			instanceKeys(e, strictjson.JoinField(prefix, "*"), out)
		}
	}
}

func loadSchemaDocs(t *testing.T) map[string]map[string]any {
	docs := map[string]map[string]any{}
	names, err := fs.Glob(design.FS(), "*.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		b, err := fs.ReadFile(design.FS(), n)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		docs[n] = m
	}
	return docs
}

// TestSchemaKeysMatchGo fails when a schema names a key the Go type never
// writes, or the Go type writes a key its schema does not name: the schemas
// allow unknown keys at the top (E9), so validation alone would not notice.
func TestSchemaKeysMatchGo(t *testing.T) {
	docs := loadSchemaDocs(t)
	check := func(t *testing.T, file string, draw func(*rapid.T) []byte) {
		want := map[string]bool{}
		schemaKeys(t, docs, docs[file], "", want, 0)
		got := map[string]bool{}
		rapid.Check(t, func(rt *rapid.T) {
			var v any
			if err := json.Unmarshal(draw(rt), &v); err != nil {
				rt.Fatal(err)
			}
			instanceKeys(v, "", got)
		})
		var extra, unseen []string
		for k := range got {
			if !want[k] {
				extra = append(extra, k)
			}
		}
		for k := range want {
			if !got[k] {
				unseen = append(unseen, k)
			}
		}
		sort.Strings(extra)
		sort.Strings(unseen)
		if len(extra) > 0 {
			t.Errorf("%s: Go writes keys the schema does not name: %v", file, extra)
		}
		if len(unseen) > 0 {
			t.Errorf("%s: the schema names keys Go never wrote: %v", file, unseen)
		}
	}
	for _, kind := range noteKinds() {
		t.Run(string(kind), func(t *testing.T) {
			check(t, design.SchemaFile(string(kind)), func(rt *rapid.T) []byte {
				enc, err := genNote(kind).Draw(rt, "note").Encode()
				if err != nil {
					rt.Fatal(err)
				}
				return unfence(rt, enc)
			})
		})
	}
	for _, kind := range []MessageKind{MsgRun, MsgStop, MsgStarted, MsgEnded} {
		t.Run("message_"+string(kind), func(t *testing.T) {
			check(t, design.MessageSchemaFile(string(kind)), func(rt *rapid.T) []byte {
				enc, err := genMessage(kind).Draw(rt, "message").Encode()
				if err != nil {
					rt.Fatal(err)
				}
				return freeKeys(rt, unfence(rt, enc), "process.env", "values")
			})
		})
	}
	t.Run("response", func(t *testing.T) {
		check(t, design.SchemaFile(responseKind), func(rt *rapid.T) []byte {
			enc, err := genResponse().Draw(rt, "response").Encode()
			if err != nil {
				rt.Fatal(err)
			}
			return unfence(rt, enc)
		})
	})
	t.Run("state", func(t *testing.T) {
		check(t, design.SchemaFile(string(kindState)), func(rt *rapid.T) []byte {
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
	for _, k := range []MessageKind{MsgRun, MsgStop, MsgStarted, MsgEnded} {
		known[design.MessageSchemaFile(string(k))] = true
	}
	s, err := validate.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range s.Files() {
		if strings.HasPrefix(f, "tool-") {
			continue // messages/toolio's TestToolSchemaFilesAreKnown
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
