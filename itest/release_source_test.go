package itest

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/itest/harness"
)

// sourceRepo is a Fossil repository file holding a copy of this project's
// source, as a node keeps OCX's own source to stage releases from: the
// module's committed tree (git's HEAD), checked in on trunk.
type sourceRepo struct {
	t    testing.TB
	repo string // the repository file
	dir  string // its check-out
	home string
}

// newSourceRepo makes the repository and checks the source in once; its
// check-in is the first of checkins.
func newSourceRepo(t testing.TB) (*sourceRepo, string) {
	t.Helper()
	s := &sourceRepo{t: t, repo: filepath.Join(t.TempDir(), "ocx-source.fossil"), dir: t.TempDir(), home: t.TempDir()}
	s.fossil("", "init", s.repo, "--admin-user", "builder")
	s.fossil(s.dir, "open", s.repo, "--force", "--nosync")
	// A file rewritten within the second of its check-in is still seen as
	// changed.
	s.fossil(s.dir, "settings", "mtime-changes", "off")
	module, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// The files of the module's committed tree (HEAD), as git archive
	// gives them: what a working tree holds beside them is not the source.
	archive := exec.Command("git", "-C", module, "archive", "--format=tar", "HEAD")
	out, err := archive.Output()
	if err != nil {
		t.Fatalf("take the source of %s from git: %v", module, err)
	}
	n := 0
	tr := tar.NewReader(bytes.NewReader(out))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue // directories are made below; links are not source
		}
		dst := filepath.Join(s.dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(dst, s.dir+string(filepath.Separator)) {
			t.Fatalf("git archive entry %q lands outside the check-out", h.Name)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, os.FileMode(h.Mode).Perm()); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n < 50 {
		t.Fatalf("only %d source files found in %s", n, module)
	}
	s.fossil(s.dir, "addremove")
	return s, s.commit("the project's source")
}

func (s *sourceRepo) fossil(dir string, args ...string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.FossilPath, args...)
	cmd.Dir = dir
	if dir == "" {
		cmd.Dir = s.home
	}
	cmd.Env = harness.FossilEnv(s.home, "builder")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		s.t.Fatalf("fossil %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// commit checks in what the check-out holds and returns the check-in's
// full hash.
func (s *sourceRepo) commit(comment string) string {
	s.t.Helper()
	out := s.fossil(s.dir, "commit", "-m", comment, "--no-warnings")
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "New_Version:"); ok {
			if hash := strings.TrimSpace(v); len(hash) == 64 {
				return hash
			}
		}
	}
	s.t.Fatalf("commit %q: no New_Version with a full hash in its output:\n%s", comment, out)
	return ""
}

// edit rewrites one file of the check-out: old, which it must hold, becomes
// new.
func (s *sourceRepo) edit(name, old, new string) {
	s.t.Helper()
	p := filepath.Join(s.dir, name)
	data, err := os.ReadFile(p)
	if err != nil {
		s.t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(old)) {
		s.t.Fatalf("%s does not hold %q", name, old)
	}
	if err := os.WriteFile(p, bytes.Replace(data, []byte(old), []byte(new), 1), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// goEnv is what a tool that builds a release needs of the Go toolchain in
// the tests' bare environment (HOME is the agents root there): the go
// command on PATH, and this machine's build and module caches, so that a
// release is built as an operator's shell would build it, from the caches
// the tests were built from.
func goEnv(t testing.TB) []string {
	t.Helper()
	goExe, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command: %v", err)
	}
	out, err := exec.Command(goExe, "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	v := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(v) != 3 {
		t.Fatalf("go env: %q", out)
	}
	return []string{"PATH=" + filepath.Dir(goExe) + ":/usr/local/bin:/usr/bin:/bin", "GOCACHE=" + v[0], "GOMODCACHE=" + v[1], "GOPATH=" + v[2]}
}
