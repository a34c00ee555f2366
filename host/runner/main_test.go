package runner_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The MCP client starts goroutines for its connection; none may outlive
// a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
