package daemon

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: a pipe
// reader, a launcher's follower, or the actor system's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
