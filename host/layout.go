package host

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ocx-go/ocx/messages"
)

// Layout computes every path of the agents root (seed 000 "layout", decision
// D2) from the root's absolute path. It touches no file: unixhost.Root does
// the writing, refusing any symbolic link below the root.
type Layout struct {
	root string
}

// NewLayout returns the layout of the agents root at root, which must be an
// absolute path; it is cleaned, so that paths compare as strings.
func NewLayout(root string) (Layout, error) {
	if root == "" || !filepath.IsAbs(root) {
		return Layout{}, fmt.Errorf("host: agents root %q is not an absolute path", root)
	}
	return Layout{root: filepath.Clean(root)}, nil
}

// Root is the agents root, cleaned.
func (l Layout) Root() string { return l.root }

// NodeJSON is AGENTS/node.json: the node's user, release root and projects.
func (l Layout) NodeJSON() string { return filepath.Join(l.root, "node.json") }

// ModelJSON is AGENTS/model.json: the model the node's llm sessions reach
// through its model proxy, and where the proxy's key is (docs/runners.md).
// It is optional: a node without one serves no model.
func (l Layout) ModelJSON() string { return filepath.Join(l.root, "model.json") }

// Lock is AGENTS/ocxd.lock, the flock the one daemon holds.
func (l Layout) Lock() string { return filepath.Join(l.root, "ocxd.lock") }

// Pipe is AGENTS/ocxd, the daemon's named pipe.
func (l Layout) Pipe() string { return filepath.Join(l.root, "ocxd") }

// Socket is AGENTS/ocxd.sock, the daemon's socket (D66): the hook, the
// status and the console ask the daemon's live index there.
func (l Layout) Socket() string { return filepath.Join(l.root, SocketName) }

// SocketName is the daemon socket's name in the agents root.
const SocketName = "ocxd.sock"

// Log is AGENTS/ocxd.log, the daemon's log.
func (l Layout) Log() string { return filepath.Join(l.root, "ocxd.log") }

// HookLog is the hook's log, AGENTS/hook.log: Fossil closes the hook's
// standard output, so it writes nothing there.
func (l Layout) HookLog() string { return filepath.Join(l.root, "hook.log") }

// Handoff is AGENTS/ocxd.handoff, present only while the daemon re-execs.
func (l Layout) Handoff() string { return filepath.Join(l.root, "ocxd.handoff") }

// StopAsked is AGENTS/ocxd.stopasked, written by an old image that was
// asked to stop while its exec was under way: the new image stops at
// once when it finds it.
func (l Layout) StopAsked() string { return filepath.Join(l.root, "ocxd.stopasked") }

// Reexec is AGENTS/ocxd.reexec, the outcome of the daemon's last re-exec
// (messages.ReexecOutcome): written by the old image when the exec did not
// happen, by the new one when it starts from the hand-off.
func (l Layout) Reexec() string { return filepath.Join(l.root, "ocxd.reexec") }

// RunCareName is the name under the agents root of the directory where the
// node keeps its runs in care (seed 004, section 4): of the ocxd.* family,
// which no login may take (D16).
const RunCareName = "ocxd.runs"

// RunCare is AGENTS/ocxd.runs: a care file for each run in the node's care
// (protocol.RunCare) and its holder's files beside it.
func (l Layout) RunCare() string { return filepath.Join(l.root, RunCareName) }

// RunCareFile is AGENTS/ocxd.runs/HASH.json, the care file of run hash.
func (l Layout) RunCareFile(hash string) (string, error) {
	if err := messages.ValidateHash(hash); err != nil {
		return "", err
	}
	return filepath.Join(l.RunCare(), hash+".json"), nil
}

// HookMark is AGENTS/hook.mark.PROJECT: the newest receipt of the project's
// repository that the wake hook handled. The hook keeps it; the daemon
// reads it to see that the hook keeps up.
func (l Layout) HookMark(project string) string {
	return filepath.Join(l.root, "hook.mark."+project)
}

// ParseHookMark reads a hook mark's content: a receipt number and a newline.
// false when it holds none (an empty file, a hook installed by hand).
func ParseHookMark(b []byte) (int64, bool) {
	v, _, ok := ParseHookMarkWorking(b)
	return v, ok
}

