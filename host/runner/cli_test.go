package runner

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestBridgeOf(t *testing.T) {
	found := func(string) (string, error) { return "/release/ocx", nil }
	b, err := bridgeOf(Env{MCPSocket: "/tmp/ocx-mcp/mcp.sock"}, found)
	if err != nil || b.Command != "/release/ocx" || strings.Join(b.Args, " ") != "mcp connect --socket /tmp/ocx-mcp/mcp.sock" {
		t.Fatalf("bridgeOf = %+v, %v", b, err)
	}
	if _, err := bridgeOf(Env{}, found); err == nil || !strings.Contains(err.Error(), envMCPSocket) {
		t.Fatalf("no socket: %v, want it named", err)
	}
	missing := func(string) (string, error) { return "", errors.New("not found") }
	if _, err := bridgeOf(Env{MCPSocket: "/s"}, missing); err == nil || !strings.Contains(err.Error(), "ocx") {
		t.Fatalf("no ocx: %v, want it named", err)
	}
}

func TestCLIRunMissingIsAFailureNamingIt(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := CLI{Name: "claude"}.Run(context.Background())
	var f *Failure
	if !errors.As(err, &f) || Note(err) != "The runner failed: claude is not on PATH (the sandbox's path must hold it)." {
		t.Fatalf("Run = %v, want a failure naming claude", err)
	}
}

func TestCLIRunExitAndOutput(t *testing.T) {
	out, err := CLI{Name: "sh", Args: []string{"-c", "cat; echo; exit 3"}, Stdin: "prompt"}.Run(context.Background())
	if err != nil || string(out.Stdout) != "prompt\n" || out.Exit != 3 {
		t.Fatalf("Run = %q %d %v", out.Stdout, out.Exit, err)
	}
}

func TestOneLineCutsAtARune(t *testing.T) {
	if got := OneLine(" a\n\tb  c ", 10); got != "a b c" {
		t.Fatalf("OneLine = %q, want %q", got, "a b c")
	}
	// "é" is two bytes; a cut at 4 would split the second.
	if got := OneLine("aéé", 4); got != "aé…" {
		t.Fatalf("OneLine = %q, want %q", got, "aé…")
	}
}
