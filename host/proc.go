package host

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// Evidence is what the process table says of a question (does a process
// name this workspace? does one hold its wake pipe?). Its zero value is
// Unknown, on which no launch or kill decision may rest.
type Evidence int8

// The answers.
const (
	Unknown Evidence = iota
	No
	Yes
)

func (a Evidence) String() string {
	switch a {
	case No:
		return "no"
	case Yes:
		return "yes"
	}
	return "unknown"
}

// Stat is what OCX reads from /proc/PID/stat.
type Stat struct {
	PID   int
	Comm  string // the short command name, without its parentheses
	State byte   // R, S, D, Z, T, ...
	PPID  int
	PGID  int
	SID   int
	Flags uint64 // the kernel's PF_* flags
	Start uint64 // field 22: start time in clock ticks since boot
}

// pfKthread marks a kernel thread in Stat.Flags.
const pfKthread = 0x00200000

// Kernel says whether the process is a kernel thread.
func (s Stat) Kernel() bool { return s.Flags&pfKthread != 0 }

// Zombie says whether the process has ended and waits to be reaped.
func (s Stat) Zombie() bool { return s.State == 'Z' || s.State == 'X' }

// pfExiting marks a process in its exit in Stat.Flags: set before the
// kernel ends the rest of the PID namespace whose first process it is.
const pfExiting = 0x00000004

// Ending says whether the process is ending or has ended: in its exit
// (PF_EXITING), or a zombie.
func (s Stat) Ending() bool { return s.Flags&pfExiting != 0 || s.Zombie() }

// errBadStat is wrapped by ParseStat's errors.
var errBadStat = errors.New("host: malformed /proc/PID/stat")

// ParseStat parses the contents of /proc/PID/stat. The command name may hold
// spaces and parentheses, so it is taken between the first '(' and the last ')'.
func ParseStat(b []byte) (Stat, error) {
	var s Stat
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 1 || end < open {
		return s, fmt.Errorf("%w: no (comm)", errBadStat)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil || pid <= 0 {
		return s, fmt.Errorf("%w: pid %q", errBadStat, bytes.TrimSpace(b[:open]))
	}
	s.PID = pid
	s.Comm = string(b[open+1 : end])
	f := bytes.Fields(b[end+1:])
	// f[0] is field 3 (state); field N is f[N-3]. Field 22 is the start time.
	if len(f) < 20 || len(f[0]) != 1 {
		return s, fmt.Errorf("%w: %d fields after the command name, want at least 20", errBadStat, len(f))
	}
	s.State = f[0][0]
	ints := []*int{&s.PPID, &s.PGID, &s.SID}
	for i, p := range ints {
		v, err := strconv.Atoi(string(f[1+i]))
		if err != nil {
			return s, fmt.Errorf("%w: field %d %q", errBadStat, 4+i, f[1+i])
		}
		*p = v
	}
	if s.Flags, err = strconv.ParseUint(string(f[6]), 10, 64); err != nil {
		return s, fmt.Errorf("%w: flags %q", errBadStat, f[6])
	}
	if s.Start, err = strconv.ParseUint(string(f[19]), 10, 64); err != nil {
		return s, fmt.Errorf("%w: start time %q", errBadStat, f[19])
	}
	return s, nil
}

// MaxCmdline bounds what the table reads of a command line: 16 KiB, twice
// the longest the node builds for a session with a generous sandbox (D78:
// host.BwrapArgs refuses a sandbox past it, so the node's own processes
// are always read whole). A reader reads at most MaxCmdline+1 bytes of
// /proc/PID/cmdline, so that what an agent writes in its argv costs the
// table the same however long it is.
const MaxCmdline = 16 << 10

// ParseCmdline splits the contents of /proc/PID/cmdline, as a reader
// bounded by MaxCmdline read them (at most MaxCmdline+1 bytes), into its
// arguments. An empty result means a zombie, a kernel thread, or a process
// that cleared it. cut says the command line is longer than MaxCmdline:
// argv is then the arguments that lie whole within its first MaxCmdline
// bytes (the one the bound falls in is dropped, so that a path cut short
// never names what the whole one does not), and the process is none the
// node made (D78).
func ParseCmdline(b []byte) (argv []string, cut bool) {
	if len(b) > MaxCmdline {
		cut = true
		b = b[:MaxCmdline]
		if i := bytes.LastIndexByte(b, 0); i >= 0 {
			b = b[:i]
		} else {
			b = nil
		}
	}
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil, cut
	}
	return strings.Split(string(b), "\x00"), cut
}

