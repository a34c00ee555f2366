package hook_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The tests read pipes in goroutines; none may outlive them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
