package host

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// A command line is the process's own to write: inside a sandbox an agent
// may run anything as `workspace serve OTHER/PROJECT --root AGENTS`. So a
// process counts for the workspace it names only where it runs (D45): in
// the reader's own PID namespace (a process of the host: the bwrap the
// daemon spawned, a person's terminal session), or in the sandbox the node
// made for that workspace. Any other is a look-alike: SeparateLookAlikes keeps it
// apart, and nothing it claims blocks, is adopted or gets a note.

// errBadNSLink is wrapped by ParseNSLink's errors.
var errBadNSLink = errors.New("host: malformed namespace link")

// ParseNSLink reads the inode of a namespace from what readlink gives for
// /proc/PID/ns/KIND: "KIND:[INODE]", e.g. "pid:[4026531836]".
func ParseNSLink(link, kind string) (uint64, error) {
	rest, ok := strings.CutPrefix(link, kind+":[")
	if !ok || !strings.HasSuffix(rest, "]") {
		return 0, fmt.Errorf("%w: %q is not %s:[INODE]", errBadNSLink, link, kind)
	}
	ino, err := strconv.ParseUint(strings.TrimSuffix(rest, "]"), 10, 64)
	if err != nil || ino == 0 {
		return 0, fmt.Errorf("%w: %q has no inode", errBadNSLink, link)
	}
	return ino, nil
}

// errNoNSpid is wrapped by ParseNSpid's errors.
var errNoNSpid = errors.New("host: no NSpid line in /proc/PID/status")

// ParseNSpid counts the PIDs on the NSpid line of /proc/PID/status: one
// per PID namespace the process is in, from the namespace of the /proc
// that was read down to its own. 1 is a process of that namespace itself;
// 2 or more, one in a namespace below it (a sandbox). The file is
// readable where /proc/PID/ns/pid is not (another user's process).
func ParseNSpid(status []byte) (int, error) {
	for line := range bytes.Lines(status) {
		v, ok := bytes.CutPrefix(line, []byte("NSpid:"))
		if !ok {
			continue
		}
		f := bytes.Fields(v)
		if len(f) == 0 {
			return 0, fmt.Errorf("%w: an empty NSpid line", errNoNSpid)
		}
		for _, p := range f {
			if n, err := strconv.Atoi(string(p)); err != nil || n <= 0 {
				return 0, fmt.Errorf("%w: NSpid holds %q", errNoNSpid, p)
			}
		}
		return len(f), nil
	}
	return 0, errNoNSpid
}

// SandboxRecord is what the node keeps of the sandbox it spawned for a
// workspace's session, in Workspace.Sandbox (outside every sandbox): its
// bwrap, the sandbox's first process (bwrap's init, by the PID the host
// sees and its start time) and the PID namespace bwrap made. It is good
// while that init lives in that namespace: a namespace ends with its init,
// and its inode may then be given to another.
type SandboxRecord struct {
	Bwrap        protocol.ProcID `json:"bwrap"`
	Init         protocol.ProcID `json:"init"`
	PIDNamespace uint64          `json:"pid_namespace"`
}

// Encode renders the record as one JSON object.
func (r SandboxRecord) Encode() ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Validate checks that the record names two processes and a namespace.
func (r SandboxRecord) Validate() error {
	switch {
	case r.Bwrap.PID <= 0 || r.Bwrap.Start == 0:
		return fmt.Errorf("host: sandbox record: bwrap %s is no process", r.Bwrap)
	case r.Init.PID <= 0 || r.Init.Start == 0:
		return fmt.Errorf("host: sandbox record: init %s is no process", r.Init)
	case r.PIDNamespace == 0:
		return errors.New("host: sandbox record: no PID namespace")
	}
	return nil
}

// DecodeSandboxRecord reads a record Encode wrote.
func DecodeSandboxRecord(b []byte) (SandboxRecord, error) {
	var r SandboxRecord
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return SandboxRecord{}, fmt.Errorf("host: sandbox record: %w", err)
	}
	return r, r.Validate()
}

// Provenance is what the reader of the table knows of the processes
// beyond their command lines (D45).
type Provenance struct {
	// Self is the PID namespace of the reader, and of the /proc it reads;
	// 0 when unknown, which leaves Process.PIDNS unusable.
	Self uint64
	// Users are the uids a session may run as (the agents root's owner,
	// root, the reader's own); a process of another user is a look-alike.
	// Empty admits every user.
	Users []int
	// Recorded is, per workspace, the PID namespace of the sandbox the
	// node spawned for its session (SandboxRecord), found good.
	Recorded map[messages.WorkspaceKey]uint64
}

