package runmsg

import (
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/docs/design"
	"github.com/ocx-go/ocx/docs/design/validate"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/strictjson"
	"pgregory.net/rapid"
)

// seed 004, section 14: an unconfined echo, and Claude in a sandbox, as
// docs/design/examples holds them.
var (
	seedEcho   = design.Example("run-echo.json")
	seedClaude = design.Example("run-claude.json")
)

const (
	testRunHash = "0123456789abcdef0123456789abcdef01234567"
)

func fenceRun(s string) []byte { return []byte("A run.\n\n```json\n" + s + "\n```\n") }

func mustRun(t *testing.T, block string) *Run {
	t.Helper()
	m, err := ReadMessage(fenceRun(block))
	if err != nil {
		t.Fatalf("ReadMessage: %v", err)
	}
	r, ok := m.(*Run)
	if !ok {
		t.Fatalf("ReadMessage gave %T, want *Run", m)
	}
	return r
}

func TestSeedRunExamples(t *testing.T) {
	schemas, err := validate.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range []string{seedEcho, seedClaude} {
		if err := schemas.ValidateMessage([]byte(block)); err != nil {
			t.Errorf("schema refuses seed 004's example: %v", err)
		}
		r := mustRun(t, block)
		if err := CheckRunValues(r, nil); err != nil {
			t.Errorf("CheckRunValues: %v", err)
		}
		enc, err := r.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if back := mustRun(t, string(unfenceT(t, enc))); !reflect.DeepEqual(back, r) {
			t.Errorf("round trip:\n got %+v\nwant %+v", back, r)
		}
	}
	r := mustRun(t, seedEcho)
	if r.Process.Keep.StdoutWhen != KeepAlways || r.Sandbox != nil || r.Limits != nil || r.Workspace != nil {
		t.Errorf("echo read as %+v", r)
	}
	p := r.Process.WithDefaults(r.SetsWorkspace())
	if p.Cwd != "/" || p.Deliveries != deliveriesFeed || !reflect.DeepEqual(*p.Keep, RunKeep{Stderr: "64K", Stdout: "64K", StdoutWhen: KeepAlways}) {
		t.Errorf("echo's defaults: %+v keep %+v", p, *p.Keep)
	}
}

func unfenceT(t *testing.T, enc []byte) []byte {
	t.Helper()
	s := strings.TrimPrefix(string(enc), "```json\n")
	s, ok := strings.CutSuffix(s, "\n```\n")
	if !ok {
		t.Fatalf("not a canonical block: %q", enc)
	}
	return []byte(s)
}

// TestExpandSeedClaude puts the values in place in seed 004's second run,
// as the node would once its steps ran.
func TestExpandSeedClaude(t *testing.T) {
	r := mustRun(t, seedClaude)
	vals := RunValues{ValueRoot: "/srv/ocx", ValueProject: "demo", ValueUser: "claude-1", ValueRun: testRunHash,
		ValueNode: "lab-1", ValueServer: "https://example.org/demo", ValueRelease: "/srv/ocx/release/1"}
	for i, s := range r.Workspace {
		e, err := ExpandStep(s, "workspace", vals)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		e.SetValues(vals, strings.Repeat("a", 64))
	}
	x, err := r.Expand(vals)
	if err != nil {
		t.Fatal(err)
	}
	ws := "/srv/ocx/claude-1/projects/demo/" + testRunHash
	if vals[ValueWorkspace] != ws || vals[valueTree] != ws+"/tree" || vals[ValueClone] != ws+"/clone" {
		t.Errorf("values set: %v", vals)
	}
	if x.Process.Cwd != ws+"/tree" || x.Process.Env["HOME"] != ws || x.Process.Env["PATH"] != "/srv/ocx/release/1:/usr/local/bin:/usr/bin:/bin" {
		t.Errorf("process: %+v", x.Process)
	}
	if x.Sandbox.Files[0].Text != "claude-1:x:1000:1000::"+ws+":/bin/sh\n" || x.Sandbox.ReadWrite[0] != ws {
		t.Errorf("sandbox: %+v", x.Sandbox)
	}
	if r.Process.Cwd != "$$tree$$" || r.Sandbox.ReadWrite[0] != "$$workspace$$" {
		t.Errorf("Expand wrote into the run it was given")
	}
	if x.Process.User != "claude-1" || !reflect.DeepEqual(x.Process.Hears, []string{"*"}) {
		t.Errorf("user or hears changed: %+v", x.Process)
	}
}

