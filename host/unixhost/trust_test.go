//go:build linux

package unixhost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// pathOpeners are the os functions that open a path by name, following
// every link on it and waiting on a named pipe: below the agents root,
// where an agent may have planted either, the node reads and writes only
// through Root (docs/trust.md).
var pathOpeners = map[string]bool{
	"Open": true, "OpenFile": true, "ReadFile": true, "WriteFile": true, "Create": true, "ReadDir": true,
}

// outsideMark is the comment that says a call's path lies outside the
// agents root, and why; it stands on the call's line or the line above.
const outsideMark = "trust:outside"

// TestFilesBelowTheRootThroughUnixhost fails when code outside host/unixhost
// calls os.Open, os.OpenFile, os.ReadFile, os.WriteFile, os.Create or
// os.ReadDir without saying, in a `trust:outside` comment, why its path is
// not below the agents root (issue 22, docs/trust.md): everything below the
// root is read through Root's bounded, link-refusing readers and written
// through its atomic writer. Test files, the integration tests and the
// stand-in programs under testdata are not held to it.
func TestFilesBelowTheRootThroughUnixhost(t *testing.T) {
	const module = "github.com/ocx-go/ocx/"
	cmd := exec.Command("go", "list", "-json", module+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -json %s...: %v\n%s", module, err, stderr.String())
	}
	var bad []string
	files := 0
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Dir        string
			GoFiles    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		switch {
		case p.ImportPath == module+"host/unixhost",
			strings.HasPrefix(p.ImportPath, module+"itest"),
			p.ImportPath == module+"cmd/internal/node/nodetest", // a test's fixture, its paths the test's
			strings.Contains(p.ImportPath, "/testdata/"):
			continue
		}
		for _, name := range p.GoFiles {
			files++
			found, err := unmarkedOpeners(filepath.Join(p.Dir, name))
			if err != nil {
				t.Fatal(err)
			}
			bad = append(bad, found...)
		}
	}
	if files == 0 {
		t.Fatal("go list listed no Go file; the check saw nothing")
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s: read or write below the agents root through unixhost.Root (ReadFile, ReadTail, WriteFile, OpenFile, OpenDir), or mark the call `// %s WHY` if its path is elsewhere", b, outsideMark)
	}
}

// unmarkedOpeners lists the calls of pathOpeners in the file at path that
// carry no outsideMark, as "FILE:LINE: os.NAME".
func unmarkedOpeners(path string) ([]string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	osName := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "os" {
			osName = "os"
			if imp.Name != nil {
				osName = imp.Name.Name
			}
		}
	}
	if osName == "" || osName == "_" {
		return nil, nil
	}
	// A mark counts for its own line, and, standing alone on its line, for
	// the line below.
	marked := map[int]bool{}
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			if !strings.Contains(c.Text, outsideMark) {
				continue
			}
			pos := fset.Position(c.Pos())
			marked[pos.Line] = true
			lineStart := bytes.LastIndexByte(src[:pos.Offset], '\n') + 1
			if len(bytes.TrimSpace(src[lineStart:pos.Offset])) == 0 {
				marked[pos.Line+1] = true
			}
		}
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		x, ok := sel.X.(*ast.Ident)
		if !ok || x.Name != osName || !pathOpeners[sel.Sel.Name] {
			return true
		}
		line := fset.Position(call.Pos()).Line
		if !marked[line] {
			out = append(out, fmt.Sprintf("%s:%d: os.%s", path, line, sel.Sel.Name))
		}
		return true
	})
	return out, nil
}

// TestUnmarkedOpenersSeesWhatItMust checks the check on files of its own:
// an unmarked call is found, a marked one (on its line or the line above)
// is not, nor a call that opens no path by name; os under another name is
// followed.
func TestUnmarkedOpenersSeesWhatItMust(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		src  string
		want []string
	}{
		{`package x

import "os"

func f(p string) {
	os.ReadFile(p)
	// trust:outside the release root
	os.Open(p)
	os.WriteFile(p, nil, 0) // trust:outside a file of the caller's
	os.Create(p)
	os.Stat(p)
}
`, []string{":6: os.ReadFile", ":10: os.Create"}},
		{`package x

import sys "os"

func f(p string) { sys.ReadDir(p) }
`, []string{":5: os.ReadDir"}},
		{`package x

func f(os interface{ ReadFile(string) }) { os.ReadFile("p") }
`, nil},
	} {
		p := filepath.Join(dir, "x.go")
		if err := os.WriteFile(p, []byte(c.src), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := unmarkedOpeners(p)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, w := range c.want {
			want = append(want, p+w)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("found %q, want %q in:\n%s", got, want, c.src)
		}
	}
}
