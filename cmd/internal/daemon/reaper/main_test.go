package reaper

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: a
// launcher's follower or a watch.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
