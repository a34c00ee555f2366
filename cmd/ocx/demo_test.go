package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/cmd/internal/model"
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
