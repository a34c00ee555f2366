package unixhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
)

// A disk (D82, host/disk.go): an ext4 file system in an image file,
// reserved whole, loop mounted at a workspace's directory. Each step is
// done under an exclusive flock on the image, so that a launch, a
// workspace's removal and a run's release never work on one disk at once.

// diskTools are the programs of e2fsprogs a disk needs, found once.
type diskTools struct {
	mkfs, fsck, resize string
	why                string
}

// diskLockWait bounds how long a step waits for another on the same disk
// (a resize of a big disk takes a few seconds).
const diskLockWait = 60 * time.Second

// diskDetachWait bounds how long an unmount waits for the kernel to
// detach the loop device behind it.
const diskDetachWait = 5 * time.Second

var hostDisks = sync.OnceValue(probeDisks)

// DiskWhy says why this host cannot give a workspace a file system of its
// own (D82), "" when it can: the node must be able to mount (root, with
// CAP_SYS_ADMIN), the kernel must know ext4 and have loop devices, and
// e2fsprogs must be installed. It is found once per process.
func DiskWhy() string { return hostDisks().why }

func probeDisks() diskTools {
	var t diskTools
	if uid := os.Geteuid(); uid != 0 {
		t.why = fmt.Sprintf("the node runs as uid %d, and mounting a file system of a workspace's own needs root", uid)
		return t
	}
	if !hasCap(unix.CAP_SYS_ADMIN) {
		t.why = "the node's root has no CAP_SYS_ADMIN (a container's?), which mounting a file system needs"
		return t
	}
	if b, err := readSmall("/proc/filesystems"); err != nil || !hasFilesystem(b, "ext4") {
		t.why = "the kernel offers no ext4 file system (/proc/filesystems)"
		return t
	}
	fd, err := unix.Open("/dev/loop-control", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.why = fmt.Sprintf("the host has no loop devices: /dev/loop-control: %v", err)
		return t
	}
	unix.Close(fd)
	for _, p := range []struct {
		name string
		to   *string
	}{{"mkfs.ext4", &t.mkfs}, {"e2fsck", &t.fsck}, {"resize2fs", &t.resize}} {
		if *p.to = sbinTool(p.name); *p.to == "" {
			t.why = p.name + " is not installed (Debian's e2fsprogs; make deps installs it)"
			return t
		}
	}
	return t
}

// hasCap says whether the process holds capability c in its effective
// set.
func hasCap(c int) bool {
	b, err := readSmall("/proc/self/status")
	if err != nil {
		return false
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("CapEff:")); ok {
			n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 16, 64)
			return err == nil && n&(1<<uint(c)) != 0
		}
	}
	return false
}

// hasFilesystem says whether /proc/filesystems' contents name fstype.
func hasFilesystem(b []byte, fstype string) bool {
	for line := range bytes.Lines(b) {
		f := strings.Fields(string(line))
		if len(f) > 0 && f[len(f)-1] == fstype {
			return true
		}
	}
	return false
}

