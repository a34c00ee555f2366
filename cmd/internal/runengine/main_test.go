package runengine

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: a run
// waiting for its user's slot, or a holder's watch.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
