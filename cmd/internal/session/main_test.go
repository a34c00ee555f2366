package session_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// release is the release directory the tests run the session from: the real
// workspace binary, built once, and the stand-in runner beside it, as a
// release directory holds them (contracts 11).
var release string

// TestMain builds the workspace binary once, then runs the tests; the
// session's own goroutines (pipe reader, turn waits) and the tests' (process
// waits) must all have ended by the end.
func TestMain(m *testing.M) {
	root, err := os.MkdirTemp("", "ocx-session-release-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	release = filepath.Join(root, "releases", "test")
	if err := buildRelease(release); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(root)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(root)
		os.Exit(code)
	}))
}

func buildRelease(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	args := []string{"build", "-o", filepath.Join(dir, "workspace")}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "github.com/ocx-go/ocx/cmd/workspace")
	cmd := exec.Command("go", args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the workspace binary: %v\n%s", err, out)
	}
	runner, err := os.ReadFile(filepath.Join("testdata", "ocx-runner-native"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "ocx-runner-native"), runner, 0o755); err != nil {
		return err
	}
	return os.Symlink(filepath.Join("releases", "test"), filepath.Join(filepath.Dir(filepath.Dir(dir)), "current"))
}