// sbinTool finds a program of e2fsprogs on PATH or in the sbin
// directories, which a daemon's PATH may lack.
func sbinTool(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// errNoDisk is a disk's image that is not there.
var errNoDisk = errors.New("no disk image")

// errDiskElsewhere is a disk attached to a loop device but not mounted at
// its directory in this mount namespace: in use elsewhere, so it is
// neither mounted a second time nor changed.
var errDiskElsewhere = errors.New("the disk is attached to a loop device, but not mounted at its directory here")

func diskTooling() (diskTools, error) {
	t := hostDisks()
	if t.why != "" {
		return t, errors.New(t.why)
	}
	return t, nil
}

// MakeDisk makes the image of a disk of size bytes (rounded down to
// host.DiskBlock) at image, which must not be there: the file reserved
// whole on the host's file system (fallocate: the disk never asks for a
// block it was not given, and a host without the room refuses it now)
// and an ext4 file system in it with no blocks reserved for root (the
// size is all the agent's). On an error nothing is left.
func MakeDisk(image string, size uint64) (err error) {
	t, err := diskTooling()
	if err != nil {
		return fmt.Errorf("make the disk %s: %w", image, err)
	}
	size = host.DiskBytes(size)
	f, err := os.OpenFile(image, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("make the disk: %w", err)
	}
	defer func() {
		if err != nil {
			os.Remove(image)
		}
	}()
	defer f.Close()
	if err := fallocate(f, size); err != nil {
		return fmt.Errorf("make the disk %s: reserve %s on the host's file system: %w", image, host.SizeWords(size), err)
	}
	if out, err := exec.Command(t.mkfs, "-q", "-F", "-m", "0", "-E", "nodiscard", "-L", "ocx-disk", image).CombinedOutput(); err != nil {
		return fmt.Errorf("make the disk %s: mkfs.ext4: %w: %s", image, err, strings.TrimSpace(string(out)))
	}
	// mkfs zeroes what it must by punching holes: allocated again, so
	// that the disk is the host's room it was given, whole.
	if err := fallocate(f, size); err != nil {
		return fmt.Errorf("make the disk %s: reserve %s on the host's file system: %w", image, host.SizeWords(size), err)
	}
	return f.Close()
}

// fallocate gives f size bytes, every block allocated.
func fallocate(f *os.File, size uint64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = unix.Fallocate(int(fd), 0, 0, int64(size))
			if ferr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}

// diskState is what the kernel says of a disk's image.
type diskState struct {
	// Loop is the loop device the image is attached to ("/dev/loop3"),
	// "" when none.
	Loop         string
	Major, Minor uint32
	// Mounts are where the loop device is mounted in this mount
	// namespace, the last mount first.
	Mounts []string
	// Size is the image's size in bytes: the disk's.
	Size uint64
}

// diskOf says what the kernel knows of image: its size, the loop device
// it is attached to and where that is mounted. errNoDisk when there is no
// image.
func diskOf(image string) (diskState, error) {
	var s diskState
	st, err := os.Lstat(image)
	if errors.Is(err, fs.ErrNotExist) {
		return s, fmt.Errorf("%s: %w", image, errNoDisk)
	}
	if err != nil {
		return s, err
	}
	if !st.Mode().IsRegular() {
		return s, fmt.Errorf("%s is not a disk's image: a %s", image, st.Mode().Type())
	}
	s.Size = uint64(st.Size())
	sys := st.Sys().(*syscall.Stat_t)
	loop, major, minor, err := loopOf(image, uint64(sys.Dev), sys.Ino)
	if err != nil || loop == "" {
		return s, err
	}
	s.Loop, s.Major, s.Minor = loop, major, minor
	mi, err := readSmall("/proc/self/mountinfo")
	if err != nil {
		return s, err
	}
	s.Mounts = host.MountsOf(host.ParseMounts(mi), major, minor)
	return s, nil
}

// loopOf finds the loop device whose backing file is the image (by its
// device and inode, as the kernel keeps them), "" when none is.
func loopOf(image string, dev, ino uint64) (loop string, major, minor uint32, err error) {
	entries, err := os.ReadDir("/sys/block")
	if err != nil {
		return "", 0, 0, err
	}
	names := []string{image}
	if real, err := filepath.EvalSymlinks(image); err == nil && real != image {
		names = append(names, real)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "loop") {
			continue
		}
		b, err := readSmall(filepath.Join("/sys/block", name, "loop", "backing_file"))
		if err != nil {
			continue // not attached
		}
		if p := strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)"); !slices.Contains(names, p) {
			continue
		}
		fd, err := unix.Open("/dev/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", 0, 0, fmt.Errorf("read /dev/%s: %w", name, err)
		}
		info, err := unix.IoctlLoopGetStatus64(fd)
		var st unix.Stat_t
		if err == nil {
			err = unix.Fstat(fd, &st)
		}
		unix.Close(fd)
		if err != nil {
			continue // detached meanwhile
		}
		if info.Device == dev && info.Inode == ino {
			return "/dev/" + name, unix.Major(st.Rdev), unix.Minor(st.Rdev), nil
		}
	}
	return "", 0, 0, nil
}

