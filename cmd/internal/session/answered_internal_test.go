package session

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/host/unixhost"
)

// TestAnsweredLogIsBounded: the log keeps the last maxAnswered posts
// answered, oldest first, each once, and reads back what it wrote; a line
// that is not a hash is passed over.
func TestAnsweredLogIsBounded(t *testing.T) {
	dir := t.TempDir()
	root, err := unixhost.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	path := filepath.Join(dir, "session", "answered")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	hash := func(i int) string { return fmt.Sprintf("%064x", i) }
	a, err := loadAnswered(root, path)
	if err != nil || a.has(hash(1)) {
		t.Fatalf("a missing log: %v, %v", a, err)
	}
	var want []string
	for i := range maxAnswered + 25 {
		if err := a.add(hash(i)); err != nil {
			t.Fatal(err)
		}
		want = append(want, hash(i))
		if i%100 == 0 {
			// Adding one already there changes nothing.
			if err := a.add(hash(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	want = want[len(want)-maxAnswered:]
	b, err := a.load()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b.order, want) || b.has(hash(0)) || !b.has(hash(maxAnswered+24)) || len(b.set) != maxAnswered {
		t.Errorf("read back %d posts, first %s", len(b.order), b.order[0])
	}
	// A spoiled file: lines not hashes and repeats are passed over.
	spoiled := "garbage\n" + hash(7) + "\n" + strings.ToUpper(hash(0xabcdef)) + "\n" + hash(7) + "\n\n" + hash(9)
	if err := os.WriteFile(path, []byte(spoiled), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := a.load()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.order, []string{hash(7), hash(9)}) {
		t.Errorf("a spoiled log reads as %q", c.order)
	}
}

// load reads the log's file again, as the next session would.
func (a *answeredLog) load() (*answeredLog, error) { return loadAnswered(a.root, a.path) }