// TestReadMessageDispatch: one reader tells apart no message, a kind it
// does not know, a malformed message of a known kind and the message, and
// reads protocol v1's record as ReadTaskRecord does.
func TestReadMessageDispatch(t *testing.T) {
	rec := &TaskRecord{User: "agent-1", Node: "lab-1", Runner: "claude", Objective: "Do it.", Checkins: []string{},
		Hears: []string{"alice"}, Sandbox: DefaultRecordSandbox(true), Budget: Budget{Wall: "2h"}}
	recBlock, err := rec.Encode()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		text string
		want error // sentinel, or nil for a message
		kind MessageKind
	}{
		{"plain post", "Hello.", strictjson.ErrNotANote, ""},
		{"json without ocx", "```json\n{\"a\": 1}\n```\n", strictjson.ErrNotANote, ""},
		{"session design note", "```json\n{\"ocx\": \"stop\"}\n```\n", strictjson.ErrNotANote, ""},
		{"ocx not a number", "```json\n{\"ocx\": true, \"kind\": \"run\"}\n```\n", strictjson.ErrNotANote, ""},
		{"version 2", "```json\n{\"ocx\": 2, \"kind\": \"run\"}\n```\n", strictjson.ErrUnknownVersion, ""},
		{"unknown kind", "```json\n{\"ocx\": 1, \"kind\": \"launch\"}\n```\n", strictjson.ErrUnknownKind, ""},
		{"no kind", "```json\n{\"ocx\": 1}\n```\n", strictjson.ErrUnknownKind, ""},
		{"kind not a string", "```json\n{\"ocx\": 1, \"kind\": 3}\n```\n", strictjson.ErrUnknownKind, ""},
		{"malformed run", string(fenceRun(`{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "x", "process": {"user": "b"}}`)), strictjson.ErrMissing, MsgRun},
		{"malformed stop", string(fenceRun(`{"ocx": 1, "kind": "stop", "node": "lab-1", "run": "abc"}`)), strictjson.ErrInvalid, MsgStop},
		{"stop with a field a stop has not", string(fenceRun(`{"ocx": 1, "kind": "stop", "node": "lab-1", "run": "` + testRunHash + `", "note": "x"}`)), strictjson.ErrUnknownKey, MsgStop},
		{"started without values", string(fenceRun(`{"ocx": 1, "kind": "started", "node": "lab-1", "run": "` + testRunHash + `", "limits": {}}`)), strictjson.ErrMissing, MsgStarted},
		{"started without limits", string(fenceRun(`{"ocx": 1, "kind": "started", "node": "lab-1", "run": "` + testRunHash + `", "values": {}}`)), strictjson.ErrMissing, MsgStarted},
		{"started naming its run by a short hash", string(fenceRun(`{"ocx": 1, "kind": "started", "node": "lab-1", "run": "abc", "values": {}, "limits": {}}`)), strictjson.ErrInvalid, MsgStarted},
		{"ended naming its run by a short hash", string(fenceRun(`{"ocx": 1, "kind": "ended", "node": "lab-1", "run": "abc", "outcome": "stopped"}`)), strictjson.ErrInvalid, MsgEnded},
		{"duplicate key", string(fenceRun(`{"ocx": 1, "kind": "stop", "kind": "run"}`)), strictjson.ErrDuplicateKey, ""},
		{"run", string(fenceRun(seedEcho)), nil, MsgRun},
		{"stop", string(fenceRun(`{"ocx": 1, "kind": "stop", "node": "lab-1", "run": "` + testRunHash + `"}`)), nil, MsgStop},
		{"record", string(recBlock), nil, MsgRecord},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := ReadMessage([]byte(c.text))
			if c.want == nil {
				if err != nil || m.Kind() != c.kind {
					t.Fatalf("got %v, %v; want a %s", m, err, c.kind)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, %v; want %v", m, err, c.want)
			}
			var mm *MalformedMessage
			if got := errors.As(err, &mm); got != (c.kind != "") {
				t.Fatalf("MalformedMessage: %v, want %v (%v)", got, c.kind != "", err)
			}
			if mm != nil && (mm.Kind != c.kind || mm.Node != "lab-1" || mm.Err.Field == "") {
				t.Errorf("malformed: %+v", mm)
			}
			checkRefusal(t, err)
		})
	}
	got, err := ReadMessage(recBlock)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ReadTaskRecord(recBlock)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("record: ReadMessage %+v, ReadTaskRecord %+v, %v", got, want, err)
	}
	// The session design's reader still passes a run over.
	if _, err := messages.ReadPost(fenceRun(seedEcho)); !errors.Is(err, strictjson.ErrRunMessage) || !messages.Ignorable(err) {
		t.Errorf("ReadPost of a run: %v", err)
	}
}

