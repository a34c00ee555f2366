package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestConsoleLinksTheSocketClientAlone: ocx-console starts at every page, so
// it links of this module the socket's client (host/nodesock) and what
// that needs, as measured when this test was written (issue 40, D87):
// no cmd/internal package, no fossilio, no actors.
func TestConsoleLinksTheSocketClientAlone(t *testing.T) {
	const module = "github.com/ocx-go/ocx/"
	allowed := []string{"cmd/ocx-console", "host/nodesock", "host", "host/unixhost", "messages"}
	out, err := exec.Command("go", "list", "-deps", module+"cmd/ocx-console").Output()
	if err != nil {
		t.Fatalf("go list -deps cmd/ocx-console: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, module+"host/nodesock") {
		t.Fatalf("go list -deps cmd/ocx-console listed no host/nodesock; the check saw nothing:\n%s", out)
	}
	for _, d := range deps {
		// messages is split by concern (D89): its packages go with it.
		if name, ok := strings.CutPrefix(d, module); ok && !slices.Contains(allowed, name) && !strings.HasPrefix(name, "messages/") {
			t.Errorf("ocx-console links %s: it links the socket's client alone", name)
		}
	}
}
