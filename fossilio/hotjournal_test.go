package fossilio_test

import (
	"database/sql"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"modernc.org/sqlite"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/itest/harness"
)

// TestHotJournalIsRolledBack: a fossil command killed in the middle of a
// write (a session's `fossil pull` when the session is stopped) leaves a hot
// journal beside the repository. A read-only connection cannot roll it back,
// so every read failed with "attempt to write a readonly database (776)",
// for good, and each next session of the workspace could not even start.
// Opening and reading now roll the journal back, as the next writer would.
func TestHotJournalIsRolledBack(t *testing.T) {
	repo := newRepoFile(t)
	before, err := fossilio.OpenClone(repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	code, err := before.ProjectCode(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	killWriter(t, repo)
	// A Repo opened before reads on, and one opened after opens.
	if got, err := before.ProjectCode(t.Context()); err != nil || got != code {
		t.Errorf("read through the Repo opened before: %q, %v; want %s", got, err, code)
	}
	after, err := fossilio.OpenClone(repo, nil)
	if err != nil {
		t.Fatalf("open after the killed writer: %v", err)
	}
	defer after.Close()
	if got, err := after.ProjectCode(t.Context()); err != nil || got != code {
		t.Errorf("read through the Repo opened after: %q, %v; want %s", got, err, code)
	}
	if _, err := os.Stat(repo + "-journal"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the hot journal is still there: %v", err)
	}
}

// TestHotJournalAdminRead: the admin's read-only open (the hook's status)
// rolls a hot journal back too.
func TestHotJournalAdminRead(t *testing.T) {
	repo := newRepoFile(t)
	killWriter(t, repo)
	st, err := (&fossilio.Admin{Repository: repo}).Hook(t.Context())
	if err != nil || st.Installed {
		t.Fatalf("hook status after a killed writer: %+v, %v", st, err)
	}
}

// newRepoFile makes a repository with `fossil new`, in a directory of its
// own.
func newRepoFile(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	repo := filepath.Join(dir, "demo.fossil")
	cmd := exec.Command(harness.FossilPath, "new", "--admin-user", "admin", repo)
	cmd.Env, cmd.Dir = harness.FossilEnv(dir, "admin"), dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fossil new: %v\n%s", err, out)
	}
	return repo
}

// killWriter kills a `fossil sql` in the middle of a transaction larger than
// its page cache (so SQLite has synced the journal and written pages into
// the file), which leaves a hot journal; and checks that a plain read-only
// reader then fails as the fix expects.
func killWriter(t *testing.T, repo string) {
	t.Helper()
	in, w := io.Pipe()
	writer := exec.Command(harness.FossilPath, "sql", "-R", repo)
	writer.Env, writer.Dir, writer.Stdin = harness.FossilEnv(filepath.Dir(repo), "admin"), filepath.Dir(repo), in
	var out syncBuffer
	writer.Stdout = &out
	if err := writer.Start(); err != nil {
		t.Fatal(err)
	}
	go io.WriteString(w, "PRAGMA cache_size=10;\nBEGIN;\nUPDATE config SET mtime=mtime+1;\n"+
		"CREATE TABLE scratch(a);\nINSERT INTO scratch SELECT randomblob(1000) FROM "+
		"(WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<5000) SELECT i FROM c);\n"+
		"SELECT 'spilled';\n")
	journal := repo + "-journal"
	deadline := time.Now().Add(30 * time.Second)
	for {
		if st, err := os.Stat(journal); err == nil && st.Size() > 0 && strings.Contains(out.String(), "spilled") {
			break
		}
		if time.Now().After(deadline) {
			writer.Process.Kill()
			w.Close()
			writer.Wait()
			t.Fatalf("the writer left no journal: %s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	writer.Process.Kill()
	w.Close()
	writer.Wait()
	ro, err := sql.Open("sqlite", "file:"+repo+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	var n int
	rerr := ro.QueryRow(`SELECT count(*) FROM config`).Scan(&n)
	var se *sqlite.Error
	if !errors.As(rerr, &se) || se.Code() != 776 {
		t.Fatalf("a read-only reader after the killed writer: %v; want SQLITE_READONLY_ROLLBACK (776)", rerr)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
