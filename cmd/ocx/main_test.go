package main

import (
	"testing"

	"go.uber.org/goleak"
)

// The demo waits for its server in a goroutine; none may outlive the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
