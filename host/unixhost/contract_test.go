//go:build linux

package unixhost

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/ocx-go/ocx/host/hosttest"
)

// The real implementations pass the same contracts as the fakes the actors
// are tested with.

func TestLockerContract(t *testing.T) {
	hosttest.LockerContract(t, Locker{}, filepath.Join(t.TempDir(), "ocxd.lock"))
}

func TestPipeContract(t *testing.T) {
	root, p := pipeRoot(t)
	hosttest.PipeContract(t, PipeWriter{Root: root}, p, func() (func() []string, func()) {
		r, err := OpenPipeReader(root, p)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var got []string
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.Run(func(l []byte) {
				mu.Lock()
				got = append(got, string(l))
				mu.Unlock()
			})
		}()
		lines := func() []string {
			eventually(t, "three lines", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(got) >= 3
			})
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), got...)
		}
		return lines, func() {
			r.Close()
			<-done
		}
	})
}

func TestFilesContract(t *testing.T) {
	dir := t.TempDir()
	r, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	hosttest.FilesContract(t, r, dir)
}
