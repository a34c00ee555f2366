package unixhost

import (
	"bytes"
	"context"
	"errors"

	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
)

// needDisks skips a test where the host cannot make disks, saying why;
// TestDiskWhy tests the reason itself.
func needDisks(t *testing.T) {
	t.Helper()
	if why := DiskWhy(); why != "" {
		t.Skip("this host makes no disks: " + why)
	}
}

// statfs is the file system at p: its size and what is free, in bytes.
func statfs(t testing.TB, p string) (size, free uint64) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * uint64(st.Bsize), st.Bavail * uint64(st.Bsize)
}

// allocated is how many bytes of the host's file system the file p holds.
func allocated(t testing.TB, p string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return uint64(st.Blocks) * 512
}

// isMount says whether dir is the top of a file system other than its
// parent's.
func isMount(t testing.TB, dir string) bool {
	t.Helper()
	var a, b unix.Stat_t
	if err := unix.Stat(dir, &a); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(filepath.Dir(dir), &b); err != nil {
		t.Fatal(err)
	}
	return a.Dev != b.Dev
}

// writeUntilFull writes zeros to p until a write fails, and returns the
// error and how much was written.
func writeUntilFull(t testing.TB, p string) (int64, error) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	var n int64
	for {
		w, err := f.Write(buf)
		n += int64(w)
		if err != nil {
			return n, err
		}
	}
}

