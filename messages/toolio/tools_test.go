package toolio

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/docs/design"
	"github.com/ocx-go/ocx/docs/design/validate"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// toolCases are inputs each tool's decoder and its schema must agree on:
// want "" accepts; otherwise both refuse, and the decoder's error names want.
var toolCases = []struct {
	tool, in, want string
}{
	{ToolCreate, `{"objective": "Keep docs in step.", "budget": {"wall": "2h"}}`, ""},
	{ToolCreate, `{"user": "claude-91c0de", "runner": "native", "objective": "o", "checkins": ["trunk"], "hears": ["pat"], "remote": false,
		"restrict": {"no_password": true, "branch": "docs-sync", "own_thread": true},
		"sandbox": {"network": true, "read_only": ["/srv/data"], "read_write": []}, "budget": {"wall": "45m"}, "dry_run": true}`, ""},
	{ToolCreate, `{"objective": "o", "budget": {"wall": "2h"}, "model": "sonnet"}`, ""},
	{ToolCreate, `{"objective": "o", "budget": {"wall": "2h"}, "model": "a\nb"}`, "model"},
	{ToolCreate, `{"objective": "o", "budget": {"wall": "2h"}, "mode": "x"}`, "mode: is not a field of create"},
	{ToolCreate, `{"objective": "o"}`, "budget: is missing"},
	{ToolCreate, `{"budget": {"wall": "2h"}}`, "objective: is missing"},
	{ToolCreate, `{"objective": "o", "budget": {"wall": "2h", "tokens": 100}}`, ""},
	{ToolCreate, `{"objective": "o", "budget": {"wall": "2h", "tokens": 0}}`, "budget.tokens"},
	{ToolCreate, `{"objective": "o", "budget": {"wall": "2h", "tokens": "100"}}`, "budget.tokens"},
	{ToolCreate, `{"objective": "o", "budget": {"wall": "2h", "cpu": 100}}`, "budget.cpu"},
	{ToolCreate, `{"objective": "o", "budget": {"tokens": 100}}`, "budget.wall: is missing"},
	{ToolCreate, `{"objective": "o", "budget": {"wall": "2 hours"}}`, "budget.wall"},
	{ToolCreate, `{"objective": "o", "budget": {"wall": "0h"}}`, "budget.wall"},
	{ToolCreate, `{"objective": "o", "budget": {"wall": "2h"}, "restrict": {"no_network": true}}`, "restrict.no_network"},
	{ToolCreate, `{"objective": "o", "budget": {"wall": "2h"}, "restrict": {"branch": "b"}}`, "restrict.branch: needs restrict.no_password"},
	{ToolCreate, `{"objective": "o", "budget": {"wall": "2h"}, "restrict": {"own_thread": true}}`, "restrict.own_thread: needs restrict.no_password"},
	{ToolCreate, `{"objective": "o", "budget": {"wall": "2h"}, "sandbox": {"network": true, "read_only": [], "read_write": [], "gpu": true}}`, "sandbox.gpu"},
	{ToolCreate, `{"objective": "o", "budget": {"wall": "2h"}, "sandbox": {"network": true, "read_only": ["rel/path"], "read_write": []}}`, "sandbox.read_only[0]"},
	{ToolCreate, `{"objective": "o", "budget": {"wall": "2h"}, "sandbox": {"network": true, "read_only": []}}`, "sandbox.read_write: is missing"},
	{ToolCreate, `{"objective": "o", "budget": {"wall": "2h"}, "runner": "gpt"}`, "runner"},
	{ToolCreate, `{"objective": "o", "budget": {"wall": "2h"}, "user": "nobody"}`, "user"},
	{ToolCreate, `{"objective": "o", "budget": {"wall": "2h"}, "checkins": ["trunk", "trunk"]}`, "checkins[1]"},
	{ToolCreate, `{"objective": "o", "budget": {"wall": "2h"}, "hears": ["*", "pat"]}`, "hears[0]"},
	{ToolCreate, `{"objective": "   ", "budget": {"wall": "2h"}}`, "objective"},
	{ToolCreate, `{"objective": "o", "budget": {"wall": "2h"}, "dry_run": "yes"}`, "dry_run: must be true or false"},
	{ToolPost, `{"to": "0123456789", "text": "hello"}`, ""},
	{ToolPost, `{"to": "0123456789abcdef0123456789abcdef01234567", "text": "hello\n\nworld", "dry_run": false}`, ""},
	{ToolPost, `{"to": "012345678", "text": "hello"}`, "to: \"012345678\" is 9 characters"},
	{ToolPost, `{"to": "0123456789xyz", "text": "hello"}`, "to: "},
	{ToolPost, `{"to": "0123456789", "text": ""}`, "text"},
	{ToolPost, `{"to": "0123456789", "text": "hi", "title": "t"}`, "title: is not a field of post"},
	{ToolPost, `{"text": "hi"}`, "to: is missing"},
	{ToolPost, `["to"]`, "a tool's input is a JSON object"},
	{ToolAudit, `{"checkin": "abcdef0123", "verdict": "pass", "reason": "every command is documented", "against": "PLAN.md"}`, ""},
	{ToolAudit, `{"checkin": "abcdef0123", "verdict": "fail", "reason": "r", "against": "abcdef0123456"}`, ""},
	{ToolAudit, `{"checkin": "abcdef0123", "verdict": "fail", "reason": "r", "against": "docs/PLAN.md"}`, ""},
	{ToolAudit, `{"checkin": "abcdef0123", "verdict": "maybe", "reason": "r", "against": "PLAN.md"}`, "verdict"},
	{ToolAudit, `{"checkin": "abcdef0123", "verdict": "pass", "reason": "two\nlines", "against": "PLAN.md"}`, "reason"},
	{ToolAudit, `{"checkin": "abcdef0123", "verdict": "pass", "reason": "r", "against": "/etc/passwd"}`, "against"},
	{ToolAudit, `{"checkin": "abcdef0123", "verdict": "pass", "reason": "r", "against": "../PLAN.md"}`, "against"},
	{ToolAudit, `{"checkin": "abcdef0123", "verdict": "pass", "reason": "r", "against": "a//b"}`, "against"},
	{ToolAudit, `{"checkin": "abc", "verdict": "pass", "reason": "r", "against": "PLAN.md"}`, "checkin"},
	{ToolAudit, `{"checkin": "abcdef0123", "verdict": "pass", "reason": "r"}`, "against: is missing"},
	{ToolPush, `{}`, ""},
	{ToolPush, `{"dry_run": true}`, ""},
	{ToolPush, `{"branch": "trunk"}`, "branch: is not a field of push"},
	{ToolStop, `{"record": "abcdef0123"}`, ""},
	{ToolStop, `{"record": "abcdef0123", "reason": "done"}`, "reason: is not a field of stop"},
	{ToolStop, `{}`, "record: is missing"},
	{ToolStop, `{"record": "abcdef0123", "record": "abcdef0124"}`, "appears twice"},
}

