package remote

import (
	"testing"

	"go.uber.org/goleak"
)

// The pokes' listener serves in goroutines; none may outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
