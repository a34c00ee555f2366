//go:build linux

package unixhost

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestReplaceLink: the link is made, replaced and removed, relative targets
// read from its directory; something that is not a link is left alone; no
// temporary name is left behind.
func TestReplaceLink(t *testing.T) {
	root := t.TempDir()
	for _, id := range []string{"a", "b"} {
		if err := os.MkdirAll(filepath.Join(root, "releases", id), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cur := filepath.Join(root, "current")
	for _, id := range []string{"a", "b", "a"} {
		if err := ReplaceLink(cur, filepath.Join("releases", id)); err != nil {
			t.Fatal(err)
		}
		if got, err := os.Readlink(cur); err != nil || got != "releases/"+id {
			t.Fatalf("current reads %q, %v", got, err)
		}
		if d, err := filepath.EvalSymlinks(cur); err != nil || d != filepath.Join(root, "releases", id) {
			t.Fatalf("current resolves to %q, %v", d, err)
		}
	}
	if err := ReplaceLink(filepath.Join(root, "releases"), "elsewhere"); err == nil || !strings.Contains(err.Error(), "not a symbolic link") {
		t.Fatalf("a directory replaced by a link: %v", err)
	}
	if st, err := os.Lstat(filepath.Join(root, "releases")); err != nil || !st.IsDir() {
		t.Fatalf("the directory is gone: %v", err)
	}
	if err := ReplaceLink("relative/current", "x"); err == nil {
		t.Fatal("a relative link path accepted")
	}
	if err := ReplaceLink(cur, ""); err == nil {
		t.Fatal("an empty target accepted")
	}
	if err := RemoveLink(cur); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(cur); !os.IsNotExist(err) {
		t.Fatalf("current after its removal: %v", err)
	}
	if err := RemoveLink(cur); err != nil {
		t.Fatalf("removing a link that is not there: %v", err)
	}
	if err := RemoveLink(filepath.Join(root, "nowhere", "next")); err != nil {
		t.Fatalf("removing a link in a directory that is not there: %v", err)
	}
	if err := RemoveLink(filepath.Join(root, "releases", "a")); err == nil {
		t.Fatal("a directory removed as a link")
	}
	names, _ := os.ReadDir(root)
	for _, n := range names {
		if strings.Contains(n.Name(), ".tmp") {
			t.Errorf("left behind: %s", n.Name())
		}
	}
}

// TestReplaceLinkNeverMissing: a reader resolving current in a tight loop,
// while it is replaced a thousand times between two releases, never
// finds it missing and always finds one of the two.
func TestReplaceLinkNeverMissing(t *testing.T) {
	root := t.TempDir()
	for _, id := range []string{"a", "b"} {
		dir := filepath.Join(root, "releases", id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "ocxd"), []byte(id), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cur := filepath.Join(root, "current")
	if err := ReplaceLink(cur, "releases/a"); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var reads, fails atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				b, err := os.ReadFile(filepath.Join(cur, "ocxd"))
				reads.Add(1)
				if err != nil || (string(b) != "a" && string(b) != "b") {
					fails.Add(1)
					first.CompareAndSwap(nil, fmt.Sprintf("%q, %v", b, err))
				}
			}
		}()
	}
	for i := range 1000 {
		target := "releases/a"
		if i%2 == 0 {
			target = "releases/b"
		}
		if err := ReplaceLink(cur, target); err != nil {
			stop.Store(true)
			wg.Wait()
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if fails.Load() > 0 {
		t.Fatalf("%d of %d reads through current failed; the first: %v", fails.Load(), reads.Load(), first.Load())
	}
	if reads.Load() < 100 {
		t.Fatalf("only %d reads ran beside the replacements", reads.Load())
	}
	t.Logf("%d reads beside 1000 replacements, none failed", reads.Load())
}