// MountsBelow lists what is mounted at or below dir in this mount
// namespace, the deepest first: what a removal of dir would cross into.
func MountsBelow(dir string) ([]string, error) {
	mi, err := readSmall("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return host.MountedBelow(host.ParseMounts(mi), filepath.Clean(dir)), nil
}

// lockDisk takes the disk's flock, on the image itself.
func lockDisk(ctx context.Context, image string) (*os.File, error) {
	f, err := os.OpenFile(image, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", image, errNoDisk)
	}
	if err != nil {
		return nil, err
	}
	if err := LockFile(ctx, f, Exclusive, diskLockWait); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// MountDisk mounts the disk whose image is image at dir, a directory, if
// it is not mounted there already: attached to a free loop device that
// detaches itself once it is unmounted (LO_FLAGS_AUTOCLEAR), mounted
// nodev and nosuid through a descriptor of dir opened without following a
// link, its top made mode 0700 and its lost+found removed. A disk
// attached elsewhere is errDiskElsewhere.
func MountDisk(ctx context.Context, image, dir string) error {
	if _, err := diskTooling(); err != nil {
		return fmt.Errorf("mount the disk %s: %w", image, err)
	}
	f, err := lockDisk(ctx, image)
	if err != nil {
		return fmt.Errorf("mount the disk: %w", err)
	}
	defer f.Close()
	_, err = mountLocked(f, image, dir)
	return err
}

// mountLocked is MountDisk under the disk's lock; done is false when it
// was mounted at dir already.
func mountLocked(img *os.File, image, dir string) (done bool, err error) {
	s, err := diskOf(image)
	if err != nil {
		return false, err
	}
	if s.Loop != "" {
		if mountedAt(s, dir) {
			return false, nil
		}
		return false, fmt.Errorf("mount the disk %s at %s: %w (%s)", image, dir, errDiskElsewhere, s.Loop)
	}
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, pathErr("mount a disk at", dir, err)
	}
	defer unix.Close(dfd)
	lfd, loop, err := attachLoop(img)
	if err != nil {
		return false, fmt.Errorf("mount the disk %s: %w", image, err)
	}
	// The loop device detaches once nothing holds it: the mount holds it
	// from now on, and this descriptor until it is closed.
	defer unix.Close(lfd)
	target := fmt.Sprintf("/proc/self/fd/%d", dfd)
	for {
		err = unix.Mount(loop, target, "ext4", unix.MS_NODEV|unix.MS_NOSUID, "")
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return false, fmt.Errorf("mount the disk %s (%s) at %s: %w", image, loop, dir, err)
	}
	if err := tidyDiskTop(dir); err != nil {
		unmountAt(dir)
		return false, err
	}
	return true, nil
}

// mountedAt says whether the disk is mounted at dir here.
func mountedAt(s diskState, dir string) bool {
	for _, at := range s.Mounts {
		if at == dir {
			return true
		}
	}
	return false
}

// attachLoop attaches the image img to a free loop device, read-write,
// detaching itself once nothing holds it; it returns the device open. The
// loop device keeps the open file it is given for as long as it is
// attached, so it is given one of its own: the disk's lock, on img's,
// goes when img is closed.
func attachLoop(img *os.File) (int, string, error) {
	ctl, err := unix.Open("/dev/loop-control", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", err
	}
	defer unix.Close(ctl)
	ifd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", img.Fd()), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", fmt.Errorf("open %s again for its loop device: %w", img.Name(), err)
	}
	defer unix.Close(ifd)
	var last error
	for range 16 {
		n, err := unix.IoctlRetInt(ctl, unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return -1, "", fmt.Errorf("find a free loop device: %w", err)
		}
		loop := "/dev/loop" + strconv.Itoa(n)
		lfd, err := unix.Open(loop, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, "", fmt.Errorf("open %s: %w", loop, err)
		}
		cfg := unix.LoopConfig{Fd: uint32(ifd)}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], img.Name())
		err = unix.IoctlLoopConfigure(lfd, &cfg)
		if err == nil {
			return lfd, loop, nil
		}
		unix.Close(lfd)
		if err != unix.EBUSY {
			return -1, "", fmt.Errorf("attach %s to %s: %w", img.Name(), loop, err)
		}
		last = err // taken by another since it was free: the next one
	}
	return -1, "", fmt.Errorf("attach %s to a loop device: %w", img.Name(), last)
}

// tidyDiskTop makes a new disk's top directory the node's alone (0700)
// and removes mkfs's empty lost+found (e2fsck makes one again when it
// needs it).
func tidyDiskTop(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return pathErr("open the disk's top", dir, err)
	}
	defer unix.Close(fd)
	if err := unix.Fchmod(fd, 0o700); err != nil {
		return pathErr("chmod the disk's top", dir, err)
	}
	if err := unix.Unlinkat(fd, "lost+found", unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT && err != unix.ENOTEMPTY && err != unix.EEXIST {
		return pathErr("remove lost+found from", dir, err)
	}
	return nil
}

// unmountAt unmounts what is mounted at dir, following no link.
func unmountAt(dir string) error {
	for {
		err := unix.Unmount(dir, unix.UMOUNT_NOFOLLOW)
		if err != unix.EINTR {
			if err != nil {
				return pathErr("unmount", dir, err)
			}
			return nil
		}
	}
}

// unmountDisk unmounts the disk whose image is image wherever it is
// mounted here, and waits for its loop device to detach; a disk that is
// not mounted is no error. A loop device still attached then (a mount of
// another mount namespace holds it: an orphaned sandbox's) is
// errDiskElsewhere.
func unmountDisk(ctx context.Context, image string) error {
	f, err := lockDisk(ctx, image)
	if errors.Is(err, errNoDisk) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("unmount the disk: %w", err)
	}
	defer f.Close()
	return unmountLocked(image)
}