// cmdlineLen is the length of argv's command line as /proc/PID/cmdline
// shows it: each argument and its NUL.
func cmdlineLen(argv []string) int {
	n := 0
	for _, a := range argv {
		n += len(a) + 1
	}
	return n
}

// verb is how a process names a workspace.
type verb string

// The verbs: the three of the workspace program (D1) and bwrap's bind of the
// workspace directory.
const (
	VerbRun   verb = "run"
	VerbStart verb = "start"
	VerbServe verb = "serve"
	VerbBind  verb = "bind"
)

// Naming is one workspace a command line names.
type Naming struct {
	Verb   verb
	Key    messages.WorkspaceKey
	Root   string // the agents root the command line gives, cleaned
	Launch string // the launch note's hash (`--launch`), as written; "" if none
	// Unsure is set when the command line names Key but gives a root that is
	// missing or relative, which cannot be matched against ours: the process
	// may name our workspace, so a refusal check counts it as unknown.
	Unsure bool
}

// MayName says quickly, from the raw contents of /proc/PID/cmdline, whether
// the command line can name a workspace at all: its program is `workspace` or
// `bwrap`. A scan reads the rest only for these.
func MayName(cmdline []byte) bool {
	arg0 := cmdline
	if i := bytes.IndexByte(cmdline, 0); i >= 0 {
		arg0 = cmdline[:i]
	}
	if i := bytes.LastIndexByte(arg0, '/'); i >= 0 {
		arg0 = arg0[i+1:]
	}
	return string(arg0) == "workspace" || string(arg0) == "bwrap"
}

// Namings returns the workspaces of the agents root of l that argv names:
// `workspace run|start|serve KEY --root ROOT [--launch HASH]` when ROOT,
// cleaned, is l's root, and bwrap's `--bind SRC DEST` or `--bind-try SRC DEST`
// when SRC, cleaned, is a workspace directory of l or lies inside one. Flags
// may be written -x or --x, with the value after '=' or as the next argument.
func Namings(argv []string, l Layout) []Naming {
	if len(argv) == 0 {
		return nil
	}
	switch filepath.Base(argv[0]) {
	case "workspace":
		n, ok := workspaceNaming(argv, l)
		if !ok {
			return nil
		}
		return []Naming{n}
	case "bwrap":
		var out []Naming
		var seen map[messages.WorkspaceKey]bool // made at the second naming
		for i := 1; i+1 < len(argv); i++ {
			if argv[i] != "--bind" && argv[i] != "--bind-try" {
				continue
			}
			// A token scan without bwrap's arities can only err towards
			// naming, which refuses a launch; it never lets one through.
			src := argv[i+1]
			i += 2
			k, ok := l.KeyWithin(src)
			if !ok || (len(out) == 1 && out[0].Key == k) || seen[k] {
				continue
			}
			if len(out) == 1 {
				seen = map[messages.WorkspaceKey]bool{out[0].Key: true}
			}
			if seen != nil {
				seen[k] = true
			}
			out = append(out, Naming{Verb: VerbBind, Key: k, Root: l.Root()})
		}
		return out
	}
	return nil
}