// TestDiskLifecycle: a disk made, mounted, filled, grown, refused a
// shrink its contents do not fit, shrunk, unmounted, mounted again as a
// launch after a host's reboot does, and removed; all on a tmpfs of the
// test's own (the host's file system a node's files are on), whose free
// space the disk's writes never touch.
func TestDiskLifecycle(t *testing.T) {
	inTmpfs(t, "256m", func(dir string) {
		needDisks(t)
		ctx := context.Background()
		image, ws := filepath.Join(dir, "disk"), filepath.Join(dir, "ws")
		if err := os.Mkdir(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := MakeDisk(image, 32<<20+100); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(image); err != nil || st.Size() != 32<<20 || st.Mode().Perm() != 0o600 {
			t.Fatalf("the image: %v %v", st, err)
		}
		if got := allocated(t, image); got < 32<<20 {
			t.Errorf("the image holds %d bytes of the host's file system, not the 32 MiB it was given", got)
		}
		if err := MakeDisk(image, 32<<20); err == nil {
			t.Error("a disk made over one that is there")
		}
		if err := MountDisk(ctx, filepath.Join(dir, "none"), ws); !errors.Is(err, errNoDisk) {
			t.Errorf("mount a disk that is not there: %v", err)
		}

		if err := MountDisk(ctx, image, ws); err != nil {
			t.Fatal(err)
		}
		if !isMount(t, ws) {
			t.Fatal("the disk is not mounted at the workspace")
		}
		if st, err := os.Stat(ws); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("the disk's top: %v %v, want mode 0700", st, err)
		}
		if _, err := os.Lstat(filepath.Join(ws, "lost+found")); err == nil {
			t.Error("the disk's lost+found is left in the workspace")
		}
		s, err := diskOf(image)
		if err != nil || s.Loop == "" || len(s.Mounts) != 1 || s.Mounts[0] != ws || s.Size != 32<<20 {
			t.Fatalf("diskOf: %+v %v", s, err)
		}
		if err := MountDisk(ctx, image, ws); err != nil {
			t.Errorf("mounting a disk mounted there already: %v", err)
		}
		other := filepath.Join(dir, "other")
		os.Mkdir(other, 0o755)
		if err := MountDisk(ctx, image, other); !errors.Is(err, errDiskElsewhere) {
			t.Errorf("mounting a disk mounted elsewhere: %v", err)
		}

		// Filled: ENOSPC in the disk, and nothing of the host's file
		// system taken: the image holds what it held (the host's free
		// space is no measure: other writers share it).
		held := allocated(t, image)
		n, err := writeUntilFull(t, filepath.Join(ws, "fill"))
		if !errors.Is(err, unix.ENOSPC) {
			t.Fatalf("filling the disk: %v", err)
		}
		if n > 32<<20 {
			t.Errorf("%d bytes written in a 32 MiB disk", n)
		}
		if now := allocated(t, image); now != held {
			t.Errorf("filling the disk changed what its image holds of the host: %d bytes, was %d", now, held)
		}
		t.Logf("a 32 MiB disk took %d bytes before ENOSPC", n)

		// Grown where it is mounted: the fill stays, room again.
		did, err := EnsureDisk(ctx, image, ws, 64<<20)
		if err != nil || !strings.Contains(did, "grown from 32 MiB to 64 MiB") {
			t.Fatalf("grow: %q %v", did, err)
		}
		if size, free := statfs(t, ws); size < 48<<20 || free < 24<<20 {
			t.Errorf("the grown disk: %d bytes, %d free", size, free)
		}
		if st, err := os.Stat(filepath.Join(ws, "fill")); err != nil || st.Size() != n {
			t.Errorf("the fill after the grow: %v %v", st, err)
		}
		if err := os.WriteFile(filepath.Join(ws, "marker"), []byte("kept"), 0o600); err != nil {
			t.Fatal(err)
		}

		// A shrink its contents do not fit is refused, the disk left as
		// it was, mounted.
		_, err = EnsureDisk(ctx, image, ws, 16<<20)
		if err == nil || !strings.Contains(err.Error(), "holds more than 16 MiB fit") {
			t.Fatalf("a shrink the contents do not fit: %v", err)
		}
		t.Logf("refused: %v", err)
		if b, err := os.ReadFile(filepath.Join(ws, "marker")); err != nil || string(b) != "kept" {
			t.Errorf("after a refused shrink: %q %v", b, err)
		}
		if s, _ := diskOf(image); s.Size != 64<<20 || !mountedAt(s, ws) {
			t.Errorf("after a refused shrink: %+v", s)
		}

		// With room, shrunk.
		if err := os.Remove(filepath.Join(ws, "fill")); err != nil {
			t.Fatal(err)
		}
		did, err = EnsureDisk(ctx, image, ws, 24<<20)
		if err != nil || !strings.Contains(did, "shrunk from 64 MiB to 24 MiB") || !strings.Contains(did, "mounted at") {
			t.Fatalf("shrink: %q %v", did, err)
		}
		if size, _ := statfs(t, ws); size > 24<<20 {
			t.Errorf("the shrunk disk is %d bytes", size)
		}
		if got := allocated(t, image); got > 25<<20 {
			t.Errorf("the shrunk image still holds %d bytes", got)
		}
		if did, err := EnsureDisk(ctx, image, ws, 24<<20); err != nil || did != "" {
			t.Errorf("a disk of the size asked, mounted: %q %v", did, err)
		}

		// Unmounted (a reboot), then mounted again by a launch.
		if err := unmountDisk(ctx, image); err != nil {
			t.Fatal(err)
		}
		if isMount(t, ws) {
			t.Fatal("still mounted")
		}
		if s, _ := diskOf(image); s.Loop != "" {
			t.Errorf("the loop device stays attached after the unmount: %+v", s)
		}
		if err := unmountDisk(ctx, image); err != nil {
			t.Errorf("unmount a disk that is not mounted: %v", err)
		}
		did, err = EnsureDisk(ctx, image, ws, 0)
		if err != nil || did != "mounted at "+ws {
			t.Fatalf("mount again: %q %v", did, err)
		}
		if b, err := os.ReadFile(filepath.Join(ws, "marker")); err != nil || string(b) != "kept" {
			t.Errorf("after the disk was mounted again: %q %v", b, err)
		}

		if err := RemoveDisk(ctx, image); err != nil {
			t.Fatal(err)
		}
		if isMount(t, ws) || Exists(image) {
			t.Error("the disk is still mounted, or its image there")
		}
		if err := RemoveDisk(ctx, image); err != nil {
			t.Errorf("remove a disk that is gone: %v", err)
		}
		// Its space is the host's again: no loop device holds the image
		// (the host's free space is no measure: other writers share it).
		backs, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
		for _, b := range backs {
			if f, err := os.ReadFile(b); err == nil && strings.HasPrefix(string(f), image) {
				t.Errorf("%s still backs onto the removed image: %q", b, f)
			}
		}
	})
}

