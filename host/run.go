package host

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ocx-go/ocx/messages/protocol"
)

// RunSandbox is a run's sandbox layer (seed 004, table 6), every value
// already in place ($$workspace$$ and the others expanded). The run engine
// maps the decoded message onto it.
type RunSandbox struct {
	UID, GID     int      // the user and group the process runs as inside
	Capabilities []string // the Linux capabilities it keeps, as "CAP_NET_BIND_SERVICE"; none when empty
	Network      bool     // whether it shares the host's network
	OwnSession   bool     // whether it runs in a session of its own
	EndsWithNode bool     // whether it ends when the process that started it (the run's watcher) ends
	ReadOnly     []string // host paths seen read-only, each where it is on the host
	ReadWrite    []string // host paths seen read-write, each where it is on the host
	Homes        []string // host paths seen read-write inside Workspace, each by its last name
	Files        []RunFile
	Proc         string // where it sees its own /proc
	Dev          string // where it sees its own /dev
	Tmp          string // where it sees an empty directory for temporary files
	// Workspace is $$workspace$$, where the homes are seen; "" for a run
	// without a workspace, which may then have no homes.
	Workspace string
}

// RunFile is a file made for the sandbox alone: At is where it is seen,
// Text what it holds.
type RunFile struct {
	At   string
	Text string
}

// RunLimits is a run's limits layer (seed 004, table 7) as far as the host
// applies it; wall is the node's to enforce. A zero field is not asked.
type RunLimits struct {
	CPU       uint64 // whole seconds of CPU time for each process (RLIMIT_CPU)
	Processes uint64 // tasks at any moment: the run's cgroup's pids.max, and RLIMIT_NPROC for a node not root
	Memory    uint64 // bytes: the run's cgroup's memory limit
	// Disk is the size in bytes of the file system the run's workspace is
	// made on (D82): made by its directory step, not by StartRun.
	Disk uint64
}

// FD is an open file handed to a process, such as an *os.File. The caller
// keeps it and closes it once StartRun has returned.
type FD interface{ Fd() uintptr }

// RunSpec is what StartRun starts: a run's process (seed 004, table 8) in
// its sandbox with its limits.
type RunSpec struct {
	// Command is the program, then its arguments; a program named without
	// '/' is found on Env's PATH (inside the sandbox, when there is one).
	Command []string
	Env     []string // the process's whole environment, "NAME=value": the node adds nothing
	Dir     string   // where it starts, as the process sees it
	// Stdin, Stdout and Stderr are the process's standard streams; nil is
	// /dev/null.
	Stdin, Stdout, Stderr FD
	Sandbox               *RunSandbox // nil runs it unconfined
	Limits                RunLimits
	// Cgroup is the cgroup the process is put in when a limit needs one
	// (memory; processes where the host gives no RLIMIT_NPROC or a cgroup
	// is there): Layout.RunCgroup. The starter makes it, and removes it
	// once the process has ended.
	Cgroup string
	// Terminal says Stdin is a terminal, which becomes the controlling
	// terminal of the process's session (seed 004 §8.1, with a terminal).
	Terminal bool
	// HangUpWithStarter sends the process SIGHUP when the process that
	// started it ends, as a terminal's hang-up would: a run's holder
	// killed outright leaves no run behind unseen (docs/runs.md §8.1).
	// With a sandbox it reaches bwrap, and the sandbox itself then ends
	// only when it ends with the node (EndsWithNode).
	HangUpWithStarter bool
}

// RunStarter starts a run's process. The process is in a session and
// process group of its own (bwrap, with a sandbox: the process to watch and
// signal, as Spawner's), and the limits are in place before its first
// instruction. onExit is called exactly once with its end, on another
// goroutine, never before StartRun has returned; it must not block.
type RunStarter interface {
	StartRun(spec RunSpec, onExit func(Exit)) (protocol.ProcID, error)
}

// RunHostname is the host name a run's sandbox sees, never the host's.
const RunHostname = "ocx-run"

// minProcesses is the least processes limit a sandbox can run with: bwrap's
// own init (PID 1 of the sandbox) counts, and so does the command.
const minProcesses = 2

// Capabilities are Linux's capability names, by number (linux/capability.h).
var Capabilities = [...]string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
	"CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE",
	"CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT",
	"CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
	"CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
	"CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
}

