package nodestatus

import (
	"testing"

	"go.uber.org/goleak"
)

// A status reads the process table and each session's files on goroutines
// of its own; none may outlive it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
