package host

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/ocx-go/ocx/messages"
)

// parseProcCgroup returns the cgroup v2 path of a process from the contents
// of /proc/PID/cgroup: the line "0::PATH". ok is false without one.
func parseProcCgroup(b []byte) (p string, ok bool) {
	for line := range bytes.Lines(b) {
		line = bytes.TrimRight(line, "\n")
		if rest, found := bytes.CutPrefix(line, []byte("0::")); found {
			return string(rest), true
		}
	}
	return "", false
}

// parseCgroup2Mounts returns where cgroup2 file systems are mounted, from
// the contents of /proc/PID/mountinfo, each with the root of the hierarchy
// it shows (field 4).
func parseCgroup2Mounts(b []byte) []cgroup2Mount {
	var out []cgroup2Mount
	for line := range bytes.Lines(b) {
		f := strings.Fields(string(line))
		sep := slices.Index(f, "-")
		if sep < 5 || sep+1 >= len(f) || f[sep+1] != "cgroup2" {
			continue
		}
		out = append(out, cgroup2Mount{Root: unescapeMountinfo(f[3]), At: unescapeMountinfo(f[4])})
	}
	return out
}

// cgroup2Mount is one cgroup2 mount: At shows the hierarchy's Root.
type cgroup2Mount struct {
	Root, At string
}

