//go:build linux

package unixhost

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// TestDirWatchCountsChanges: each change of an entry of a watched
// directory moves the count, once read; reading an entry, or opening one
// not named in Opens, does not; an ignored name's changes do not; opening
// a pipe named in Opens does; the directory's removal does.
func TestDirWatchCountsChanges(t *testing.T) {
	dir := t.TempDir()
	w, err := NewDirWatch()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := unix.Mkfifo(filepath.Join(dir, "wake"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hears"), []byte("alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	added, err := w.Add(dir, DirRule{Ignore: func(n string) bool { return n == "log" }, Opens: map[string]bool{"wake": true}})
	if err != nil || !added {
		t.Fatalf("Add = %v, %v", added, err)
	}
	if again, err := w.Add(dir+"/", DirRule{}); err != nil || again {
		t.Fatalf("Add again = %v, %v; want false, nil", again, err)
	}
	count := w.Changes()
	moves := func(what string, want bool, f func()) {
		t.Helper()
		f()
		got := w.Changes()
		if (got != count) != want {
			t.Errorf("%s: the count went from %d to %d; want a change: %v", what, count, got, want)
		}
		count = got
	}
	moves("nothing", false, func() {})
	moves("a read of an entry", false, func() {
		if _, err := os.ReadFile(filepath.Join(dir, "hears")); err != nil {
			t.Fatal(err)
		}
	})
	moves("a stat of the pipe", false, func() {
		if _, err := os.Stat(filepath.Join(dir, "wake")); err != nil {
			t.Fatal(err)
		}
	})
	moves("a file made", true, func() {
		if err := os.WriteFile(filepath.Join(dir, "turn"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	})
	moves("a file written again", true, func() {
		if err := os.WriteFile(filepath.Join(dir, "hears"), []byte("bob\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	moves("a file renamed over another", true, func() {
		if err := os.WriteFile(filepath.Join(dir, "hears.new"), []byte("carol\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		w.Changes()
		count = w.Changes()
		if err := os.Rename(filepath.Join(dir, "hears.new"), filepath.Join(dir, "hears")); err != nil {
			t.Fatal(err)
		}
	})
	moves("a mode changed", true, func() {
		if err := os.Chmod(filepath.Join(dir, "hears"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	moves("a file removed", true, func() {
		if err := os.Remove(filepath.Join(dir, "turn")); err != nil {
			t.Fatal(err)
		}
	})
	moves("an ignored log written", false, func() {
		if err := os.WriteFile(filepath.Join(dir, "log"), []byte("a line\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	moves("the wake pipe opened and closed", true, func() {
		fd, err := unix.Open(filepath.Join(dir, "wake"), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
	})
	sub := filepath.Join(dir, "sub")
	moves("a directory made", true, func() {
		if err := os.Mkdir(sub, 0o700); err != nil {
			t.Fatal(err)
		}
	})
	moves("a file made in a directory not watched", false, func() {
		if err := os.WriteFile(filepath.Join(sub, "f"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	})
	if added, err := w.Add(sub, DirRule{}); err != nil || !added {
		t.Fatalf("Add %s = %v, %v", sub, added, err)
	}
	moves("the watched directory removed", true, func() {
		if err := os.RemoveAll(sub); err != nil {
			t.Fatal(err)
		}
	})
	if n := w.Watched(); n != 1 {
		t.Errorf("%d directories watched after one was removed; want 1", n)
	}
}

// TestDirWatchRefusesALink: a link or a file where a directory is read,
// or nothing there, is not watched, an error that is fs.ErrNotExist.
func TestDirWatchRefusesALink(t *testing.T) {
	dir := t.TempDir()
	w, err := NewDirWatch()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := os.Symlink(t.TempDir(), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"link", "file", "absent"} {
		added, err := w.Add(filepath.Join(dir, name), DirRule{})
		if added || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Add %s = %v, %v; want false and an error that is fs.ErrNotExist", name, added, err)
		}
	}
	if n := w.Watched(); n != 0 {
		t.Errorf("%d directories watched; want none", n)
	}
}

// TestWatchCountsProcessChanges: the process table's count of changes
// moves when a process naming a workspace starts and when it ends, and
// not for a process that names none.
func TestWatchCountsProcessChanges(t *testing.T) {
	k := messages.WorkspaceKey{Login: "alice", Project: "demo"}
	root, l, _ := agentsRoot(t, k)
	pt, err := NewProcTable(ProcOptions{Layout: l, Daemon: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	if _, ok := pt.Changes(); ok {
		t.Fatal("a table that follows no events counts changes")
	}
	if err := pt.Watch(); err != nil {
		t.Fatal(err)
	}
	count, ok := pt.Changes()
	if !ok {
		t.Fatal("a watched table counts no changes")
	}
	moves := func(what string, want bool, f func()) {
		t.Helper()
		f()
		got, ok := pt.Changes()
		if !ok || (got != count) != want {
			t.Errorf("%s: the count went from %d to %d (%v); want a change: %v", what, count, got, ok, want)
		}
		count = got
	}
	moves("processes naming no workspace", false, func() {
		for range 5 {
			if err := exec.Command("/bin/true").Run(); err != nil {
				t.Fatal(err)
			}
		}
	})
	launcher := newLauncher(t, root)
	x := newExits()
	readyP, lines := readyPipe(t, t.TempDir())
	var id protocol.ProcID
	moves("a session started", true, func() {
		id, err = launcher.Spawn(host.SpawnSpec{Path: testExe(t), Args: []string{"workspace", "serve", "alice/demo", "--root", l.Root()},
			Env: []string{helperEnv + "=serve", "HELPER_READY=" + readyP}, Dir: "/"}, x.on)
		if err != nil {
			t.Fatal(err)
		}
		await(t, lines, "session ready")
	})
	moves("the session running", false, func() {})
	moves("the session killed", true, func() {
		if err := launcher.Signal(id, host.SIGKILL); err != nil {
			t.Fatal(err)
		}
		x.wait(t, id)
	})
}

// FuzzParseInotify: any bytes read as inotify events parse without a
// panic, into events whose names hold no NUL, each within the bytes read.
func FuzzParseInotify(f *testing.F) {
	ev := make([]byte, unix.SizeofInotifyEvent+8)
	binary.LittleEndian.PutUint32(ev[0:], 3)
	binary.LittleEndian.PutUint32(ev[4:], unix.IN_CREATE)
	binary.LittleEndian.PutUint32(ev[12:], 8)
	copy(ev[unix.SizeofInotifyEvent:], "turn\x00\x00\x00\x00")
	f.Add(ev)
	f.Add(append(append([]byte{}, ev...), ev[:10]...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		total := 0
		for _, e := range parseInotify(b) {
			for i := 0; i < len(e.name); i++ {
				if e.name[i] == 0 {
					t.Fatalf("a name with a NUL: %q", e.name)
				}
			}
			total += unix.SizeofInotifyEvent + len(e.name)
		}
		if total > len(b) {
			t.Fatalf("events of %d bytes from %d", total, len(b))
		}
	})
}

// TestDirWatchFollowsAMountOver: a file system mounted over a watched
// directory (a workspace's own disk, D82) makes no event; the next Add of
// the path sees another directory there, watches it (added, a change),
// and counts what changes in it from then on; its unmount is a change
// too.
func TestDirWatchFollowsAMountOver(t *testing.T) {
	inTmpfs(t, "1m", func(dir string) {
		ws := filepath.Join(dir, "ws")
		if err := os.Mkdir(ws, 0o700); err != nil {
			t.Fatal(err)
		}
		w, err := NewDirWatch()
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if added, err := w.Add(ws, DirRule{}); err != nil || !added {
			t.Fatalf("Add = %v, %v", added, err)
		}
		if err := unix.Mount("ocx-disk", ws, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
		count := w.Changes()
		added, err := w.Add(ws, DirRule{})
		if err != nil || !added {
			t.Fatalf("Add over a mount = %v, %v; want true", added, err)
		}
		if got := w.Changes(); got == count {
			t.Error("a directory watched anew at its path is no change")
		}
		count = w.Changes()
		if err := os.WriteFile(filepath.Join(ws, "clone"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if got := w.Changes(); got == count {
			t.Error("an entry made on the mounted file system is not counted")
		}
		if w.Watched() != 1 {
			t.Errorf("%d directories watched, want 1", w.Watched())
		}
		count = w.Changes()
		if err := unix.Unmount(ws, 0); err != nil {
			t.Fatal(err)
		}
		if got := w.Changes(); got == count {
			t.Error("the unmount is not counted")
		}
	})
}