func unmountLocked(image string) error {
	s, err := diskOf(image)
	if err != nil {
		return err
	}
	if s.Loop == "" {
		return nil
	}
	for _, at := range s.Mounts {
		if err := unmountAt(at); err != nil {
			return fmt.Errorf("unmount the disk %s: %w", image, err)
		}
	}
	deadline := time.Now().Add(diskDetachWait)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		s, err := diskOf(image)
		if err != nil || s.Loop == "" {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("unmount the disk %s: %w (%s, still attached %s after its mounts here went)", image, errDiskElsewhere, s.Loop, diskDetachWait)
		}
		time.Sleep(delay)
	}
}

// RemoveDisk unmounts the disk whose image is image (unmountDisk) and
// removes the image; no image is no error. An image still attached
// elsewhere is removed all the same: its blocks go back to the host once
// the last mount of it goes.
func RemoveDisk(ctx context.Context, image string) error {
	err := unmountDisk(ctx, image)
	if err != nil && !errors.Is(err, errDiskElsewhere) {
		return err
	}
	if rerr := os.Remove(image); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		return errors.Join(err, rerr)
	}
	return nil
}

// EnsureDisk is what a launch does with a workspace's disk (D82): the
// disk given size bytes (rounded down to host.DiskBlock; 0 keeps its
// size), then mounted at dir if it is not mounted there. A resize is made
// unmounted (no session runs at a launch): e2fsck, then resize2fs on the
// image, which grows into the room fallocate reserved or shrinks, failing
// and naming the sizes when the contents do not fit; the disk is then as
// it was. What it did is said in words ("" for nothing). errNoDisk when
// there is no image.
func EnsureDisk(ctx context.Context, image, dir string, size uint64) (string, error) {
	t, err := diskTooling()
	if err != nil {
		return "", err
	}
	f, err := lockDisk(ctx, image)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s, err := diskOf(image)
	if err != nil {
		return "", err
	}
	mounted := mountedAt(s, dir)
	if s.Loop != "" && !mounted {
		return "", fmt.Errorf("the disk %s: %w (%s)", image, errDiskElsewhere, s.Loop)
	}
	size = host.DiskBytes(size)
	var did []string
	if change := host.ResizeOf(s.Size, size); change != host.DiskKept {
		if mounted {
			if err := unmountLocked(image); err != nil {
				return "", err
			}
			mounted = false
		}
		if err := resizeLocked(ctx, t, f, s.Size, size); err != nil {
			// Mounted again as it was, so that nothing of it changed.
			if _, merr := mountLocked(f, image, dir); merr != nil {
				err = errors.Join(err, merr)
			}
			return "", err
		}
		verb := "grown"
		if change == host.DiskShrunk {
			verb = "shrunk"
		}
		did = append(did, fmt.Sprintf("%s from %s to %s", verb, host.SizeWords(s.Size), host.SizeWords(size)))
	}
	if !mounted {
		if _, err := mountLocked(f, image, dir); err != nil {
			return "", err
		}
		did = append(did, "mounted at "+dir)
	}
	return strings.Join(did, ", "), nil
}

// resizeLocked resizes an unmounted disk from have to size bytes. A grow
// reserves the room first, a shrink gives it back last; on an error the
// image is its old size again.
func resizeLocked(ctx context.Context, t diskTools, f *os.File, have, size uint64) error {
	image := f.Name()
	if size > have {
		if err := fallocate(f, size); err != nil {
			return fmt.Errorf("grow the disk %s to %s: reserve it on the host's file system: %w", image, host.SizeWords(size), err)
		}
	}
	undo := func(err error) error {
		if size > have {
			if terr := f.Truncate(int64(have)); terr != nil {
				err = errors.Join(err, terr)
			}
		}
		return err
	}
	if err := fsck(ctx, t, image); err != nil {
		return undo(err)
	}
	if out, err := exec.CommandContext(ctx, t.resize, image, strconv.FormatUint(size/1024, 10)+"K").CombinedOutput(); err != nil {
		if size < have {
			return fmt.Errorf("the disk %s holds more than %s fit (it is %s): resize2fs: %w: %s", image, host.SizeWords(size), host.SizeWords(have), err, strings.TrimSpace(string(out)))
		}
		return undo(fmt.Errorf("grow the disk %s to %s: resize2fs: %w: %s", image, host.SizeWords(size), err, strings.TrimSpace(string(out))))
	}
	if size < have {
		if err := f.Truncate(int64(size)); err != nil {
			return fmt.Errorf("shrink the disk %s: %w", image, err)
		}
	}
	return nil
}

// fsck checks an unmounted disk as resize2fs asks, mending what is safe.
func fsck(ctx context.Context, t diskTools, image string) error {
	out, err := exec.CommandContext(ctx, t.fsck, "-f", "-p", image).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		return nil // errors corrected
	}
	if err != nil {
		return fmt.Errorf("check the disk %s: e2fsck: %w: %s", image, err, strings.TrimSpace(string(out)))
	}
	return nil
}
