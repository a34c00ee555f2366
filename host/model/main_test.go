package model_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The proxy serves HTTP in goroutines; none may outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
