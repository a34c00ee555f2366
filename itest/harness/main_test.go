package harness_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The harness waits for each server in a goroutine; none may outlive the
// tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