// TestHostileRuns: each refused run names the field at fault; for a run
// that is section 11's row 2.
func TestHostileRuns(t *testing.T) {
	proc := `"process": {"user": "b", "command": ["x"]}`
	sb := `"uid": 1, "gid": 1, "capabilities": [], "network": true, "own_session": true, "ends_with_node": true, "read_only": [], "read_write": [], "homes": [], "files": [], "proc": "/proc", "dev": "/dev", "tmp": "/tmp"`
	run := func(rest string) string {
		return `{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "x"` + rest + `}`
	}
	cases := []struct{ name, block, field string }{
		{"no process", run(""), "process"},
		{"no objective", `{"ocx": 1, "kind": "run", "node": "lab-1", ` + proc + `}`, "objective"},
		{"blank objective", `{"ocx": 1, "kind": "run", "node": "lab-1", "objective": " \n", ` + proc + `}`, "objective"},
		{"no node", `{"ocx": 1, "kind": "run", "objective": "x", ` + proc + `}`, "node"},
		{"unknown top key", run(`, "run": "abc", ` + proc), "run"},
		{"budget is not a layer", run(`, "budget": {}, ` + proc), "budget"},
		{"no command", run(`, "process": {"user": "b"}`), "process.command"},
		{"empty command", run(`, "process": {"user": "b", "command": []}`), "process.command"},
		{"unknown process key", run(`, "process": {"user": "b", "command": ["x"], "when": "now"}`), "process.when"},
		{"env not text", run(`, "process": {"user": "b", "command": ["x"], "env": {"A": 1}}`), "process.env.A"},
		{"deliveries", run(`, "process": {"user": "b", "command": ["x"], "deliveries": "push"}`), "process.deliveries"},
		{"hears twice", run(`, "process": {"user": "b", "command": ["x"], "hears": ["a", "a"]}`), "process.hears[1]"},
		{"keep size digits as text", run(`, "process": {"user": "b", "command": ["x"], "keep": {"stderr": "65536"}}`), "process.keep.stderr"},
		{"keep size unit", run(`, "process": {"user": "b", "command": ["x"], "keep": {"stdout": "64k"}}`), "process.keep.stdout"},
		{"keep stdout_when", run(`, "process": {"user": "b", "command": ["x"], "keep": {"stdout_when": "never"}}`), "process.keep.stdout_when"},
		{"keep mask not a list", run(`, "process": {"user": "b", "command": ["x"], "keep": {"mask": "pw"}}`), "process.keep.mask"},
		{"keep mask not text", run(`, "process": {"user": "b", "command": ["x"], "keep": {"mask": ["pw", 1]}}`), "process.keep.mask[1]"},
		{"keep mask empty string", run(`, "process": {"user": "b", "command": ["x"], "keep": {"mask": ["pw", ""]}}`), "process.keep.mask[1]"},
		{"keep mask two lines", run(`, "process": {"user": "b", "command": ["x"], "keep": {"mask": ["a\nb"]}}`), "process.keep.mask[0]"},
		{"keep mask too long", run(`, "process": {"user": "b", "command": ["x"], "keep": {"mask": ["` + strings.Repeat("x", MaxKeepMask+1) + `"]}}`), "process.keep.mask[0]"},
		{"keep mask too many", run(`, "process": {"user": "b", "command": ["x"], "keep": {"mask": [` + strings.TrimSuffix(strings.Repeat(`"x",`, MaxKeepMasks+1), ",") + `]}}`), "process.keep.mask"},
		{"keep match not text", run(`, "process": {"user": "b", "command": ["x"], "keep": {"match": ["error"]}}`), "process.keep.match"},
		{"keep match invalid", run(`, "process": {"user": "b", "command": ["x"], "keep": {"match": "(error"}}`), "process.keep.match"},
		{"keep match backreference", run(`, "process": {"user": "b", "command": ["x"], "keep": {"match": "(a)\\1"}}`), "process.keep.match"},
		{"keep match too long", run(`, "process": {"user": "b", "command": ["x"], "keep": {"match": "` + strings.Repeat("x", MaxKeepMask+1) + `"}}`), "process.keep.match"},
		{"keep unknown filter", run(`, "process": {"user": "b", "command": ["x"], "keep": {"grep": "x"}}`), "process.keep.grep"},
		{"relative cwd", run(`, "process": {"user": "b", "command": ["x"], "cwd": "tree"}`), "process.cwd"},
		{"sandbox missing a field", run(`, "sandbox": {"uid": 1}, ` + proc), "sandbox.gid"},
		{"sandbox unknown key", run(`, "sandbox": {` + sb + `, "seccomp": true}, ` + proc), "sandbox.seccomp"},
		{"sandbox uid", run(`, "sandbox": {` + strings.Replace(sb, `"uid": 1`, `"uid": -1`, 1) + `}, ` + proc), "sandbox.uid"},
		{"sandbox relative path", run(`, "sandbox": {` + strings.Replace(sb, `"homes": []`, `"homes": ["x"]`, 1) + `}, ` + proc), "sandbox.homes[0]"},
		{"sandbox file key", run(`, "sandbox": {` + strings.Replace(sb, `"files": []`, `"files": [{"at": "/a", "text": "", "mode": 1}]`, 1) + `}, ` + proc), "sandbox.files[0].mode"},
		{"limits wall", run(`, "limits": {"wall": "8 hours"}, ` + proc), "limits.wall"},
		{"limits cpu zero", run(`, "limits": {"cpu": 0}, ` + proc), "limits.cpu"},
		{"limits unknown", run(`, "limits": {"swap": "1G"}, ` + proc), "limits.swap"},
		{"limits disk below its least", run(`, "limits": {"disk": "1M"}, ` + proc), "limits.disk"},
		{"limits disk form", run(`, "limits": {"disk": "1T"}, ` + proc), "limits.disk"},
		{"limits memory form", run(`, "limits": {"memory": "1T"}, ` + proc), "limits.memory"},
		{"step without kind", run(`, "workspace": [{"at": "/a"}], ` + proc), "workspace[0].step"},
		{"step without its argument", run(`, "workspace": [{"step": "clone"}], ` + proc), "workspace[0].into"},
		{"step with another's argument", run(`, "workspace": [{"step": "password", "at": "/a"}], ` + proc), "workspace[0].at"},
		{"workspace not a list", run(`, "workspace": {}, ` + proc), "workspace"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadMessage(fenceRun(c.block))
			var mm *MalformedMessage
			if !errors.As(err, &mm) {
				t.Fatalf("got %v, want a malformed run naming %s", err, c.field)
			}
			if mm.Err.Field != c.field {
				t.Errorf("names %q, want %q: %v", mm.Err.Field, c.field, err)
			}
			ref := RunRefusal(nil, err, RefusalFacts{SenderPrivileged: true})
			if ref == nil || ref.Row != RefusedMalformed || !strings.Contains(ref.Note, c.field) {
				t.Errorf("refusal %v, want row 2 naming %s", ref, c.field)
			}
		})
	}
}

