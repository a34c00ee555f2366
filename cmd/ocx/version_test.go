package main

import (
	"context"
	"strings"
	"testing"
)

// TestVersion: `ocx version` and `ocx --version` print the one version
// line; an unstamped build says dev.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out, errOut strings.Builder
		if code := run(context.Background(), args, &out, &errOut); code != 0 || out.String() != "ocx version dev checkin dev\n" {
			t.Errorf("ocx %s: exit %d, %q %q", strings.Join(args, " "), code, out.String(), errOut.String())
		}
	}
	var out, errOut strings.Builder
	if code := run(context.Background(), []string{"version", "x"}, &out, &errOut); code != 2 {
		t.Errorf("ocx version x: exit %d", code)
	}
}
