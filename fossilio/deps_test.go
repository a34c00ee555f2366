package fossilio_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestFossilioDoesNoHostIO: fossilio reads and writes Fossil's record; the
// host's I/O (the agents root, its locks, its processes) is host's, which
// may use fossilio but not the other way round (issue 40, D87: the
// flocked listening index moved to host/listening). No package of
// fossilio depends on any package of host.
func TestFossilioDoesNoHostIO(t *testing.T) {
	const module = "github.com/ocx-go/ocx/"
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"fossilio/...").Output()
	if err != nil {
		t.Fatalf("go list -deps fossilio/...: %v", err)
	}
	ours := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || !strings.HasPrefix(fields[0], module) {
			continue
		}
		ours++
		for _, imp := range fields[1:] {
			if imp == module+"host" || strings.HasPrefix(imp, module+"host/") {
				t.Errorf("%s imports %s: fossilio does no host I/O", fields[0], imp)
			}
		}
	}
	if ours < 3 {
		t.Fatalf("go list -deps fossilio/... listed %d of this module's packages; the check saw nothing", ours)
	}
}