// ParseHookMarkWorking reads a hook mark and, when a run of the hook is
// at work past it (or died there), the newest receipt that run handles:
// "MARK\n", or "MARK WORKING\n" while a run does its work for the
// receipts after MARK up to WORKING (working 0 when none is).
func ParseHookMarkWorking(b []byte) (mark, working int64, ok bool) {
	fields := strings.Fields(string(b))
	if len(fields) == 0 || len(fields) > 2 {
		return 0, 0, false
	}
	v, err := strconv.ParseInt(fields[0], 10, 64)
	if err != nil || v < 0 {
		return 0, 0, false
	}
	if len(fields) == 2 {
		w, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil || w <= v {
			return 0, 0, false
		}
		return v, w, true
	}
	return v, 0, true
}

// ReadHookMark reads a hook mark without its lock: read (the file's
// contents) until two reads in a row agree and parse, at most eight. The
// hook rewrites its mark in place (unixhost.RewriteInPlace), and a read
// that takes no lock may see part of one write: the kernel copies a write
// into the file's page as a read copies out of it, with no lock between
// them (TestMarkNeverEmpty saw "9\n1\n"). A torn read is told by the next.
func ReadHookMark(read func() ([]byte, error)) (mark, working int64, ok bool) {
	var last []byte
	for range 8 {
		b, err := read()
		if err != nil {
			return 0, 0, false
		}
		if last != nil && string(b) == string(last) {
			return ParseHookMarkWorking(b)
		}
		last = b
	}
	return 0, 0, false
}

// HookMarkContent is what a hook mark holds for receipt v.
func HookMarkContent(v int64) []byte { return []byte(strconv.FormatInt(v, 10) + "\n") }

// HookMarkWorkingContent is what a hook mark holds for receipt v while a
// run does its work for the receipts after v up to working.
func HookMarkWorkingContent(v, working int64) []byte {
	return []byte(strconv.FormatInt(v, 10) + " " + strconv.FormatInt(working, 10) + "\n")
}

// Password is AGENTS/LOGIN/password, the login's one password (mode 0600).
func (l Layout) Password(login string) (string, error) {
	if err := messages.ValidateLogin(login); err != nil {
		return "", err
	}
	return filepath.Join(l.root, login, "password"), nil
}

// Workspace returns the paths of the workspace k.
func (l Layout) Workspace(k messages.WorkspaceKey) (Workspace, error) {
	if err := k.Validate(); err != nil {
		return Workspace{}, err
	}
	dir := filepath.Join(l.root, k.Login, "projects", k.Project)
	session := filepath.Join(dir, "session")
	return Workspace{
		Key:          k,
		Dir:          dir,
		Clone:        filepath.Join(dir, "clone"),
		Tree:         filepath.Join(dir, "tree"),
		Binding:      filepath.Join(dir, "binding.json"),
		Session:      session,
		Wake:         filepath.Join(session, "wake"),
		Log:          filepath.Join(session, "log"),
		ListeningDir: filepath.Join(l.root, k.Login, "held", k.Project, "listening"),
		Held:         filepath.Join(l.root, k.Login, "held", k.Project),
		Hears:        filepath.Join(l.root, k.Login, "held", k.Project, "hears"),
		Checkins:     filepath.Join(l.root, k.Login, "held", k.Project, "checkins"),
		HeldBinding:  filepath.Join(l.root, k.Login, "held", k.Project, "binding.json"),
		Sandbox:      filepath.Join(l.root, k.Login, "held", k.Project, "sandbox"),
		Woken:        filepath.Join(l.root, k.Login, "held", k.Project, "woken"),
		Disk:         filepath.Join(l.root, k.Login, "held", k.Project, DiskName),
		MCPDir:       filepath.Join(l.root, k.Login, "mcp", k.Project),
		MCPLog:       filepath.Join(l.root, k.Login, "mcp", k.Project+".log"),
	}, nil
}

