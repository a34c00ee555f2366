//go:build linux

package unixhost

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// openDir opens dir/name (made first) through a Root of dir.
func openDir(t *testing.T, r *Root, dir, name string) *Dir {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := r.MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
	d, err := r.OpenDir(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func names(t *testing.T, p string) []string {
	t.Helper()
	ents, err := os.ReadDir(p)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// A reader never sees half a file WriteFile writes, only the old contents
// or the new; a write that fails leaves neither a partial file nor its
// temporary one; the mode is exactly the one asked, whatever the umask.
func TestDirWriteFileIsWhole(t *testing.T) {
	rootModes(t, func(t *testing.T, r *Root, dir string) {
		old := unix.Umask(0o077)
		defer unix.Umask(old)
		d := openDir(t, r, dir, "session")
		a, b := bytes.Repeat([]byte("a"), 100), bytes.Repeat([]byte("b"), 300<<10)
		if err := d.WriteFile("hears", a, 0o644); err != nil {
			t.Fatal(err)
		}
		if m := mode(t, filepath.Join(d.Path(), "hears")); m != 0o644 {
			t.Fatalf("mode %v, want 0644 whatever the umask", m)
		}
		var torn atomic.Int64
		var reads atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, err := os.ReadFile(filepath.Join(d.Path(), "hears"))
				if err != nil || !bytes.Equal(got, a) && !bytes.Equal(got, b) {
					torn.Add(1)
				}
				reads.Add(1)
			}
		}()
		for i := range 200 {
			data := a
			if i%2 == 0 {
				data = b
			}
			if err := d.WriteFile("hears", data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, "a read", func() bool { return reads.Load() > 0 })
		close(stop)
		wg.Wait()
		if n := torn.Load(); n > 0 {
			t.Fatalf("%d of %d reads saw neither the old contents nor the new", n, reads.Load())
		}
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
		// The rename fails (a directory is in the way): the error names the
		// path, the directory stays, nothing is left beside it.
		if err := os.MkdirAll(filepath.Join(d.Path(), "in-the-way", "x"), 0o700); err != nil {
			t.Fatal(err)
		}
		err := d.WriteFile("in-the-way", a, 0o600)
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Path != filepath.Join(d.Path(), "in-the-way") {
			t.Fatalf("WriteFile over a directory = %v", err)
		}
		if got := names(t, d.Path()); !slices.Equal(got, []string{"hears", "in-the-way"}) {
			t.Fatalf("left in the directory: %q", got)
		}
		if m := mode(t, filepath.Join(d.Path(), "in-the-way")); !m.IsDir() {
			t.Fatalf("in-the-way is now %v", m)
		}
	})
}

// Nothing done through a Dir follows a link: a directory reached through
// one is refused, a link at a file's name is replaced and its target kept,
// Holds reads no link and no pipe.
func TestDirFollowsNoLink(t *testing.T) {
	rootModes(t, func(t *testing.T, r *Root, dir string) {
		outside := t.TempDir()
		secret := filepath.Join(outside, "secret")
		if err := os.WriteFile(secret, []byte("keep\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		ws := filepath.Join(dir, "alice", "projects", "demo")
		if err := os.MkdirAll(ws, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(ws, "session")); err != nil {
			t.Fatal(err)
		}
		if _, err := r.OpenDir(filepath.Join(ws, "session")); err == nil || !strings.Contains(err.Error(), ws) {
			t.Errorf("OpenDir through a link = %v", err)
		}
		d, err := r.OpenDir(ws)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if _, err := d.OpenDir("session"); err == nil {
			t.Error("Dir.OpenDir opened a link")
		}
		if err := os.Symlink(secret, filepath.Join(ws, "hears")); err != nil {
			t.Fatal(err)
		}
		if d.Holds("hears", []byte("keep\n")) {
			t.Error("Holds read through a link")
		}
		if err := unix.Mkfifo(filepath.Join(ws, "pipe"), 0o600); err != nil {
			t.Fatal(err)
		}
		if d.Holds("pipe", nil) {
			t.Error("Holds took a named pipe for a file")
		}
		if err := d.WriteFile("hears", []byte("new\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if m := mode(t, filepath.Join(ws, "hears")); !m.IsRegular() {
			t.Fatalf("hears is %v, want the link replaced by a file", m)
		}
		if !d.Holds("hears", []byte("new\n")) || d.Holds("hears", []byte("new")) || d.Holds("hears", []byte("new\n\n")) {
			t.Error("Holds does not say exactly what the file holds")
		}
		if got := readFile(t, secret); got != "keep\n" {
			t.Fatalf("the link's target changed: %q", got)
		}
		if ents := names(t, outside); len(ents) != 1 {
			t.Fatalf("something was made outside: %v", ents)
		}
	})
}

// exchangeFixture makes d/name holding files.
func exchangeFixture(t *testing.T, d *Dir, name string, files ...string) {
	t.Helper()
	if err := d.Mkdir(name, 0o700); err != nil {
		t.Fatal(err)
	}
	sub, err := d.OpenDir(name)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for _, f := range files {
		if err := sub.WriteFile(f, []byte(f+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// ExchangeDir puts a directory in place in one step whatever is there:
// nothing, a file, a link (replaced, its target kept), or a directory
// (exchanged, the old one left at the staging name); and a reader listing
// the place meanwhile sees the one set of files or the other, never a mix.
func TestDirExchange(t *testing.T) {
	dir := t.TempDir()
	r, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d := openDir(t, r, dir, "session")
	at := filepath.Join(d.Path(), "listening")

	exchangeFixture(t, d, "stage", "a", "b")
	if err := d.ExchangeDir("stage", "listening"); err != nil {
		t.Fatal(err)
	}
	if got := names(t, at); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after a rename into nothing: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(d.Path(), "stage")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the staging name after a rename: %v", err)
	}

	outside := t.TempDir()
	for _, plant := range []func() error{
		func() error { return os.WriteFile(at, []byte("x"), 0o600) },
		func() error { return os.Symlink(outside, at) },
	} {
		if err := os.RemoveAll(at); err != nil {
			t.Fatal(err)
		}
		if err := plant(); err != nil {
			t.Fatal(err)
		}
		exchangeFixture(t, d, "stage", "c")
		if err := d.ExchangeDir("stage", "listening"); err != nil {
			t.Fatal(err)
		}
		if m := mode(t, at); !m.IsDir() {
			t.Fatalf("listening is %v", m)
		}
		if got := names(t, at); !slices.Equal(got, []string{"c"}) {
			t.Fatalf("after replacing a file or a link: %q", got)
		}
	}
	if got := names(t, outside); len(got) != 0 {
		t.Fatalf("something was made through the link: %q", got)
	}

	// Exchanges back and forth under a reader.
	exchangeFixture(t, d, "stage", "d", "e", "f")
	sets := [][]string{{"c"}, {"d", "e", "f"}}
	var mixed, reads atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			f, err := os.Open(at)
			if err != nil {
				mixed.Add(1)
				continue
			}
			got, _ := f.Readdirnames(-1)
			f.Close()
			sort.Strings(got)
			if !slices.Equal(got, sets[0]) && !slices.Equal(got, sets[1]) {
				mixed.Add(1)
			}
			reads.Add(1)
		}
	}()
	for range 500 {
		if err := d.ExchangeDir("stage", "listening"); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "a read", func() bool { return reads.Load() > 0 })
	close(stop)
	wg.Wait()
	if n := mixed.Load(); n > 0 {
		t.Fatalf("%d of %d listings saw neither set whole", n, reads.Load())
	}
	// An even number of exchanges: each set back where it began.
	if got := names(t, filepath.Join(d.Path(), "stage")); !slices.Equal(got, sets[1]) {
		t.Fatalf("the old directory at the staging name holds %q", got)
	}
	if got := names(t, at); !slices.Equal(got, sets[0]) {
		t.Fatalf("listening holds %q", got)
	}
}

// Where the file system cannot exchange, ExchangeDir moves the new files in
// (the directory keeps its inode) and removes the stale ones after.
func TestDirExchangeFallback(t *testing.T) {
	dir := t.TempDir()
	r, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d := openDir(t, r, dir, "session")
	defer func(f func(int, string, int, string, uint) error) { renameat2 = f }(renameat2)
	refused := 0
	renameat2 = func(ofd int, from string, nfd int, to string, flags uint) error {
		if flags&unix.RENAME_EXCHANGE != 0 {
			refused++
			return unix.EINVAL
		}
		return unix.Renameat2(ofd, from, nfd, to, flags)
	}
	exchangeFixture(t, d, "listening", "a", "b", "stale")
	if err := os.Mkdir(filepath.Join(d.Path(), "listening", "stale-dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	at := filepath.Join(d.Path(), "listening")
	ino := inode(t, at)
	exchangeFixture(t, d, "stage", "a", "b", "c")
	if err := d.ExchangeDir("stage", "listening"); err != nil {
		t.Fatal(err)
	}
	if refused != 1 {
		t.Fatalf("the exchange was tried %d times", refused)
	}
	if got := names(t, at); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("listening holds %q", got)
	}
	if inode(t, at) != ino {
		t.Fatal("listening was replaced, not written in place")
	}
	if got := readFile(t, filepath.Join(at, "c")); got != "c\n" {
		t.Fatalf("c holds %q", got)
	}
	if got := names(t, filepath.Join(d.Path(), "stage")); len(got) != 0 {
		t.Fatalf("the staging directory still holds %q", got)
	}
}
