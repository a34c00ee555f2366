package host

import (
	"slices"
	"testing"

	"github.com/ocx-go/ocx/messages"
)

const diskMountinfo = `22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
45 22 7:3 / /srv/agents/alice/projects/demo rw,nosuid,nodev,relatime - ext4 /dev/loop3 rw
46 22 7:3 / /srv/agents/alice/projects/demo rw,nosuid,nodev,relatime - ext4 /dev/loop3 rw
47 22 7:4 / /srv/agents/ocxd.work/a\040b rw,nosuid,nodev - ext4 /dev/loop4 rw
48 47 0:50 / /srv/agents/ocxd.work/a\040b/tmp rw - tmpfs tmpfs rw
bad line
`

// TestParseMounts: every mount, escapes undone; MountsOf gives a
// device's mount points last first, MountedBelow what lies at or below a
// directory, deepest first and once.
func TestParseMounts(t *testing.T) {
	ms := ParseMounts([]byte(diskMountinfo))
	if len(ms) != 5 || ms[3].At != "/srv/agents/ocxd.work/a b" || ms[1].Dev != "7:3" || ms[1].FSType != "ext4" || ms[1].Source != "/dev/loop3" {
		t.Fatalf("ParseMounts: %+v", ms)
	}
	if got := MountsOf(ms, 7, 3); !slices.Equal(got, []string{"/srv/agents/alice/projects/demo", "/srv/agents/alice/projects/demo"}) {
		t.Errorf("MountsOf(7:3) = %q", got)
	}
	if got := MountsOf(ms, 7, 9); got != nil {
		t.Errorf("MountsOf(7:9) = %q", got)
	}
	if got := MountedBelow(ms, "/srv/agents/ocxd.work"); !slices.Equal(got, []string{"/srv/agents/ocxd.work/a b/tmp", "/srv/agents/ocxd.work/a b"}) {
		t.Errorf("MountedBelow(ocxd.work) = %q", got)
	}
	if got := MountedBelow(ms, "/srv/agents/alice/projects/demo"); !slices.Equal(got, []string{"/srv/agents/alice/projects/demo"}) {
		t.Errorf("MountedBelow(demo) = %q", got)
	}
	if got := MountedBelow(ms, "/srv/agents/alice/projects/dem"); got != nil {
		t.Errorf("MountedBelow(a prefix) = %q", got)
	}
}

// TestSessionDisk: the definition's limits.disk, else node.json's, else
// none; each rounded down to a block, and refused below its least.
func TestSessionDisk(t *testing.T) {
	node := &messages.NodeSessionLimits{Disk: "2G"}
	for _, c := range []struct {
		def  string
		node *messages.NodeSessionLimits
		want uint64
		bad  bool
	}{
		{"", nil, 0, false},
		{"", &messages.NodeSessionLimits{}, 0, false},
		{"", node, 2 << 30, false},
		{"64M", node, 64 << 20, false},
		{"16777300", nil, 16 << 20, false},
		{"1M", node, 0, true},
		{"2T", nil, 0, true},
	} {
		got, err := SessionDisk(c.def, c.node)
		if got != c.want || (err != nil) != c.bad {
			t.Errorf("SessionDisk(%q, %+v) = %d, %v", c.def, c.node, got, err)
		}
	}
	if n, err := NodeDisk(node); n != 2<<30 || err != nil {
		t.Errorf("NodeDisk = %d, %v", n, err)
	}
	for _, c := range []struct {
		have, want uint64
		is         diskChange
	}{{64, 0, DiskKept}, {64, 64, DiskKept}, {64, 128, diskGrown}, {64, 32, DiskShrunk}} {
		if got := ResizeOf(c.have, c.want); got != c.is {
			t.Errorf("ResizeOf(%d, %d) = %d", c.have, c.want, got)
		}
	}
}
