package host

import (
	"bytes"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
)

// ParseProcCgroup returns the cgroup v2 path of a process from the contents
// of /proc/PID/cgroup: the line "0::PATH". ok is false without one.
func ParseProcCgroup(b []byte) (p string, ok bool) {
	for line := range bytes.Lines(b) {
		line = bytes.TrimRight(line, "\n")
		if rest, found := bytes.CutPrefix(line, []byte("0::")); found {
			return string(rest), true
		}
	}
	return "", false
}

// ParseCgroup2Mounts returns where cgroup2 file systems are mounted, from
// the contents of /proc/PID/mountinfo, each with the root of the hierarchy
// it shows (field 4).
func ParseCgroup2Mounts(b []byte) []Cgroup2Mount {
	var out []Cgroup2Mount
	for line := range bytes.Lines(b) {
		f := strings.Fields(string(line))
		sep := slices.Index(f, "-")
		if sep < 5 || sep+1 >= len(f) || f[sep+1] != "cgroup2" {
			continue
		}
		out = append(out, Cgroup2Mount{Root: unescapeMountinfo(f[3]), At: unescapeMountinfo(f[4])})
	}
	return out
}

// Cgroup2Mount is one cgroup2 mount: At shows the hierarchy's Root.
type Cgroup2Mount struct {
	Root, At string
}

// Cgroup2Dir says where the cgroup p (as /proc/PID/cgroup gives it) is seen
// among mounts: the first mount whose root holds it. ok is false when none does.
func Cgroup2Dir(mounts []Cgroup2Mount, p string) (dir string, ok bool) {
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

// MemoryRefusal says why a memory limit is refused, given what the reader
// found: the cgroup v2 directory of the node's own cgroup ("" when it has
// none) and the controllers it offers (cgroup.controllers) and delegates
// (cgroup.subtree_control). A memory limit is refused whatever they say: the
// node applies none yet (seed 004, table 7); the reason names what is missing.
func MemoryRefusal(dir string, controllers, subtree []byte) string {
	if dir == "" {
		return "the node's cgroup has no cgroup v2 hierarchy mounted, so no memory controller applies to its runs"
	}
	offered := strings.Fields(string(controllers))
	if !slices.Contains(offered, "memory") {
		list := strings.Join(offered, " ")
		if list == "" {
			list = "none"
		}
		return fmt.Sprintf("the node's cgroup %s offers no cgroup v2 memory controller (its controllers: %s)", dir, list)
	}
	if !slices.Contains(strings.Fields(string(subtree)), "memory") {
		return fmt.Sprintf("the cgroup v2 memory controller of %s is not delegated to the node's runs (cgroup.subtree_control lacks memory)", dir)
	}
	return fmt.Sprintf("the node does not yet put its runs in a cgroup of %s, which a memory limit needs", dir)
}
