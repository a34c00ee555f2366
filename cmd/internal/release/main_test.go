package release_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The release actions run programs and talk to a daemon and a fossil
// server, which start goroutines; none may outlive the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
