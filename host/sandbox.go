package host

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ocx-go/ocx/messages"
)

// SandboxSpec is a sandbox plus what the node adds for one session.
type SandboxSpec struct {
	Sandbox   messages.Sandbox // the workspace definition's, as written on the record
	Workspace string           // the workspace directory: bound read-write, and HOME
	Release   string           // the release directory the program runs from, bound read-only; "" for none
	// MCPDir, when set, is the session's MCP directory (Workspace.MCPDir),
	// bound read-only at MCPMount after every other path, so that the
	// sandbox sees its own session's socket and no other (D38).
	MCPDir string
	// BlockFD, when positive, is given as --block-fd: the sandbox's first
	// process waits for a byte on it before it execs the command, while
	// the spawner puts it in its cgroup (D46).
	BlockFD int
}

// BwrapArgs builds bwrap's argv (its argv[0] is "bwrap") that runs argv in dir
// (the workspace when dir is "") inside the sandbox of s. What is the same for
// every workspace comes first: a session of its own (--new-session, always:
// no TIOCSTI into a terminal), every namespace unshared (--share-net gives the
// network back), its own /proc, /dev and /tmp. Then the stated paths, later
// ones seen over earlier ones at the same place: read_only (--ro-bind-try, so
// a system path this host lacks is simply absent), read_write, the workspace,
// the release read-only, the homes inside the workspace. HOME is the
// workspace and PATH is path. --die-with-parent is never given: a session
// outlives the daemon. statusFD, when positive, is given as --json-status-fd,
// so that a sandbox that failed to start can be told from a session that exited.
//
// BwrapArgs checks shapes only; CheckSandbox checks where the paths lead.
// It refuses a command line longer than MaxCmdline, which the process
// table would read cut and count as no session (D78).
func BwrapArgs(s SandboxSpec, statusFD int, dir string, argv []string) ([]string, error) {
	if err := checkSpec(s); err != nil {
		return nil, err
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("host: sandbox: no command to run")
	}
	if dir == "" {
		dir = s.Workspace
	}
	if err := absClean("sandbox directory", dir); err != nil {
		return nil, err
	}
	ws := filepath.Clean(s.Workspace)
	// The session is root in its own user namespace; without
	// CAP_SYS_RESOURCE there it cannot raise the counts the launcher
	// holds that namespace to (D82).
	a := []string{"bwrap", "--new-session", "--unshare-all", "--cap-drop", "CAP_SYS_RESOURCE"}
	if s.Sandbox.Network {
		a = append(a, "--share-net")
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp")
	for _, p := range dedupe(s.Sandbox.ReadOnly) {
		// A path in both lists is read-write (seed 004, section 6).
		if p == ws || slices.Contains(s.Sandbox.ReadWrite, p) {
			continue
		}
		a = append(a, "--ro-bind-try", p, p)
	}
	for _, p := range dedupe(s.Sandbox.ReadWrite) {
		if p == ws {
			continue
		}
		a = append(a, "--bind", p, p)
	}
	a = append(a, "--bind", ws, ws)
	if s.Release != "" {
		a = append(a, "--ro-bind", s.Release, s.Release)
	}
	for _, h := range s.Sandbox.Homes {
		a = append(a, "--bind", h, filepath.Join(ws, filepath.Base(h)))
	}
	if s.MCPDir != "" {
		a = append(a, "--ro-bind", s.MCPDir, MCPMount)
	}
	a = append(a, "--setenv", "HOME", ws)
	if len(s.Sandbox.Path) > 0 {
		a = append(a, "--setenv", "PATH", strings.Join(s.Sandbox.Path, ":"))
	}
	a = append(a, "--chdir", dir)
	if statusFD > 0 {
		a = append(a, "--json-status-fd", fmt.Sprint(statusFD))
	}
	if s.BlockFD > 0 {
		a = append(a, "--block-fd", fmt.Sprint(s.BlockFD))
	}
	a = append(a, "--")
	a = append(a, argv...)
	if n := cmdlineLen(a); n > MaxCmdline {
		return nil, fmt.Errorf("host: sandbox: bwrap's command line would be %d bytes, past the %d the process table reads of one, which tells a session from a look-alike (D78): state fewer or shorter paths", n, MaxCmdline)
	}
	return a, nil
}

func dedupe(ps []string) []string {
	var out []string
	for _, p := range ps {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// checkSpec checks every path's shape: absolute, clean, no NUL; homes with
// distinct last names that are not the workspace's own entries; PATH entries
// without ':'; and no stated path over the sandbox's own /proc, /dev or /tmp.
func checkSpec(s SandboxSpec) error {
	if err := absClean("workspace", s.Workspace); err != nil {
		return err
	}
	if s.Release != "" {
		if err := absClean("release", s.Release); err != nil {
			return err
		}
	}
	if s.MCPDir != "" {
		if err := absClean("MCP directory", s.MCPDir); err != nil {
			return err
		}
	}
	lists := []struct {
		name  string
		paths []string
	}{{"read_only", s.Sandbox.ReadOnly}, {"read_write", s.Sandbox.ReadWrite}, {"homes", s.Sandbox.Homes}}
	for _, l := range lists {
		for i, p := range l.paths {
			field := fmt.Sprintf("%s[%d]", l.name, i)
			if err := absClean(field, p); err != nil {
				return err
			}
			if err := checkFixed(p); err != nil {
				return fmt.Errorf("host: sandbox %s: %w", field, err)
			}
		}
	}
	seen := map[string]string{}
	for i, h := range s.Sandbox.Homes {
		base := filepath.Base(h)
		if h == "/" {
			return fmt.Errorf("host: sandbox homes[%d]: / has no last name", i)
		}
		if slices.Contains(ownEntries, base) {
			return fmt.Errorf("host: sandbox homes[%d] %q: its last name %q is one of the workspace's own entries", i, h, base)
		}
		if prev, ok := seen[base]; ok {
			return fmt.Errorf("host: sandbox homes[%d] %q: its last name %q is also %q's", i, h, base, prev)
		}
		seen[base] = h
	}
	for i, p := range s.Sandbox.Path {
		if err := absClean(fmt.Sprintf("path[%d]", i), p); err != nil {
			return err
		}
		if strings.ContainsRune(p, ':') {
			return fmt.Errorf("host: sandbox path[%d] %q holds ':'", i, p)
		}
	}
	return nil
}

func absClean(field, p string) error {
	switch {
	case p == "":
		return fmt.Errorf("host: sandbox %s is empty", field)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("host: sandbox %s %q holds a NUL", field, p)
	case !filepath.IsAbs(p):
		return fmt.Errorf("host: sandbox %s %q is not absolute", field, p)
	case filepath.Clean(p) != p:
		return fmt.Errorf("host: sandbox %s %q is not clean (%q)", field, p, filepath.Clean(p))
	}
	return nil
}

// checkFixed refuses a stated path that would hide what every sandbox has of
// its own: a path that is, holds or lies within /proc or /dev, or that is or
// holds /tmp (a path inside /tmp is bound over the sandbox's own /tmp).
func checkFixed(p string) error {
	for _, f := range []string{"/proc", "/dev"} {
		if within(p, f) || within(f, p) {
			return fmt.Errorf("%w: %q would hide the sandbox's own %s", errRefused, p, f)
		}
	}
	if within("/tmp", p) {
		return fmt.Errorf("%w: %q would hide the sandbox's own /tmp", errRefused, p)
	}
	if within(p, MCPMount) || within(MCPMount, p) {
		return fmt.Errorf("%w: %q would hide the sandbox's own MCP socket at %s", errRefused, p, MCPMount)
	}
	return nil
}

// within says whether p is b or lies below it; both are clean and absolute.
func within(p, b string) bool {
	return p == b || b == "/" || strings.HasPrefix(p, b+"/")
}

// NodeFiles are the node's own files (seed 004, section 6), every path
// already resolved (links followed) and clean. A sandbox may not see them.
type NodeFiles struct {
	Repositories []string // each repository file
	Agents       string   // the agents root: the daemon's state and every password
	ReleaseRoot  string   // the release root; "" without one
	Release      string   // the release the session runs: may be named
	Workspace    string   // the session's own workspace: may be named
	// State is the directory the node keeps its runs' state in, and
	// Passwords its file of passwords (seed 004, section 4); "" for none.
	// Neither has an exception: not even the workspace may hold them.
	State     string
	Passwords string
}

// RefusalError says which sandbox path reaches which of the node's files.
type RefusalError struct {
	Path     string // as the definition states it
	Resolved string // after links were followed
	Reason   string
}

func (e *RefusalError) Error() string {
	if e.Resolved != "" && e.Resolved != e.Path {
		return fmt.Sprintf("host: sandbox path %q (%q once links are followed) %s", e.Path, e.Resolved, e.Reason)
	}
	return fmt.Sprintf("host: sandbox path %q %s", e.Path, e.Reason)
}

// Unwrap lets errors.Is(err, ErrRefused) hold.
func (e *RefusalError) Unwrap() error { return errRefused }

// Check refuses a resolved path that is, holds or lies within one of the
// node's own files: a repository (its -journal, -wal and -shm too), the agents
// root except the workspace itself and what lies in it (other workspaces'
// clones remember their logins' passwords), the release root except the
// release and the workspace.
func (n NodeFiles) Check(p string) error { return n.check(p, checkSession) }

// CheckReadOnly is Check for a path seen read-only, which may also name any
// release of the release root (RELEASE_ROOT/releases/ID), so that a definition
// naming the release root's current link still runs on the previous release.
func (n NodeFiles) CheckReadOnly(p string) error { return n.check(p, checkSessionReadOnly) }

// How check reads a path: for a session's sandbox (which has its own /proc,
// /dev, /tmp and MCP socket at fixed places), seen read-only or not; or for a
// run's, whose own places are stated and seen over what it binds.
type checkMode int8

const (
	checkSession checkMode = iota
	checkSessionReadOnly
	checkRun
)

func (n NodeFiles) check(p string, mode checkMode) error {
	refuse := func(why string) error { return &RefusalError{Path: p, Resolved: p, Reason: why} }
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return refuse("is not an absolute, clean path")
	}
	if mode != checkRun {
		if err := checkFixed(p); err != nil {
			return refuse(strings.TrimPrefix(err.Error(), errRefused.Error()+": "))
		}
	}
	for _, r := range n.Repositories {
		if within(p, r) || within(r, p) || strings.HasPrefix(p, r+"-") {
			return refuse(fmt.Sprintf("is, holds or lies within the repository %s", r))
		}
	}
	for _, f := range []struct{ what, p string }{{"the node's run state directory", n.State}, {"the node's file of passwords", n.Passwords}} {
		if f.p != "" && (within(p, f.p) || within(f.p, p)) {
			return refuse(fmt.Sprintf("is, holds or lies within %s %s", f.what, f.p))
		}
	}
	inWorkspace := n.Workspace != "" && within(p, n.Workspace)
	if n.Agents != "" && !inWorkspace && (within(p, n.Agents) || within(n.Agents, p)) {
		return refuse(fmt.Sprintf("is, holds or lies within the agents root %s (only the workspace itself may be named)", n.Agents))
	}
	inRelease := n.Release != "" && within(p, n.Release)
	if mode == checkSessionReadOnly && n.ReleaseRoot != "" {
		releases := filepath.Join(n.ReleaseRoot, "releases")
		if rest, ok := strings.CutPrefix(p, releases+"/"); ok && rest != "" {
			inRelease = true
		}
	}
	if n.ReleaseRoot != "" && !inWorkspace && !inRelease && (within(p, n.ReleaseRoot) || within(n.ReleaseRoot, p)) {
		return refuse(fmt.Sprintf("is, holds or lies within the release root %s (only the release and the workspace may be named)", n.ReleaseRoot))
	}
	return nil
}

// CheckSandbox resolves and checks every path of sb that a sandbox would
// see: read_only, read_write and homes. A path that cannot be resolved is
// refused: no decision rests on evidence that could not be read.
func (n NodeFiles) CheckSandbox(sb messages.Sandbox, resolve func(string) (string, error)) error {
	return n.checkPaths([][]string{sb.ReadOnly, sb.ReadWrite, sb.Homes}, false, resolve)
}

func (n NodeFiles) checkPaths(lists [][]string, run bool, resolve func(string) (string, error)) error {
	for i, l := range lists {
		for _, p := range l {
			r, err := resolve(p)
			if err != nil {
				return &RefusalError{Path: p, Reason: fmt.Sprintf("cannot be resolved: %v", err)}
			}
			mode := checkSession
			switch {
			case run:
				mode = checkRun
			case i == 0:
				mode = checkSessionReadOnly
			}
			if err := n.check(r, mode); err != nil {
				err.(*RefusalError).Path = p
				return err
			}
			if err := n.leavesWorkspace(p, r, resolve); err != nil {
				return err
			}
			// Seen read-write, the host's /sys would let the process move
			// itself out of its cgroup (D46), or write the kernel's knobs.
			if i > 0 && (within(r, "/sys") || within("/sys", r)) {
				return &RefusalError{Path: p, Resolved: r, Reason: "is, holds or lies within /sys, which a sandbox sees read-only if at all: read-write it lets its process leave its cgroup"}
			}
		}
	}
	return nil
}

// leavesWorkspace refuses a stated path p that passes through the
// workspace (a directory it names resolves to the workspace) but resolves,
// as r, outside it: a link in the workspace, which the agent may have
// planted, leads it out, and bwrap, which binds p as stated, would follow
// the link as the node (docs/trust.md).
func (n NodeFiles) leavesWorkspace(p, r string, resolve func(string) (string, error)) error {
	if n.Workspace == "" || within(r, n.Workspace) {
		return nil
	}
	for q := filepath.Dir(p); ; q = filepath.Dir(q) {
		if rq, err := resolve(q); err == nil && rq == n.Workspace {
			return &RefusalError{Path: p, Resolved: r, Reason: fmt.Sprintf("lies in the workspace %s, but a link there leads it out of it: what the workspace holds is its agent's to plant", q)}
		}
		if q == "/" || q == "." {
			return nil
		}
	}
}

// BwrapStatus is what bwrap wrote to its --json-status-fd.
type BwrapStatus struct {
	ChildPID int // the sandbox's first process; 0 when not written
	// PIDNamespace is the inode number of the sandbox's PID namespace, which
	// tells the sandbox's first process from a later process given its PID.
	PIDNamespace uint64
	Exited       bool // the command ran to its end and ExitCode is its code
	ExitCode     int
}

// ParseBwrapStatus reads bwrap's JSON status lines; a line that is not
// complete JSON is ignored.
func ParseBwrapStatus(b []byte) BwrapStatus {
	var st BwrapStatus
	for line := range bytes.Lines(b) {
		if !bytes.HasSuffix(line, []byte("\n")) {
			break
		}
		var v struct {
			ChildPID *int   `json:"child-pid"`
			PIDNS    uint64 `json:"pid-namespace"`
			ExitCode *int   `json:"exit-code"`
		}
		if json.Unmarshal(line, &v) != nil {
			continue
		}
		if v.ChildPID != nil {
			st.ChildPID, st.PIDNamespace = *v.ChildPID, v.PIDNS
		}
		if v.ExitCode != nil {
			st.Exited, st.ExitCode = true, *v.ExitCode
		}
	}
	return st
}

// UserNSLimits are the counts the kernel keeps for each user namespace
// that a sandbox's own user namespace is held to (D82): the inotify
// instances and watches its processes may hold. The kernel charges them
// up the chain of user namespaces to the node's own uid, which the
// daemon's watches count against too, so that without a bound of its own
// one agent could take them all and push the daemon's directory watch to
// its every-ask fallback.
type UserNSLimits struct {
	InotifyInstances uint64 // user.max_inotify_instances in the sandbox's user namespace
	InotifyWatches   uint64 // user.max_inotify_watches
}

// DefaultUserNSLimits are each sandbox's: 16 instances (a program that
// watches files takes one; the host's default is 128 for the node's uid
// and every sandbox together) and 8192 watches (a watched tree of that
// many directories; the host's default is about 190,000 together).
var DefaultUserNSLimits = UserNSLimits{InotifyInstances: 16, InotifyWatches: 8192}
