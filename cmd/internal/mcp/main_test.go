package mcp_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Serve runs a goroutine per connection; none may outlive the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