func workspaceNaming(argv []string, l Layout) (Naming, bool) {
	if len(argv) < 3 {
		return Naming{}, false
	}
	var n Naming
	switch v := verb(argv[1]); v {
	case VerbRun, VerbStart, VerbServe:
		n.Verb = v
	default:
		return Naming{}, false
	}
	var key string
	positional := false
	for i := 2; i < len(argv); i++ {
		a := argv[i]
		if positional || a == "-" || !strings.HasPrefix(a, "-") {
			if key == "" {
				key = a
			}
			continue
		}
		if a == "--" {
			positional = true
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if name != "root" && name != "launch" {
			continue
		}
		if !hasVal {
			if i+1 >= len(argv) {
				break
			}
			i++
			val = argv[i]
		}
		if name == "root" {
			n.Root = val
		} else {
			n.Launch = val
		}
	}
	k, err := messages.ParseWorkspaceKey(key)
	if err != nil {
		return Naming{}, false
	}
	n.Key = k
	if n.Root == "" || !filepath.IsAbs(n.Root) {
		n.Unsure = true
		return n, true
	}
	n.Root = filepath.Clean(n.Root)
	if n.Root != l.Root() {
		return Naming{}, false
	}
	return n, true
}

// Process is one process of the table: a process whose command line names a
// workspace of the agents root.
type Process struct {
	ID   protocol.ProcID
	PPID int
	PGID int
	SID  int
	Comm string
	Argv []string
	// Cut says the command line is longer than MaxCmdline: Argv is the
	// part read, Names what it names. No process the node makes has one
	// so long, so it is never a session (SeparateLookAlikes, D78).
	Cut   bool
	Names []Naming
	// Exe is /proc/PID/exe; "" when it could not be read.
	Exe string
	// Release is the release the process runs: ID for an executable in
	// RELEASE_ROOT/releases/ID/, otherwise the executable's directory; ""
	// when unknown.
	Release string
	// Listening says whether the process holds its workspace's wake pipe open
	// for reading.
	Listening Evidence
	Origin    messages.Origin
	// PIDNS is the inode of the PID namespace the process runs in
	// (/proc/PID/ns/pid); 0 when it could not be read (D45).
	PIDNS uint64
	// NSLevels counts the PID namespaces the process is in, from the one
	// of the /proc it was read from (ParseNSpid): 1 for a process of that
	// namespace, more for one in a sandbox below it; 0 when not read. It
	// is read only when PIDNS cannot be.
	NSLevels int
	// UID is the process's owner as /proc/PID shows it (its effective
	// uid; root's for a process that is not dumpable); -1 when unknown.
	UID int
	// Partial says why some of the above could not be read (the process
	// vanished mid-scan, say); "" when all was read. A partial process still
	// names its workspaces.
	Partial string
}

// NamesKey says whether the process names the workspace k (surely or not).
func (p Process) NamesKey(k messages.WorkspaceKey) (named, unsure bool) {
	for _, n := range p.Names {
		if n.Key != k {
			continue
		}
		if n.Unsure {
			unsure = true
		} else {
			named = true
		}
	}
	return named, unsure
}

// Unreadable is a process the scan listed but could not read: it may name
// any workspace.
type Unreadable struct {
	PID int
	Err string
	// Names are the workspaces its command line named, read a moment
	// before it vanished; PIDNS the PID namespace it was in then (0 when
	// unknown). SeparateLookAlikes makes one that was in another workspace's sandbox
	// a look-alike rather than unknown.
	Names []Naming
	PIDNS uint64
}

// Table is the process table as far as OCX is concerned.
type Table struct {
	Procs      []Process
	Unreadable []Unreadable
	// LookAlikes are the processes whose command lines name workspaces
	// they are no session of (SeparateLookAlikes): in none of Procs' Names, never
	// counted by Naming.
	LookAlikes []LookAlike
}

// Verdict answers "does any process name workspace Key?".
type Verdict struct {
	Key messages.WorkspaceKey
	// Named is Yes when a process names it, No when the evidence says none
	// does, Unknown when some process could not be read or names it under a
	// root that cannot be matched: refuse on anything but No.
	Named  Evidence
	By     []protocol.ProcID // the processes that name it
	Unsure []int             // the PIDs that made the answer Unknown
	// LookAlikes are the processes whose command lines name it and which
	// are no session of it (D45): they count for nothing, and are named
	// so that a refusal or a log says they were seen and why ignored.
	LookAlikes []LookAlike
}

// String renders the verdict for a log or a refusal note.
func (v Verdict) String() string {
	var s string
	switch v.Named {
	case Yes:
		ids := make([]string, len(v.By))
		for i, id := range v.By {
			ids[i] = id.String()
		}
		s = fmt.Sprintf("workspace %s is named by %s", v.Key, strings.Join(ids, ", "))
	case No:
		s = fmt.Sprintf("no process names workspace %s", v.Key)
	default:
		s = fmt.Sprintf("cannot tell whether a process names workspace %s: pids %v could not be read or matched", v.Key, v.Unsure)
	}
	return s + v.Ignored()
}

// Ignored says which look-alikes the verdict ignored, and why: "" when
// none, else a clause to append to a sentence, naming the first few
// (messages.MaxLookAlikeClaims) and counting the rest.
func (v Verdict) Ignored() string {
	if len(v.LookAlikes) == 0 {
		return ""
	}
	n := min(len(v.LookAlikes), messages.MaxLookAlikeClaims)
	parts := make([]string, 0, n+1)
	for _, l := range v.LookAlikes[:n] {
		parts = append(parts, l.String())
	}
	if more := len(v.LookAlikes) - n; more > 0 {
		parts = append(parts, fmt.Sprintf("%d more processes that only look like sessions of it", more))
	}
	return "; ignored: " + strings.Join(parts, "; ")
}

// Naming answers whether any process of the table names the workspace k.
func (t Table) Naming(k messages.WorkspaceKey) Verdict {
	v := Verdict{Key: k}
	for _, p := range t.Procs {
		named, unsure := p.NamesKey(k)
		if named {
			v.By = append(v.By, p.ID)
		} else if unsure {
			v.Unsure = append(v.Unsure, p.ID.PID)
		}
	}
	return t.decide(v)
}

// decide adds to v, whose By and Unsure the processes gave, what the
// unreadable processes and the look-alikes say, and its answer.
func (t Table) decide(v Verdict) Verdict {
	for _, u := range t.Unreadable {
		v.Unsure = append(v.Unsure, u.PID)
	}
	for _, l := range t.LookAlikes {
		if l.Claims(v.Key) {
			v.LookAlikes = append(v.LookAlikes, l)
		}
	}
	switch {
	case len(v.By) > 0:
		v.Named = Yes
	case len(v.Unsure) > 0:
		v.Named = Unknown
	default:
		v.Named = No
	}
	return v
}

// ByWorkspace is the table read once by workspace: Naming for each of
// many workspaces (a status's thousand) without reading every process for
// each.
type ByWorkspace struct {
	t   Table
	per map[messages.WorkspaceKey]*Verdict
}

// ByWorkspace indexes the table by the workspaces its processes name.
func (t Table) ByWorkspace() *ByWorkspace {
	n := &ByWorkspace{t: t, per: map[messages.WorkspaceKey]*Verdict{}}
	for _, p := range t.Procs {
		for i, nm := range p.Names {
			if slices.ContainsFunc(p.Names[:i], func(o Naming) bool { return o.Key == nm.Key }) {
				continue // this process is counted for it already
			}
			v := n.per[nm.Key]
			if v == nil {
				v = &Verdict{Key: nm.Key}
				n.per[nm.Key] = v
			}
			named, unsure := p.NamesKey(nm.Key)
			if named {
				v.By = append(v.By, p.ID)
			} else if unsure {
				v.Unsure = append(v.Unsure, p.ID.PID)
			}
		}
	}
	return n
}

// Naming is Table.Naming(k).
func (n *ByWorkspace) Naming(k messages.WorkspaceKey) Verdict {
	v := Verdict{Key: k}
	if p := n.per[k]; p != nil {
		v.By, v.Unsure = slices.Clone(p.By), slices.Clone(p.Unsure)
	}
	return n.t.decide(v)
}

// Find returns the process with identity id.
func (t Table) Find(id protocol.ProcID) (Process, bool) {
	for _, p := range t.Procs {
		if p.ID == id {
			return p, true
		}
	}
	return Process{}, false
}

// SetOrigins decides each process's Origin. daemon is the daemon's PID (0 when
// none runs); subreaper says whether a PID is a child subreaper, and may be nil.
// A process's chain is followed up through parents that name the same
// workspace (bwrap, its init, then `workspace serve`); the parent of the
// chain's top decides.
func (t *Table) SetOrigins(daemon int, subreaper func(pid int) bool) {
	byPID := make(map[int]*Process, len(t.Procs))
	for i := range t.Procs {
		byPID[t.Procs[i].ID.PID] = &t.Procs[i]
	}
	for i := range t.Procs {
		p := &t.Procs[i]
		top := p
		for range len(t.Procs) {
			parent, ok := byPID[top.PPID]
			if !ok || parent == top || !sharesKey(*parent, *p) {
				break
			}
			top = parent
		}
		switch {
		case daemon > 0 && top.PPID == daemon:
			p.Origin = messages.OriginDaemon
		case top.PPID <= 1 || (subreaper != nil && subreaper(top.PPID)):
			p.Origin = messages.OriginOrphan
		default:
			p.Origin = messages.OriginTerminal
		}
	}
}

func sharesKey(a, b Process) bool {
	for _, n := range a.Names {
		for _, m := range b.Names {
			if n.Key == m.Key {
				return true
			}
		}
	}
	return false
}

// ReleaseOf says which release an executable belongs to: ID when exe lies in
// releaseRoot/releases/ID/, otherwise the executable's directory.
func ReleaseOf(exe, releaseRoot string) string {
	if releaseRoot != "" {
		prefix := filepath.Join(filepath.Clean(releaseRoot), "releases") + "/"
		if rest, ok := strings.CutPrefix(filepath.Clean(exe), prefix); ok {
			if id, _, ok := strings.Cut(rest, "/"); ok && id != "" {
				return id
			}
		}
	}
	return filepath.Dir(exe)
}