// TestDiskInTheSandbox: a session's sandbox binds the workspace, its disk
// with it; the agent, root in its own user namespace, gets ENOSPC past the
// disk, and undoing its bind (umount, which it may do in its own mount
// namespace) shows it the sandbox's own empty tmpfs root, never the
// host's directory under the disk: what it writes there is in memory,
// and the host's directory stays empty.
func TestDiskInTheSandbox(t *testing.T) {
	inTmpfs(t, "128m", func(dir string) {
		needDisks(t)
		bwrap, err := exec.LookPath("bwrap")
		if err != nil {
			t.Skip("no bwrap")
		}
		ctx := context.Background()
		image, ws := filepath.Join(dir, "disk"), filepath.Join(dir, "ws")
		os.Mkdir(ws, 0o700)
		if err := MakeDisk(image, 16<<20); err != nil {
			t.Fatal(err)
		}
		if err := MountDisk(ctx, image, ws); err != nil {
			t.Fatal(err)
		}
		defer RemoveDisk(ctx, image)
		args, err := host.BwrapArgs(host.SandboxSpec{Workspace: ws, Sandbox: messages.Sandbox{ReadOnly: []string{"/usr", "/bin", "/lib", "/lib64"}}}, 0, "/",
			[]string{"/bin/sh", "-c", `dd if=/dev/zero of=` + ws + `/fill bs=64k 2>&1 | grep -o 'No space left on device' | head -1
umount ` + ws + ` && echo unmounted; echo planted > ` + ws + `/planted && echo wrote; true`})
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bwrap, args[1:]...).CombinedOutput()
		// bwrap's init outlives it a moment, reparented to this test (a
		// subreaper), which runs alone in its process: waited for.
		for {
			var st unix.WaitStatus
			if _, werr := unix.Wait4(-1, &st, 0, nil); werr == unix.ECHILD {
				break
			}
		}
		if err != nil {
			t.Fatalf("bwrap: %v\n%s", err, out)
		}
		t.Logf("in the sandbox:\n%s", out)
		if !bytes.Contains(out, []byte("No space left on device")) {
			t.Errorf("the agent was not told ENOSPC past its disk:\n%s", out)
		}
		if err := unmountDisk(ctx, image); err != nil {
			t.Fatal(err)
		}
		entries, err := os.ReadDir(ws)
		if err != nil || len(entries) != 0 {
			t.Errorf("the host's directory under the disk holds %v (%v): the agent reached it", entries, err)
		}
	})
}

// TestDiskWhy: on this host the reason is empty or names what lacks; a
// node that is not root is told it needs root, which the probe says
// before anything else.
func TestDiskWhy(t *testing.T) {
	why := DiskWhy()
	t.Logf("DiskWhy: %q", why)
	if os.Geteuid() != 0 && !strings.Contains(why, "needs root") {
		t.Errorf("a node that is not root: %q", why)
	}
	if why != "" {
		if err := MakeDisk(filepath.Join(t.TempDir(), "d"), 32<<20); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("MakeDisk where disks cannot be made: %v, want %q", err, why)
		}
	}
	for _, c := range []struct {
		b    string
		want bool
	}{{"nodev\tproc\n\text4\n", true}, {"\text3\n\text2\n", false}, {"", false}} {
		if got := hasFilesystem([]byte(c.b), "ext4"); got != c.want {
			t.Errorf("hasFilesystem(%q) = %v", c.b, got)
		}
	}
}
