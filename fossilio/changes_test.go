package fossilio_test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/itest/harness"
)

// TestChangesCountsOthersWrites: a repository's count of writes moves
// when another process writes it (a user's capabilities, which no
// receipt records), in rollback and in WAL journal mode, and not when it
// is read.
func TestChangesCountsOthersWrites(t *testing.T) {
	for _, mode := range []string{"rollback", "wal"} {
		t.Run(mode, func(t *testing.T) {
			repo := newRepoFile(t)
			if mode == "wal" {
				if got, err := (&fossilio.Admin{Repository: repo}).UseWAL(t.Context()); err != nil || got != "wal" {
					t.Fatalf("UseWAL: %q, %v", got, err)
				}
			}
			r, err := fossilio.OpenNode(repo, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			c, err := r.Changes()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			count := func() int64 {
				t.Helper()
				n, err := c.Count(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			before := count()
			if _, err := r.Users(t.Context()); err != nil {
				t.Fatal(err)
			}
			if again := count(); again != before {
				t.Errorf("the count moved from %d to %d on a read", before, again)
			}
			for i, caps := range []string{"io", "v"} {
				cmd := exec.Command(harness.FossilPath, "user", "capabilities", "admin", caps, "-R", repo)
				cmd.Env, cmd.Dir = harness.FossilEnv(filepath.Dir(repo), "admin"), filepath.Dir(repo)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("fossil user capabilities: %v\n%s", err, out)
				}
				after := count()
				if after == before {
					t.Errorf("write %d: the count stayed %d after another process wrote the repository", i+1, after)
				}
				before = after
			}
		})
	}
}
