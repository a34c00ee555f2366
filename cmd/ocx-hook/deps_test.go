package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestHookLinksTheSocketClientAlone: ocx-hook starts at every receipt, so
// it links of this module the socket's client (host/nodesock) and what
// that needs, as measured when this test was written (issue 40, D87):
// no cmd/internal package, no fossilio, no actors.
func TestHookLinksTheSocketClientAlone(t *testing.T) {
	const module = "github.com/ocx-go/ocx/"
	allowed := []string{"cmd/ocx-hook", "host/nodesock", "host", "host/unixhost", "messages"}
	out, err := exec.Command("go", "list", "-deps", module+"cmd/ocx-hook").Output()
	if err != nil {
		t.Fatalf("go list -deps cmd/ocx-hook: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, module+"host/nodesock") {
		t.Fatalf("go list -deps cmd/ocx-hook listed no host/nodesock; the check saw nothing:\n%s", out)
	}
	for _, d := range deps {
		// messages is split by concern (D89): its packages go with it.
		if name, ok := strings.CutPrefix(d, module); ok && !slices.Contains(allowed, name) && !strings.HasPrefix(name, "messages/") {
			t.Errorf("ocx-hook links %s: it links the socket's client alone", name)
		}
	}
}