// TestEndedTable12: per outcome, which of exit and note are present and
// required.
func TestEndedTable12(t *testing.T) {
	one, past := 1, 256 // past: beyond an exit code's 0 to 255
	cases := []struct {
		outcome RunOutcome
		exit    *int
		note    string
		field   string // "" accepted
	}{
		{RunRefused, nil, "row 3: $$x$$", ""},
		{RunRefused, nil, "", "note"},
		{RunRefused, &one, "x", "exit"},
		{RunStopped, nil, "", ""},
		{RunStopped, nil, "x", "note"},
		{RunStopped, &one, "", "exit"},
		{RunExited, &one, "", ""},
		{RunExited, nil, "", "exit"},
		{RunExited, &one, "x", "note"},
		{RunExited, &past, "", "exit"},
		{RunBudget, nil, "wall", ""},
		{RunBudget, nil, "", "note"},
		{RunBudget, &one, "wall", "exit"},
		{RunLost, nil, "not in its care", ""},
		{RunLost, nil, "", "note"},
		{RunLost, &one, "x", "exit"},
		{"crashed", nil, "x", "outcome"},
	}
	schemas, err := validate.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		e := &RunEnded{Node: "lab-1", Run: testRunHash, Outcome: c.outcome, Exit: c.exit, Note: c.note}
		err := e.Validate()
		var fe *strictjson.FieldError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%+v refused: %v", c, err)
		case c.field != "" && (!errors.As(err, &fe) || fe.Field != c.field):
			t.Errorf("%+v: got %v, want %s refused", c, err, c.field)
		}
		// The reader and the schema agree with Validate.
		raw := map[string]any{"ocx": 1, "kind": "ended", "node": "lab-1", "run": testRunHash, "outcome": c.outcome}
		if c.exit != nil {
			raw["exit"] = *c.exit
		}
		if c.note != "" {
			raw["note"] = c.note
		}
		block, _ := json.Marshal(raw)
		_, rerr := ReadMessage(fenceRun(string(block)))
		serr := schemas.ValidateMessage(block)
		if (rerr == nil) != (c.field == "") || (serr == nil) != (c.field == "") {
			t.Errorf("%+v: reader %v, schema %v", c, rerr, serr)
		}
	}
}

// TestMessageRoundTrip: every message a generator draws encodes to a
// canonical block that the schema accepts and that reads back the same.
func TestMessageRoundTrip(t *testing.T) {
	schemas, err := validate.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []MessageKind{MsgRun, MsgStop, MsgStarted, MsgEnded, MsgFired} {
		t.Run(string(kind), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				m := genMessage(kind).Draw(rt, "message")
				enc, err := m.Encode()
				if err != nil {
					rt.Fatalf("Encode: %v", err)
				}
				if err := schemas.ValidateMessage(unfence(rt, enc)); err != nil {
					rt.Fatalf("schema: %v\n%s", err, enc)
				}
				back, err := ReadMessage(enc)
				if err != nil {
					rt.Fatalf("ReadMessage: %v\n%s", err, enc)
				}
				if !reflect.DeepEqual(normMessage(back), normMessage(m)) {
					rt.Fatalf("round trip:\n got %#v\nwant %#v", back, m)
				}
				again, err := back.Encode()
				if err != nil || string(again) != string(enc) {
					rt.Fatalf("not canonical: %v\n%s\n%s", err, enc, again)
				}
				if s := m.(interface{ String() string }).String(); strings.ContainsAny(s, "\n\r") {
					rt.Fatalf("String is not one line: %q", s)
				}
			})
		})
	}
}

// normMessage makes a sandbox's nil lists empty, as they read back.
func normMessage(m Message) Message {
	r, ok := m.(*Run)
	if !ok || r.Sandbox == nil {
		if s, ok := m.(*RunStarted); ok && s.Values == nil {
			c := *s
			c.Values = RunValues{}
			return &c
		}
		return m
	}
	c := *r
	s := *r.Sandbox
	for _, l := range []*[]string{&s.Capabilities, &s.ReadOnly, &s.ReadWrite, &s.Homes} {
		if *l == nil {
			*l = []string{}
		}
	}
	if s.Files == nil {
		s.Files = []runFile{}
	}
	c.Sandbox = &s
	return &c
}

var valueRef = regexp.MustCompile(`\$\$([A-Za-z0-9_]+)\$\$`)

func TestScanValues(t *testing.T) {
	cases := []struct {
		in   string
		refs []string
	}{
		{"", nil},
		{"$", nil},
		{"$$", nil},
		{"$$$$", nil},
		{"${HOME}", nil},
		{"$HOME", nil},
		{"$$HOME", nil},
		{"$$a$$", []string{"a"}},
		{"$$$a$$", []string{"a"}},
		{"$$a$$b$$", []string{"a"}},
		{"$$a$$$$b$$", []string{"a", "b"}},
		{"$$a-b$$", nil},
		{"x$$root$$/$$user$$/y", []string{"root", "user"}},
		{"$$é$$", nil},
	}
	for _, c := range cases {
		if got := valueRefs(c.in); !reflect.DeepEqual(got, c.refs) {
			t.Errorf("ValueRefs(%q) = %q, want %q", c.in, got, c.refs)
		}
	}
	if got, _, _ := expandString("$${HOME} $$a$$ $ $$", RunValues{"a": "$$b$$"}); got != "$${HOME} $$b$$ $ $$" {
		t.Errorf("ExpandString: %q (a value's own $$ is not read again)", got)
	}
}

// TestValueScannerMatchesRegexp: the scanner finds what the regular
// expression of section 2 finds, and expansion is what ReplaceAll gives.
func TestValueScannerMatchesRegexp(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.OneOf(genValueText(0), rapid.StringOfN(rapid.SampledFrom([]rune("$a_{}1-")), 0, 30, -1)).Draw(t, "s")
		var want []string
		for _, m := range valueRef.FindAllStringSubmatch(s, -1) {
			want = append(want, m[1])
		}
		if got := valueRefs(s); !reflect.DeepEqual(got, want) {
			t.Fatalf("ValueRefs(%q) = %q, regexp %q", s, got, want)
		}
		vals := RunValues{}
		for _, n := range want {
			vals[n] = "<" + n + ">"
		}
		got, _, ok := expandString(s, vals)
		if exp := valueRef.ReplaceAllString(s, "<$1>"); !ok || got != exp {
			t.Fatalf("ExpandString(%q) = %q, %v; want %q", s, got, ok, exp)
		}
	})
}

// TestExpandIdentityWithoutValues: a string naming no value reaches the
// process as written, whatever the values.
func TestExpandIdentityWithoutValues(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genValueText(0).Filter(func(s string) bool { return !valueRef.MatchString(s) }).Draw(t, "s")
		vals := rapid.MapOfN(genValueName(), genValueText(0), 0, 5).Draw(t, "values")
		if got, _, ok := expandString(s, vals); !ok || got != s {
			t.Fatalf("ExpandString(%q) = %q, %v", s, got, ok)
		}
	})
}

