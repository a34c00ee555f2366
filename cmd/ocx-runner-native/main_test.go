package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// runnerExe is the runner built for the tests, run as a child process as
// a session runs it.
var runnerExe string

// The tests serve the model, the proxy and MCP in goroutines; none may
// outlive them.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ocx-runner-native-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	runnerExe = filepath.Join(dir, "ocx-runner-native")
	build := exec.Command("go", "build", "-o", runnerExe, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build ocx-runner-native: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "ocx-runner-native: goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}