// CapabilityMask is the capability set names keeps, as /proc/PID/status
// shows CapEff; an unknown name is an error naming it.
func CapabilityMask(names []string) (uint64, error) {
	var m uint64
	for i, n := range names {
		c := slices.Index(Capabilities[:], n)
		if c < 0 {
			return 0, &RunFieldError{Field: fmt.Sprintf("sandbox.capabilities[%d]", i),
				Why: fmt.Sprintf("%q is not a Linux capability (names are written as CAP_NET_BIND_SERVICE is)", n)}
		}
		m |= 1 << c
	}
	return m, nil
}

// RunFieldError says which field of a run's layers cannot be used, and why:
// a refusal's note names Field.
type RunFieldError struct {
	Field string // as the message names it: "sandbox.homes[1]", "limits.memory"
	Why   string
}

func (e *RunFieldError) Error() string { return fmt.Sprintf("host: run %s: %s", e.Field, e.Why) }

// ErrNotProvided is wrapped by the errors of RunSupport.Check: the host cannot
// provide what the run asks (seed 004, section 11, row 8).
var ErrNotProvided = errors.New("host: not provided by this node")

// NotProvidedError names the sandbox setting or limit the host cannot
// provide (refusal row 8).
type NotProvidedError struct {
	Field string // "limits.memory", "sandbox"
	Why   string
}

func (e *NotProvidedError) Error() string {
	return fmt.Sprintf("host: run %s is not provided by this node: %s", e.Field, e.Why)
}

// Unwrap lets errors.Is(err, ErrNotProvided) hold.
func (e *NotProvidedError) Unwrap() error { return ErrNotProvided }

// RunSupport says what this host can provide a run: each field is "" when
// it can, and otherwise says why not.
type RunSupport struct {
	Sandbox   string // bwrap and user namespaces
	CPU       string
	Processes string
	Memory    string
	Disk      string // a file system of the workspace's own (D82): unixhost.DiskWhy
}

// Check refuses a run asking a sandbox or a limit the host cannot provide
// (refusal row 8), naming the first such field. Every limit is applied only
// inside a sandbox: an unconfined process cannot be held before its first
// instruction.
func (s RunSupport) Check(sb *RunSandbox, l RunLimits) error {
	if sb != nil && s.Sandbox != "" {
		return &NotProvidedError{Field: "sandbox", Why: s.Sandbox}
	}
	lim := []struct {
		field string
		asked bool
		why   string
	}{
		{"limits.cpu", l.CPU > 0, s.CPU},
		{"limits.processes", l.Processes > 0, s.Processes},
		{"limits.memory", l.Memory > 0, s.Memory},
	}
	for _, x := range lim {
		if !x.asked {
			continue
		}
		if x.why != "" {
			return &NotProvidedError{Field: x.field, Why: x.why}
		}
		if sb == nil {
			return &NotProvidedError{Field: x.field, Why: "applied only inside a sandbox, where the process waits for it before its first instruction"}
		}
	}
	// The workspace's own file system bounds it whatever runs there, in a
	// sandbox or not.
	if l.Disk > 0 && s.Disk != "" {
		return &NotProvidedError{Field: "limits.disk", Why: s.Disk}
	}
	if l.Processes > 0 && l.Processes < minProcesses {
		return &NotProvidedError{Field: "limits.processes",
			Why: fmt.Sprintf("%d is below %d: the sandbox's own init and the command count", l.Processes, minProcesses)}
	}
	return nil
}

// RunFDs are the descriptor numbers bwrap is given, as the child numbers
// them.
type RunFDs struct {
	Status int // --json-status-fd
	Block  int // --block-fd; 0 or less for none
	Files  int // the first of the files' data, one descriptor each in order
}

