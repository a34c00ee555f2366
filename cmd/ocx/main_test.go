package main

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// The demo waits for its server in a goroutine; none may outlive the tests.
func TestMain(m *testing.M) {
	// Inside a session's sandbox, the test binary is BenchmarkMCPPost's
	// client, and nothing else.
	if spec := os.Getenv(mcpBenchEnv); spec != "" {
		if err := mcpBenchClient(spec); err != nil {
			fmt.Fprintln(os.Stderr, "mcp bench client:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The release the tool tests built once goes with them.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if releaseDir != "" {
			os.RemoveAll(releaseDir)
		}
		os.Exit(code)
	}))
}
