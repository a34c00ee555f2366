// Package validate compiles docs/design's schemas and validates documents
// against them: the tests' and the tools' check that what they write is
// what the documentation shows. It is apart from package design so that a
// program that only reads a schema links no validator (whose package init
// compiles its meta-schemas: 3 ms at every start of ocx).
package validate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/ocx-go/ocx/docs/design"
)

// Schemas is every schema of docs/design, compiled.
type Schemas struct {
	byFile map[string]*jsonschema.Schema
}

var load = sync.OnceValues(compile)

// Load compiles the embedded schemas once and returns them.
func Load() (*Schemas, error) { return load() }

func compile() (*Schemas, error) {
	names, err := fs.Glob(design.FS(), "*.schema.json")
	if err != nil {
		return nil, fmt.Errorf("list schemas: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	// Formats such as date-time are only annotations in 2020-12 unless asked.
	c.AssertFormat = true
	for _, n := range names {
		b, err := fs.ReadFile(design.FS(), n)
		if err != nil {
			return nil, fmt.Errorf("read schema %s: %w", n, err)
		}
		if err := c.AddResource(design.BaseURL+n, bytes.NewReader(b)); err != nil {
			return nil, fmt.Errorf("add schema %s: %w", n, err)
		}
	}
	s := &Schemas{byFile: make(map[string]*jsonschema.Schema, len(names))}
	for _, n := range names {
		sch, err := c.Compile(design.BaseURL + n)
		if err != nil {
			return nil, fmt.Errorf("compile schema %s: %w", n, err)
		}
		s.byFile[n] = sch
	}
	return s, nil
}

// Files lists the compiled schemas' file names, sorted.
func (s *Schemas) Files() []string {
	out := make([]string, 0, len(s.byFile))
	for n := range s.byFile {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Schema returns the compiled schema of a file, or nil.
func (s *Schemas) Schema(file string) *jsonschema.Schema { return s.byFile[file] }

// Validate checks a JSON document against the schema of a file. Duplicate keys
// are beyond a schema's reach; the messages package refuses them.
func (s *Schemas) Validate(file string, doc []byte) error {
	sch := s.byFile[file]
	if sch == nil {
		return fmt.Errorf("validate against %s: no such schema", file)
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("validate against %s: %w", file, err)
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("validate against %s: %w", file, err)
	}
	return nil
}

// ValidateNote checks a note's JSON against the schema its "ocx" names.
func (s *Schemas) ValidateNote(doc []byte) error {
	var head struct {
		OCX any `json:"ocx"`
	}
	if err := json.Unmarshal(doc, &head); err != nil {
		return fmt.Errorf("validate note: %w", err)
	}
	kind, ok := head.OCX.(string)
	if !ok || kind == "" || strings.ContainsAny(kind, "/.") || kind == "common" {
		return fmt.Errorf("validate note: \"ocx\" is %v, not a kind of note", head.OCX)
	}
	return s.Validate(design.SchemaFile(kind), doc)
}

// ValidateMessage checks a run engine message's JSON ("ocx": 1) against the
// schema its "kind" names.
func (s *Schemas) ValidateMessage(doc []byte) error {
	var head struct {
		Kind any `json:"kind"`
	}
	if err := json.Unmarshal(doc, &head); err != nil {
		return fmt.Errorf("validate message: %w", err)
	}
	kind, ok := head.Kind.(string)
	if !ok || (kind != "run" && kind != "stop" && kind != "started" && kind != "ended" && kind != "fired") {
		return fmt.Errorf("validate message: \"kind\" is %v, not a run engine kind", head.Kind)
	}
	return s.Validate(design.MessageSchemaFile(kind), doc)
}