// RunBwrapArgs builds bwrap's argv (its argv[0] is "bwrap") for a run's
// sandbox: the fields in table 6's order, so that a later one is seen over an
// earlier one at the same place, and nothing else of the host. Every
// namespace is unshared but the network when sb.Network, and the host name is
// RunHostname. It checks the shapes (absolute clean paths, homes' last
// names, capabilities); NodeFiles.CheckRunSandbox checks where the paths lead.
func RunBwrapArgs(sb RunSandbox, fds RunFDs, dir string, command []string) ([]string, error) {
	if err := CheckRunSandbox(sb); err != nil {
		return nil, err
	}
	if len(command) == 0 || command[0] == "" {
		return nil, &RunFieldError{Field: "process.command", Why: "no program to run"}
	}
	if err := runPath("process.cwd", dir); err != nil {
		return nil, err
	}
	a := []string{"bwrap",
		// users, processes, host name, message queues: never the host's.
		"--unshare-user", "--unshare-pid", "--unshare-uts", "--unshare-ipc", "--unshare-cgroup-try",
		"--hostname", RunHostname,
		"--uid", strconv.Itoa(sb.UID), "--gid", strconv.Itoa(sb.GID),
		"--cap-drop", "ALL",
	}
	for _, c := range sb.Capabilities {
		a = append(a, "--cap-add", c)
	}
	if !sb.Network {
		a = append(a, "--unshare-net")
	}
	if sb.OwnSession {
		a = append(a, "--new-session")
	}
	if sb.EndsWithNode {
		a = append(a, "--die-with-parent")
	}
	for _, p := range dedupe(sb.ReadOnly) {
		if slices.Contains(sb.ReadWrite, p) {
			continue // a path in both lists is read-write
		}
		// Never --ro-bind-try: a path gone since the run was prepared
		// fails the launch rather than run it with less (D83).
		a = append(a, "--ro-bind", p, p)
	}
	for _, p := range dedupe(sb.ReadWrite) {
		a = append(a, "--bind", p, p)
	}
	for _, h := range sb.Homes {
		a = append(a, "--bind", h, filepath.Join(sb.Workspace, filepath.Base(h)))
	}
	for i, f := range sb.Files {
		a = append(a, "--perms", "0644", "--ro-bind-data", strconv.Itoa(fds.Files+i), f.At)
	}
	a = append(a, "--proc", sb.Proc, "--dev", sb.Dev, "--tmpfs", sb.Tmp, "--chdir", dir)
	if fds.Status > 0 {
		a = append(a, "--json-status-fd", strconv.Itoa(fds.Status))
	}
	if fds.Block > 0 {
		a = append(a, "--block-fd", strconv.Itoa(fds.Block))
	}
	a = append(a, "--")
	return append(a, command...), nil
}

// CheckRunSandbox checks a run's sandbox's shapes: ids, capabilities,
// every path absolute and clean, homes only with a workspace and with
// distinct last names.
func CheckRunSandbox(sb RunSandbox) error {
	if sb.UID < 0 {
		return &RunFieldError{Field: "sandbox.uid", Why: fmt.Sprintf("%d is negative", sb.UID)}
	}
	if sb.GID < 0 {
		return &RunFieldError{Field: "sandbox.gid", Why: fmt.Sprintf("%d is negative", sb.GID)}
	}
	if _, err := CapabilityMask(sb.Capabilities); err != nil {
		return err
	}
	lists := []struct {
		name  string
		paths []string
	}{{"read_only", sb.ReadOnly}, {"read_write", sb.ReadWrite}, {"homes", sb.Homes}}
	for _, l := range lists {
		for i, p := range l.paths {
			if err := runPath(fmt.Sprintf("sandbox.%s[%d]", l.name, i), p); err != nil {
				return err
			}
		}
	}
	if len(sb.Homes) > 0 {
		if err := runPath("sandbox's workspace, where homes are seen,", sb.Workspace); err != nil {
			return err
		}
	}
	seen := map[string]string{}
	for i, h := range sb.Homes {
		field := fmt.Sprintf("sandbox.homes[%d]", i)
		if h == "/" {
			return &RunFieldError{Field: field, Why: "/ has no last name"}
		}
		base := filepath.Base(h)
		if prev, ok := seen[base]; ok {
			return &RunFieldError{Field: field, Why: fmt.Sprintf("%q has the last name %q of %q too", h, base, prev)}
		}
		seen[base] = h
	}
	for i, f := range sb.Files {
		field := fmt.Sprintf("sandbox.files[%d].at", i)
		if err := runPath(field, f.At); err != nil {
			return err
		}
		if f.At == "/" {
			return &RunFieldError{Field: field, Why: "/ cannot be a file"}
		}
	}
	for _, f := range []struct{ name, p string }{{"sandbox.proc", sb.Proc}, {"sandbox.dev", sb.Dev}, {"sandbox.tmp", sb.Tmp}} {
		if err := runPath(f.name, f.p); err != nil {
			return err
		}
	}
	return checkHidden(sb)
}

