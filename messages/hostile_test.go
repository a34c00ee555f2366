package messages

import (
	"errors"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/docs/design"
	"github.com/ocx-go/ocx/docs/design/validate"
	"github.com/ocx-go/ocx/messages/strictjson"
	"github.com/santhosh-tekuri/jsonschema/v5"
)

const (
	h64 = "93b653f3e69fdc88a716e5e3428a4947e7af5d21926850ad9673c8469d94913d"
	h40 = "a9f7f290053f573c5e19492705598fcd9dd10dc8"
)

// ws builds a workspace definition's JSON around a sandbox body.
func ws(top, sandbox string) string {
	return `{"ocx": "workspace", "login": "ci-ocx", "project": "ollama", "branch": "ocx"` + top +
		`, "sandbox": {` + sandbox + `}}`
}

const okSandbox = `"network": true, "read_only": ["/usr"], "read_write": ["/srv/w"], "homes": [], "path": ["/usr/bin"]`

// hostileNotes are blocks every reader must refuse, each with the sentinel, the
// field the error must name, and words the message must hold. schema says
// whether a JSON Schema can see the fault too; then its error must point at the
// same place (the field as a JSON pointer).
var hostileNotes = []struct {
	name    string
	block   string
	err     error
	field   string
	words   string
	schema  bool
	schemaF string // the schema's location when it differs from field: a parent, "." for the root
}{
	{"unknown sandbox key", ws("", okSandbox+`, "memory": "4G"`), strictjson.ErrUnknownKey, "sandbox.memory", "may be a limit", true, "sandbox"},
	{"unknown sandbox key first of two", ws("", okSandbox+`, "zz": 1, "cpu": 2`), strictjson.ErrUnknownKey, "sandbox.cpu", "whole block is refused", true, "sandbox"},
	{"relative path in read_write", ws("", `"network": true, "read_only": [], "read_write": ["/srv/w", "tmp"], "homes": [], "path": []`), strictjson.ErrInvalid, "sandbox.read_write[1]", `"tmp" is not an absolute path`, true, ""},
	{"dot-dot path", ws("", `"network": true, "read_only": ["/a/../b"], "read_write": [], "homes": [], "path": []`), strictjson.ErrInvalid, "sandbox.read_only[0]", "not a clean path", true, ""},
	{"trailing slash", ws("", `"network": true, "read_only": ["/usr/"], "read_write": [], "homes": [], "path": []`), strictjson.ErrInvalid, "sandbox.read_only[0]", "not a clean path", true, ""},
	{"double slash", ws("", `"network": true, "read_only": ["//usr"], "read_write": [], "homes": [], "path": []`), strictjson.ErrInvalid, "sandbox.read_only[0]", "not a clean path", true, ""},
	{"NUL in a path", ws("", `"network": true, "read_only": ["/us\u0000r"], "read_write": [], "homes": [], "path": []`), strictjson.ErrInvalid, "sandbox.read_only[0]", `control character '\x00'`, true, ""},
	{"colon in PATH", ws("", `"network": true, "read_only": [], "read_write": [], "homes": [], "path": ["/usr/bin:/bin"]`), strictjson.ErrInvalid, "sandbox.path[0]", "separates PATH", true, ""},
	{"root as a home", ws("", `"network": true, "read_only": [], "read_write": [], "homes": ["/"], "path": []`), strictjson.ErrInvalid, "sandbox.homes[0]", "no last name", true, ""},
	{"network as a string", ws("", `"network": "yes", "read_only": [], "read_write": [], "homes": [], "path": []`), strictjson.ErrInvalid, "sandbox.network", "must be true or false, not a string", true, ""},
	{"null list", ws("", `"network": true, "read_only": null, "read_write": [], "homes": [], "path": []`), strictjson.ErrInvalid, "sandbox.read_only", "not null", true, ""},
	{"list left out", ws("", `"network": true, "read_only": [], "read_write": [], "path": []`), strictjson.ErrMissing, "sandbox.homes", "even an empty one", true, "sandbox"},
	{"number in a list", ws("", `"network": true, "read_only": ["/usr", 7], "read_write": [], "homes": [], "path": []`), strictjson.ErrInvalid, "sandbox.read_only[1]", "must be a string, not a number", true, ""},
	{"no sandbox", `{"ocx": "workspace", "login": "ci-ocx", "project": "ollama", "branch": "ocx", "tools": ["git"]}`, strictjson.ErrMissing, "sandbox", "not read as an older form", true, "."},
	{"login ../x", `{"ocx": "workspace", "login": "../x", "project": "ollama", "branch": "ocx", "sandbox": {` + okSandbox + `}}`, strictjson.ErrInvalid, "login", `"../x" is not a login`, true, ""},
	{"login with a slash", `{"ocx": "workspace", "login": "a/b", "project": "ollama", "branch": "ocx", "sandbox": {` + okSandbox + `}}`, strictjson.ErrInvalid, "login", `'/' is not allowed`, true, ""},
	{"login nobody", `{"ocx": "workspace", "login": "Nobody", "project": "ollama", "branch": "ocx", "sandbox": {` + okSandbox + `}}`, strictjson.ErrInvalid, "login", "pseudo-users", true, ""},
	{"login too long", `{"ocx": "workspace", "login": "` + strings.Repeat("a", 65) + `", "project": "ollama", "branch": "ocx", "sandbox": {` + okSandbox + `}}`, strictjson.ErrTooLong, "login", "at most 64", true, ""},
	{"project with NUL", `{"ocx": "workspace", "login": "ci", "project": "oll\u0000ama", "branch": "ocx", "sandbox": {` + okSandbox + `}}`, strictjson.ErrInvalid, "project", `'\x00' is not allowed`, true, ""},
	{"empty branch", `{"ocx": "workspace", "login": "ci", "project": "ollama", "branch": "", "sandbox": {` + okSandbox + `}}`, strictjson.ErrMissing, "branch", "is empty", true, ""},
	{"branch with a newline", `{"ocx": "workspace", "login": "ci", "project": "ollama", "branch": "a\nb", "sandbox": {` + okSandbox + `}}`, strictjson.ErrInvalid, "branch", `control character '\n'`, true, ""},
	{"duplicate key", `{"ocx": "workspace", "login": "ci-ocx", "login": "other", "project": "ollama", "branch": "ocx", "sandbox": {` + okSandbox + `}}`, strictjson.ErrDuplicateKey, "login", "appears twice", false, ""},
	{"duplicate key in sandbox", ws("", okSandbox+`, "network": false`), strictjson.ErrDuplicateKey, "sandbox.network", "appears twice", false, ""},
	{"duplicate key by escape", `{"ocx": "stop", "reason": "a", "re\u0061son": "b"}`, strictjson.ErrDuplicateKey, "reason", "appears twice", false, ""},
	{"truncated block", `{"ocx": "workspace", "login": "ci-ocx",`, strictjson.ErrSyntax, "", "truncated", false, ""},
	{"trailing data", `{"ocx": "stop"} {"ocx": "stop"}`, strictjson.ErrSyntax, "", "holds more after its JSON value", false, ""},
	{"invalid UTF-8", "{\"ocx\": \"stop\", \"reason\": \"\xff\"}", strictjson.ErrSyntax, "", "not valid UTF-8", false, ""},
	{"version 2", ws(`, "version": 2`, okSandbox), strictjson.ErrUnknownVersion, "version", "2 is not a version this reader knows", true, ""},
	{"version as a string", ws(`, "version": "1"`, okSandbox), strictjson.ErrInvalid, "version", "must be a whole number", true, ""},
	{"budget on a workspace", ws(`, "budget": {"wall": "2h"}`, okSandbox), strictjson.ErrUnknownKey, "budget", "rather than drop a limit", true, ""},
	{"sandbox on a session", `{"ocx": "session", "kind": "mechanical", "command": ["make"], "lifetime": "stays", "sandbox": {}}`, strictjson.ErrUnknownKey, "sandbox", "has no sandbox", true, ""},
	{"restrict on a launch", `{"ocx": "launch", "login": "a", "project": "b", "workspace": "` + h64 + `", "session": "` + h64 + `", "restrict": {}}`, strictjson.ErrUnknownKey, "restrict", "has no restrict", true, ""},
	{"unknown kind", `{"ocx": "frobnicate"}`, strictjson.ErrUnknownKind, "ocx", `"frobnicate" is not a kind of note`, false, ""},
	{"run-engine message", `{"ocx": 1, "kind": "run"}`, strictjson.ErrRunMessage, "ocx", "run-engine message", false, ""},
	{"no ocx", `{"login": "ci"}`, strictjson.ErrNotANote, "ocx", "not an OCX note", false, ""},
	{"an array", `[{"ocx": "stop"}]`, strictjson.ErrNotANote, "", "a list; a note is a JSON object", false, ""},
	{"mechanical with a runner", `{"ocx": "session", "kind": "mechanical", "command": ["make"], "runner": "claude", "lifetime": "stays"}`, strictjson.ErrInvalid, "runner", "has no runner", true, "."},
	{"llm with a command", `{"ocx": "session", "kind": "llm", "runner": "claude", "model": "m", "command": ["x"], "lifetime": "stays"}`, strictjson.ErrInvalid, "command", "has no command", true, "."},
	{"empty program", `{"ocx": "session", "kind": "mechanical", "command": ["", "x"], "lifetime": "stays"}`, strictjson.ErrInvalid, "command[0]", "names the program", true, ""},
	{"NUL in an argument", `{"ocx": "session", "kind": "mechanical", "command": ["sh", "a\u0000b"], "lifetime": "stays"}`, strictjson.ErrInvalid, "command[1]", "NUL", true, ""},
	{"a stays reviewer", `{"ocx": "session", "kind": "mechanical", "command": ["make"], "lifetime": "stays", "result": "verdict"}`, strictjson.ErrInvalid, "result", "`completes` session", true, "lifetime"},
	{"a result of no kind", `{"ocx": "session", "kind": "mechanical", "command": ["make"], "lifetime": "completes", "result": "score"}`, strictjson.ErrInvalid, "result", "(ci, verdict)", true, ""},
	{"an empty result", `{"ocx": "session", "kind": "mechanical", "command": ["make"], "lifetime": "completes", "result": ""}`, strictjson.ErrInvalid, "result", "leave the key out", true, ""},
	{"uppercase hash", `{"ocx": "launch", "login": "a", "project": "b", "workspace": "` + strings.ToUpper(h64) + `", "session": "` + h64 + `"}`, strictjson.ErrInvalid, "workspace", "not lowercase hex", true, ""},
	{"release latest", `{"ocx": "launch", "login": "a", "project": "b", "workspace": "` + h64 + `", "session": "` + h64 + `", "release": "latest"}`, strictjson.ErrInvalid, "release", "current, previous", true, ""},
	{"empty optional", `{"ocx": "launch", "login": "a", "project": "b", "workspace": "` + h64 + `", "session": "` + h64 + `", "checkin": ""}`, strictjson.ErrInvalid, "checkin", "leave the key out", true, ""},
	{"pid fraction", `{"ocx": "end", "launch": "` + h64 + `", "login": "a", "project": "b", "pid": 1.5, "start_time": 1, "status": "exited", "exit_code": 0, "killed": false, "release": "r", "seen": "2026-01-01T00:00:00Z", "note": "n"}`, strictjson.ErrInvalid, "pid", "not a whole number", true, ""},
	{"pid too big", `{"ocx": "end", "launch": "` + h64 + `", "login": "a", "project": "b", "pid": 99999999, "start_time": 1, "status": "exited", "exit_code": 0, "killed": false, "release": "r", "seen": "2026-01-01T00:00:00Z", "note": "n"}`, strictjson.ErrInvalid, "pid", "from 0 to 4194304", true, ""},
	{"start time past 2^53", `{"ocx": "end", "launch": "` + h64 + `", "login": "a", "project": "b", "pid": 1, "start_time": 9007199254740992, "status": "exited", "exit_code": 0, "killed": false, "release": "r", "seen": "2026-01-01T00:00:00Z", "note": "n"}`, strictjson.ErrInvalid, "start_time", "from 0 to 9007199254740991", true, ""},
	{"exit code 256", `{"ocx": "end", "launch": "` + h64 + `", "login": "a", "project": "b", "pid": 1, "start_time": 1, "status": "exited", "exit_code": 256, "killed": false, "release": "r", "seen": "2026-01-01T00:00:00Z", "note": "n"}`, strictjson.ErrInvalid, "exit_code", "0 to 255", true, ""},
	{"signaled without signal", `{"ocx": "end", "launch": "` + h64 + `", "login": "a", "project": "b", "pid": 1, "start_time": 1, "status": "signaled", "killed": true, "release": "r", "seen": "2026-01-01T00:00:00Z", "note": "n"}`, strictjson.ErrMissing, "signal", "names the signal", true, "."},
	{"killed but exited", `{"ocx": "end", "launch": "` + h64 + `", "login": "a", "project": "b", "pid": 1, "start_time": 1, "status": "exited", "exit_code": 0, "killed": true, "release": "r", "seen": "2026-01-01T00:00:00Z", "note": "n"}`, strictjson.ErrInvalid, "killed", "signaled, not exited", true, "killed"},
	{"result without checkin", `{"ocx": "end", "launch": "` + h64 + `", "login": "a", "project": "b", "pid": 1, "start_time": 1, "status": "exited", "exit_code": 0, "killed": false, "release": "r", "seen": "2026-01-01T00:00:00Z", "result": "green", "note": "n"}`, strictjson.ErrInvalid, "result", "names no checkin", true, "."},
	{"seen not a time", `{"ocx": "end", "launch": "` + h64 + `", "login": "a", "project": "b", "pid": 1, "start_time": 1, "status": "exited", "exit_code": 0, "killed": false, "release": "r", "seen": "yesterday", "note": "n"}`, strictjson.ErrInvalid, "seen", "not a time in UTC", true, ""},
	{"seen with a one-digit hour", `{"ocx": "end", "launch": "` + h64 + `", "login": "a", "project": "b", "pid": 1, "start_time": 1, "status": "exited", "exit_code": 0, "killed": false, "release": "r", "seen": "2000-10-01T0:00:00Z", "note": "n"}`, strictjson.ErrInvalid, "seen", "not a time in UTC", true, ""},
	{"seen with a comma", `{"ocx": "end", "launch": "` + h64 + `", "login": "a", "project": "b", "pid": 1, "start_time": 1, "status": "exited", "exit_code": 0, "killed": false, "release": "r", "seen": "2000-10-01T00:00:00,5Z", "note": "n"}`, strictjson.ErrInvalid, "seen", "not a time in UTC", true, ""},
	{"ticket id of 64", `{"ocx": "listen", "login": "a", "project": "b", "kind": "ticket", "names": "` + h64 + `"}`, strictjson.ErrInvalid, "names", "a ticket id is 40", true, ""},
	{"thread names a branch", `{"ocx": "listen", "login": "a", "project": "b", "kind": "thread", "names": "trunk"}`, strictjson.ErrInvalid, "names", "full artifact hash", true, ""},
	{"holder with empty command", `{"ocx": "refusal", "launch": "` + h64 + `", "login": "a", "project": "b", "reason": "r", "holder": {"pid": 1, "start_time": 1, "command": [], "started_by": "daemon"}}`, strictjson.ErrMissing, "holder.command", "command line", true, ""},
	{"reason empty", `{"ocx": "refusal", "launch": "` + h64 + `", "login": "a", "project": "b", "reason": ""}`, strictjson.ErrMissing, "reason", "in words", true, ""},
	{"reason with a bell", `{"ocx": "refusal", "launch": "` + h64 + `", "login": "a", "project": "b", "reason": "\u0007"}`, strictjson.ErrInvalid, "reason", `'\a'`, true, ""},
	{"why unknown", `{"ocx": "unheard", "post": "` + h64 + `", "login": "a", "project": "b", "why": "asleep"}`, strictjson.ErrInvalid, "why", "no-reader, no-pipe, ended", true, ""},
	{"ci line with spaces", `{"ocx": "ci", "checkin": "` + h64 + `", "result": "red", "line": " x "}`, strictjson.ErrInvalid, "line", "space at an end", true, ""},
	{"stopped by request without request", `{"ocx": "stopped", "login": "a", "project": "b", "cause": "request"}`, strictjson.ErrMissing, "request", "is empty", true, "."},
	{"deep nesting", `{"ocx": "stop", "x": ` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`, strictjson.ErrTooLong, "x" + strings.Repeat("[0]", 31), "deeper than 32", false, ""},
}

func TestHostileNotes(t *testing.T) {
	schemas, err := validate.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range hostileNotes {
		t.Run(tc.name, func(t *testing.T) {
			n, err := decodeNote([]byte(tc.block))
			if err == nil {
				t.Fatalf("accepted: %v", n)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("error %q is not %v", err, tc.err)
			}
			var fe *strictjson.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T %q is not a *FieldError", err, err)
			}
			if fe.Field != tc.field {
				t.Errorf("error names field %q, want %q: %v", fe.Field, tc.field, err)
			}
			if !strings.Contains(err.Error(), tc.words) {
				t.Errorf("error %q does not say %q", err, tc.words)
			}
			if tc.field != "" && !strings.Contains(err.Error(), tc.field+": ") {
				t.Errorf("error %q does not name %s", err, tc.field)
			}
			// The same block as a post is refused the same way.
			if _, perr := ReadPost([]byte("```json\n" + tc.block + "\n```\n")); !errors.Is(perr, tc.err) {
				t.Errorf("as a post: %v", perr)
			}
			if !tc.schema {
				return
			}
			kind := ""
			for _, k := range noteKinds() {
				if strings.Contains(tc.block, `"ocx": "`+string(k)+`"`) {
					kind = string(k)
				}
			}
			serr := schemas.Validate(design.SchemaFile(kind), []byte(tc.block))
			if serr == nil {
				t.Fatalf("the schema accepts what the Go reader refuses: %v", err)
			}
			want := fe.JSONPointer()
			switch tc.schemaF {
			case "":
			case ".":
				want = "" // a missing key or a condition: JSON Schema locates the object
			default:
				want = (&strictjson.FieldError{Field: tc.schemaF}).JSONPointer()
			}
			var ve *jsonschema.ValidationError
			if !errors.As(serr, &ve) {
				t.Fatalf("schema error %T: %v", serr, serr)
			}
			if !schemaLocates(ve, want) {
				t.Errorf("the schema does not locate the fault at %q: %#v", want, ve)
			}
		})
	}
}

// schemaLocates says whether any leaf of a schema error is at loc.
func schemaLocates(ve *jsonschema.ValidationError, loc string) bool {
	if len(ve.Causes) == 0 {
		return ve.InstanceLocation == loc
	}
	for _, c := range ve.Causes {
		if schemaLocates(c, loc) {
			return true
		}
	}
	return false
}

func TestHostilePosts(t *testing.T) {
	tests := []struct {
		name  string
		post  string
		err   error
		words string
	}{
		{"truncated block", "look:\n```json\n{\"ocx\": \"stop\"}\n", strictjson.ErrUnclosedFence, "block at line 2: the ```json block is never closed"},
		{"truncated JSON", "```json\n{\"ocx\": \"stop\",\n```\n", strictjson.ErrSyntax, "block at line 1: is not valid JSON"},
		{"two notes", "```json\n{\"ocx\": \"stop\"}\n```\n```json\n{\"ocx\": \"stop\"}\n```\n", strictjson.ErrSeveralNotes, "blocks at lines 1, 4"},
		{"no note", "just words", strictjson.ErrNotANote, "holds no OCX note"},
		{"other JSON only", "```json\n[1, 2]\n```\n", strictjson.ErrNotANote, "1 ```json block(s), none with \"ocx\""},
		{"stop with more words", "OCX stop now", strictjson.ErrNotANote, "holds no OCX note"},
		{"lower-case stop", "ocx stop", strictjson.ErrNotANote, "holds no OCX note"},
		{"duplicate key", "```json\n{\"ocx\": \"stop\", \"ocx\": \"report\"}\n```\n", strictjson.ErrDuplicateKey, "block at line 1: ocx: appears twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := ReadPost([]byte(tc.post))
			if err == nil {
				t.Fatalf("accepted: %v", n)
			}
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.words) {
				t.Errorf("error %q, want %v saying %q", err, tc.err, tc.words)
			}
		})
	}
}

