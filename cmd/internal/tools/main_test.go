package tools_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// The actions run fossil commands and HTTP writes, which start goroutines;
// none may outlive the tests. The release the daemon's tests build is
// removed after them.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "tools: goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}