// place is where a process runs, as far as the reader can tell.
type place int8

const (
	placeUnknown place = iota
	placeHome          // the reader's own PID namespace
	placeSandbox       // a PID namespace other than the reader's, its inode known
	placeBelow         // a PID namespace below the reader's, its inode unknown
)

func (p Provenance) placeOf(pr Process) place {
	switch {
	case pr.PIDNS != 0 && p.Self != 0 && pr.PIDNS == p.Self:
		return placeHome
	case pr.PIDNS != 0 && p.Self != 0:
		return placeSandbox
	case pr.NSLevels == 1:
		return placeHome
	case pr.NSLevels > 1:
		return placeBelow
	}
	return placeUnknown
}

func (p Provenance) admits(uid int) bool {
	return len(p.Users) == 0 || uid < 0 || slices.Contains(p.Users, uid)
}

// anchors are, per workspace, the PID namespaces that are its sandbox's:
// those the node recorded, and those bwrap made where bwrap runs in the
// reader's namespace as a user a session may be, binding the workspace
// (the sandbox's first process is bwrap's child, in the namespace it
// made). A process inside a sandbox cannot have a parent outside it but
// that sandbox's bwrap, so no agent can make one.
func (t Table) anchors(p Provenance) map[messages.WorkspaceKey]map[uint64]bool {
	out := map[messages.WorkspaceKey]map[uint64]bool{}
	add := func(k messages.WorkspaceKey, ns uint64) {
		if out[k] == nil {
			out[k] = map[uint64]bool{}
		}
		out[k][ns] = true
	}
	for k, ns := range p.Recorded {
		if ns != 0 {
			add(k, ns)
		}
	}
	byPID := make(map[int]*Process, len(t.Procs))
	for i := range t.Procs {
		byPID[t.Procs[i].ID.PID] = &t.Procs[i]
	}
	for _, c := range t.Procs {
		if p.placeOf(c) != placeSandbox {
			continue
		}
		// Only a bwrap of the shape the node makes: one workspace, its
		// command line read whole.
		b, ok := byPID[c.PPID]
		if !ok || p.placeOf(*b) != placeHome || !p.admits(b.UID) || len(b.Names) != 1 || b.Cut {
			continue
		}
		for _, n := range b.Names {
			if n.Verb == VerbBind && !n.Unsure {
				add(n.Key, c.PIDNS)
			}
		}
	}
	return out
}

