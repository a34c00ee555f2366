package reexeccheck

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves an early probe running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
