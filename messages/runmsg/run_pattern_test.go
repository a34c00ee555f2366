package runmsg

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// patternPage is a pattern's page: prose, then its one fenced block.
func patternPage(layers string) []byte {
	return []byte("A pattern.\n\n```json\n" + layers + "\n```\n")
}

// layersOf is the run's layers, as a pattern holds them: the run's JSON
// without its envelope and objective.
func layersOf(t *testing.T, run string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(run), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ocx", "kind", "node", "objective"} {
		delete(m, k)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRunPatternWritesTheRunInFull (D84): section 14's two runs, each
// made from a pattern holding its layers and the caller's objective,
// with the node given by the caller or defaulted to the tool's, encode to
// exactly the block of the run written in full.
func TestRunPatternWritesTheRunInFull(t *testing.T) {
	for _, c := range []struct{ name, run, objective string }{
		{"echo", seedEcho, "Say hello."},
		{"claude", seedClaude, "Answer what is said here."},
	} {
		p, err := DecodeRunPattern(c.name, patternPage(layersOf(t, c.run)))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want, err := mustRun(t, c.run).Encode()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []struct {
			fields, node string
		}{
			{`{"objective": "` + c.objective + `"}`, "lab-1"},
			{`{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "` + c.objective + `"}`, "other-node"},
		} {
			r, err := p.Apply([]byte(f.fields), f.node, "")
			if err != nil {
				t.Fatalf("%s %s: %v", c.name, f.fields, err)
			}
			got, err := r.Encode()
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s from its pattern with %s:\n%s\nwant the run in full:\n%s (%v)", c.name, f.fields, got, want, err)
			}
		}
	}
}

// TestRunPatternMerge (D84): the caller's fields are a JSON merge patch
// on the pattern: objects merged key by key at every depth, lists
// replaced whole, null removing the pattern's value.
func TestRunPatternMerge(t *testing.T) {
	p, err := DecodeRunPattern("claude", patternPage(layersOf(t, seedClaude)))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.Layers(), ","); got != "workspace,sandbox,limits,process" {
		t.Errorf("layers %q", got)
	}
	fields := `{"objective": "Review.", "node": "lab-2",
		"workspace": [{"step": "directory", "at": "/srv/runs/$$run$$"}],
		"sandbox": {"network": false, "read_only": ["/usr"]},
		"limits": null,
		"process": {"command": ["claude", "-p", "review"], "env": {"HOME": "/home/r", "IS_SANDBOX": null}, "terminal": false}}`
	r, err := p.Apply([]byte(fields), "lab-1", "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Node != "lab-2" || r.Objective != "Review." {
		t.Errorf("envelope: node %q objective %q", r.Node, r.Objective)
	}
	if len(r.Workspace) != 1 || r.Workspace[0].At != "/srv/runs/$$run$$" {
		t.Errorf("workspace not replaced whole: %+v", r.Workspace)
	}
	sb := r.Sandbox
	if sb == nil || sb.Network || strings.Join(sb.ReadOnly, ",") != "/usr" || sb.UID != 1000 || strings.Join(sb.Homes, ",") != "/root/.claude,/root/.claude.json" || sb.Tmp != "/tmp" {
		t.Errorf("sandbox not merged key by key (network and read_only the caller's, the rest the pattern's): %+v", sb)
	}
	if r.Limits != nil {
		t.Errorf("limits: null kept the pattern's: %+v", r.Limits)
	}
	pr := r.Process
	if strings.Join(pr.Command, " ") != "claude -p review" || pr.User != "claude-1" || pr.Terminal || !pr.Session || pr.Cwd != "$$tree$$" {
		t.Errorf("process not merged key by key: %+v", pr)
	}
	if len(pr.Env) != 3 || pr.Env["HOME"] != "/home/r" || pr.Env["USER"] != "$$user$$" || pr.Env["IS_SANDBOX"] != "" {
		t.Errorf("process.env not merged key by key at depth 2: %v", pr.Env)
	}
	if got := strings.Join(p.Over([]byte(fields)), ","); got != "workspace,sandbox.network,sandbox.read_only,limits,process.command,process.env,process.terminal" {
		t.Errorf("Over %q", got)
	}
	// A front end's objective is set over the fields'.
	if r, err := p.Apply([]byte(`{"objective": "theirs"}`), "lab-1", "Mine."); err != nil || r.Objective != "Mine." {
		t.Errorf("the objective given apart: %v %+v", err, r)
	}
	if r, err := p.Apply(nil, "lab-1", "Mine."); err != nil || r.Objective != "Mine." {
		t.Errorf("the objective given alone: %v %+v", err, r)
	}
	// The pattern is unchanged by an Apply: a second gives the first run.
	again, err := p.Apply([]byte(`{"objective": "Answer what is said here."}`), "lab-1", "")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := mustRun(t, seedClaude).Encode()
	if got, _ := again.Encode(); !bytes.Equal(got, want) {
		t.Errorf("an Apply changed the pattern:\n%s", got)
	}
}