// Unanchored lists the workspaces some process in a sandbox names with no
// live bwrap of the reader's namespace making that sandbox its: for these
// alone the reader needs the node's records (Provenance.Recorded).
//
// A process that names more than one workspace is a look-alike whatever
// the records say, so it asks for none: an agent's command line naming
// thousands of workspaces costs no read of the node's files.
func (t Table) Unanchored(p Provenance) []messages.WorkspaceKey {
	var out []messages.WorkspaceKey
	seen := map[messages.WorkspaceKey]bool{}
	var anchors map[messages.WorkspaceKey]map[uint64]bool
	need := func(k messages.WorkspaceKey, ns uint64) {
		if anchors == nil {
			anchors = t.anchors(Provenance{Self: p.Self, Users: p.Users})
		}
		if !anchors[k][ns] && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for _, pr := range t.Procs {
		if p.placeOf(pr) != placeSandbox || !p.admits(pr.UID) || len(pr.Names) > 1 {
			continue
		}
		for _, n := range pr.Names {
			need(n.Key, pr.PIDNS)
		}
	}
	for _, u := range t.Unreadable {
		if u.PIDNS == 0 || u.PIDNS == p.Self || p.Self == 0 || len(u.Names) > 1 {
			continue
		}
		for _, n := range u.Names {
			need(n.Key, u.PIDNS)
		}
	}
	return out
}

// SeparateLookAlikes keeps in Procs only what each process may name (D45), and moves
// the rest to LookAlikes, saying why:
//
//   - a process of a user no session runs as names nothing;
//   - one whose command line names more than one workspace names nothing:
//     each process of a session names exactly its own (D78);
//   - one in the reader's own PID namespace names what its command line
//     says;
//   - one in a sandbox names a workspace only if that sandbox is the
//     workspace's (anchors): a look-alike otherwise, and also when its
//     namespace cannot be read but it is known to be below the reader's;
//   - one whose namespace could not be read at all names its workspaces
//     unsure, so that no answer about them is "no".
//
// A process whose command line was cut (Process.Cut) is no session, but
// where it runs it may still be a person's work in the workspace: what it
// names there it names unsure, refusing a launch, never adopted, never
// listed as a session (D78).
//
// A process that vanished while it was read (Unreadable with Names) is a
// look-alike when it was in a sandbox that none of its workspaces' is;
// otherwise it stays unreadable.
func (t *Table) SeparateLookAlikes(p Provenance) {
	var anchors map[messages.WorkspaceKey]map[uint64]bool
	anchored := func(k messages.WorkspaceKey, ns uint64) bool {
		if anchors == nil {
			anchors = t.anchors(p)
		}
		return anchors[k][ns]
	}
	kept := t.Procs[:0:0]
	for _, pr := range t.Procs {
		if len(pr.Names) == 0 {
			continue
		}
		var names []Naming
		why := ""
		switch pl := p.placeOf(pr); {
		case !p.admits(pr.UID):
			why = fmt.Sprintf("it runs as uid %d, which no session of this node runs as", pr.UID)
		case len(pr.Names) > 1:
			why = fmt.Sprintf("its command line names %d workspaces, and each process of a session names its own alone", len(pr.Names))
		case pl == placeHome:
			names = pr.Names
		case pl == placeUnknown:
			names = unsure(pr.Names)
			if pr.Partial == "" {
				pr.Partial = "its PID namespace could not be read"
			}
		case pl == placeBelow:
			why = "it runs in a sandbox (a PID namespace below the node's) whose namespace cannot be read, so it is no sandbox the node made for it"
		case anchored(pr.Names[0].Key, pr.PIDNS):
			names = pr.Names
		default:
			why = fmt.Sprintf("it runs in PID namespace pid:[%d], which is not the sandbox the node made for %s", pr.PIDNS, pr.Names[0].Key)
		}
		if len(names) == 0 {
			t.LookAlikes = append(t.LookAlikes, LookAlike{Process: pr, Why: why})
			continue
		}
		if pr.Cut {
			names = unsure(names)
			pr.Partial = cutWhy
		}
		pr.Names = names
		kept = append(kept, pr)
	}
	t.Procs = kept
	var un []Unreadable
	for _, u := range t.Unreadable {
		if len(u.Names) == 0 || u.PIDNS == 0 || p.Self == 0 || u.PIDNS == p.Self {
			un = append(un, u)
			continue
		}
		mine := false
		for _, n := range u.Names {
			mine = mine || anchored(n.Key, u.PIDNS)
		}
		if mine {
			un = append(un, u)
			continue
		}
		t.LookAlikes = append(t.LookAlikes, LookAlike{
			Process: Process{ID: protocol.ProcID{PID: u.PID}, Names: u.Names, PIDNS: u.PIDNS, UID: -1, Partial: u.Err},
			Why:     fmt.Sprintf("it ran in PID namespace pid:[%d], which is no sandbox the node made for the workspace it named, and ended while it was read", u.PIDNS),
		})
	}
	t.Unreadable = un
}

// cutWhy is the Partial of a process whose command line was cut.
var cutWhy = fmt.Sprintf("its command line is longer than %d bytes, longer than any the node makes: no session, and what it names is read in part", MaxCmdline)

// unsure is names, each unsure.
func unsure(names []Naming) []Naming {
	out := make([]Naming, len(names))
	for i, n := range names {
		n.Unsure = true
		out[i] = n
	}
	return out
}

// LookAlike is a process whose command line names workspaces (its Names)
// it is no session of, and why (SeparateLookAlikes). It blocks no launch, stop,
// withdrawal or collection, is never adopted and never gets a note;
// refusals and the status name it as such.
type LookAlike struct {
	Process
	Why string
}

// String names the look-alike for a refusal, a log or the status: the
// first of the workspaces it claims (messages.MaxLookAlikeClaims), and
// how many more.
func (l LookAlike) String() string {
	n := min(len(l.Names), messages.MaxLookAlikeClaims)
	keys := make([]string, 0, n+1)
	for _, nm := range l.Names[:n] {
		keys = append(keys, nm.Key.String())
	}
	if more := len(l.Names) - n; more > 0 {
		keys = append(keys, fmt.Sprintf("%d more", more))
	}
	s := fmt.Sprintf("pid %d only looks like a session of %s", l.ID.PID, strings.Join(keys, ", "))
	if len(l.Argv) > 0 {
		s += fmt.Sprintf(" (`%s`)", messages.ClipText(messages.CleanText(strings.Join(l.Argv, " ")), 200))
	}
	return s + ": " + l.Why
}

// Claims says whether the look-alike names workspace k.
func (l LookAlike) Claims(k messages.WorkspaceKey) bool {
	for _, n := range l.Names {
		if n.Key == k {
			return true
		}
	}
	return false
}
