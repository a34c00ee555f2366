//go:build linux

package unixhost

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// elfMagic opens every ELF file: a program or a library built for Linux.
var elfMagic = []byte{0x7f, 'E', 'L', 'F'}

// TestNoBinariesInGit fails when git tracks an ELF file: a built program
// belongs in bin/ or the Go build cache, never in the repository (COMMON
// rules, "no binaries in git"; .gitignore keeps the build outputs out).
func TestNoBinariesInGit(t *testing.T) {
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git work tree: %v", err)
	}
	root := strings.TrimSpace(string(top))
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var names []string
	for _, n := range strings.Split(string(out), "\x00") {
		if n != "" {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		t.Fatal("git ls-files listed no file; the check saw nothing")
	}
	found, err := elfFiles(root, names)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range found {
		t.Errorf("%s: git tracks an ELF binary; git rm --cached it and cover it in .gitignore", n)
	}
}

// TestElfFilesSeesAnELF is the test of the test: the running test binary is
// an ELF, a Go file is not, and a tracked file deleted from the work tree
// is no error.
func TestElfFilesSeesAnELF(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "short"), []byte{0x7f}, 0o644); err != nil {
		t.Fatal(err)
	}
	found, err := elfFiles("/", []string{
		strings.TrimPrefix(exe, "/"),
		strings.TrimPrefix(filepath.Join(dir, "main.go"), "/"),
		strings.TrimPrefix(filepath.Join(dir, "short"), "/"),
		strings.TrimPrefix(filepath.Join(dir, "gone"), "/"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimPrefix(exe, "/"); len(found) != 1 || found[0] != want {
		t.Fatalf("elfFiles = %q, want only the test binary %q", found, want)
	}
}

// elfFiles lists those of names, paths relative to root, whose first four
// bytes are the ELF magic. A name missing from the work tree (deleted, not
// yet committed) is skipped.
func elfFiles(root string, names []string) ([]string, error) {
	var found []string
	head := make([]byte, len(elfMagic))
	for _, n := range names {
		f, err := os.Open(filepath.Join(root, n))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		k, err := io.ReadFull(f, head)
		f.Close()
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, err
		}
		if k == len(head) && bytes.Equal(head, elfMagic) {
			found = append(found, n)
		}
	}
	return found, nil
}
