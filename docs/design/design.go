// Package design embeds OCX's JSON Schemas and docs/design/notes.md, so that
// tools and tests validate against the very files the documentation shows.
// Compiling them is design/validate's: a program that only reads a schema
// (the tools offer their input schemas) does not link a validator.
package design

import (
	"embed"
	"fmt"
	"io/fs"
	"strings"
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

// MessageSchemaFile names the schema of a run engine message's kind (seed
// 004): run.schema.json, and run-KIND.schema.json for stop, started and
// ended. A protocol v1 record has no schema file.
func MessageSchemaFile(kind string) string {
	if kind == "run" {
		return "run.schema.json"
	}
	return "run-" + kind + ".schema.json"
}
