package hookshell

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: the
// watch's loop, a hook run's waiter, or the file events' release.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
