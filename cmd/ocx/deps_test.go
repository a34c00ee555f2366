package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestToolsLinkNoActors: `ocx` (and with it the hook, `ocx hook`) reaches
// the daemon through host/daemonclient, so it links neither the
// actors nor the actor system under them. `workspace` does not either.
func TestToolsLinkNoActors(t *testing.T) {
	const module = "github.com/ocx-go/ocx/"
	for _, main := range []string{"cmd/ocx", "cmd/workspace", "cmd/internal/hook"} {
		out, err := exec.Command("go", "list", "-deps", module+main).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", main, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("go list -deps %s listed %d packages; the check saw nothing", main, len(deps))
		}
		for _, d := range deps {
			if d == module+"actors" || strings.Contains(d, "protoactor") || d == module+"cmd/internal/daemon" {
				t.Errorf("%s links %s", main, d)
			}
			// A schema validator compiles its meta-schemas at every start:
			// 3 ms of each run's holder (docs/design/validate is the tests').
			if strings.Contains(d, "santhosh-tekuri/jsonschema") || d == module+"docs/design/validate" {
				t.Errorf("%s links %s, whose init slows every start", main, d)
			}
		}
	}
}