// TestToolDecodersAgreeWithSchemas: each case is accepted by both the
// decoder and the tool's schema, or refused by both, and the decoder's
// refusal names the field at fault.
func TestToolDecodersAgreeWithSchemas(t *testing.T) {
	s, err := validate.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range toolCases {
		_, derr := DecodeTool(c.tool, []byte(c.in))
		serr := s.Validate(design.ToolSchemaFile(c.tool), []byte(c.in))
		if strings.Contains(c.in, `"record": "abcdef0123", "record"`) {
			serr = errors.New("a duplicate key is beyond a schema") // encoding/json keeps the last
		}
		switch {
		case c.want == "" && (derr != nil || serr != nil):
			t.Errorf("%s %s: want it accepted; decoder: %v; schema: %v", c.tool, c.in, derr, serr)
		case c.want != "" && (derr == nil || serr == nil):
			t.Errorf("%s %s: want it refused (%s); decoder: %v; schema: %v", c.tool, c.in, c.want, derr, serr)
		case c.want != "" && !strings.Contains(derr.Error(), c.want):
			t.Errorf("%s %s: refused with %q, which does not say %q", c.tool, c.in, derr, c.want)
		}
		var fe *strictjson.FieldError
		if derr != nil && !errors.As(derr, &fe) {
			t.Errorf("%s %s: %v is not a *FieldError", c.tool, c.in, derr)
		}
	}
}

func TestToolFieldsMatchSchemas(t *testing.T) {
	for _, name := range ToolNames {
		a, err := DecodeTool(name, []byte(map[string]string{
			ToolCreate: `{"objective": "o", "budget": {"wall": "1h"}}`, ToolPost: `{"to": "0123456789", "text": "t"}`,
			ToolAudit: `{"checkin": "0123456789", "verdict": "pass", "reason": "r", "against": "A"}`, ToolPush: `{}`, ToolStop: `{"record": "0123456789"}`}[name]))
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(design.ToolSchema(name), &doc); err != nil {
			t.Fatalf("%s: %v", design.ToolSchemaFile(name), err)
		}
		props := doc["properties"].(map[string]any)
		fields := toolFields(a)
		if len(props) != len(fields) {
			t.Errorf("%s: the schema names %d fields, the decoder %d (%v)", name, len(props), len(fields), fields)
		}
		for _, f := range fields {
			if props[f] == nil {
				t.Errorf("%s: the schema does not name %s", name, f)
			}
		}
	}
}

func FuzzCreateArgs(f *testing.F) { fuzzTool(f, ToolCreate) }

func FuzzPostArgs(f *testing.F) { fuzzTool(f, ToolPost) }

func FuzzAuditArgs(f *testing.F) { fuzzTool(f, ToolAudit) }

func FuzzPushArgs(f *testing.F) { fuzzTool(f, ToolPush) }

func FuzzStopArgs(f *testing.F) { fuzzTool(f, ToolStop) }

// fuzzTool: a decoder never panics, refuses with a *FieldError, and what it
// accepts its schema accepts too.
func fuzzTool(f *testing.F, tool string) {
	for _, c := range toolCases {
		if c.tool == tool {
			f.Add([]byte(c.in))
		}
	}
	s, err := validate.Load()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := DecodeTool(tool, data)
		if err != nil {
			var fe *strictjson.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("%v is not a *FieldError", err)
			}
			return
		}
		if a.ToolName() != tool {
			t.Fatalf("decoded a %s input", a.ToolName())
		}
		if len(strings.TrimSpace(string(data))) > 0 && !strings.Contains(string(data), `\u`) {
			if serr := s.Validate(design.ToolSchemaFile(tool), data); serr != nil {
				t.Fatalf("the decoder accepted what the schema refuses: %v", serr)
			}
		}
	})
}

// TestToolSchemaFilesAreKnown: each tool has its schema file, and each tool
// schema file is a tool's (messages' TestSchemaFilesAreKnown leaves tool-*
// files to this test).
func TestToolSchemaFilesAreKnown(t *testing.T) {
	known := map[string]bool{}
	for _, tool := range ToolNames {
		known[design.ToolSchemaFile(tool)] = true
	}
	s, err := validate.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range s.Files() {
		if !strings.HasPrefix(f, "tool-") {
			continue
		}
		if !known[f] {
			t.Errorf("%s belongs to no tool", f)
		}
		delete(known, f)
	}
	for f := range known {
		t.Errorf("no schema file %s", f)
	}
}
