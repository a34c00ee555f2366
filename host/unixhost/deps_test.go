//go:build linux

package unixhost

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// TestOSCallsOnlyInUnixhost keeps the OS calls here (STYLE 11): no package
// of this module but host/unixhost imports syscall or golang.org/x/sys (the
// packages under cmd/internal, cmd's mains, host, actors, fossilio and the
// rest reach the kernel through unixhost's functions), so there is one flock
// helper, one pidfd signal, one atomic write. The integration tests'
// harness is let off: it is a test's, kills what the tests start, and no
// binary imports it. Test files are not held to it (go list's Imports are
// the package's own). It runs go list as tailscale's tstest/deptest does, and
// as actors' TestNoHostImports.
func TestOSCallsOnlyInUnixhost(t *testing.T) {
	const module = "github.com/ocx-go/ocx/"
	allowed := map[string]bool{
		module + "host/unixhost": true, // where they live
		module + "itest/harness": true, // the integration tests' own
		// The node actions' shared test fixture, which starts and stops
		// a real daemon: no binary imports it (checked below).
		module + "cmd/internal/node/nodetest": true,
	}
	banned := func(imp string) bool {
		return imp == "syscall" || imp == "golang.org/x/sys" || strings.HasPrefix(imp, "golang.org/x/sys/")
	}
	cmd := exec.Command("go", "list", "-json", module+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -json %s...: %v\n%s", module, err, stderr.String())
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	cmdInternal := 0
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if strings.HasPrefix(p.ImportPath, module+"cmd/internal/") {
			cmdInternal++
		}
		for _, imp := range p.Imports {
			if allowed[imp] && imp != module+"host/unixhost" && !allowed[p.ImportPath] {
				t.Errorf("%s imports %s, a test's own package: only tests may", p.ImportPath, imp)
			}
		}
		if allowed[p.ImportPath] {
			continue
		}
		for _, imp := range p.Imports {
			if banned(imp) {
				t.Errorf("%s imports %s; OS calls live in host/unixhost only: call a function of its, or add one there", p.ImportPath, imp)
			}
		}
	}
	if cmdInternal == 0 {
		t.Fatalf("go list %s... listed no package under cmd/internal; the check saw nothing", module)
	}
}