// cgroup2Dir says where the cgroup p (as /proc/PID/cgroup gives it) is seen
// among mounts: the first mount whose root holds it. ok is false when none does.
func cgroup2Dir(mounts []cgroup2Mount, p string) (dir string, ok bool) {
	for _, m := range mounts {
		if rel, found := strings.CutPrefix(p, m.Root); found && (m.Root == "/" || rel == "" || rel[0] == '/') {
			return path.Join(m.At, rel), true
		}
	}
	return "", false
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// The cgroup versions: v1's hierarchies, one per controller, or v2's
// unified one.
const (
	cgroupV1 = 1
	CgroupV2 = 2
)

// cgroupMount is one cgroup hierarchy mounted, from /proc/PID/mountinfo: v1
// (file system type "cgroup") with the controllers its super options name,
// or v2 ("cgroup2"), whose controllers its own cgroup.controllers says.
type cgroupMount struct {
	Version     int
	Root, At    string   // the hierarchy's root it shows (field 4), and where (field 5)
	Controllers []string // v1 only: "memory", "pids", ...; "name=systemd" is not one
}

// ParseCgroupMounts returns every cgroup hierarchy mounted, in mountinfo's
// order.
func ParseCgroupMounts(b []byte) []cgroupMount {
	var out []cgroupMount
	for line := range bytes.Lines(b) {
		f := strings.Fields(string(line))
		sep := slices.Index(f, "-")
		if sep < 5 || sep+1 >= len(f) {
			continue
		}
		m := cgroupMount{Root: unescapeMountinfo(f[3]), At: unescapeMountinfo(f[4])}
		switch f[sep+1] {
		case "cgroup2":
			m.Version = CgroupV2
		case "cgroup":
			m.Version = cgroupV1
			if sep+3 < len(f) {
				for _, o := range strings.Split(f[sep+3], ",") {
					if o != "rw" && o != "ro" && !strings.Contains(o, "=") {
						m.Controllers = append(m.Controllers, o)
					}
				}
			}
		default:
			continue
		}
		out = append(out, m)
	}
	return out
}

// CgroupHierarchies is where the node makes its cgroups: the top directory
// (a mount point) of the hierarchy holding the memory controller and of
// the one holding pids; the same directory for v2.
type CgroupHierarchies struct {
	Version      int
	Memory, Pids string
}

// Dirs is each hierarchy's top once: two for v1, one for v2.
func (h CgroupHierarchies) Dirs() []string {
	if h.Memory == h.Pids {
		return []string{h.Memory}
	}
	return []string{h.Memory, h.Pids}
}

// ChooseCgroups says where the node's cgroups are made: in the first
// cgroup v2 hierarchy mounted when its top offers both the memory and the
// pids controllers (unified is that top's cgroup.controllers, nil when it
// could not be read), else in the v1 hierarchies holding memory and pids.
// When neither is there, why says what is missing, for the status and for
// a run's refusal (row 8).
func ChooseCgroups(mounts []cgroupMount, unified []byte) (h CgroupHierarchies, why string) {
	var v2 *cgroupMount
	var mem, pids string
	for i, m := range mounts {
		switch {
		case m.Version == CgroupV2 && v2 == nil:
			v2 = &mounts[i]
		case m.Version == cgroupV1 && mem == "" && slices.Contains(m.Controllers, "memory"):
			mem = m.At
		}
		if m.Version == cgroupV1 && pids == "" && slices.Contains(m.Controllers, "pids") {
			pids = m.At
		}
	}
	offered := strings.Fields(string(unified))
	if v2 != nil && slices.Contains(offered, "memory") && slices.Contains(offered, "pids") {
		return CgroupHierarchies{Version: CgroupV2, Memory: v2.At, Pids: v2.At}, ""
	}
	if mem != "" && pids != "" {
		return CgroupHierarchies{Version: cgroupV1, Memory: mem, Pids: pids}, ""
	}
	var lacks []string
	if v2 == nil {
		lacks = append(lacks, "no cgroup v2 hierarchy is mounted")
	} else {
		list := strings.Join(offered, " ")
		if list == "" {
			list = "none"
		}
		lacks = append(lacks, fmt.Sprintf("the cgroup v2 hierarchy at %s offers no memory and pids controllers (its controllers: %s)", v2.At, list))
	}
	switch {
	case mem == "" && pids == "":
		lacks = append(lacks, "no cgroup v1 memory or pids hierarchy is mounted")
	case mem == "":
		lacks = append(lacks, "no cgroup v1 memory hierarchy is mounted")
	default:
		lacks = append(lacks, "no cgroup v1 pids hierarchy is mounted")
	}
	return CgroupHierarchies{}, strings.Join(lacks, ", and ")
}

// CgroupNode is the directory, at the top of each hierarchy, that holds
// the cgroups of the node whose agents root this is: "ocx-" and the first
// twelve hex digits of the root's SHA-256. It is the same whichever
// cgroup the daemon runs in, so that a daemon started again, from anywhere,
// finds its sessions' cgroups; and two nodes on one host never share one.
func (l Layout) CgroupNode() string {
	sum := sha256.Sum256([]byte(l.root))
	return "ocx-" + hex.EncodeToString(sum[:6])
}

// SessionCgroup is the cgroup of the session of workspace k, below
// CgroupNode: "session:LOGIN:PROJECT" (':' is in no login or project). A
// workspace runs one session at a time, so its name is stable across the
// daemon's restarts and re-execs.
func (l Layout) SessionCgroup(k messages.WorkspaceKey) string {
	return l.CgroupNode() + "/session:" + k.Login + ":" + k.Project
}

// MCPCgroupName is the cgroup, below its session's, of the node's server
// for the session (`ocx mcp serve`: its MCP server, model proxy and sync
// socket, D80): the session's limits count it, and a session's end ends
// it apart from the sandbox.
const MCPCgroupName = "mcp"

// RunCgroup is the cgroup of the process of run (its hash), below
// CgroupNode: "run:HASH".
func (l Layout) RunCgroup(run string) string { return l.CgroupNode() + "/run:" + run }

// CgroupLimits are the limits a cgroup holds its processes to; zero is none.
type CgroupLimits struct {
	Memory    uint64 // bytes of memory, swap not counted extra
	Processes uint64 // tasks (threads too) at any moment
}

// String renders the limits as the status and the logs say them.
func (l CgroupLimits) String() string {
	var parts []string
	if l.Memory > 0 {
		parts = append(parts, "memory "+SizeWords(l.Memory))
	}
	if l.Processes > 0 {
		parts = append(parts, fmt.Sprintf("processes %d", l.Processes))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// SizeWords says a number of bytes the way a person reads it: 64 MiB,
// 1.5 GiB, 100 bytes.
func SizeWords(n uint64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	if n < 1024 {
		return fmt.Sprintf("%d bytes", n)
	}
	v, u := float64(n)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v, u = v/1024, u+1
	}
	if v == float64(uint64(v)) {
		return fmt.Sprintf("%d %s", uint64(v), units[u])
	}
	return fmt.Sprintf("%.1f %s", v, units[u])
}

// cgroupFile is one file of a cgroup and what is written to it.
type cgroupFile struct {
	Controller string // memory or pids: the hierarchy it is in
	Name       string
	Value      string
	// Optional says a hierarchy may lack the file (swap not accounted):
	// its absence is no error.
	Optional bool
}

// CgroupLimitFiles are the writes that set l in a new cgroup of the given
// version, in order. v1: memory.limit_in_bytes, then
// memory.memsw.limit_in_bytes to the same (memory and swap together, so
// that the limit is not met by swapping; it must not be below the first),
// pids.max. v2: memory.max, memory.swap.max 0, pids.max.
func CgroupLimitFiles(version int, l CgroupLimits) []cgroupFile {
	var out []cgroupFile
	if l.Memory > 0 {
		v := strconv.FormatUint(l.Memory, 10)
		if version == CgroupV2 {
			out = append(out, cgroupFile{"memory", "memory.max", v, false}, cgroupFile{"memory", "memory.swap.max", "0", true})
		} else {
			out = append(out, cgroupFile{"memory", "memory.limit_in_bytes", v, false}, cgroupFile{"memory", "memory.memsw.limit_in_bytes", v, true})
		}
	}
	if l.Processes > 0 {
		out = append(out, cgroupFile{"pids", "pids.max", strconv.FormatUint(l.Processes, 10), false})
	}
	return out
}

// CgroupEventFiles are the files that count a cgroup's limits reached:
// OOM kills in memory's (v1 memory.oom_control, v2 memory.events: each
// has a line "oom_kill N"), and forks refused at pids.max in pids's
// (pids.events: "max N").
func CgroupEventFiles(version int) (memory, pids string) {
	if version == CgroupV2 {
		return "memory.events", "pids.events"
	}
	return "memory.oom_control", "pids.events"
}

// parseCgroupCount reads the count of key from a cgroup's flat keyed file
// (lines "KEY N"); false when it has no such line.
func parseCgroupCount(b []byte, key string) (uint64, bool) {
	for line := range bytes.Lines(b) {
		f := strings.Fields(string(line))
		if len(f) == 2 && f[0] == key {
			if n, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				return n, true
			}
		}
	}
	return 0, false
}

// CgroupEvents are a cgroup's counts of its limits reached.
type CgroupEvents struct {
	OOMKills uint64 // processes the kernel killed at the memory limit
	PidsMax  uint64 // forks refused at the processes limit
}

// ParseCgroupEvents reads the two counts from the contents of
// CgroupEventFiles.
func ParseCgroupEvents(memory, pids []byte) CgroupEvents {
	var e CgroupEvents
	e.OOMKills, _ = parseCgroupCount(memory, "oom_kill")
	e.PidsMax, _ = parseCgroupCount(pids, "max")
	return e
}

// Limit names the limit the cgroup's processes went past (memory before
// processes: an OOM kill is the harder end), "" for none. The names are
// messages.LimitMemory and messages.LimitProcesses, a budget's.
func (e CgroupEvents) Limit() string {
	switch {
	case e.OOMKills > 0:
		return messages.LimitMemory
	case e.PidsMax > 0:
		return messages.LimitProcesses
	}
	return ""
}

// Words says what the counts show against l, for an end note: "2
// processes killed at its memory limit of 64 MiB".
func (e CgroupEvents) Words(l CgroupLimits) string {
	var parts []string
	if e.OOMKills > 0 {
		s := fmt.Sprintf("%d %s killed by the kernel at its memory limit", e.OOMKills, plural(e.OOMKills, "process", "processes"))
		if l.Memory > 0 {
			s += " of " + SizeWords(l.Memory)
		}
		parts = append(parts, s)
	}
	if e.PidsMax > 0 {
		s := fmt.Sprintf("%d %s refused at its processes limit", e.PidsMax, plural(e.PidsMax, "new process", "new processes"))
		if l.Processes > 0 {
			s += fmt.Sprintf(" of %d", l.Processes)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func plural(n uint64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// ParseCgroupLimits reads the limits a cgroup holds from the contents of
// its limit files (v1 memory.limit_in_bytes or v2 memory.max, and
// pids.max); "max", or v1's near 2^63 for none, is zero.
func ParseCgroupLimits(memory, pids []byte) CgroupLimits {
	read := func(b []byte) uint64 {
		s := strings.TrimSpace(string(b))
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n >= 1<<62 {
			return 0
		}
		return n
	}
	return CgroupLimits{Memory: read(memory), Processes: read(pids)}
}

// defaultSessionProcesses is a session's processes limit when node.json
// says none: far more tasks (threads count) than a build or an agent's
// tools start, and few enough that a fork loop stops long before the host
// does.
const defaultSessionProcesses = 4096

// SessionLimits are the limits of every session of a node: node.json's
// session_limits, each one it leaves out taken from the defaults: half the
// host's memory (memTotal, bytes; none when it is unknown) and
// defaultSessionProcesses.
func SessionLimits(c *messages.NodeSessionLimits, memTotal uint64) (CgroupLimits, error) {
	l := CgroupLimits{Memory: memTotal / 2, Processes: defaultSessionProcesses}
	if c == nil {
		return l, nil
	}
	if c.Memory != "" {
		b, err := messages.RunSize(c.Memory).Bytes()
		if err != nil {
			return CgroupLimits{}, fmt.Errorf("node.json session_limits.memory: %w", err)
		}
		l.Memory = b
	}
	if c.Processes != nil {
		l.Processes = *c.Processes
	}
	return l, nil
}

// ParseMemTotal reads MemTotal from /proc/meminfo, in bytes.
func ParseMemTotal(b []byte) (uint64, bool) {
	for line := range bytes.Lines(b) {
		f := strings.Fields(string(line))
		if len(f) == 3 && f[0] == "MemTotal:" && f[2] == "kB" {
			if n, err := strconv.ParseUint(f[1], 10, 64); err == nil && n < 1<<52 {
				return n * 1024, true
			}
		}
	}
	return 0, false
}
