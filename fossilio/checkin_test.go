package fossilio_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/fossilio"
)

// srcRepo is a repository of the test's own with a check-out, to commit
// files in.
type srcRepo struct {
	t    *testing.T
	ctx  context.Context
	f    *fossilio.Fossil
	repo string
	tree string
}

func newSrcRepo(t *testing.T) *srcRepo {
	t.Helper()
	dir := t.TempDir()
	s := &srcRepo{t: t, ctx: context.Background(), repo: filepath.Join(dir, "src.fossil"), tree: filepath.Join(dir, "tree")}
	s.f = &fossilio.Fossil{Home: dir, User: "maker", Dir: dir}
	s.run("init", s.repo)
	if err := os.Mkdir(s.tree, 0o755); err != nil {
		t.Fatal(err)
	}
	s.f.Dir = s.tree
	s.run("open", s.repo, "--nosync")
	// Files rewritten within a second keep their size and mtime: compare
	// them by their hashes.
	s.run("settings", "mtime-changes", "off")
	return s
}

func (s *srcRepo) run(args ...string) string {
	s.t.Helper()
	out, err := s.f.Run(s.ctx, args)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// commit writes files (name -> content; a name ending in * is executable)
// and commits them, returning the check-in's hash.
func (s *srcRepo) commit(files map[string]string) string {
	s.t.Helper()
	for name, content := range files {
		mode := os.FileMode(0o644)
		if n, ok := strings.CutSuffix(name, "*"); ok {
			name, mode = n, 0o755
		}
		p := filepath.Join(s.tree, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			s.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			s.t.Fatal(err)
		}
	}
	s.run("addremove")
	out := s.run("commit", "-m", "change", "--no-warnings")
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "New_Version:"); ok {
			return strings.TrimSpace(v)
		}
	}
	s.t.Fatalf("no New_Version in fossil commit's output:\n%s", out)
	return ""
}

// fakeCheckins adds check-in rows whose hashes share prefix, so that a
// prefix is ambiguous (real hashes sharing ten digits would take a
// million check-ins). They are test rows only: no artifact holds them.
func (s *srcRepo) fakeCheckins(prefix string, n int) []string {
	s.t.Helper()
	var hs []string
	for i := range n {
		h := prefix + strings.Repeat(fmt.Sprint(i+1), 64-len(prefix))
		hs = append(hs, h)
		s.run("sql", "-R", s.repo, fmt.Sprintf(
			"INSERT INTO blob(uuid,size,content) VALUES('%s',0,NULL); INSERT INTO event(type,mtime,objid) VALUES('ci',2460000.5,(SELECT rid FROM blob WHERE uuid='%s'));", h, h))
	}
	return hs
}

func (s *srcRepo) open() *fossilio.Repo {
	s.t.Helper()
	r, err := fossilio.OpenNode(s.repo, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { r.Close() })
	return r
}

// TestCheckinResolves: a check-in by its full hash or a unique prefix,
// upper case or not; a prefix two share is refused naming both, one no
// check-in has (or that names another kind of artifact) is not found,
// and a short or non-hex one is a bad hash.
func TestCheckinResolves(t *testing.T) {
	s := newSrcRepo(t)
	h := s.commit(map[string]string{"a.txt": "one\n"})
	fakes := s.fakeCheckins("abcdef0123", 2)
	r := s.open()
	ctx := context.Background()
	for _, in := range []string{h, h[:fossilio.MinPrefix], strings.ToUpper(h[:20]), " " + h[:12] + "\n"} {
		c, err := r.Checkin(ctx, in)
		if err != nil || c.Hash != h || c.Time.IsZero() {
			t.Fatalf("Checkin(%q) = %+v, %v; want %s", in, c, err, h)
		}
	}
	_, err := r.Checkin(ctx, "abcdef0123")
	var he *fossilio.HashError
	if !errors.Is(err, fossilio.ErrAmbiguous) || !errors.As(err, &he) || len(he.Matches) != 2 ||
		!strings.Contains(err.Error(), fakes[0]) || !strings.Contains(err.Error(), fakes[1]) {
		t.Fatalf("an ambiguous prefix: %v", err)
	}
	if c, err := r.Checkin(ctx, fakes[1]); err != nil || c.Hash != fakes[1] {
		t.Fatalf("a full hash among those sharing a prefix: %+v, %v", c, err)
	}
	if _, err := r.Checkin(ctx, "0000000000"); !errors.Is(err, fossilio.ErrNotFound) {
		t.Fatalf("an unknown prefix: %v", err)
	}
	// The file a.txt's own hash is an artifact, not a check-in.
	blob := strings.TrimSpace(s.run("sql", "-R", s.repo, "SELECT uuid FROM blob WHERE rid=(SELECT fid FROM mlink LIMIT 1)"))
	blob = strings.Trim(blob, "'")
	if _, err := r.Checkin(ctx, blob); !errors.Is(err, fossilio.ErrNotFound) {
		t.Fatalf("a file's hash %q: %v", blob, err)
	}
	for _, bad := range []string{"", "abc", "zzzzzzzzzzzz", h + "0"} {
		if _, err := r.Checkin(ctx, bad); !errors.Is(err, fossilio.ErrBadHash) {
			t.Fatalf("Checkin(%q): %v", bad, err)
		}
	}
}

// TestExportWritesTheCheckin: the files of a check-in, not of a later
// one, with their executable bits, into a directory that did not exist;
// an existing directory or an unknown check-in leaves nothing.
func TestExportWritesTheCheckin(t *testing.T) {
	s := newSrcRepo(t)
	first := s.commit(map[string]string{"go.mod": "module x\n", "cmd/run.sh*": "#!/bin/sh\necho hi\n", "deep/er/file.txt": "a\n"})
	s.commit(map[string]string{"go.mod": "module y\n", "later.txt": "later\n"})
	f := &fossilio.Fossil{Home: t.TempDir()}
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "out")
	if err := f.Export(ctx, s.repo, first, dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err != nil || string(b) != "module x\n" {
		t.Fatalf("go.mod: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "deep/er/file.txt")); err != nil || string(b) != "a\n" {
		t.Fatalf("deep/er/file.txt: %q, %v", b, err)
	}
	if st, err := os.Stat(filepath.Join(dir, "cmd/run.sh")); err != nil || st.Mode().Perm()&0o111 == 0 {
		t.Fatalf("cmd/run.sh is not executable: %v, %v", st, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "later.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a later check-in's file was exported: %v", err)
	}
	if err := f.Export(ctx, s.repo, first, dir); !errors.Is(err, fossilio.ErrBadInput) {
		t.Fatalf("an existing directory: %v", err)
	}
	gone := filepath.Join(t.TempDir(), "gone")
	if err := f.Export(ctx, s.repo, strings.Repeat("0", 64), gone); err == nil {
		t.Fatal("an unknown check-in was exported")
	}
	if _, err := os.Lstat(gone); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed export left %s: %v", gone, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(gone))
	if len(entries) != 0 {
		t.Fatalf("a failed export left %v", entries)
	}
}
