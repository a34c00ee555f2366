package messages

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/ocx-go/ocx/docs/design"
	"github.com/ocx-go/ocx/docs/design/validate"
)

// seedWorkspace is seed 000's workspace definition in canonical form (15
// read-only paths, one read-write, four PATH entries).
func seedWorkspace(b *testing.B) []byte {
	d := &WorkspaceDefinition{Login: "ci-ocx", Project: "ollama", Branch: "ocx", Sandbox: Sandbox{Network: true,
		ReadOnly: []string{"/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc/ssl", "/etc/pki", "/etc/ca-certificates",
			"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/passwd", "/etc/group", "/opt", "/var/lib/ocx/release/current"},
		ReadWrite: []string{"/var/lib/ocx/agents/ci-ocx/projects/ollama"}, Homes: []string{},
		Path: []string{"/var/lib/ocx/release/current", "/usr/local/bin", "/usr/bin", "/bin"}}}
	enc, err := d.Encode()
	if err != nil {
		b.Fatal(err)
	}
	return enc
}

// BenchmarkDecodeWorkspaceDefinition: the Go reader, strict parse and
// validation of every field, from the block's JSON.
func BenchmarkDecodeWorkspaceDefinition(b *testing.B) {
	body := unfence(b, seedWorkspace(b))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeNote(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnmarshalWorkspaceDefinition is what a reader would do with
// encoding/json alone (unknown keys refused, no duplicate-key, UTF-8 or
// field checks), beside the Go reader's two passes and Validate.
func BenchmarkUnmarshalWorkspaceDefinition(b *testing.B) {
	body := unfence(b, seedWorkspace(b))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var d struct {
			WorkspaceDefinition
			OCX string `json:"ocx"`
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadPostWorkspaceDefinition adds finding the block in a post.
func BenchmarkReadPostWorkspaceDefinition(b *testing.B) {
	post := append([]byte("The workspace for the arm64 port.\n\n"), seedWorkspace(b)...)
	b.SetBytes(int64(len(post)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadPost(post); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSchemaValidateWorkspaceDefinition: the JSON Schema, for comparison
// (encoding/json's decode included, as a tool validating input would do).
func BenchmarkSchemaValidateWorkspaceDefinition(b *testing.B) {
	body := unfence(b, seedWorkspace(b))
	schemas, err := validate.Load()
	if err != nil {
		b.Fatal(err)
	}
	file := design.SchemaFile(string(KindWorkspace))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := schemas.Validate(file, body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeWorkspaceDefinition(b *testing.B) {
	n, err := decodeNote(unfence(b, seedWorkspace(b)))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := n.Encode(); err != nil {
			b.Fatal(err)
		}
	}
}