// TestExpandLeavesKeysAndUnreadFields: keys, process.user, deliveries,
// hears and checkins are never read for values, and the run given is not
// changed.
func TestExpandLeavesKeysAndUnreadFields(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := genRun().Draw(t, "run")
		vals := RunValues{}
		for _, n := range append(nodeValueNames, ValueWorkspace, ValueClone, valueTree, valueCheckout) {
			vals[n] = "/v/" + n
		}
		for _, s := range []*[]string{&r.Process.Hears, &r.Process.Checkins} {
			if len(*s) > 0 && (*s)[0] != messages.HearsEveryone {
				(*s)[0] = "$$user$$"
			}
		}
		before, err := r.Encode()
		if err != nil {
			t.Fatal(err)
		}
		x, err := r.Expand(vals)
		if err != nil {
			return // a name not set, or a path not absolute once in place
		}
		if after, _ := r.Encode(); string(after) != string(before) {
			t.Fatalf("Expand changed the run it was given")
		}
		for k := range r.Process.Env {
			if _, ok := x.Process.Env[k]; !ok {
				t.Fatalf("env key %q changed", k)
			}
		}
		if len(x.Process.Env) != len(r.Process.Env) || x.Process.User != r.Process.User ||
			!reflect.DeepEqual(x.Process.Hears, r.Process.Hears) || !reflect.DeepEqual(x.Process.Checkins, r.Process.Checkins) ||
			x.Process.Deliveries != DefaultOr(r.Process.Deliveries, deliveriesFeed) {
			t.Fatalf("unread fields changed: %+v -> %+v", r.Process, x.Process)
		}
	})
}

func DefaultOr(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// TestEveryValueSetOrRefused: a run whose strings name values passes the
// arrival check exactly when each named value is set by then, and
// otherwise is refused naming a value that is not; Expand agrees, given the
// values the check allowed.
func TestEveryValueSetOrRefused(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := genRun().Draw(t, "run")
		node := rapid.SliceOfDistinct(rapid.SampledFrom(nodeValueNames), func(s string) string { return s }).Draw(t, "node-values")
		err := CheckRunValues(r, node)
		// The model: walk the steps, each seeing what was set before it.
		set := map[string]bool{}
		for _, n := range node {
			set[n] = true
		}
		var firstUnset string
		var firstField string
		seen := func(fields []valueField) {
			for _, f := range fields {
				for _, n := range valueRef.FindAllStringSubmatch(*f.s, -1) {
					if !set[n[1]] && firstUnset == "" {
						firstUnset, firstField = n[1], f.field
					}
				}
			}
		}
		done := map[string]bool{}
		stepErr := false
		for i := range r.Workspace {
			s := &r.Workspace[i]
			if need := s.Needs(); need != "" && !done[need] && firstUnset == "" {
				stepErr = true
				break
			}
			if done[StepCommand] && len(s.Sets()) > 0 {
				stepErr = true // every step that sets a value comes before a command step (D99)
				break
			}
			seen(s.valueStrings(strictjson.IndexField("workspace", i)))
			if firstUnset != "" {
				break
			}
			done[s.Step] = true
			for _, n := range s.Sets() {
				set[n] = true
			}
		}
		if !stepErr && firstUnset == "" {
			if r.Sandbox != nil {
				seen(r.Sandbox.valueStrings("sandbox"))
			}
			if firstUnset == "" {
				seen(r.Process.valueStrings("process"))
			}
		}
		switch {
		case stepErr:
			if !errors.Is(err, errStepNeeds) {
				t.Fatalf("want unmet needs, got %v", err)
			}
		case firstUnset != "":
			var fe *strictjson.FieldError
			if !errors.Is(err, ErrUnsetValue) || !errors.As(err, &fe) || fe.Field != firstField || !strings.Contains(fe.Problem, "$$"+firstUnset+"$$") {
				t.Fatalf("want %s refused at %s, got %v", firstUnset, firstField, err)
			}
		default:
			if err != nil {
				t.Fatalf("refused a run naming only values set: %v", err)
			}
			vals := RunValues{}
			for n := range set {
				vals[n] = "/v"
			}
			if _, err := r.Expand(vals); errors.Is(err, ErrUnsetValue) {
				t.Fatalf("Expand names an unset value the check let through: %v", err)
			}
		}
	})
}

