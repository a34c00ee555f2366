package node_test

import (
	"testing"

	"github.com/ocx-go/ocx/cmd/internal/node/nodetest"
)

// The actions start goroutines, none of which may outlive the tests; the
// release the daemon's tests build is removed after them (nodetest.Main).
func TestMain(m *testing.M) { nodetest.Main(m, "node") }
