package session_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/cmd/internal/session"
	"github.com/ocx-go/ocx/host/runner"
)

// TestRunnerInputIsOneLine: the line a runner is given is one line, the
// text kept as written and an unknown sender left out.
func TestRunnerInputIsOneLine(t *testing.T) {
	in := runner.Input{Post: strings.Repeat("3", 64), Text: "two\nlines <b>&", Record: strings.Repeat("1", 64), Objective: "o"}
	line := string(in.Line())
	if strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") {
		t.Fatalf("not one line: %q", line)
	}
	if strings.Contains(line, `"from"`) {
		t.Errorf("an unknown sender is written: %q", line)
	}
	if !strings.Contains(line, `"text":"two\nlines <b>&"`) {
		t.Errorf("the text is not kept as written: %q", line)
	}
}

// TestParseArgs: the session's verbs and flags, and the usage errors.
func TestParseArgs(t *testing.T) {
	h := strings.Repeat("ab", 32)
	o, err := session.ParseArgs([]string{"serve", "--root", "/srv/agents", "claude-1/demo", "--launch=" + h})
	if err != nil {
		t.Fatal(err)
	}
	if o.Verb != "serve" || o.Key.String() != "claude-1/demo" || o.Root != "/srv/agents" || o.Launch != h {
		t.Errorf("parsed %+v", o)
	}
	o, err = session.ParseArgs([]string{"run", "claude-1/demo", "--root", "/srv/agents"})
	if err != nil || o.Session != "" || o.Launch != "" {
		t.Errorf("run: %+v %v", o, err)
	}
	var out, errOut strings.Builder
	if code := session.Main([]string{"--version"}, &out, &errOut); code != session.ExitOK || out.String() != "workspace version dev checkin dev\n" {
		t.Errorf("workspace --version: exit %d, %q %q", code, out.String(), errOut.String())
	}
	if code := session.Main([]string{"--version", "x"}, &out, &errOut); code != session.ExitUsage {
		t.Errorf("workspace --version x: exit %d", code)
	}
	var ue *session.UsageError
	for _, args := range [][]string{
		{"serve", "claude-1/demo", "--root", "/srv/agents"},
		{"run", "claude-1/demo", "--root", "/srv/agents", "--launch", h},
		{"serve", "claude-1/demo", "--root", "/srv//agents", "--launch", h},
		{"start", "claude-1/demo", "--root", "/srv/agents", "--ready-fd", "-1"},
	} {
		if _, err := session.ParseArgs(args); !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