// Workspace holds the paths of one workspace, AGENTS/LOGIN/projects/PROJECT.
type Workspace struct {
	Key     messages.WorkspaceKey
	Dir     string // the workspace directory: bound read-write, HOME in the sandbox
	Clone   string // the agent's own Fossil clone
	Tree    string // the check-out on the definition's branch
	Binding string // binding.json
	Session string // session/
	Wake    string // session/wake, the wake pipe (mode 0600)
	Log     string // session/log, the session's stdout and stderr
	// ListeningDir is Held/listening/, the listening index (seed 000's
	// session/listening/, moved out of the agent's reach, D44): the hook
	// wakes a session for what it names, so an agent that could write it
	// would hear records no listen note of its own names.
	ListeningDir string
	// Held is AGENTS/LOGIN/held/PROJECT (mode 0700): what the hook reads of
	// the session that its agent may not change, outside the workspace and
	// bound into no sandbox. A file in the workspace is the agent's to
	// write: a hears file there would let it hear whom its record does not.
	Held string
	// Hears is Held/hears: the users whose posts wake the session, one
	// login a line or "*", written by whoever starts it (D27).
	Hears string
	// Checkins is Held/checkins: the branches whose check-ins the hook
	// gives the session, one branch a line, written by whoever starts it
	// (seed 001 E7); absent for none.
	Checkins string
	// HeldBinding is Held/binding.json: the node's own copy of the binding
	// it wrote into the workspace when it made it (D44). The workspace's
	// binding.json is the agent's to rewrite; the node reads only this one.
	HeldBinding string
	// Sandbox is Held/sandbox: the sandbox the daemon spawned for the
	// session (SandboxRecord), written at the spawn and removed at its end,
	// so that a process in it counts for the workspace (D45).
	Sandbox string
	// Woken is Held/woken: the persons' posts the hook woke the session for
	// (WokenPost, one a line), which the daemon reads when it records the
	// session's end, to note those it never answered (D77).
	Woken string
	// Disk is Held/disk: the image of the workspace's own file system,
	// mounted at Dir (D82), when the node gave it one. Out of every
	// sandbox's reach, so that no agent writes it but through its mount.
	Disk string
	// MCPDir is AGENTS/LOGIN/mcp/PROJECT (mode 0700), outside the
	// workspace: it holds the session's MCP socket, MCPSocketName, and is
	// bound read-only into that session's sandbox alone, at MCPMount (D38).
	MCPDir string
	// MCPLog is AGENTS/LOGIN/mcp/PROJECT.log, the MCP server's log, out
	// of the sandbox's reach.
	MCPLog string
}

// DiskName is the name of a workspace's disk image in its Held
// directory (D82), and of a run's beside its care file.
const DiskName = "disk"

// RunDisk is AGENTS/ocxd.runs/HASH.disk, the image of run hash's
// workspace's file system when it asks limits.disk (D82).
func (l Layout) RunDisk(hash string) (string, error) {
	if err := messages.ValidateHash(hash); err != nil {
		return "", err
	}
	return filepath.Join(l.RunCare(), hash+"."+DiskName), nil
}

// MCPSocketName is the name of a session's MCP socket in its MCPDir.
const MCPSocketName = "mcp.sock"

// MCPMount is where a sandbox sees its own session's MCPDir, and
// MCPSocketInside the socket's path there, which the session's
// environment names as OCX_MCP_SOCKET (D38).
const (
	MCPMount        = "/tmp/ocx-mcp"
	MCPSocketInside = MCPMount + "/" + MCPSocketName
	MCPSocketEnv    = "OCX_MCP_SOCKET"
)

// MCPLaunchEnv and MCPTokensEnv tell `ocx mcp start`, in its environment,
// the launch an llm session serves and its limits.tokens, for its model
// proxy's count (D50). The environment, not flags: a release from before
// D50 ignores them, where it would refuse a flag it does not know.
const (
	MCPLaunchEnv = "OCX_MCP_LAUNCH"
	MCPTokensEnv = "OCX_MCP_TOKENS"
)

// MCPSocket is the session's MCP socket as the node sees it.
func (w Workspace) MCPSocket() string { return filepath.Join(w.MCPDir, MCPSocketName) }

// ModelSocketName is the session's model proxy in its MCPDir, beside the
// MCP socket and served by the same process when AGENTS/model.json says
// which model; a runner finds it beside $OCX_MCP_SOCKET.
const ModelSocketName = "model.sock"

// ModelSocket is the session's model proxy as the node sees it.
func (w Workspace) ModelSocket() string { return filepath.Join(w.MCPDir, ModelSocketName) }

// modelUsageName is the node's count of a session's model in its MCPDir
// (D50), written by its model proxy; the sandbox sees it read-only.
const modelUsageName = "usage.json"

