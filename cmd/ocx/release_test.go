package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages/protocol"
)

// TestReleaseCommandLine: `ocx help release` tells the layout and the
// actions; a wrong source is a usage error; `release init --from DIR
// --json` makes a release root and answers with its check-in.
func TestReleaseCommandLine(t *testing.T) {
	ctx := context.Background()
	var out bytes.Buffer
	if code := run(ctx, []string{"help", "release"}, &out, &out); code != 0 || !strings.Contains(out.String(), "releases/CHECKIN") || !strings.Contains(out.String(), "rollback") {
		t.Fatalf("ocx help release: %d %q", code, out.String())
	}
	for _, args := range [][]string{
		{"release"}, {"release", "nope"}, {"release", "stage"}, {"release", "stage", "--from", "/x", "abc"},
		{"release", "stage", "--repo", "/r.fossil", "a", "b"}, {"release", "init"}, {"release", "rollback", "x"},
		{"release", "accept", "a", "b"}, {"release", "status", "x"},
	} {
		out.Reset()
		if code := run(ctx, args, &out, &out); code != 2 {
			t.Errorf("ocx %v: exit %d, want 2 (usage): %q", args, code, out.String())
		}
	}
	for _, act := range []string{"init", "stage", "accept", "rollback", "status"} {
		out.Reset()
		if code := run(ctx, []string{"release", act, "--help"}, &out, &out); code != 0 || !strings.Contains(out.String(), "usage: ocx release "+act) {
			t.Errorf("ocx release %s --help: %d %q", act, code, out.String())
		}
	}

	checkin := strings.Repeat("5e", 20)
	from := t.TempDir()
	for _, p := range []string{"ocx", "ocxd", "workspace"} {
		script := fmt.Sprintf("#!/bin/sh\ncase \"$1\" in\nversion|--version) echo '%s version v0.0.0-1-5e checkin %s' ;;\n--handoff-version) echo %d ;;\nesac\n", p, checkin, protocol.HandoffVersion)
		if err := os.WriteFile(filepath.Join(from, p), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	root := filepath.Join(t.TempDir(), "release")
	out.Reset()
	var stderr bytes.Buffer
	if code := run(ctx, []string{"release", "init", root, "--from", from, "--json"}, &out, &stderr); code != 0 {
		t.Fatalf("release init: %d %s %s", code, out.String(), stderr.String())
	}
	var a struct {
		Result *string `json:"result"`
	}
	if err := json.Unmarshal(out.Bytes(), &a); err != nil || a.Result == nil || *a.Result != checkin {
		t.Fatalf("release init's answer %q: %v", out.String(), err)
	}
	if target, err := os.Readlink(filepath.Join(root, "current")); err != nil || target != "releases/"+checkin {
		t.Fatalf("current -> %q, %v", target, err)
	}
}
