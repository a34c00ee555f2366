package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// linkedByOcxd are the cmd/internal packages ocxd links, frozen as they
// were measured when this test was written (issue 40, D87) and taken down
// as they left (D88), so that the set cannot grow. Issue 40 wants 8 or
// fewer, and no CLI action, console form or release manager: node,
// workspaces, tools, console, model and release are not on it (the
// socket derives its status with host/nodestatus and renders its pages
// with consolepage). daemonclient, noderepos, procs and version left
// cmd/ for host/ and fossilio/, where what they do belongs (a client of
// the daemon, the node's open repositories, the process table's offers,
// the build's version), and remote's client of the server to
// fossilio/remote (its puller, the daemon's shell of actors/pull, to
// daemon/otherhosts). When a package leaves, take it off this list.
var linkedByOcxd = []string{
	"answers",
	"consolepage",
	"daemon",
	"daemon/otherhosts",
	"daemon/reaper",
	"hook",
	"hookshell",
	"runengine",
}

// TestOcxdLinks: ocxd links no cmd/internal package beyond linkedByOcxd.
func TestOcxdLinks(t *testing.T) {
	const internal = "github.com/ocx-go/ocx/cmd/internal/"
	out, err := exec.Command("go", "list", "-deps", "github.com/ocx-go/ocx/cmd/ocxd").Output()
	if err != nil {
		t.Fatalf("go list -deps cmd/ocxd: %v", err)
	}
	deps := strings.Fields(string(out))
	var linked []string
	for _, d := range deps {
		if name, ok := strings.CutPrefix(d, internal); ok {
			linked = append(linked, name)
			if !slices.Contains(linkedByOcxd, name) {
				t.Errorf("ocxd links cmd/internal/%s, not in linkedByOcxd: the set it links may not grow (issue 40)", name)
			}
		}
	}
	if !slices.Contains(linked, "daemon") {
		t.Fatalf("go list -deps cmd/ocxd listed no cmd/internal/daemon; the check saw nothing:\n%s", out)
	}
	t.Logf("ocxd links %d cmd/internal packages (issue 40's bar: 8)", len(linked))
}
