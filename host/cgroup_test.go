package host

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/proc/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestChooseCgroups: v2 where its top offers memory and pids, else v1's
// memory and pids hierarchies (this machine's kind: a hybrid whose
// unified hierarchy offers hugetlb alone), else a reason naming what lacks.
func TestChooseCgroups(t *testing.T) {
	hybrid := ParseCgroupMounts(readFixture(t, "mountinfo-hybrid"))
	if len(hybrid) != 10 {
		t.Fatalf("%d cgroup mounts in the hybrid fixture: %+v", len(hybrid), hybrid)
	}
	if m := hybrid[3]; m.Version != cgroupV1 || m.At != "/sys/fs/cgroup/memory" || !reflect.DeepEqual(m.Controllers, []string{"memory"}) {
		t.Fatalf("the memory mount: %+v", m)
	}
	if m := hybrid[8]; m.Version != cgroupV1 || len(m.Controllers) != 0 {
		t.Fatalf("name=systemd is no controller: %+v", m)
	}
	if m := hybrid[9]; m.Version != CgroupV2 || m.At != "/sys/fs/cgroup/unified" {
		t.Fatalf("the unified mount: %+v", m)
	}
	h, why := ChooseCgroups(hybrid, []byte("hugetlb\n"))
	if why != "" || h != (CgroupHierarchies{Version: cgroupV1, Memory: "/sys/fs/cgroup/memory", Pids: "/sys/fs/cgroup/pids"}) {
		t.Fatalf("hybrid: %+v %q", h, why)
	}
	if d := h.Dirs(); len(d) != 2 {
		t.Fatalf("v1 dirs %q", d)
	}
	// Were memory and pids offered in the unified hierarchy, it is used.
	h, why = ChooseCgroups(hybrid, []byte("cpu memory pids\n"))
	if why != "" || h.Version != CgroupV2 || h.Memory != "/sys/fs/cgroup/unified" || len(h.Dirs()) != 1 {
		t.Fatalf("hybrid with a full unified: %+v %q", h, why)
	}
	v2 := ParseCgroupMounts(readFixture(t, "mountinfo-v2"))
	if h, why := ChooseCgroups(v2, []byte("cpuset cpu io memory hugetlb pids rdma misc\n")); why != "" || h.Version != CgroupV2 || h.Pids != "/sys/fs/cgroup" {
		t.Fatalf("v2: %+v %q", h, why)
	}
	for _, c := range []struct {
		mounts []cgroupMount
		ctl    string
		want   string
	}{
		{nil, "", "no cgroup v2 hierarchy is mounted, and no cgroup v1 memory or pids hierarchy is mounted"},
		{v2, "cpu io\n", "the cgroup v2 hierarchy at /sys/fs/cgroup offers no memory and pids controllers (its controllers: cpu io)"},
		{v2, "", "(its controllers: none)"},
		{hybrid[:3], "hugetlb", "no cgroup v1 memory or pids hierarchy"},
		{append(hybrid[:3:3], hybrid[3]), "", "no cgroup v1 pids hierarchy is mounted"},
		{append(hybrid[:3:3], hybrid[7]), "", "no cgroup v1 memory hierarchy is mounted"},
	} {
		if h, why := ChooseCgroups(c.mounts, []byte(c.ctl)); h.Version != 0 || !strings.Contains(why, c.want) {
			t.Errorf("%+v %q: %+v %q, want it to say %q", c.mounts, c.ctl, h, why, c.want)
		}
	}
	// A v1 hierarchy holding both (mounted "rw,memory,pids") is both.
	both := ParseCgroupMounts([]byte("40 31 0:40 / /cg rw - cgroup cgroup rw,pids,memory\n"))
	if h, why := ChooseCgroups(both, nil); why != "" || h.Memory != "/cg" || h.Pids != "/cg" || len(h.Dirs()) != 1 {
		t.Fatalf("co-mounted: %+v %q", h, why)
	}
}

// TestCgroupNames: per node, stable, never shared by two agents roots,
// and one path component below it per session or run.
func TestCgroupNames(t *testing.T) {
	a, _ := NewLayout("/srv/agents")
	b, _ := NewLayout("/srv/agents2")
	again, _ := NewLayout("/srv/agents/")
	if a.CgroupNode() != again.CgroupNode() || a.CgroupNode() == b.CgroupNode() {
		t.Fatalf("%s %s %s", a.CgroupNode(), again.CgroupNode(), b.CgroupNode())
	}
	if n := a.CgroupNode(); len(n) != len("ocx-")+12 || !strings.HasPrefix(n, "ocx-") {
		t.Fatalf("node %q", n)
	}
	k := messages.WorkspaceKey{Login: "agent-1", Project: "demo.x"}
	if got := a.SessionCgroup(k); got != a.CgroupNode()+"/session:agent-1:demo.x" {
		t.Fatalf("session %q", got)
	}
	if got := a.RunCgroup("abc123"); got != a.CgroupNode()+"/run:abc123" {
		t.Fatalf("run %q", got)
	}
}