func TestIgnorable(t *testing.T) {
	for _, tc := range []struct {
		block string
		want  bool
	}{
		{ws(`, "version": 2`, okSandbox), true},
		{`{"ocx": "frobnicate"}`, true},
		{`{"ocx": 1, "kind": "run"}`, true},
		{`{"prompt": ""}`, true},
		{ws("", okSandbox+`, "memory": "4G"`), false},
		{`{"ocx": "stop", "login": "../x"}`, false},
	} {
		_, err := decodeNote([]byte(tc.block))
		if err == nil || Ignorable(err) != tc.want {
			t.Errorf("%s: Ignorable(%v) = %v, want %v", tc.block, err, !tc.want, tc.want)
		}
	}
}

// TestNewProcessInfo: whatever a command line holds, the refusal that names
// its process can be written, and it reads back as written.
func TestNewProcessInfo(t *testing.T) {
	argvs := [][]string{
		nil,
		{""},
		{"/usr/bin/workspace", "run", "ci/x", "--root", "/a"},
		{"sh", "-c", "a\x00b\xff\nc"},
		{strings.Repeat("é", 10000)},
		strings.Split(strings.Repeat("arg ", 200), " "),
		{"x", strings.Repeat("y", 15000), strings.Repeat("z", 5000)},
	}
	for _, argv := range argvs {
		p := NewHolder(42, 7, argv, OriginTerminal)
		n := &RefusalNote{Launch: h64, Login: "ci", Project: "x", Reason: "held", Holder: &p}
		enc, err := n.Encode()
		if err != nil {
			t.Fatalf("argv %.60q: %v", argv, err)
		}
		back, err := ReadPost(enc)
		if err != nil || back.String() != n.String() {
			t.Fatalf("argv %.60q reads back as %v, %v", argv, back, err)
		}
		if len(enc) > 20<<10 {
			t.Errorf("argv %.60q makes a %d-byte note", argv, len(enc))
		}
	}
	if p := NewHolder(1, 1, strings.Split(strings.Repeat("a ", 100), " "), OriginDaemon); len(p.Command) != 65 || p.Command[64] != "(37 more arguments left out)" {
		t.Errorf("101 arguments kept as %d, last %q", len(p.Command), p.Command[len(p.Command)-1])
	}
	if _, err := decodeNote([]byte(`{"ocx": "refusal", "launch": "` + h64 + `", "login": "a", "project": "b", "reason": "r", "holder": {"pid": 1, "start_time": 1, "command": [""], "started_by": "daemon"}}`)); err == nil || !strings.Contains(err.Error(), "holder.command[0]: is empty") {
		t.Errorf("empty program in a holder: %v", err)
	}
}

// TestDecodeSandbox: a sandbox alone (a template's) is read as strictly as
// inside a definition, its errors naming the field under "sandbox".
func TestDecodeSandbox(t *testing.T) {
	sb, err := DecodeSandbox([]byte(`{` + okSandbox + `}`))
	if err != nil || !sb.Network || len(sb.ReadOnly) != 1 || sb.Path[0] != "/usr/bin" {
		t.Fatalf("a good sandbox: %+v %v", sb, err)
	}
	for _, c := range []struct{ data, err, words string }{
		{`{` + okSandbox + `, "memory": "4G"}`, "sandbox.memory", "may be a limit"},
		{`{"network": true, "read_only": [], "read_write": [], "path": []}`, "sandbox.homes", "even an empty one"},
		{`{"network": true, "read_only": ["tmp"], "read_write": [], "homes": [], "path": []}`, "sandbox.read_only[0]", "not an absolute path"},
		{`["/usr"]`, "", "a sandbox is a JSON object"},
		{`{"network": true,`, "", "truncated"},
	} {
		_, err := DecodeSandbox([]byte(c.data))
		if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), c.words) {
			t.Errorf("%s: %v, want %q and %q", c.data, err, c.err, c.words)
		}
	}
}
