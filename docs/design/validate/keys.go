package validate

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/ocx-go/ocx/docs/design"
)

// keys lists the key paths a schema file names ("sandbox.read_only",
// "sessions.*.pid"), following $ref into other files and through allOf,
// anyOf, oneOf and if/then/else; a list's items and an object's other
// properties are "*". A property whose schema is false (a key the document
// refuses) is left out: no value may carry it. The tests hold it against
// DocKeys of what the Go types write, as validation alone would not notice
// a key one side names and the other never writes.
func keys(file string) (map[string]bool, error) {
	docs := map[string]map[string]any{}
	names, err := fs.Glob(design.FS(), "*.schema.json")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		b, err := fs.ReadFile(design.FS(), n)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		docs[n] = m
	}
	if docs[file] == nil {
		return nil, fmt.Errorf("no schema file %s", file)
	}
	out := map[string]bool{}
	return out, schemaKeys(docs, docs[file], "", out, 0)
}

func schemaKeys(docs map[string]map[string]any, node any, prefix string, out map[string]bool, depth int) error {
	if depth > 20 {
		return fmt.Errorf("schema nests too deep at %s", prefix)
	}
	m, ok := node.(map[string]any)
	if !ok {
		return nil
	}
	walk := func(sub any, prefix string) error { return schemaKeys(docs, sub, prefix, out, depth+1) }
	if ref, ok := m["$ref"].(string); ok {
		file, ptr, _ := strings.Cut(ref, "#")
		doc := docs[file]
		if doc == nil {
			return fmt.Errorf("unresolved $ref %s", ref)
		}
		var target any = doc
		for _, p := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
			if p == "" {
				continue
			}
			target = target.(map[string]any)[p]
		}
		if err := walk(target, prefix); err != nil {
			return err
		}
	}
	if props, ok := m["properties"].(map[string]any); ok {
		for k, v := range props {
			if b, isBool := v.(bool); isBool && !b {
				continue
			}
			out[joinKey(prefix, k)] = true
			if err := walk(v, joinKey(prefix, k)); err != nil {
				return err
			}
		}
	}
	if add, ok := m["additionalProperties"].(map[string]any); ok {
		out[joinKey(prefix, "*")] = true
		if err := walk(add, joinKey(prefix, "*")); err != nil {
			return err
		}
	}
	if items, ok := m["items"]; ok {
		if err := walk(items, joinKey(prefix, "*")); err != nil {
			return err
		}
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		if subs, ok := m[k].([]any); ok {
			for _, s := range subs {
				if err := walk(s, prefix); err != nil {
					return err
				}
			}
		}
	}
	for _, k := range []string{"if", "then", "else"} {
		if sub, ok := m[k]; ok {
			if err := walk(sub, prefix); err != nil {
				return err
			}
		}
	}
	return nil
}

// DocKeys lists the key paths of a JSON document, as keys names them.
func DocKeys(doc []byte) (map[string]bool, error) {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	docKeys(v, "", out)
	return out, nil
}

func docKeys(v any, prefix string, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			out[joinKey(prefix, k)] = true
			docKeys(e, joinKey(prefix, k), out)
		}
	case []any:
		for _, e := range x {
			docKeys(e, joinKey(prefix, "*"), out)
		}
	}
}

func joinKey(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

// CompareKeys holds the key paths documents were seen to write (DocKeys)
// against those the schema file names (keys): extra are written but not
// named, unseen named but never written; both sorted.
func CompareKeys(file string, written map[string]bool) (extra, unseen []string, err error) {
	named, err := keys(file)
	if err != nil {
		return nil, nil, err
	}
	for k := range written {
		if !named[k] {
			extra = append(extra, k)
		}
	}
	for k := range named {
		if !written[k] {
			unseen = append(unseen, k)
		}
	}
	sort.Strings(extra)
	sort.Strings(unseen)
	return extra, unseen, nil
}