func TestCgroupLimitFiles(t *testing.T) {
	l := CgroupLimits{Memory: 64 << 20, Processes: 32}
	v1 := CgroupLimitFiles(cgroupV1, l)
	want1 := []cgroupFile{
		{"memory", "memory.limit_in_bytes", "67108864", false},
		{"memory", "memory.memsw.limit_in_bytes", "67108864", true},
		{"pids", "pids.max", "32", false},
	}
	if !reflect.DeepEqual(v1, want1) {
		t.Fatalf("v1 %+v", v1)
	}
	v2 := CgroupLimitFiles(CgroupV2, CgroupLimits{Memory: 1 << 30})
	want2 := []cgroupFile{{"memory", "memory.max", "1073741824", false}, {"memory", "memory.swap.max", "0", true}}
	if !reflect.DeepEqual(v2, want2) {
		t.Fatalf("v2 %+v", v2)
	}
	if f := CgroupLimitFiles(cgroupV1, CgroupLimits{}); len(f) != 0 {
		t.Fatalf("no limits: %+v", f)
	}
	if got := ParseCgroupLimits([]byte("9223372036854771712\n"), []byte("max\n")); got != (CgroupLimits{}) {
		t.Fatalf("unlimited read as %+v", got)
	}
	if got := ParseCgroupLimits([]byte("67108864\n"), []byte("32\n")); got != l {
		t.Fatalf("limits read as %+v", got)
	}
	if s := l.String(); s != "memory 64 MiB, processes 32" {
		t.Fatalf("%q", s)
	}
	if s := (CgroupLimits{Memory: 1536 << 20}).String(); s != "memory 1.5 GiB" {
		t.Fatalf("%q", s)
	}
}

// TestCgroupEvents reads the counts from the files each version has, and
// names the limit reached as a budget names it.
func TestCgroupEvents(t *testing.T) {
	if m, p := CgroupEventFiles(cgroupV1); m != "memory.oom_control" || p != "pids.events" {
		t.Fatal(m, p)
	}
	if m, p := CgroupEventFiles(CgroupV2); m != "memory.events" || p != "pids.events" {
		t.Fatal(m, p)
	}
	pids := readFixture(t, "pids.events")
	v1 := ParseCgroupEvents(readFixture(t, "memory.oom_control-v1"), pids)
	if v1 != (CgroupEvents{OOMKills: 2, PidsMax: 3}) || v1.Limit() != messages.LimitMemory {
		t.Fatalf("v1 %+v %q", v1, v1.Limit())
	}
	// v2's memory.events has "max" too (times at memory.max): only
	// oom_kill counts.
	v2 := ParseCgroupEvents(readFixture(t, "memory.events-v2"), []byte("max 0\n"))
	if v2 != (CgroupEvents{OOMKills: 1}) {
		t.Fatalf("v2 %+v", v2)
	}
	if e := ParseCgroupEvents([]byte("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"), pids); e.Limit() != messages.LimitProcesses {
		t.Fatalf("forks refused: %+v %q", e, e.Limit())
	}
	if e := ParseCgroupEvents(nil, nil); e.Limit() != "" {
		t.Fatalf("nothing: %+v", e)
	}
	if _, ok := parseCgroupCount([]byte("oom_kill x\n"), "oom_kill"); ok {
		t.Fatal("a count that is no number")
	}
	w := (CgroupEvents{OOMKills: 1, PidsMax: 2}).Words(CgroupLimits{Memory: 64 << 20, Processes: 16})
	if w != "1 process killed by the kernel at its memory limit of 64 MiB; 2 new processes refused at its processes limit of 16" {
		t.Fatalf("%q", w)
	}
}

func TestSessionLimits(t *testing.T) {
	mem, ok := ParseMemTotal([]byte("MemTotal:       24683584 kB\nMemFree: 1 kB\n"))
	if !ok || mem != 24683584*1024 {
		t.Fatal(mem, ok)
	}
	if _, ok := ParseMemTotal([]byte("MemFree: 1 kB\n")); ok {
		t.Fatal("no MemTotal")
	}
	l, err := SessionLimits(nil, 8<<30)
	if err != nil || l != (CgroupLimits{Memory: 4 << 30, Processes: defaultSessionProcesses}) {
		t.Fatal(l, err)
	}
	n := uint64(64)
	l, err = SessionLimits(&messages.NodeSessionLimits{Memory: "256M", Processes: &n}, 8<<30)
	if err != nil || l != (CgroupLimits{Memory: 256 << 20, Processes: 64}) {
		t.Fatal(l, err)
	}
	l, err = SessionLimits(&messages.NodeSessionLimits{Processes: &n}, 0)
	if err != nil || l != (CgroupLimits{Processes: 64}) {
		t.Fatal(l, err)
	}
}
