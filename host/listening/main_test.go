package listening

import (
	"testing"

	"go.uber.org/goleak"
)

// The tests race tools against rebuilds in goroutines, and the harness
// waits for processes; none may outlive the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
