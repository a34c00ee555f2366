package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ocx-go/ocx/cmd/internal/runner"
	"go.uber.org/goleak"
)

// bin holds the runner and the stand-in claude, built once; standins the
// stand-in alone with a fake ocx, the directory a test puts on PATH.
var bin, standins string

// TestMain builds the runner and the stand-in CLI, runs the tests, and
// fails the package if a goroutine outlives them (os/exec starts some).
func TestMain(m *testing.M) {
	code, err := buildAndRun(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func buildAndRun(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "ocx-runner-claude-test-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	bin, standins = filepath.Join(dir, "bin"), filepath.Join(dir, "standins")
	for _, b := range [][]string{{"-o", filepath.Join(bin, "ocx-runner-claude"), "."}, {"-o", filepath.Join(standins, "claude"), "./testdata/claude"}} {
		cmd := exec.Command("go", append([]string{"build"}, b...)...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("go build %v: %v\n%s", b, err, out)
		}
	}
	// The bridge the MCP configuration names; the stand-in never runs it.
	if err := os.WriteFile(filepath.Join(standins, "ocx"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		return 0, err
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			return 0, fmt.Errorf("goleak: %v", err)
		}
	}
	return code, nil
}

// fixture is one session: its tree, its directory and its home.
type fixture struct {
	tree, sessionDir, home string
	// path is the sandbox's PATH; tools says whether the node serves tools.
	path  string
	tools bool
}

const socket = "/tmp/ocx-mcp/mcp.sock"

func newFixture(t *testing.T) *fixture {
	t.Helper()
	d := t.TempDir()
	f := &fixture{tree: filepath.Join(d, "tree"), sessionDir: filepath.Join(d, "session"), home: filepath.Join(d, "home"),
		path: standins + ":/usr/bin:/bin", tools: true}
	for _, p := range []string{f.tree, f.sessionDir, f.home} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func input(text string) runner.Input {
	return runner.Input{Post: "p1", From: "alice", Text: text, Record: "rec1", Objective: "Record rec1: fix the build",
		Login: "agent-1", Session: "rec1"}
}

// turn runs the built runner as a session does: in the tree, the line on
// standard input, the session's environment.
func (f *fixture) turn(t *testing.T, in runner.Input, argv ...string) (stdout, stderr string, code int) {
	t.Helper()
	if argv == nil {
		argv = []string{"--model", "sonnet"}
	}
	cmd := exec.Command(filepath.Join(bin, "ocx-runner-claude"), argv...)
	cmd.Dir = f.tree
	cmd.Stdin = bytes.NewReader(in.Line())
	cmd.Env = []string{"PATH=" + f.path, "HOME=" + f.home, "OCX_SESSION_DIR=" + f.sessionDir,
		"OCX_POST=" + in.Post, "OCX_RECORD=" + in.Record, "OCX_FROM=" + in.From, "STANDIN_CWD=" + f.tree}
	if f.tools {
		cmd.Env = append(cmd.Env, "OCX_MCP_SOCKET="+socket)
	} else {
		cmd.Env = append(cmd.Env, "STANDIN_NO_TOOLS=1")
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// stored is the session id the conversation store holds, and its turns.
func (f *fixture) stored(t *testing.T) (string, int) {
	t.Helper()
	s, err := runner.OpenStore(f.sessionDir, "claude")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := s.Load("rec1")
	if err != nil || c == nil {
		return "", 0
	}
	var st state
	if err := json.Unmarshal(c.State, &st); err != nil {
		t.Fatal(err)
	}
	return st.SessionID, c.Turns
}