func TestCheckRunValues(t *testing.T) {
	proc := `"process": {"user": "b", "command": ["x"]}`
	run := func(ws string, rest string) *Run {
		return mustRun(t, `{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "x", "workspace": [`+ws+`], `+rest+`}`)
	}
	cases := []struct {
		name, ws, rest string
		want           error
		field          string
	}{
		{"seed steps", `{"step": "directory", "at": "$$root$$/$$run$$"}, {"step": "password"}, {"step": "clone", "into": "$$workspace$$/clone"}, {"step": "checkout", "of": "trunk", "into": "$$clone$$/../tree"}`, `"process": {"user": "b", "command": ["ls", "$$tree$$", "$$checkout$$"]}`, nil, ""},
		{"a step sees only what is before it", `{"step": "directory", "at": "$$workspace$$/a"}`, proc, ErrUnsetValue, "workspace[0].at"},
		{"a value no one sets", `{"step": "directory", "at": "/a"}`, `"process": {"user": "b", "command": ["x", "$$home$$"]}`, ErrUnsetValue, "process.command[1]"},
		{"sandbox before any checkout", ``, `"sandbox": {"uid": 1, "gid": 1, "capabilities": [], "network": true, "own_session": true, "ends_with_node": true, "read_only": ["$$tree$$"], "read_write": [], "homes": [], "files": [], "proc": "/proc", "dev": "/dev", "tmp": "/tmp"}, ` + proc, ErrUnsetValue, "sandbox.read_only[0]"},
		{"env value, not key", ``, `"process": {"user": "b", "command": ["x"], "env": {"$$nope$$": "$$clone$$"}}`, ErrUnsetValue, "process.env.\"$$nope$$\""},
		{"user, hears, checkins are not read", ``, `"process": {"user": "$$x$$", "command": ["x"], "hears": ["$$y$$"], "checkins": ["$$z$$"]}`, nil, ""},
		{"unknown step", `{"step": "shell", "run": "make"}`, proc, errUnknownStep, "workspace[0].step"},
		{"clone needs password", `{"step": "directory", "at": "/a"}, {"step": "clone", "into": "/a/c"}`, proc, errStepNeeds, "workspace[1]"},
		{"checkout needs clone", `{"step": "password"}, {"step": "checkout", "of": "trunk", "into": "/t"}`, proc, errStepNeeds, "workspace[1]"},
		{"the default cwd is left out without workspace", ``, proc, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckRunValues(run(c.ws, c.rest), nil)
			var fe *strictjson.FieldError
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, c.want) || !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("got %v, want %v at %s", err, c.want, c.field)
			}
		})
	}
	// The default cwd: $$workspace$$ with a directory step, / without.
	r := run(`{"step": "directory", "at": "/w"}`, proc)
	x, err := r.Expand(RunValues{ValueWorkspace: "/w"})
	if err != nil || x.Process.Cwd != "/w" {
		t.Errorf("default cwd with a workspace: %v %v", x, err)
	}
	x, err = run(``, proc).Expand(RunValues{})
	if err != nil || x.Process.Cwd != "/" {
		t.Errorf("default cwd without one: %v %v", x, err)
	}
	if _, err := run(``, `"process": {"user": "b", "command": ["x"], "cwd": "$$user$$"}`).Expand(RunValues{ValueUser: "b"}); err == nil {
		t.Errorf("a cwd relative once its values are in was accepted")
	}
}