// ModelUsage is the node's count of the session's model, as the node sees
// it.
func (w Workspace) ModelUsage() string { return filepath.Join(w.MCPDir, modelUsageName) }

// TurnsFile is session/usage.json: the session's own account of its turns
// (D50), the session's to write.
func (w Workspace) TurnsFile() string { return filepath.Join(w.Session, "usage.json") }

// RunnerUsage is session/turn-usage.json: what a turn's runner reports of
// itself ($OCX_TURN_USAGE), read by the session after the turn (D50).
func (w Workspace) RunnerUsage() string { return filepath.Join(w.Session, "turn-usage.json") }

// SyncSocketName is the session's sync socket in its MCPDir, served by the
// same process as its MCP socket: it forwards Fossil's sync requests to
// the one server of the session's project (D49). SyncSocketInside is its
// path in the sandbox, which the session's environment names as
// SyncSocketEnv.
const (
	SyncSocketName   = "sync.sock"
	SyncSocketInside = MCPMount + "/" + SyncSocketName
	SyncSocketEnv    = "OCX_SYNC_SOCKET"
)

// SyncSocket is the session's sync socket as the node sees it.
func (w Workspace) SyncSocket() string { return filepath.Join(w.MCPDir, SyncSocketName) }

// Listening is session/listening/RECORD for a validated record name.
func (w Workspace) Listening(record string) (string, error) {
	if err := messages.ValidateListeningFileName(record); err != nil {
		return "", err
	}
	return filepath.Join(w.ListeningDir, record), nil
}

// SpawnedDir is Held/spawned: one file per session the daemon spawned in
// the workspace whose end note is not yet on the record (D76), each named
// by its launch (SpawnedFile), holding protocol.Spawned. It is the node's,
// out of every sandbox's reach: the agent's workspace holds nothing the
// node believes about how its session ended (docs/trust.md).
func (w Workspace) SpawnedDir() string { return filepath.Join(w.Held, "spawned") }

// SpawnedFile is SpawnedDir/LAUNCH for a full launch hash.
func (w Workspace) SpawnedFile(launch string) (string, error) {
	if err := messages.ValidateHash(launch); err != nil {
		return "", err
	}
	return filepath.Join(w.SpawnedDir(), launch), nil
}

// ownEntries are the names the workspace directory itself holds; a home bound
// inside the workspace by its last name may not take one of them.
var ownEntries = []string{"clone", "tree", "binding.json", "session"}

// KeyOf says which workspace the directory dir is, after cleaning: ok only when
// dir is exactly AGENTS/LOGIN/projects/PROJECT with valid names.
func (l Layout) KeyOf(dir string) (messages.WorkspaceKey, bool) {
	rel, ok := l.rel(dir)
	if !ok {
		return messages.WorkspaceKey{}, false
	}
	parts := strings.Split(rel, "/")
	if len(parts) != 3 || parts[1] != "projects" {
		return messages.WorkspaceKey{}, false
	}
	k := messages.WorkspaceKey{Login: parts[0], Project: parts[2]}
	if k.Validate() != nil {
		return messages.WorkspaceKey{}, false
	}
	return k, true
}

// KeyWithin says which workspace holds p (p is the workspace directory or lies
// inside it), after cleaning.
func (l Layout) KeyWithin(p string) (messages.WorkspaceKey, bool) {
	rel, ok := l.rel(p)
	if !ok {
		return messages.WorkspaceKey{}, false
	}
	parts := strings.SplitN(rel, "/", 4)
	if len(parts) < 3 {
		return messages.WorkspaceKey{}, false
	}
	return l.KeyOf(filepath.Join(l.root, parts[0], parts[1], parts[2]))
}

// Contains says whether p, cleaned, is the root or lies below it.
func (l Layout) Contains(p string) bool {
	_, ok := l.rel(p)
	return ok || filepath.Clean(p) == l.root
}

// rel returns p relative to the root, with '/' separators, when p lies strictly
// below the root.
func (l Layout) rel(p string) (string, bool) {
	if l.root == "" || !filepath.IsAbs(p) {
		return "", false
	}
	p = filepath.Clean(p)
	prefix := l.root + "/"
	if l.root == "/" {
		prefix = "/"
	}
	rel, ok := strings.CutPrefix(p, prefix)
	if !ok || rel == "" {
		return "", false
	}
	return rel, true
}
