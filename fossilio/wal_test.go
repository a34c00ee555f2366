package fossilio_test

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/itest/harness"
)

// The locks another process may hold on a repository in rollback-journal
// mode: a writer in the middle of its transaction (a server's handler
// writing a post, a backoffice run), and an exclusive transaction, which
// keeps even readers out.
var walLocks = []struct{ name, begin string }{
	{"writer", harness.WriteLock},
	{"exclusive", harness.ExclusiveLock},
}

// TestUseWALWaitsForTheLock: UseWAL on a repository another process is
// writing (the demo's server and backoffice poller, a live node's) waits
// for the lock and switches once it is released. It failed at once with
// "database is locked (5) (SQLITE_BUSY)": changing the journal mode takes
// the write lock from within a read, where SQLite calls no busy handler.
func TestUseWALWaitsForTheLock(t *testing.T) {
	for _, lock := range walLocks {
		t.Run(lock.name, func(t *testing.T) {
			repo := newRepoFile(t)
			h := harness.HoldLock(t, repo, lock.begin)
			done := make(chan error, 1)
			var mode string
			go func() {
				var err error
				mode, err = (&fossilio.Admin{Repository: repo}).UseWAL(t.Context())
				done <- err
			}()
			// Long enough for UseWAL to meet the lock; it cannot have
			// switched while the lock is held.
			select {
			case err := <-done:
				h.Release()
				t.Fatalf("UseWAL returned while the lock was held: %q, %v", mode, err)
			case <-time.After(200 * time.Millisecond):
			}
			h.Release()
			select {
			case err := <-done:
				if err != nil || mode != "wal" {
					t.Fatalf("UseWAL after the lock was released: %q, %v", mode, err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("UseWAL did not return within 30 s of the lock's release")
			}
			if got := journalMode(t, repo); got != "wal" {
				t.Errorf("the repository's journal mode is %q after UseWAL", got)
			}
		})
	}
}

// TestUseWALGivesUpAtTheBound: a lock held past the bound ends UseWAL
// with ErrBusy and an error that names the repository, what it waited for
// and how long, within about the bound (not Fossil's 15 s busy timeout on
// top of it); the repository keeps its rollback journal.
func TestUseWALGivesUpAtTheBound(t *testing.T) {
	for _, lock := range walLocks {
		t.Run(lock.name, func(t *testing.T) {
			repo := newRepoFile(t)
			h := harness.HoldLock(t, repo, lock.begin)
			defer h.Release()
			const bound = 500 * time.Millisecond
			start := time.Now()
			mode, err := (&fossilio.Admin{Repository: repo, WALWait: bound}).UseWAL(t.Context())
			took := time.Since(start)
			if err == nil {
				t.Fatalf("UseWAL under a lock held past the bound: %q, no error", mode)
			}
			t.Logf("after %v: %v", took, err)
			if !errors.Is(err, fossilio.ErrBusy) {
				t.Errorf("error %v does not wrap ErrBusy", err)
			}
			for _, want := range []string{repo, "waited 500ms", "lock"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if took < bound || took > bound+3*time.Second {
				t.Errorf("UseWAL gave up after %v; the bound is %v", took, bound)
			}
			h.Release()
			if got := journalMode(t, repo); got != "delete" {
				t.Errorf("the repository's journal mode is %q after UseWAL gave up", got)
			}
		})
	}
}

// TestUseWALOnAWALRepositoryNeedsNoLock: a repository already in WAL mode
// is not switched again, so UseWAL returns while another process holds a
// write transaction on it, without waiting.
func TestUseWALOnAWALRepositoryNeedsNoLock(t *testing.T) {
	repo := newRepoFile(t)
	a := &fossilio.Admin{Repository: repo}
	if mode, err := a.UseWAL(t.Context()); err != nil || mode != "wal" {
		t.Fatalf("UseWAL: %q, %v", mode, err)
	}
	h := harness.HoldLock(t, repo, harness.WriteLock)
	defer h.Release()
	start := time.Now()
	mode, err := a.UseWAL(t.Context())
	if took := time.Since(start); err != nil || mode != "wal" || took > 2*time.Second {
		t.Fatalf("UseWAL on a WAL repository with a writer in a transaction: %q, %v after %v", mode, err, took)
	}
}

// journalMode asks fossil for the repository's journal mode.
func journalMode(t *testing.T, repo string) string {
	t.Helper()
	cmd := exec.Command(harness.FossilPath, "sql", "-R", repo, "PRAGMA journal_mode")
	cmd.Env, cmd.Dir = harness.FossilEnv(filepath.Dir(repo), "admin"), filepath.Dir(repo)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fossil sql: %v\n%s", err, out)
	}
	return strings.Trim(strings.TrimSpace(string(out)), "'")
}