// TestRunRefusalRows: one case per row 1 to 8, each holding that row
// alone, then the order: a run holding several is refused for the first.
func TestRunRefusalRows(t *testing.T) {
	ok := RefusalFacts{SenderPrivileged: true, NodeUser: "lab-1", NodeUsers: []string{"lab-2"}, Privileged: []string{"admin"},
		ServerNode: true, Provides: RunProvision{Sandbox: true, NoNetwork: true, Limits: []string{messages.LimitWall, messages.LimitCPU, messages.LimitProcesses}}}
	sb := `"sandbox": {"uid": 1, "gid": 1, "capabilities": [], "network": true, "own_session": true, "ends_with_node": true, "read_only": [], "read_write": [], "homes": [], "files": [], "proc": "/proc", "dev": "/dev", "tmp": "/tmp"}`
	block := func(user, extra string) string {
		return `{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "x", "workspace": [{"step": "password"}]` + extra + `, "process": {"user": "` + user + `", "command": ["x"]}}`
	}
	good := block("builder", "")
	type tc struct {
		name  string
		block string
		facts func(f *RefusalFacts)
		row   RefusalRow
		note  string
	}
	cases := []tc{
		{"none", good, nil, 0, ""},
		{"1 sender", good, func(f *RefusalFacts) { f.SenderPrivileged = false }, refusedSender, "admin or setup"},
		{"2 malformed", block("", ""), nil, RefusedMalformed, "process.user"},
		{"3 value", block("builder", `, "limits": {}, "sandbox": {"uid": 1, "gid": 1, "capabilities": [], "network": true, "own_session": true, "ends_with_node": true, "read_only": ["$$tree$$"], "read_write": [], "homes": [], "files": [], "proc": "/proc", "dev": "/dev", "tmp": "/tmp"}`), nil, RefusedSteps, "$$tree$$"},
		{"3 step", `{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "x", "workspace": [{"step": "clone", "into": "/c"}], "process": {"user": "builder", "command": ["x"]}}`, nil, RefusedSteps, "needs a password step"},
		{"4 own user", block("lab-1", ""), nil, RefusedUser, "this node's own"},
		{"4 a node's user", block("lab-2", ""), nil, RefusedUser, "a node's user"},
		{"4 admin", block("admin", ""), nil, RefusedUser, "admin or setup"},
		{"5 works for another", good, func(f *RefusalFacts) { f.BoundNode = "lab-3" }, refusedOtherNode, "lab-3"},
		{"5 works for this one", good, func(f *RefusalFacts) { f.BoundNode = "lab-1" }, 0, ""},
		{"6 no password", good, func(f *RefusalFacts) { f.ServerNode = false }, RefusedNoPassword, "builder"},
		{"6 a password held", good, func(f *RefusalFacts) { f.ServerNode, f.HasPassword = false, true }, 0, ""},
		{"7 unconfined", good, func(f *RefusalFacts) { f.NothingUnconfined = true }, refusedUnconfined, "unconfined"},
		{"7 confined", block("builder", ", "+sb), func(f *RefusalFacts) { f.NothingUnconfined = true }, 0, ""},
		{"8 memory provided", block("builder", `, "limits": {"memory": "1G"}`), func(f *RefusalFacts) { f.Provides.Limits = append(f.Provides.Limits, messages.LimitMemory) }, 0, ""},
		{"8 memory", block("builder", `, "limits": {"memory": "1G"}`), func(f *RefusalFacts) {
			f.Provides.LimitWhy = map[string]string{messages.LimitMemory: "no cgroup v1 memory or pids hierarchy is mounted"}
		}, RefusedUnprovided, "limits.memory: this node cannot enforce it: no cgroup v1 memory or pids hierarchy is mounted"},
		{"8 cpu", block("builder", `, "limits": {"cpu": 60}`), func(f *RefusalFacts) { f.Provides.Limits = []string{messages.LimitWall} }, RefusedUnprovided, "limits.cpu"},
		{"8 disk", block("builder", `, "limits": {"disk": "1G"}`), func(f *RefusalFacts) {
			f.Provides.LimitWhy = map[string]string{messages.LimitDisk: "the host has no loop devices"}
		}, RefusedUnprovided, "limits.disk: this node cannot enforce it: the host has no loop devices"},
		{"8 disk provided", block("builder", `, "limits": {"disk": "1G"}`), func(f *RefusalFacts) { f.Provides.Limits = append(f.Provides.Limits, messages.LimitDisk) }, 0, ""},
		{"8 no bwrap", block("builder", ", "+sb), func(f *RefusalFacts) { f.Provides.Sandbox = false }, RefusedUnprovided, "sandbox"},
		{"8 capability", block("builder", ", "+strings.Replace(sb, `"capabilities": []`, `"capabilities": ["CAP_SYS_ADMIN"]`, 1)), nil, RefusedUnprovided, "CAP_SYS_ADMIN"},
		{"8 network", block("builder", ", "+strings.Replace(sb, `"network": true`, `"network": false`, 1)), func(f *RefusalFacts) { f.Provides.NoNetwork = false }, RefusedUnprovided, "sandbox.network"},
		{"8 terminal", `{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "x", "process": {"user": "builder", "command": ["x"], "terminal": true}}`, nil, RefusedUnprovided, "process.terminal"},
		{"8 session", `{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "x", "process": {"user": "builder", "command": ["x"], "session": true}}`, nil, RefusedUnprovided, "process.session"},
		{"8 manual", `{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "x", "process": {"user": "builder", "command": ["x"], "manual": true}}`, nil, RefusedUnprovided, "process.manual"},
		{"8 terminal held", `{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "x", "process": {"user": "builder", "command": ["x"], "terminal": true, "session": true, "manual": true}}`, func(f *RefusalFacts) {
			f.Provides.Terminal, f.Provides.Deliveries, f.Provides.Manual = true, true, true
		}, 0, ""},
		// A holder starts a terminal's command as the launcher does, limits
		// in place before its first instruction.
		{"8 cpu on a terminal provided", `{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "x", "limits": {"cpu": 60}, "process": {"user": "builder", "command": ["x"], "terminal": true}}`, func(f *RefusalFacts) {
			f.Provides.Terminal, f.Provides.Limits = true, []string{messages.LimitWall, messages.LimitCPU, messages.LimitProcesses}
		}, 0, ""},
		{"8 cpu on a terminal not provided", `{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "x", "limits": {"cpu": 60}, "process": {"user": "builder", "command": ["x"], "terminal": true}}`, func(f *RefusalFacts) {
			f.Provides.Terminal, f.Provides.Limits = true, []string{messages.LimitWall}
		}, RefusedUnprovided, "limits.cpu: this node cannot enforce it"},
		// Order: the first row that holds counts.
		{"1 before 2", block("", ""), func(f *RefusalFacts) { f.SenderPrivileged = false }, refusedSender, ""},
		{"2 before 4", block("", `, "process2": 1`), nil, RefusedMalformed, ""},
		{"3 before 4", strings.Replace(block("lab-1", ""), `"password"`, `"shell"`, 1), nil, RefusedSteps, "shell"},
		{"4 before 5", block("admin", ""), func(f *RefusalFacts) { f.BoundNode = "lab-3" }, RefusedUser, ""},
		{"5 before 6", good, func(f *RefusalFacts) { f.BoundNode, f.ServerNode = "lab-3", false }, refusedOtherNode, ""},
		{"6 before 7", good, func(f *RefusalFacts) { f.ServerNode, f.NothingUnconfined = false, true }, RefusedNoPassword, ""},
		{"7 before 8", block("builder", `, "limits": {"memory": "1G"}`), func(f *RefusalFacts) { f.NothingUnconfined = true }, refusedUnconfined, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := ok
			f.Provides.Limits = append([]string(nil), ok.Provides.Limits...)
			if c.facts != nil {
				c.facts(&f)
			}
			m, err := ReadMessage(fenceRun(c.block))
			r, _ := m.(*Run)
			got := RunRefusal(r, err, f)
			if c.row == 0 {
				if got != nil {
					t.Fatalf("refused: %v", got)
				}
				return
			}
			if got == nil || got.Row != c.row || !strings.Contains(got.Note, c.note) || strings.ContainsAny(got.Note, "\n\r") {
				t.Fatalf("got %v, want row %d naming %q", got, c.row, c.note)
			}
		})
	}
	if RefusedNodeFiles != 9 || RefusedStepFailed != 10 {
		t.Errorf("rows 9 and 10 are %d and %d", RefusedNodeFiles, RefusedStepFailed)
	}
}

