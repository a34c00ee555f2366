package fossilio_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The sync client and the harness start goroutines (HTTP, process waits);
// none may outlive the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
