package runner_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/host/runner"
)

func TestFinish(t *testing.T) {
	var b strings.Builder
	if code := runner.Finish(&b, "the answer", nil); code != runner.ExitAnswered || b.String() != "the answer\n" {
		t.Fatalf("%d %q", code, b.String())
	}
	b.Reset()
	err := fmt.Errorf("wrapped: %w", runner.Failf("the model did not answer\nwithin 2s."))
	if code := runner.Finish(&b, "", err); code != runner.ExitFailed ||
		b.String() != "The runner failed: wrapped: the model did not answer within 2s.\n" {
		t.Fatalf("%d %q", code, b.String())
	}
	b.Reset()
	if code := runner.Finish(&b, "", &runner.Failure{What: "--model is missing", Usage: true}); code != runner.ExitUsage {
		t.Fatalf("usage: %d", code)
	}
	long := runner.Note(errors.New(strings.Repeat("é", 1000)))
	if len(long) > 500 || strings.Contains(long, "\n") || !strings.HasSuffix(long, "….") {
		t.Fatalf("long note %q", long)
	}
}
