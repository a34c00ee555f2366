package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
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

// TestDaemonLocksNoThread: a command step, started by ocxd, is hung up
// when the thread that started it ends (Pdeathsig, D99), which must then
// mean the daemon's end: Go ends a thread only when a goroutine that
// locked it returns, so no package of the module ocxd links may lock one.
func TestDaemonLocksNoThread(t *testing.T) {
	const module = "github.com/ocx-go/ocx/"
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Dir}}", module+"cmd/ocxd").Output()
	if err != nil {
		t.Fatalf("go list -deps cmd/ocxd: %v", err)
	}
	read := 0
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, dir, _ := strings.Cut(l, " ")
		if !strings.HasPrefix(path, module) {
			continue
		}
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			read++
			if bytes.Contains(b, []byte("LockOSThread(")) {
				t.Errorf("%s locks a thread: a command step's hang-up would fire when that thread ends, not with the daemon", f)
			}
		}
	}
	if read < 100 {
		t.Fatalf("read %d files of ocxd's packages; the check saw nothing", read)
	}
}
