package host

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/ocx-go/ocx/messages"
)

// A disk (D82) is a file system of a workspace's own: an ext4 file system
// in an image file the node keeps out of every sandbox's reach, loop
// mounted at the workspace's directory, so that the kernel holds what is
// written there to its size (a write past it fails with ENOSPC) and
// nothing written there takes room from the node's own files. The image
// is reserved whole when it is made (fallocate), so that the disks of
// all the workspaces never ask more of the host's file system than it
// gave them.

// diskBlock is what a disk's size is rounded down to: ext4's largest
// block, so that the image and the file system in it are the same size.
const diskBlock = 4096

// DiskBytes is a size in bytes as a disk is made: rounded down to
// diskBlock.
func DiskBytes(n uint64) uint64 { return n &^ (diskBlock - 1) }

// SessionDisk is the size a workspace's disk is given at a launch (D82):
// the session definition's limits.disk (def, as written), else node.json's
// session_limits.disk, else 0: the disk, if the workspace has one, keeps
// the size it has.
func SessionDisk(def string, node *messages.NodeSessionLimits) (uint64, error) {
	switch {
	case def != "":
		n, err := messages.ParseDisk("limits.disk", def)
		if err != nil {
			return 0, err
		}
		return DiskBytes(n), nil
	case node != nil && node.Disk != "":
		n, err := messages.ParseDisk("node.json session_limits.disk", node.Disk)
		if err != nil {
			return 0, err
		}
		return DiskBytes(n), nil
	}
	return 0, nil
}

// NodeDisk is node.json's session_limits.disk in bytes, 0 when it gives
// none: the size a workspace's disk is made at.
func NodeDisk(node *messages.NodeSessionLimits) (uint64, error) {
	if node == nil || node.Disk == "" {
		return 0, nil
	}
	return SessionDisk("", node)
}

// mount is one line of /proc/PID/mountinfo.
type mount struct {
	// Dev is the device's major:minor as mountinfo writes it ("7:3").
	Dev string
	// Root is what of the file system the mount shows, At where.
	Root, At string
	// FSType is the file system's type ("ext4"), Source its source
	// ("/dev/loop3").
	FSType, Source string
}

// ParseMounts reads every mount of /proc/PID/mountinfo's contents, in
// order; a line it cannot read is left out.
func ParseMounts(b []byte) []mount {
	var out []mount
	for line := range bytes.Lines(b) {
		f := strings.Fields(string(line))
		sep := slices.Index(f, "-")
		if sep < 5 || sep+2 >= len(f) {
			continue
		}
		out = append(out, mount{Dev: f[2], Root: unescapeMountinfo(f[3]), At: unescapeMountinfo(f[4]),
			FSType: f[sep+1], Source: unescapeMountinfo(f[sep+2])})
	}
	return out
}

// MountsOf lists where the device major:minor is mounted, the last mount
// first: the order in which they are undone.
func MountsOf(mounts []mount, major, minor uint32) []string {
	dev := fmt.Sprintf("%d:%d", major, minor)
	var at []string
	for i := len(mounts) - 1; i >= 0; i-- {
		if mounts[i].Dev == dev {
			at = append(at, mounts[i].At)
		}
	}
	return at
}

// MountedBelow lists the mount points at or below dir, the deepest first.
func MountedBelow(mounts []mount, dir string) []string {
	var at []string
	for i := len(mounts) - 1; i >= 0; i-- {
		if p := mounts[i].At; within(p, dir) && !slices.Contains(at, p) {
			at = append(at, p)
		}
	}
	return at
}

// diskChange is what a disk needs to be given a size: nothing, to grow,
// or to shrink.
type diskChange int

// The changes, as ResizeOf says them.
const (
	DiskKept diskChange = iota
	diskGrown
	DiskShrunk
)

// ResizeOf says what a disk of size have needs to be of size want; a want
// of 0 keeps it.
func ResizeOf(have, want uint64) diskChange {
	switch {
	case want == 0 || want == have:
		return DiskKept
	case want > have:
		return diskGrown
	}
	return DiskShrunk
}