// TestClassifyMessage: one case per row of section 3's "A message that
// ... is", and the messages that count.
func TestClassifyMessage(t *testing.T) {
	cases := []struct {
		name string
		m    MessageStanding
		want messageVerdict
		row  int
	}{
		{"1 a run from a user without admin or setup", MessageStanding{Kind: MsgRun}, messageRefused, messageRowRunSender},
		{"a run from an admin, anywhere", MessageStanding{Kind: MsgRun, SenderPrivileged: true}, MessageCounts, 0},
		{"2 a stop from a user without admin or setup", MessageStanding{Kind: MsgStop, WhereItsRun: true}, messageIgnored, messageRowOtherSender},
		{"2 a stop written elsewhere", MessageStanding{Kind: MsgStop, SenderPrivileged: true}, messageIgnored, messageRowOtherSender},
		{"a stop from an admin where its run is", MessageStanding{Kind: MsgStop, SenderPrivileged: true, WhereItsRun: true}, MessageCounts, 0},
		{"2 a started from an admin, not the node", MessageStanding{Kind: MsgStarted, SenderPrivileged: true, WhereItsRun: true}, messageIgnored, messageRowOtherSender},
		{"2 an ended from the node, elsewhere", MessageStanding{Kind: MsgEnded, SenderIsNode: true}, messageIgnored, messageRowOtherSender},
		{"a started from the node where its run is", MessageStanding{Kind: MsgStarted, SenderIsNode: true, WhereItsRun: true}, MessageCounts, 0},
		{"an ended from the node where its run is", MessageStanding{Kind: MsgEnded, SenderIsNode: true, WhereItsRun: true}, MessageCounts, 0},
		{"3 a kind the reader does not know", MessageStanding{Kind: "restart", SenderPrivileged: true, SenderIsNode: true, WhereItsRun: true}, messageIgnored, messageRowUnknownKind},
		{"3 no kind", MessageStanding{SenderPrivileged: true}, messageIgnored, messageRowUnknownKind},
		{"4 a second started", MessageStanding{Kind: MsgStarted, SenderIsNode: true, WhereItsRun: true, SeenBefore: true}, messageIgnored, messageRowSecondReport},
		{"4 a second ended", MessageStanding{Kind: MsgEnded, SenderIsNode: true, WhereItsRun: true, SeenBefore: true}, messageIgnored, messageRowSecondReport},
		{"2 before 4", MessageStanding{Kind: MsgEnded, SeenBefore: true, WhereItsRun: true}, messageIgnored, messageRowOtherSender},
		{"a record from an admin (protocol v1)", MessageStanding{Kind: MsgRecord, SenderPrivileged: true}, MessageCounts, 0},
		{"a record from anyone else", MessageStanding{Kind: MsgRecord}, messageIgnored, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if v, row := ClassifyMessage(c.m); v != c.want || row != c.row {
				t.Errorf("got %v row %d, want %v row %d", v, row, c.want, c.row)
			}
		})
	}
}

// TestRunKeepFilters: keep.mask and keep.match (D98) read, round trip,
// take values in mask (not in match), and are refused naming the field
// and what is wrong: a match that is not RE2 says why, as row 2's note.
func TestRunKeepFilters(t *testing.T) {
	run := func(keep string) string {
		return `{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "x", "workspace": [{"step": "directory", "at": "$$root$$/w"}], "process": {"user": "b", "command": ["x"], "keep": ` + keep + `}}`
	}
	r := mustRun(t, run(`{"mask": ["hunter2", "$$user$$@$$workspace$$"], "match": "^(ERROR|FATAL)\\b"}`))
	k := r.Process.Keep
	if !reflect.DeepEqual(k.Mask, []string{"hunter2", "$$user$$@$$workspace$$"}) || k.Match != `^(ERROR|FATAL)\b` {
		t.Fatalf("keep read as %+v", k)
	}
	enc, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if back := mustRun(t, string(unfenceT(t, enc))); !reflect.DeepEqual(back, r) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back.Process.Keep, r.Process.Keep)
	}
	if err := CheckRunValues(r, nil); err != nil {
		t.Errorf("values set by then refused: %v", err)
	}
	x, err := r.Expand(RunValues{ValueRoot: "/r", ValueUser: "b", ValueWorkspace: "/r/w", ValueRun: "h"})
	if err != nil {
		t.Fatal(err)
	}
	if got := x.Process.Keep.Mask; !reflect.DeepEqual(got, []string{"hunter2", "b@/r/w"}) {
		t.Errorf("mask expanded to %q", got)
	}
	if x.Process.Keep.Match != k.Match || r.Process.Keep.Mask[1] != "$$user$$@$$workspace$$" {
		t.Errorf("expand changed match or the run itself: %+v, %+v", x.Process.Keep, r.Process.Keep)
	}
	// A match's $ is its own: $$tree$$ in a match is not a value.
	if err := CheckRunValues(mustRun(t, run(`{"match": "$$tree$$"}`)), nil); err != nil {
		t.Errorf("a match naming what looks like a value: %v", err)
	}
	// A mask naming a value nothing sets by then is row 3.
	m, err := ReadMessage(fenceRun(run(`{"mask": ["$$tree$$"]}`)))
	if err != nil {
		t.Fatal(err)
	}
	ref := RunRefusal(m.(*Run), nil, RefusalFacts{SenderPrivileged: true, NodeUser: "lab-1"})
	if ref == nil || ref.Row != RefusedSteps || !strings.Contains(ref.Note, "process.keep.mask[0]") || !strings.Contains(ref.Note, "$$tree$$") {
		t.Errorf("a mask naming an unset value: %v, want row 3 naming process.keep.mask[0]", ref)
	}
	// An invalid match: row 2, the note naming the field and RE2's reason.
	_, err = ReadMessage(fenceRun(run(`{"match": "a{2,1}"}`)))
	ref = RunRefusal(nil, err, RefusalFacts{SenderPrivileged: true})
	if ref == nil || ref.Row != RefusedMalformed || !strings.Contains(ref.Note, "process.keep.match: ") || !strings.Contains(ref.Note, "RE2") || !strings.Contains(ref.Note, "invalid repeat count") {
		t.Errorf("an invalid match: %v", ref)
	}
	// keep with filters alone keeps the defaults of its sizes.
	p := mustRun(t, run(`{"match": "x"}`)).Process.WithDefaults(true)
	if p.Keep.Stderr != defaultKeepSize || p.Keep.Stdout != defaultKeepSize || p.Keep.StdoutWhen != keepOnFailure || p.Keep.Match != "x" {
		t.Errorf("defaults with a match: %+v", p.Keep)
	}
}
