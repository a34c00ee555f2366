package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
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
// locked it returns, so no function ocxd runs may lock one. A package
// ocxd links may lock one only in a function listed in otherPrograms,
// the entry of another program, which no package ocxd links calls.
func TestDaemonLocksNoThread(t *testing.T) {
	const module = "github.com/ocx-go/ocx/"
	otherPrograms := map[string]string{
		"host/unixhost.EnterMain": "`ocx run enter`, the process nsenter starts in a run's sandbox (D100)",
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Dir}}", module+"cmd/ocxd").Output()
	if err != nil {
		t.Fatalf("go list -deps cmd/ocxd: %v", err)
	}
	fset := token.NewFileSet()
	read, calls := 0, map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, dir, _ := strings.Cut(l, " ")
		pkg, ok := strings.CutPrefix(path, module)
		if !ok {
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
			file, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			read++
			for _, d := range file.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					sel, ok := n.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "runtime" && sel.Sel.Name == "LockOSThread" {
						if _, other := otherPrograms[pkg+"."+fn.Name.Name]; !other {
							t.Errorf("%s: %s locks a thread: a command step's hang-up would fire when that thread ends, not with the daemon", fset.Position(sel.Pos()), fn.Name.Name)
						}
					}
					for entry := range otherPrograms {
						if name := entry[strings.LastIndexByte(entry, '.')+1:]; sel.Sel.Name == name {
							calls[entry]++
						}
					}
					return true
				})
			}
		}
	}
	if read < 100 {
		t.Fatalf("read %d files of ocxd's packages; the check saw nothing", read)
	}
	for entry, why := range otherPrograms {
		if calls[entry] > 0 {
			t.Errorf("a package ocxd links calls %s, %s, which locks a thread", entry, why)
		}
	}
}

// TestGitTracksNoBinary: git tracks no build output and no binary (a
// screenshot the tests take stays beside the docs, untracked): a tracked
// file outside a testdata directory holds no NUL byte and no executable
// format's magic. A testdata file may (a /proc cmdline is NUL-separated).
func TestGitTracksNoBinary(t *testing.T) {
	out, err := exec.Command("git", "-C", filepath.Join("..", ".."), "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	if len(files) < 100 {
		t.Fatalf("git lists %d files; the check saw nothing", len(files))
	}
	for _, f := range files {
		if strings.Contains("/"+f, "/testdata/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("..", "..", f))
		if err != nil {
			t.Fatal(err)
		}
		head := b[:min(len(b), 8000)]
		for _, magic := range [][]byte{{0x7f, 'E', 'L', 'F'}, []byte("\x89PNG"), []byte("GIF8"), {0xff, 0xd8, 0xff}} {
			if bytes.HasPrefix(head, magic) {
				t.Errorf("git tracks %s, a binary (%q)", f, magic)
			}
		}
		if bytes.IndexByte(head, 0) >= 0 {
			t.Errorf("git tracks %s, which holds a NUL byte", f)
		}
	}
}
