// Package design embeds OCX's JSON Schemas and docs/design/notes.md, so that
// tools and tests validate against the very files the documentation shows.
package design

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

//go:embed *.schema.json notes.md examples/*.json
var files embed.FS

// BaseURL is the $id prefix of every schema; relative $refs resolve against it.
const BaseURL = "https://github.com/ocx-go/ocx/docs/design/"

// FS holds the schema files and notes.md.
func FS() fs.FS { return files }

// Notes returns docs/design/notes.md.
func Notes() []byte {
	b, err := files.ReadFile("notes.md")
	if err != nil {
		// The file is embedded at build time; a build without it does not compile.
		panic(fmt.Sprintf("design: notes.md not embedded: %v", err))
	}
	return b
}

// Example returns docs/design/examples/NAME: a message as the seeds write
// it (seed 004, section 14's runs), for the docs and the tests to share.
func Example(name string) string {
	b, err := files.ReadFile("examples/" + name)
	if err != nil {
		panic(fmt.Sprintf("design: no example %s: %v", name, err))
	}
	return strings.TrimSuffix(string(b), "\n")
}

// SchemaFile names the schema of a note kind ("ocx" value) or of the state.
// The seeds name the two definitions' schemas; every other is KIND.schema.json.
func SchemaFile(kind string) string {
	switch kind {
	case "workspace":
		return "workspace-definition.schema.json"
	case "session":
		return "session-definition.schema.json"
	}
	return kind + ".schema.json"
}

// ToolSchemaFile names the schema of a protocol v1 tool's input.
func ToolSchemaFile(tool string) string { return "tool-" + tool + ".schema.json" }

// ToolSchema returns a tool's input schema as the file holds it, or nil.
func ToolSchema(tool string) []byte {
	b, err := files.ReadFile(ToolSchemaFile(tool))
	if err != nil {
		return nil
	}
	return b
}

// Schemas is every schema of docs/design, compiled.
type Schemas struct {
	byFile map[string]*jsonschema.Schema
}

var load = sync.OnceValues(compile)

// Load compiles the embedded schemas once and returns them.
func Load() (*Schemas, error) { return load() }

func compile() (*Schemas, error) {
	names, err := fs.Glob(files, "*.schema.json")
	if err != nil {
		return nil, fmt.Errorf("list schemas: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	// Formats such as date-time are only annotations in 2020-12 unless asked.
	c.AssertFormat = true
	for _, n := range names {
		b, err := files.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("read schema %s: %w", n, err)
		}
		if err := c.AddResource(BaseURL+n, bytes.NewReader(b)); err != nil {
			return nil, fmt.Errorf("add schema %s: %w", n, err)
		}
	}
	s := &Schemas{byFile: make(map[string]*jsonschema.Schema, len(names))}
	for _, n := range names {
		sch, err := c.Compile(BaseURL + n)
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
	return s.Validate(SchemaFile(kind), doc)
}

// MessageSchemaFile names the schema of a run engine message's kind (seed
// 004): run.schema.json, and run-KIND.schema.json for stop, started and
// ended. A protocol v1 record has no schema file.
func MessageSchemaFile(kind string) string {
	if kind == "run" {
		return "run.schema.json"
	}
	return "run-" + kind + ".schema.json"
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
	if !ok || (kind != "run" && kind != "stop" && kind != "started" && kind != "ended") {
		return fmt.Errorf("validate message: \"kind\" is %v, not a run engine kind", head.Kind)
	}
	return s.Validate(MessageSchemaFile(kind), doc)
}