// checkHidden refuses proc, dev or tmp at or above a path the sandbox
// shows before it: table 6 applies them last, so the process would see
// its own /proc, /dev or an empty directory there instead (a node whose
// root lies under /tmp, and tmp "/tmp": bwrap cannot chdir to the
// workspace). It names the field and the first path it would hide: the
// workspace, then read_only, read_write, the homes' places, the files.
func checkHidden(sb RunSandbox) error {
	type shown struct{ what, p string }
	var paths []shown
	if sb.Workspace != "" {
		paths = append(paths, shown{"the workspace", sb.Workspace})
	}
	for _, l := range []struct {
		name  string
		paths []string
	}{{"read_only", sb.ReadOnly}, {"read_write", sb.ReadWrite}} {
		for i, p := range l.paths {
			paths = append(paths, shown{fmt.Sprintf("sandbox.%s[%d]", l.name, i), p})
		}
	}
	for i, h := range sb.Homes {
		paths = append(paths, shown{fmt.Sprintf("sandbox.homes[%d], seen at", i), filepath.Join(sb.Workspace, filepath.Base(h))})
	}
	for i, f := range sb.Files {
		paths = append(paths, shown{fmt.Sprintf("sandbox.files[%d]", i), f.At})
	}
	for _, m := range []struct{ name, p string }{{"sandbox.proc", sb.Proc}, {"sandbox.dev", sb.Dev}, {"sandbox.tmp", sb.Tmp}} {
		for _, s := range paths {
			if s.p == m.p || atOrBelow(s.p, m.p) {
				return &RunFieldError{Field: m.name, Why: fmt.Sprintf("%s would hide %s %s: it is applied after the paths (seed 004, table 6), so the process would not see what lies there", m.p, s.what, s.p)}
			}
		}
	}
	return nil
}

// atOrBelow says whether the clean path p is dir or lies below it.
func atOrBelow(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

func runPath(field, p string) error {
	why := ""
	switch {
	case p == "":
		why = "is empty"
	case strings.IndexByte(p, 0) >= 0:
		why = fmt.Sprintf("%q holds a NUL", p)
	case !filepath.IsAbs(p):
		why = fmt.Sprintf("%q is not absolute", p)
	case filepath.Clean(p) != p:
		why = fmt.Sprintf("%q is not clean (%q)", p, filepath.Clean(p))
	default:
		return nil
	}
	return &RunFieldError{Field: field, Why: why}
}

// CheckRunReadOnly refuses a read_only path this host does not have (seed
// 004, section 1: "a node never runs a run with less than it asks"; row
// 8, naming the field and the path, D83): stat says why, once links are
// followed, there is nothing to bind there. A path also in read_write is
// read-write (its bind fails at the launch). A path at or below one of
// made, which the workspace's steps are still to make, is not checked:
// the check after the steps sees it.
func CheckRunReadOnly(sb RunSandbox, made []string, stat func(string) error) error {
	for i, p := range sb.ReadOnly {
		if slices.Contains(sb.ReadWrite, p) || slices.ContainsFunc(made, func(m string) bool { return m != "" && atOrBelow(p, m) }) {
			continue
		}
		if err := stat(p); err != nil {
			return &RunFieldError{Field: fmt.Sprintf("sandbox.read_only[%d]", i),
				Why: fmt.Sprintf("%s is not on this node, so the process could not see it (%v); a run that may go without it does not list it", p, err)}
		}
	}
	return nil
}

// CheckRunSandbox resolves and checks every path of sb a run's process
// would see of the host (read_only, read_write and homes) against the
// node's own files (seed 004, section 6; refusal row 9), naming the path as
// the run states it. A path that cannot be resolved is refused. Release and
// Workspace (and what lies in them) may be named; no other release may, and
// neither State nor Passwords, wherever they lie.
func (n NodeFiles) CheckRunSandbox(sb RunSandbox, resolve func(string) (string, error)) error {
	return n.checkPaths([][]string{sb.ReadOnly, sb.ReadWrite, sb.Homes}, true, resolve)
}
