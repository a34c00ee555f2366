// Package runnertest is what the tests of a runner that drives an agent's
// CLI share: the runner and its stand-in CLI built once, and a session's
// tree, directory and home to run a turn in, as the session runs it.
package runnertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ocx-go/ocx/host/runner"
	"github.com/ocx-go/ocx/messages"
	"go.uber.org/goleak"
)

// Socket is the MCP socket a sandboxed session's environment names.
const Socket = "/tmp/ocx-mcp/mcp.sock"

// Kit is one runner under test: its name (the CLI's), the model its turns
// ask, and where the build put it.
type Kit struct {
	Name, Model string
	// Bin holds ocx-runner-NAME; Standins the stand-in CLI (testdata/NAME)
	// and a fake ocx, the directory a test puts on PATH.
	Bin, Standins string
}

// Main builds the runner in the current directory and its stand-in CLI in
// ./testdata/NAME, runs the tests, and fails the package if a goroutine
// outlives them (os/exec starts some). It is a test package's TestMain.
func (k *Kit) Main(m *testing.M) {
	code, err := k.buildAndRun(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func (k *Kit) buildAndRun(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "ocx-runner-"+k.Name+"-test-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	k.Bin, k.Standins = filepath.Join(dir, "bin"), filepath.Join(dir, "standins")
	for _, b := range [][]string{{"-o", filepath.Join(k.Bin, "ocx-runner-"+k.Name), "."}, {"-o", filepath.Join(k.Standins, k.Name), "./testdata/" + k.Name}} {
		cmd := exec.Command("go", append([]string{"build"}, b...)...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("go build %v: %v\n%s", b, err, out)
		}
	}
	// The bridge the runner's MCP configuration names; the stand-in never
	// runs it.
	if err := os.WriteFile(filepath.Join(k.Standins, "ocx"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil { // trust:outside a test's own directory
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

// Fixture is one session: its tree, its directory and its home.
type Fixture struct {
	Tree, SessionDir, Home string
	// Path is the sandbox's PATH; Tools says whether the node serves tools.
	Path  string
	Tools bool
	kit   *Kit
}

// NewFixture makes a session's directories, the stand-ins first on PATH.
func (k *Kit) NewFixture(t *testing.T) *Fixture {
	t.Helper()
	d := t.TempDir()
	f := &Fixture{Tree: filepath.Join(d, "tree"), SessionDir: filepath.Join(d, "session"), Home: filepath.Join(d, "home"),
		Path: k.Standins + ":/usr/bin:/bin", Tools: true, kit: k}
	for _, p := range []string{f.Tree, f.SessionDir, f.Home} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// Input is a turn's line on the record rec1.
func Input(text string) runner.Input {
	return runner.Input{Post: "p1", From: "alice", Text: text, Record: "rec1", Objective: "Record rec1: fix the build",
		Login: "agent-1", Session: "rec1"}
}

// Turn runs the built runner as a session does: in the tree, the line on
// standard input, the session's environment; argv nil is --model MODEL.
func (f *Fixture) Turn(t *testing.T, in runner.Input, argv ...string) (stdout, stderr string, code int) {
	t.Helper()
	if argv == nil {
		argv = []string{"--model", f.kit.Model}
	}
	cmd := exec.Command(filepath.Join(f.kit.Bin, "ocx-runner-"+f.kit.Name), argv...)
	cmd.Dir = f.Tree
	cmd.Stdin = bytes.NewReader(in.Line())
	cmd.Env = []string{"PATH=" + f.Path, "HOME=" + f.Home, "OCX_SESSION_DIR=" + f.SessionDir, runner.EnvTurnUsage + "=" + f.UsageFile(),
		"OCX_POST=" + in.Post, "OCX_RECORD=" + in.Record, "OCX_FROM=" + in.From, "STANDIN_CWD=" + f.Tree}
	if f.Tools {
		cmd.Env = append(cmd.Env, "OCX_MCP_SOCKET="+Socket)
	} else {
		cmd.Env = append(cmd.Env, "STANDIN_NO_TOOLS=1")
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// UsageFile is where a turn's runner reports what it used: the session's
// directory's turn-usage.json, as a session names it.
func (f *Fixture) UsageFile() string { return filepath.Join(f.SessionDir, "turn-usage.json") }

// Reported is what the last turn's runner reported, and takes it away as
// the session does; nil when it reported nothing.
func (f *Fixture) Reported(t *testing.T) *messages.RunnerReport {
	t.Helper()
	b, err := os.ReadFile(f.UsageFile()) // trust:outside a test's own directory
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(f.UsageFile())
	r, err := messages.DecodeRunnerReport(b)
	if err != nil {
		t.Fatalf("the runner's report %s does not read: %v", b, err)
	}
	return r
}

// Stored decodes into state what the conversation store holds for rec1,
// and returns its turns; 0 when it holds nothing.
func (f *Fixture) Stored(t *testing.T, state any) int {
	t.Helper()
	s, err := runner.OpenStore(f.SessionDir, f.kit.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := s.Load("rec1")
	if err != nil || c == nil {
		return 0
	}
	if err := json.Unmarshal(c.State, state); err != nil {
		t.Fatal(err)
	}
	return c.Turns
}