// TestRunPatternRefusals (D84): a page that is not a pattern, and fields
// that make no run, are refused naming the field; a field at fault that
// the pattern gave says so.
func TestRunPatternRefusals(t *testing.T) {
	echo := layersOf(t, seedEcho)
	for _, c := range []struct{ name, page, want string }{
		{"a node", `{"node": "lab-1", "process": {}}`, "node: a pattern names no node"},
		{"an objective", `{"objective": "x"}`, "objective: a pattern says not what a run is for"},
		{"the envelope", `{"ocx": 1, "kind": "run"}`, "kind: a pattern is not a message"},
		{"another key", `{"budget": {}}`, "budget: is not a layer of a run"},
		{"a list", `[]`, "is a list; a pattern is a JSON object"},
		{"a layer of the wrong type", `{"sandbox": []}`, "sandbox: must be an object"},
		{"steps of the wrong type", `{"workspace": {}}`, "workspace: must be a list of objects"},
		{"two keys alike", `{"process": {}, "process": {}}`, "process: appears twice"},
	} {
		_, err := DecodeRunPattern("p", patternPage(c.page))
		if err == nil || !strings.Contains(err.Error(), "pattern run/p") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want one naming %q", c.name, err, c.want)
		}
	}
	for _, c := range []struct{ name, text, want string }{
		{"no block", "just prose", "holds 0 fenced JSON blocks"},
		{"two blocks", string(patternPage(echo)) + string(patternPage(echo)), "holds 2 fenced JSON blocks"},
		{"unclosed", "```json\n{}\n", "never closed"},
	} {
		if _, err := DecodeRunPattern("p", []byte(c.text)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want one naming %q", c.name, err, c.want)
		}
	}
	for _, name := range []string{"", "../x", "-x", ".x", "a b", "a/b", strings.Repeat("x", 65)} {
		if err := CheckRunPatternName(name); err == nil {
			t.Errorf("the name %q is taken", name)
		}
	}
	p, err := DecodeRunPattern("echo", patternPage(echo))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, fields, node, want string }{
		{"no objective", `{}`, "lab-1", "objective: is missing"},
		{"no node at all", `{"objective": "x"}`, "", "node: is missing"},
		{"not an object", `"x"`, "lab-1", "is a string; give a run's fields"},
		{"a field no run has", `{"objective": "x", "colour": 1}`, "lab-1", "colour: is not a field"},
		{"another version", `{"ocx": 2, "objective": "x"}`, "lab-1", "ocx: is a number; a run over a pattern is version 1"},
		{"another kind", `{"kind": "stop", "objective": "x"}`, "lab-1", "kind: a pattern makes a run"},
		{"the caller's field at fault", `{"objective": "x", "process": {"cwd": "relative"}}`, "lab-1", "process.cwd"},
		{"a key no process has", `{"objective": "x", "process": {"colour": 1}}`, "lab-1", "process.colour"},
		{"a value the pattern gave, under the caller's null", `{"objective": "x", "process": {"command": null}}`, "lab-1", "process.command: is missing"},
	} {
		_, err := p.Apply([]byte(c.fields), c.node, "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want one naming %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "the pattern run/echo gives it") {
			t.Errorf("%s: %v blames the pattern", c.name, err)
		}
	}
	// A field at fault the pattern gave says so.
	bad, err := DecodeRunPattern("bad", patternPage(`{"process": {"user": "builder", "command": ["true"], "cwd": "relative"}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Apply([]byte(`{"objective": "x", "process": {"command": ["false"]}}`), "lab-1", "")
	var me *MalformedMessage
	if err == nil || !errors.As(err, &me) || !strings.Contains(err.Error(), "process.cwd") || !strings.Contains(err.Error(), "(the pattern run/bad gives it)") {
		t.Errorf("a pattern's own bad field: %v, want process.cwd named as the pattern's", err)
	}
	// A required sandbox field neither gives is missing: named, and not
	// blamed on the pattern, which does not give it.
	sbOnly, err := DecodeRunPattern("sb", patternPage(`{"sandbox": {"uid": 0}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sbOnly.Apply([]byte(`{"objective": "x", "process": {"user": "b", "command": ["true"]}}`), "lab-1", ""); err == nil || !strings.Contains(err.Error(), "sandbox.gid: is missing") || strings.Contains(err.Error(), "gives it") {
		t.Errorf("an incomplete sandbox from the pattern: %v", err)
	}
}

// FuzzRunPattern (D84): any page and any fields either are refused with
// a *FieldError naming what is wrong, or make a run that encodes and
// reads back as itself, as a run written in full would.
func FuzzRunPattern(f *testing.F) {
	f.Add(patternPage(`{"process": {"user": "builder", "command": ["echo", "hello"], "env": {"PATH": "/usr/bin:/bin"}, "keep": {"stdout_when": "always"}}}`), []byte(`{"objective": "Say hello."}`))
	f.Add(patternPage(`{"workspace": [{"step": "directory", "at": "/w/$$run$$"}], "limits": {"wall": "1h"}, "process": {"user": "u", "command": ["x"]}}`), []byte(`{"objective": "x", "limits": null, "process": {"env": {"A": "b"}}}`))
	f.Add(patternPage(`{"sandbox": {"uid": 1}}`), []byte(`{"ocx": 1, "kind": "run", "node": "n", "objective": "x", "sandbox": null, "process": {"user": "u", "command": ["x"]}}`))
	f.Add([]byte("```json\n[]\n```\n"), []byte(`null`))
	f.Fuzz(func(t *testing.T, page, fields []byte) {
		p, err := DecodeRunPattern("fuzz", page)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		r, err := p.Apply(fields, "lab-1", "")
		if err != nil {
			checkRefusal(t, err)
			return
		}
		block, err := r.Encode()
		if err != nil {
			t.Fatalf("a run from a pattern does not encode: %v\n%+v", err, r)
		}
		back, err := ReadMessage(block)
		if err != nil {
			t.Fatalf("a run from a pattern does not read back: %v\n%s", err, block)
		}
		again, err := back.Encode()
		if err != nil || !bytes.Equal(again, block) {
			t.Fatalf("a run from a pattern reads back as another:\n%s\n%s", block, again)
		}
	})
}

// TestRunPatternMergesKeepFilters: a pattern's keep.mask and keep.match
// (D98) merge key by key with the caller's keep, the mask a list replaced
// whole, null removing; a bad match the pattern gives is refused naming
// the field and the pattern.
func TestRunPatternMergesKeepFilters(t *testing.T) {
	p, err := DecodeRunPattern("masked", patternPage(`{"process": {"user": "b", "command": ["x"], "keep": {"stdout_when": "always", "mask": ["a-token"], "match": "ERROR"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		fields string
		mask   []string
		match  string
	}{
		{`{"objective": "x"}`, []string{"a-token"}, "ERROR"},
		{`{"objective": "x", "process": {"keep": {"mask": ["other", "$$user$$"]}}}`, []string{"other", "$$user$$"}, "ERROR"},
		{`{"objective": "x", "process": {"keep": {"match": null}}}`, []string{"a-token"}, ""},
		{`{"objective": "x", "process": {"keep": {"mask": null, "match": "^W"}}}`, nil, "^W"},
	} {
		r, err := p.Apply([]byte(c.fields), "lab-1", "")
		if err != nil {
			t.Fatalf("%s: %v", c.fields, err)
		}
		k := r.Process.Keep
		if k == nil || !slices.Equal(k.Mask, c.mask) || k.Match != c.match || k.StdoutWhen != KeepAlways {
			t.Errorf("%s: keep %+v, want mask %q match %q and the pattern's stdout_when", c.fields, k, c.mask, c.match)
		}
	}
	bad, err := DecodeRunPattern("bad", patternPage(`{"process": {"user": "b", "command": ["x"], "keep": {"match": "(?P<x"}}}`))
	if err == nil {
		_, err = bad.Apply([]byte(`{"objective": "x"}`), "lab-1", "")
	}
	if err == nil || !strings.Contains(err.Error(), "process.keep.match") || !strings.Contains(err.Error(), "RE2") || !strings.Contains(err.Error(), "run/bad") {
		t.Errorf("a pattern's bad match: %v", err)
	}
}
