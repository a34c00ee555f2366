package actors

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: an
// effect's goroutine, a timer, or protoactor's own.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
