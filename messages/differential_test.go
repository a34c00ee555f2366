package messages

import (
	"bytes"
	"encoding/json"
	"sort"
	"testing"

	"github.com/ocx-go/ocx/docs/design"
	"github.com/ocx-go/ocx/docs/design/validate"
	"pgregory.net/rapid"
)

// mutants are the values a mutation puts in place of a field: edges of every
// rule (empty, too long, wrong type, a neighbour enum value, a path not clean).
var mutants = []any{
	"", " ", "x", "/", "/x/", "tmp", "..", "a/b", "a b", "\u0000", "a\nb", "\t", "é",
	"SIGTERM", "SIG", "TERM", "SIGRTMIN+03", "nobody", "current", "previous", "latest",
	"thread", "ticket", "branch", "exited", "signaled", "unknown", "sandbox-failed",
	"green", "red", "none", "done", "failed", "request", "signal", "daemon", "orphan",
	"mechanical", "llm", "claude", "completes", "stays", "no-reader", "no-pipe", "ended",
	"active", "idle", "missing", "terminated", "working", "ijk", "ii",
	"2026-01-01T00:00:00Z", "2026-01-01T00:00:00.5Z", "2026-01-01T00:00:00+00:00",
	h40, h64, h64[:63], "/srv/a.fossil", "/srv/a b.fossil",
	json.Number("0"), json.Number("1"), json.Number("-1"), json.Number("1.5"), json.Number("2"),
	json.Number("255"), json.Number("256"), json.Number("4194304"), json.Number("4194305"),
	json.Number("9007199254740991"), json.Number("9007199254740992"), json.Number("1e3"),
	true, false, nil, []any{}, []any{""}, []any{"x"}, []any{"/a", "/a"}, map[string]any{},
}

// leaves lists the paths into a parsed JSON tree: object keys and list indexes.
type step struct {
	key   string
	index int
}

func paths(v any, prefix []step, out *[][]step) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := append(append([]step(nil), prefix...), step{key: k, index: -1})
			*out = append(*out, p)
			paths(x[k], p, out)
		}
	case []any:
		for i, e := range x {
			p := append(append([]step(nil), prefix...), step{index: i})
			*out = append(*out, p)
			paths(e, p, out)
		}
	}
}

// fresh copies a mutant, so that no two places of a tree (nor two checks)
// share one list or object: a mutation of one must not reach the other.
func fresh(v any) any {
	switch x := v.(type) {
	case []any:
		c := make([]any, len(x))
		for i, e := range x {
			c[i] = fresh(e)
		}
		return c
	case map[string]any:
		c := make(map[string]any, len(x))
		for k, e := range x {
			c[k] = fresh(e)
		}
		return c
	}
	return v
}

// mutate changes the tree at path: replace the value, delete the key, or add
// a key beside it.
func mutate(t *rapid.T, root any, path []step) {
	parent := root
	for _, s := range path[:len(path)-1] {
		if s.index >= 0 {
			parent = parent.([]any)[s.index]
		} else {
			parent = parent.(map[string]any)[s.key]
		}
	}
	last := path[len(path)-1]
	op := rapid.IntRange(0, 5).Draw(t, "op")
	if m, ok := parent.(map[string]any); ok {
		switch op {
		case 0:
			delete(m, last.key)
			return
		case 1:
			m[rapid.SampledFrom([]string{"extra", "budget", "limits", "restrict", "sandbox", "memory", "version", "ocx"}).Draw(t, "key")] = fresh(rapid.SampledFrom(mutants).Draw(t, "value"))
			return
		}
		m[last.key] = fresh(rapid.SampledFrom(mutants).Draw(t, "value"))
		return
	}
	parent.([]any)[last.index] = fresh(rapid.SampledFrom(mutants).Draw(t, "value"))
}

// TestGoAcceptsOnlyWhatTheSchemaAccepts: one field of a valid note, mutated;
// whenever the Go reader still accepts it, so must the schema. (The schema may
// refuse more only where it cannot express a rule the other way round; it is
// the Go reader that may refuse more: duplicate keys, two homes with one name.)
func TestGoAcceptsOnlyWhatTheSchemaAccepts(t *testing.T) {
	schemas, err := validate.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range append(noteKinds(), kindState) {
		t.Run(string(kind), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				var doc []byte
				if kind == kindState {
					enc, err := genState().Draw(t, "state").Encode()
					if err != nil {
						t.Fatal(err)
					}
					doc = enc
				} else {
					enc, err := genNote(kind).Draw(t, "note").Encode()
					if err != nil {
						t.Fatal(err)
					}
					doc = unfence(t, enc)
				}
				dec := json.NewDecoder(bytes.NewReader(doc))
				dec.UseNumber()
				var tree any
				if err := dec.Decode(&tree); err != nil {
					t.Fatal(err)
				}
				var ps [][]step
				paths(tree, nil, &ps)
				for range rapid.IntRange(1, 3).Draw(t, "mutations") {
					ps = ps[:0]
					paths(tree, nil, &ps)
					if len(ps) == 0 {
						break
					}
					mutate(t, tree, rapid.SampledFrom(ps).Draw(t, "path"))
				}
				mutated, err := json.Marshal(tree)
				if err != nil {
					t.Fatal(err)
				}
				var goErr error
				if kind == kindState {
					_, goErr = DecodeState(mutated)
				} else {
					_, goErr = decodeNote(mutated)
				}
				if goErr != nil {
					return
				}
				// A mutated "ocx" may make it another kind: the schema is the one
				// its "ocx" names, as for any note read.
				validate := schemas.ValidateNote
				if kind == kindState {
					validate = func(doc []byte) error { return schemas.Validate(design.SchemaFile(string(kindState)), doc) }
				}
				if serr := validate(mutated); serr != nil {
					t.Fatalf("the Go reader accepts what the schema refuses:\n%s\n%v", mutated, serr)
				}
			})
		})
	}
}
