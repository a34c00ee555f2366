package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/docs/design"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/model"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// The demo is run for real, from the built release, by itest's TestDemo;
// here only what it refuses before starting anything.
func TestDemoRefusesBeforeStartingAnything(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"demo", "--project", "../x"}, &out, &out); code != 2 || !strings.Contains(out.String(), "project") {
		t.Errorf("bad project: %d %q", code, out.String())
	}
	out.Reset()
	empty := t.TempDir()
	if code := run(context.Background(), []string{"demo", "--from", empty, "--dir", t.TempDir()}, &out, &out); code != 1 || !strings.Contains(out.String(), "has no ocx") {
		t.Errorf("no release binaries: %d %q", code, out.String())
	}
	// Without the small hook and console every sync and every console
	// page would take the slow path (issue 42): refused, naming it.
	for _, name := range host.ReleasePrograms {
		if err := os.WriteFile(filepath.Join(empty, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	if code := run(context.Background(), []string{"demo", "--from", empty, "--dir", t.TempDir()}, &out, &out); code != 1 || !strings.Contains(out.String(), "has no "+host.HookProgram) {
		t.Errorf("no hook program: %d %q", code, out.String())
	}
}

func TestUsage(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), nil, &out, &out); code != 2 || !strings.Contains(out.String(), "demo") {
		t.Fatalf("no arguments: %d %q", code, out.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"nope"}, &out, &out); code != 2 || !strings.Contains(out.String(), `unknown command "nope"`) {
		t.Fatalf("unknown command: %d %q", code, out.String())
	}
	for _, args := range [][]string{{"login"}, {"workspace", "nope"}, {"session", "start"}, {"listener", "add", "a/b", "c/d"}} {
		out.Reset()
		if code := run(context.Background(), args, &out, &out); code != 2 {
			t.Errorf("ocx %v: exit %d, want 2 (usage): %q", args, code, out.String())
		}
	}
	for _, args := range [][]string{{"login", "add", "--help"}, {"workspace", "add", "--help"}, {"session", "--help"}, {"status", "--help"}, {"hook", "install", "--help"}} {
		out.Reset()
		if code := run(context.Background(), args, &out, &out); code != 0 || !strings.Contains(out.String(), "usage: ocx") {
			t.Errorf("ocx %v: exit %d: %q", args, code, out.String())
		}
	}
}

// TestDemoModelIsCreatesDefault: the model.json the demo writes for its
// model server offers that model, so create gives an agent with no model
// of its own the demo's (D52), not a refusal.
func TestDemoModelIsCreatesDefault(t *testing.T) {
	t.Setenv(demoModelURLEnv, "http://127.0.0.1:1")
	t.Setenv(demoModelEnv, "llama3.2")
	path := filepath.Join(t.TempDir(), "model.json")
	if name, err := demoModel(path); err != nil || name != "llama3.2" {
		t.Fatalf("demoModel: %q, %v", name, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := model.DecodeConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := model.ChooseModel(c, "native", ""); err != nil || got != "llama3.2" {
		t.Errorf("create's model on the demo node: %q, %v", got, err)
	}
}

// TestWritePageTriesALockedWriteAgain: a `fossil wiki` write that met
// another writer ("database is locked", nothing written) is tried again and
// lands once; any other failure is returned at once. The fossil here is the
// real one behind a script that fails as Fossil does the first time.
func TestWritePageTriesALockedWriteAgain(t *testing.T) {
	fossil, err := exec.LookPath("fossil")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	repo := filepath.Join(dir, "r.fossil")
	fsl := &fossilio.Fossil{Home: dir, User: "admin", Dir: dir}
	if out, err := fsl.Run(context.Background(), []string{"new", "--admin-user", "admin", repo}); err != nil {
		t.Fatalf("fossil new: %v\n%s", err, out)
	}
	page := filepath.Join(dir, "page.md")
	if err := os.WriteFile(page, []byte("version 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tries := filepath.Join(dir, "tries")
	script := filepath.Join(dir, "fossil")
	os.WriteFile(script, []byte("#!/bin/sh\necho x >> "+tries+"\nif [ \"$(wc -l < "+tries+")\" -le 2 ]; then echo 'Database error: database is locked: {INSERT INTO rcvfrom}'; exit 1; fi\nexec "+fossil+" \"$@\"\n"), 0o700)
	fsl.Exe = script
	if err := writePage(context.Background(), fsl, repo, "workspace/demo", page); err != nil {
		t.Fatalf("writePage after two locked tries: %v", err)
	}
	if b, _ := os.ReadFile(tries); strings.Count(string(b), "x") != 3 {
		t.Errorf("fossil ran %d times, want 3", strings.Count(string(b), "x"))
	}
	r, err := fossilio.OpenNode(repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if w, err := r.WikiPage(context.Background(), "workspace/demo"); err != nil || !strings.Contains(w.Text, "version 1") {
		t.Errorf("the page: %+v %v", w, err)
	}
	// A second write is a new version (commit), and a failure that is not
	// a lock is not tried again.
	os.WriteFile(script, []byte("#!/bin/sh\necho x >> "+tries+"\necho 'no such page'; exit 1\n"), 0o700)
	os.Remove(tries)
	if err := writePage(context.Background(), fsl, repo, "workspace/demo", page); err == nil || !strings.Contains(err.Error(), "no such page") {
		t.Errorf("writePage with fossil failing otherwise: %v", err)
	}
	if b, _ := os.ReadFile(tries); strings.Count(string(b), "x") != 1 {
		t.Errorf("fossil ran %d times for a failure that is no lock, want 1", strings.Count(string(b), "x"))
	}
}

// TestDemoEchoPattern (D84): the demo's run/echo is a pattern, and a run
// from it with section 14's objective is section 14's echo, in full.
func TestDemoEchoPattern(t *testing.T) {
	p, err := runmsg.DecodeRunPattern(demoRunPattern, []byte(demoEchoPattern))
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.Apply(nil, "lab-1", "Say hello.")
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	m, err := runmsg.DecodeMessage([]byte(design.Example("run-echo.json")))
	if err != nil {
		t.Fatal(err)
	}
	want, err := m.Encode()
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("a run from the demo's pattern:\n%s\nwant section 14's echo:\n%s", got, want)
	}
}
