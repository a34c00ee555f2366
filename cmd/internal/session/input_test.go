package session_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// tree lists every path below dir with its mode and size: what a refused
// command must leave as it was.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		size := info.Size()
		if info.IsDir() {
			size = 0
		}
		lines = append(lines, fmt.Sprintf("%s %v %d %d", p, info.Mode(), size, info.ModTime().UnixNano()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func runWorkspace(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(release, "workspace"), args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var xerr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &xerr):
	default:
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), o.String(), e.String()
}

func TestBadInputIsRefusedAndWritesNothing(t *testing.T) {
	n := newNode(t)
	w := n.workspace("good-1")
	agents := n.agents
	launch := strings.Repeat("a", 64)
	// A workspace whose binding does not decode.
	broken := filepath.Join(agents, "broken-1", "projects", "demo")
	if err := os.MkdirAll(broken, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(broken, "binding.json"), []byte(`{"ocx": "binding", "login": "broken-1", "project": "demo"`), 0o644); err != nil {
		t.Fatal(err)
	}
	// A workspace whose binding is another's.
	other := filepath.Join(agents, "other-1", "projects", "demo")
	if err := os.MkdirAll(other, 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(w.ws.Binding)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "binding.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	before := tree(t, agents)

	cases := []struct {
		name string
		args []string
		code int
		says []string
	}{
		{"no verb", nil, 2, []string{"no verb"}},
		{"unknown verb", []string{"launch", "good-1/demo"}, 2, []string{`"launch" is not a verb`}},
		{"key without a slash", []string{"serve", "good-1", "--root", agents, "--launch", launch}, 2, []string{"workspace key", "good-1"}},
		{"key with a pseudo-user", []string{"serve", "nobody/demo", "--root", agents, "--launch", launch}, 2, []string{"workspace key", "nobody"}},
		{"key naming the daemon's files", []string{"serve", "ocxd/demo", "--root", agents, "--launch", launch}, 2, []string{"workspace key", "ocxd"}},
		{"key climbing out", []string{"serve", "../x/demo", "--root", agents, "--launch", launch}, 2, []string{"workspace key"}},
		{"two keys", []string{"serve", "good-1/demo", "good-1/other", "--root", agents, "--launch", launch}, 2, []string{"one workspace"}},
		{"relative root", []string{"serve", "good-1/demo", "--root", "agents", "--launch", launch}, 2, []string{`--root "agents" is not an absolute path`}},
		{"unclean root", []string{"serve", "good-1/demo", "--root", agents + "/../agents", "--launch", launch}, 2, []string{"not a clean path"}},
		{"no root", []string{"serve", "good-1/demo", "--launch", launch}, 2, []string{"--root AGENTS is missing"}},
		{"no launch", []string{"serve", "good-1/demo", "--root", agents}, 2, []string{"--launch HASH is missing"}},
		{"launch not a hash", []string{"serve", "good-1/demo", "--root", agents, "--launch", "1234abcd"}, 2, []string{"--launch:", "1234abcd"}},
		{"launch in capitals", []string{"serve", "good-1/demo", "--root", agents, "--launch", strings.Repeat("A", 64)}, 2, []string{"--launch:"}},
		{"unknown flag", []string{"serve", "good-1/demo", "--root", agents, "--launch", launch, "--sandbox"}, 2, []string{"sandbox"}},
		{"session on serve", []string{"serve", "good-1/demo", "--root", agents, "--launch", launch, "--session", launch}, 2, []string{"session"}},
		{"run session not a hash", []string{"run", "good-1/demo", "--root", agents, "--session", "xyz"}, 2, []string{"--session:", "xyz"}},
		{"missing root directory", []string{"serve", "good-1/demo", "--root", agents + "-gone", "--launch", launch}, 1, []string{"agents root", "no such file"}},
		{"workspace that does not exist", []string{"serve", "ghost-1/demo", "--root", agents, "--launch", launch}, 1, []string{"workspace ghost-1/demo does not exist"}},
		{"binding that does not decode", []string{"serve", "broken-1/demo", "--root", agents, "--launch", launch}, 1, []string{"binding.json"}},
		{"binding of another workspace", []string{"serve", "other-1/demo", "--root", agents, "--launch", launch}, 1, []string{"is the binding of good-1/demo"}},
		{"start of a workspace that does not exist", []string{"start", "ghost-1/demo", "--root", agents}, 1, []string{"does not exist"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runWorkspace(t, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d\nstderr: %s", code, c.code, stderr)
			}
			for _, s := range c.says {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
			if stdout != "" {
				t.Errorf("a refused command printed on stdout: %q", stdout)
			}
			if strings.Count(strings.TrimSpace(stderr), "\n") > 12 {
				t.Errorf("the refusal is not short:\n%s", stderr)
			}
		})
	}
	if after := tree(t, agents); after != before {
		t.Errorf("refused commands changed the agents root:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"serve", "--help"}, {"run", "-h"}, {"start", "--help"}} {
		code, stdout, stderr := runWorkspace(t, args...)
		if code != 0 || stderr != "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
		if !strings.Contains(stdout, "usage: workspace") && !strings.Contains(stdout, "usage:\n  workspace") {
			t.Errorf("%v: no usage on stdout:\n%s", args, stdout)
		}
		if len(args) == 2 && !strings.Contains(stdout, "--root") {
			t.Errorf("%v: the flags are not listed:\n%s", args, stdout)
		}
	}
}
