package node_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The actions run fossil commands and HTTP writes, which start goroutines;
// none may outlive the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
