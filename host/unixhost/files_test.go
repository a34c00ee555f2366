//go:build linux

package unixhost

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// rootModes runs a test with openat2 and with the O_NOFOLLOW walk that
// stands in for it on kernels without openat2.
func rootModes(t *testing.T, f func(t *testing.T, r *Root, dir string)) {
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "walk"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			r, err := OpenRoot(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if !walk && r.walk {
				t.Fatal("this kernel has no openat2")
			}
			r.walk = walk
			f(t, r, dir)
		})
	}
}

func mode(t *testing.T, p string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

func TestRootWrites(t *testing.T) {
	rootModes(t, func(t *testing.T, r *Root, dir string) {
		old := unix.Umask(0o077)
		defer unix.Umask(old)
		pw := filepath.Join(dir, "alice", "password")
		if err := r.MkdirAll(filepath.Dir(pw), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := r.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if m := mode(t, pw); m != 0o600 {
			t.Fatalf("password mode %v", m)
		}
		// WriteFile gives exactly the mode asked, whatever the umask.
		bind := filepath.Join(dir, "alice", "projects", "demo", "binding.json")
		if err := r.MkdirAll(filepath.Dir(bind), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := r.WriteFile(bind, []byte(`{"a":1}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if m := mode(t, bind); m != 0o644 {
			t.Fatalf("binding mode %v", m)
		}
		if err := r.WriteFile(bind, []byte(`{"a":2}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := r.ReadFile(bind, SmallFile); err != nil || string(got) != `{"a":2}` {
			t.Fatalf("ReadFile = %q %v", got, err)
		}
		// No temporary file is left beside it.
		ents, _ := os.ReadDir(filepath.Dir(bind))
		if len(ents) != 1 {
			t.Fatalf("left in the directory: %v", ents)
		}
		wake := filepath.Join(dir, "alice", "projects", "demo", "session", "wake")
		if err := r.MkdirAll(filepath.Dir(wake), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := r.Mkfifo(wake, 0o600); err != nil {
			t.Fatal(err)
		}
		if m := mode(t, wake); m != fs.ModeNamedPipe|0o600 {
			t.Fatalf("wake mode %v", m)
		}
		// Again: a pipe already there is kept.
		if err := r.Mkfifo(wake, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := r.Mkfifo(bind, 0o600); err == nil {
			t.Fatal("Mkfifo accepted a regular file in the way")
		}
		f, err := r.OpenFile(filepath.Join(dir, "alice", "projects", "demo", "session", "log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := r.Remove(wake); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(wake); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("wake still there: %v", err)
		}
		if err := r.Remove(wake); err != nil {
			t.Fatalf("removing what is gone: %v", err)
		}
		if err := r.RemoveAll(filepath.Join(dir, "alice")); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(dir, "alice")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("alice still there: %v", err)
		}
	})
}

func TestRootRefusesEscapes(t *testing.T) {
	rootModes(t, func(t *testing.T, r *Root, dir string) {
		outside := t.TempDir()
		secret := filepath.Join(outside, "secret")
		if err := os.WriteFile(secret, []byte("keep\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		ws := filepath.Join(dir, "alice", "projects", "demo")
		if err := os.MkdirAll(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		// The agent owns its workspace and plants links in it: session as a
		// link to a directory outside, tree as a link to another login's
		// directory inside the root, binding.json as a link to a file.
		if err := os.Symlink(outside, filepath.Join(ws, "session")); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "bob"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(dir, "bob"), filepath.Join(ws, "tree")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(secret, filepath.Join(ws, "binding.json")); err != nil {
			t.Fatal(err)
		}
		through := []func() error{
			func() error { return r.WriteFile(filepath.Join(ws, "session", "secret"), []byte("x"), 0o600) },
			func() error { return r.WriteFile(filepath.Join(ws, "tree", "password"), []byte("x"), 0o600) },
			func() error { return r.Mkfifo(filepath.Join(ws, "session", "wake"), 0o600) },
			func() error { return r.MkdirAll(filepath.Join(ws, "session", "listening"), 0o700) },
			func() error {
				_, err := r.OpenFile(filepath.Join(ws, "session", "log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
				return err
			},
			func() error {
				_, err := r.OpenFile(filepath.Join(ws, "binding.json"), os.O_WRONLY|os.O_APPEND, 0)
				return err
			},
			func() error { _, err := r.ReadFile(filepath.Join(ws, "binding.json"), SmallFile); return err },
			func() error { return r.Remove(filepath.Join(ws, "session", "secret")) },
			func() error { return r.RemoveAll(filepath.Join(ws, "tree", "x")) },
		}
		for i, f := range through {
			err := f()
			if err == nil {
				t.Errorf("operation %d followed a planted link", i)
				continue
			}
			var pe *fs.PathError
			_, refused := AsRefused(err)
			if !errors.As(err, &pe) && !refused || !strings.Contains(err.Error(), ws) {
				t.Errorf("operation %d: %v does not name the path", i, err)
			}
		}
		if got := readFile(t, secret); got != "keep\n" {
			t.Fatalf("the file outside changed: %q", got)
		}
		if ents, _ := os.ReadDir(outside); len(ents) != 1 {
			t.Fatalf("something was made outside: %v", ents)
		}
		if ents, _ := os.ReadDir(filepath.Join(dir, "bob")); len(ents) != 0 {
			t.Fatalf("something was made in bob's directory: %v", ents)
		}
		// Replacing binding.json replaces the link, never its target.
		if err := r.WriteFile(filepath.Join(ws, "binding.json"), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		if m := mode(t, filepath.Join(ws, "binding.json")); !m.IsRegular() {
			t.Fatalf("binding.json is %v", m)
		}
		if got := readFile(t, secret); got != "keep\n" {
			t.Fatalf("the link's target changed: %q", got)
		}
		// Removing the workspace removes the links, not what they lead to.
		if err := r.RemoveAll(ws); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, secret); got != "keep\n" {
			t.Fatal("RemoveAll followed a link")
		}
		if _, err := os.Stat(filepath.Join(dir, "bob")); err != nil {
			t.Fatal("RemoveAll removed bob's directory through a link")
		}
		for _, p := range []string{"relative/x", outside + "/x", dir, dir + "/../x", "/"} {
			if err := r.WriteFile(p, []byte("x"), 0o600); err == nil {
				t.Errorf("WriteFile(%q) was accepted", p)
			}
		}
	})
}

// TestAppendBounded: appends go in whole, in a file made in a directory
// that is there; one past the bound empties the file first, and says so;
// a missing directory, a link and a FIFO are refused, nothing written
// through them.
func TestAppendBounded(t *testing.T) {
	rootModes(t, func(t *testing.T, r *Root, dir string) {
		p := filepath.Join(dir, "ledger")
		for _, line := range []string{"one\n", "two\n"} {
			if emptied, err := AppendBounded(r, p, []byte(line), 10); err != nil || emptied {
				t.Fatalf("append %q: emptied %v, %v", line, emptied, err)
			}
		}
		if b, _ := os.ReadFile(p); string(b) != "one\ntwo\n" {
			t.Fatalf("the file holds %q", b)
		}
		if emptied, err := AppendBounded(r, p, []byte("three\n"), 10); err != nil || !emptied {
			t.Fatalf("an append past the bound: emptied %v, %v", emptied, err)
		}
		if b, _ := os.ReadFile(p); string(b) != "three\n" {
			t.Fatalf("after the bound the file holds %q", b)
		}
		if _, err := AppendBounded(r, filepath.Join(dir, "no", "ledger"), []byte("x\n"), 10); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("an append in a missing directory: %v, want not exist", err)
		}
		outside := filepath.Join(t.TempDir(), "outside")
		if err := os.WriteFile(outside, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
			t.Fatal(err)
		}
		if _, err := AppendBounded(r, filepath.Join(dir, "link"), []byte("x\n"), 10); err == nil {
			t.Error("an append through a link was taken")
		}
		if b, _ := os.ReadFile(outside); len(b) != 0 {
			t.Errorf("an append through a link wrote %q outside", b)
		}
		if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := AppendBounded(r, filepath.Join(dir, "fifo"), []byte("x\n"), 10); err == nil {
			t.Error("an append to a FIFO was taken")
		}
	})
}
