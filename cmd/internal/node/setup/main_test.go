package setup

import (
	"testing"

	"go.uber.org/goleak"
)

// The actions run fossil commands, which start goroutines; none may
// outlive the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
