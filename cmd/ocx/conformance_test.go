package main

import (
	"bufio"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// conformanceRow is one row of docs/conformance.md's tables that map a
// row (of a seed, of an issue, or a rule) to its tests.
type conformanceRow struct {
	line int
	what string
	// tests are the top-level tests named, each with the package (its
	// directory below the module root) the row names it in.
	tests []namedTest
}

type namedTest struct{ dir, name string }

var (
	// testName is a test, fuzz target or benchmark as a row names it; a
	// subtest's path after "/" is not checked (t.Run names are values).
	testName = regexp.MustCompile(`\b(?:Test|Fuzz|Benchmark)[A-Z0-9_]\w*`)
	// pkgHead opens a part of a row's last cell: the package its tests
	// are in, as "`fossilio/record`:" or "itest:".
	pkgHead = regexp.MustCompile("^`?([a-z][a-z0-9_./-]*)`?\\s*:")
	// ownPkg is a package named right after a test, in parentheses.
	ownPkg = regexp.MustCompile("^ \\(`([a-z][a-z0-9_./-]*)`\\)")
	// testFunc is a top-level test function's declaration.
	testFunc = regexp.MustCompile(`^func ((?:Test|Fuzz|Benchmark)\w*)\(`)
)

// conformanceRows reads the rows of path's tables whose last column is
// "test": the mapping tables, not the tables of rows not yet built.
func conformanceRows(t *testing.T, path string) []conformanceRow {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []conformanceRow
	mapping := false
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if !strings.HasPrefix(l, "|") {
			mapping = false
			continue
		}
		cells := strings.Split(strings.Trim(l, "| "), " | ")
		last := strings.TrimSpace(cells[len(cells)-1])
		switch {
		case strings.HasPrefix(l, "|---"):
			continue
		case !mapping && last == "test":
			mapping = true
			continue
		case !mapping:
			continue
		}
		row := conformanceRow{line: n, what: strings.Join(cells[:len(cells)-1], " | ")}
		dir := ""
		for _, part := range strings.Split(last, ";") {
			part = strings.TrimSpace(part)
			if m := pkgHead.FindStringSubmatch(part); m != nil {
				dir = m[1]
			}
			for _, m := range testName.FindAllStringIndex(part, -1) {
				// A name may say its own package after it: "TestX (`actors/turn`)".
				nt := namedTest{dir, part[m[0]:m[1]]}
				if own := ownPkg.FindStringSubmatch(part[m[1]:]); own != nil {
					nt.dir = own[1]
				}
				row.tests = append(row.tests, nt)
			}
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// moduleTests is every top-level test function of the module's test
// files, by the directory (below root) that holds it.
func moduleTests(t *testing.T, root string) map[string][]string {
	t.Helper()
	tests := map[string][]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if m := testFunc.FindStringSubmatch(l); m != nil {
				tests[filepath.ToSlash(rel)] = append(tests[filepath.ToSlash(rel)], m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tests
}

// TestConformanceNamesRealTests holds docs/conformance.md to the code:
// every row of its mapping tables names at least one test, and each test
// it names is a top-level test, fuzz target or benchmark of the package
// the row names it in, so that a test renamed or removed cannot leave a
// row proved by nothing.
func TestConformanceNamesRealTests(t *testing.T) {
	root := filepath.Join("..", "..")
	rows := conformanceRows(t, filepath.Join(root, "docs", "conformance.md"))
	if len(rows) < 400 {
		t.Fatalf("docs/conformance.md: %d rows read from its mapping tables; the reader missed them", len(rows))
	}
	tests := moduleTests(t, root)
	all := map[string]bool{}
	for _, names := range tests {
		for _, n := range names {
			all[n] = true
		}
	}
	for _, r := range rows {
		if len(r.tests) == 0 {
			t.Errorf("docs/conformance.md:%d (%.80s): names no test", r.line, r.what)
		}
		for _, nt := range r.tests {
			switch {
			case nt.dir != "" && tests[nt.dir] == nil && !all[nt.name]:
				t.Errorf("docs/conformance.md:%d: %s in %s: no such package with tests, and no such test elsewhere", r.line, nt.name, nt.dir)
			case nt.dir != "" && tests[nt.dir] != nil && !slices.Contains(tests[nt.dir], nt.name):
				where := "no package has it"
				for _, d := range slices.Sorted(maps.Keys(tests)) {
					if slices.Contains(tests[d], nt.name) {
						where = "it is in " + d
						break
					}
				}
				t.Errorf("docs/conformance.md:%d: %s is not a test of %s (%s)", r.line, nt.name, nt.dir, where)
			case nt.dir == "" && !all[nt.name]:
				t.Errorf("docs/conformance.md:%d: %s is not a test of this module", r.line, nt.name)
			}
		}
	}
}

// TestDocsNameRealTests: every test, fuzz target or benchmark the docs
// name (but the decisions, which say what was true when each was made)
// is one of the module's; a name ending in `*` names those it begins.
func TestDocsNameRealTests(t *testing.T) {
	root := filepath.Join("..", "..")
	all := map[string]bool{}
	for _, names := range moduleTests(t, root) {
		for _, n := range names {
			all[n] = true
		}
	}
	prefixed := func(p string) bool {
		for n := range all {
			if strings.HasPrefix(n, p) {
				return true
			}
		}
		return false
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) < 10 {
		t.Fatalf("the docs: %d files (%v)", len(docs), err)
	}
	named := 0
	for _, p := range append(docs, filepath.Join(root, "README.md")) {
		if filepath.Base(p) == "decisions.md" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range strings.Split(string(b), "\n") {
			for _, m := range testName.FindAllStringIndex(l, -1) {
				n := l[m[0]:m[1]]
				named++
				glob := strings.HasPrefix(l[m[1]:], "*")
				if !all[n] && !(glob && prefixed(n)) {
					t.Errorf("%s:%d: %s is not a test of this module", filepath.Base(p), i+1, n)
				}
			}
		}
	}
	if named < 500 {
		t.Errorf("the docs name %d tests; the reader missed them", named)
	}
}
