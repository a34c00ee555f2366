package messages

import (
	"slices"
	"time"

	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// NodeState is the status JSON the console serves at GET /state
// (docs/design/state.schema.json): hooks, agent logins, workspaces, sessions and
// listeners, derived from the record, the workspace directories and the process
// table. It carries "ocx": "state" like a note, and is read by the same rules:
// unknown keys are ignored, a version other than 1 is refused, naming it.
type NodeState struct {
	Version    int               `json:"-" ocx:"version"`
	Hooks      []HookStatus      `json:"hooks" why:"the state lists it, even when empty"`
	Logins     []LoginStatus     `json:"logins" why:"the state lists it, even when empty"`
	Workspaces []WorkspaceStatus `json:"workspaces" why:"the state lists it, even when empty"`
	Sessions   []SessionStatus   `json:"sessions" why:"the state lists it, even when empty"`
	Listeners  []Listener        `json:"listeners" why:"the state lists it, even when empty"`
	// Daemon is the agents root's daemon: whether one runs, its release,
	// its last re-exec. Absent from a state written before it was added.
	Daemon *DaemonStatus `json:"daemon,omitempty"`
	// Restrictions are the restrictions of protocol v1 E10 this node
	// enforces (D37); absent from a node that enforces none.
	Restrictions []string `json:"restrictions,omitzero"`
	// Runners are the runners this node offers (E9): of the runners the
	// protocol knows (Runners), those whose ocx-runner-NAME is in the
	// current release, each with its version; absent when none is.
	Runners []RunnerOffer `json:"runners,omitzero"`
	// SessionLimits are the limits each session runs under (D46): its
	// cgroup's, with where the cgroups are, or why none can be made.
	// Absent from a state written before it was added.
	SessionLimits *SessionLimitsStatus `json:"session_limits,omitempty"`
	// Verdicts are each user's latest verdict (E6) on the check-ins most
	// recently tagged audited, per project.
	Verdicts []VerdictStatus `json:"verdicts,omitzero"`
	// Reviews are each reviewer's queue (D42): a branch listener whose
	// session's result is verdict, and the check-ins on its branch that wait
	// for its verdict, derived from the record as the daemon derives them.
	Reviews []ReviewStatus `json:"reviews,omitzero"`
	// LookAlikes are the processes whose command lines name a workspace
	// they are no session of (D45): they run in another workspace's
	// sandbox, or as another user. Nothing counts them; the status names
	// them so that a person sees them. Absent when there are none. Each
	// process is listed by the first MaxLookAlikeClaims workspaces it
	// claims, and MaxLookAlikes entries in all (D78): an agent's command
	// line naming thousands of workspaces costs the status a few lines.
	LookAlikes []LookAlikeStatus `json:"look_alikes,omitzero"`
	// LookAlikesLeftOut counts the look-alike processes the list leaves
	// out, past its MaxLookAlikes entries; absent when none is.
	LookAlikesLeftOut int `json:"look_alikes_left_out,omitempty"`
}

// The bounds of the status's look-alikes (D78).
const (
	// MaxLookAlikeClaims is how many of the workspaces one look-alike
	// claims are listed, in the status and in a refusal's words.
	MaxLookAlikeClaims = 3
	// MaxLookAlikes bounds the entries of NodeState.LookAlikes.
	MaxLookAlikes = 100
)

// LookAlikeStatus is one process whose command line claims a workspace it
// is no session of, and why it is not (D45).
type LookAlikeStatus struct {
	Login     string `json:"login" why:"a look-alike names the agent login of the workspace it claims"`
	Project   string `json:"project" why:"a look-alike names the project of the workspace it claims"`
	PID       int    `json:"pid" max:"pid" why:"a process is named by its PID and start time"`
	StartTime uint64 `json:"start_time" why:"a process is named by its PID and start time (clock ticks since boot)"`
	// Command is its command line, clipped.
	Command string `json:"command" why:"a look-alike shows the command line that claims the workspace"`
	// Why says why it is no session of the workspace.
	Why string `json:"why" why:"a look-alike says why it is no session of the workspace"`
	// Claims counts the workspaces the process claims in all, when it
	// claims more than one: the status lists the first
	// MaxLookAlikeClaims of them, each an entry. Absent for one.
	Claims int `json:"claims,omitempty"`
}

// String renders the look-alike on one line.
func (l LookAlikeStatus) String() string {
	s := fmt.Sprintf("look-alike %s/%s pid=%d start_time=%d command=%s why=%s", Token(l.Login), Token(l.Project), l.PID, l.StartTime, Token(l.Command), Token(l.Why))
	if l.Claims > 0 {
		s += fmt.Sprintf(" claims=%d", l.Claims)
	}
	return s
}

func (l *LookAlikeStatus) validate(f string) error {
	if err := CheckLogin(strictjson.JoinField(f, "login"), l.Login); err != nil {
		return err
	}
	if err := CheckProject(strictjson.JoinField(f, "project"), l.Project); err != nil {
		return err
	}
	if err := checkPID(strictjson.JoinField(f, "pid"), l.PID); err != nil {
		return err
	}
	if err := checkStartTime(strictjson.JoinField(f, "start_time"), l.StartTime); err != nil {
		return err
	}
	if err := CheckLine(strictjson.JoinField(f, "command"), l.Command, true, MaxShortLen); err != nil {
		return err
	}
	if l.Claims == 1 || l.Claims < 0 || l.Claims > strictjson.MaxSafeInt {
		return strictjson.FieldErr(strictjson.JoinField(f, "claims"), strictjson.ErrInvalid, fmt.Sprintf("is %d; a look-alike that claims more than one workspace counts them (2 or more), one that claims one says nothing", l.Claims))
	}
	return CheckLine(strictjson.JoinField(f, "why"), l.Why, true, MaxShortLen)
}

// ReviewStatus is one reviewer's queue on a branch (D42): the check-ins on
// the branch received after its listen note without its verdict, oldest
// first, and how many it may never judge (E6: its own).
type ReviewStatus struct {
	Project string `json:"project" why:"a review names its project"`
	Login   string `json:"login" why:"a review names the reviewer's agent login"`
	Branch  string `json:"branch" why:"a review names the branch it listens to"`
	Record  string `json:"record" why:"a review names the reviewer's own record"`
	// Pending are the check-ins that wait for its verdict, in the server's
	// order.
	Pending []string `json:"pending" why:"a review lists the check-ins that wait, even none"`
	// Skipped counts the check-ins it may never judge.
	Skipped int `json:"skipped,omitempty"`
}

// String renders the review on one line.
func (r ReviewStatus) String() string {
	s := fmt.Sprintf("%s %s on %s: %d waiting", r.Project, r.Login, r.Branch, len(r.Pending))
	for i, h := range r.Pending {
		if i == 0 {
			s += ":"
		}
		s += " " + h[:min(len(h), 10)]
	}
	if r.Skipped > 0 {
		s += fmt.Sprintf(" (%d its own, never judged)", r.Skipped)
	}
	return s
}

func (r *ReviewStatus) validate(f string) error {
	if err := CheckProject(strictjson.JoinField(f, "project"), r.Project); err != nil {
		return err
	}
	if err := CheckLogin(strictjson.JoinField(f, "login"), r.Login); err != nil {
		return err
	}
	if err := CheckBranch(strictjson.JoinField(f, "branch"), r.Branch); err != nil {
		return err
	}
	if err := CheckHash(strictjson.JoinField(f, "record"), r.Record); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, h := range r.Pending {
		pf := strictjson.IndexField(strictjson.JoinField(f, "pending"), i)
		if err := CheckHash(pf, h); err != nil {
			return err
		}
		if seen[h] {
			return strictjson.FieldErr(pf, strictjson.ErrInvalid, "names a check-in twice")
		}
		seen[h] = true
	}
	if r.Skipped < 0 {
		return strictjson.FieldErr(strictjson.JoinField(f, "skipped"), strictjson.ErrInvalid, "is below 0")
	}
	return nil
}

// SessionLimitsStatus is what the node holds each session to (D46): the
// memory and processes of its cgroup (node.json's session_limits, the
// defaults filled in), and Cgroups, where they are made; or NotApplied,
// why no cgroup can be made on this host, and sessions run without them.
type SessionLimitsStatus struct {
	Memory     uint64 `json:"memory,omitempty"` // bytes; 0 for none
	Processes  uint64 `json:"processes,omitempty"`
	Cgroups    string `json:"cgroups,omitempty"`
	NotApplied string `json:"not_applied,omitempty"`
	// Disk is the size of each workspace's own file system (node.json's
	// session_limits.disk, D82), bytes; 0 when node.json gives none.
	Disk uint64 `json:"disk,omitempty"`
	// DiskNotApplied says why Disk is not applied on this host (no loop
	// devices, not root, no mkfs.ext4): workspaces are then made on the
	// host's file system, and a limits.disk is refused.
	DiskNotApplied string `json:"disk_not_applied,omitempty"`
}

// String renders the limits on one line.
func (l SessionLimitsStatus) String() string {
	s := "memory " + strconv.FormatUint(l.Memory, 10) + " bytes, processes " + strconv.FormatUint(l.Processes, 10)
	if l.NotApplied != "" {
		s += ", not applied: " + l.NotApplied
	} else {
		s += ", in cgroups " + l.Cgroups
	}
	switch {
	case l.Disk > 0 && l.DiskNotApplied != "":
		s += "; disk " + strconv.FormatUint(l.Disk, 10) + " bytes, not applied: " + l.DiskNotApplied
	case l.Disk > 0:
		s += "; disk " + strconv.FormatUint(l.Disk, 10) + " bytes, a file system of its own for each workspace"
	}
	return s
}

func (l *SessionLimitsStatus) validate(f string) error {
	if (l.Cgroups == "") == (l.NotApplied == "") {
		return strictjson.FieldErr(f, strictjson.ErrInvalid, "says where the cgroups are (cgroups) or why there are none (not_applied), one of the two")
	}
	if err := CheckLine(strictjson.JoinField(f, "cgroups"), l.Cgroups, false, MaxShortLen); err != nil {
		return err
	}
	if l.DiskNotApplied != "" && l.Disk == 0 {
		return strictjson.FieldErr(strictjson.JoinField(f, "disk_not_applied"), strictjson.ErrInvalid, "says why a disk is not applied, and node.json gives none (disk)")
	}
	if err := CheckLine(strictjson.JoinField(f, "disk_not_applied"), l.DiskNotApplied, false, MaxShortLen); err != nil {
		return err
	}
	return CheckLine(strictjson.JoinField(f, "not_applied"), l.NotApplied, false, MaxShortLen)
}

// RunnerOffer is a runner a node offers and the version it says it is
// (its --version line), "unknown" when it does not say.
type RunnerOffer struct {
	Name    string `json:"name" why:"an offered runner is named"`
	Version string `json:"version" why:"an offered runner says its version, or unknown"`
}

// VersionUnknown is the version of a runner that does not answer --version.
const VersionUnknown = "unknown"

// VerdictStatus is one user's latest verdict on a check-in (E6): from the
// audited tag's history, counting only a user that neither sent the
// check-in nor is the user Fossil records in it.
type VerdictStatus struct {
	Project string `json:"project" why:"a verdict is on a project's check-in"`
	Checkin string `json:"checkin" why:"a verdict names its check-in"`
	Branch  string `json:"branch" why:"a verdict names its check-in's branch"`
	User    string `json:"user" why:"a verdict names the user that sent it"`
	Verdict string `json:"verdict" why:"a verdict is pass or fail"`
	Reason  string `json:"reason" why:"a verdict gives its reason"`
	Against string `json:"against" why:"a verdict names what it was judged against"`
	// Tag is the tag change that carries it.
	Tag string `json:"tag" why:"a verdict names the tag change that carries it"`
}

// String renders the verdict on one line.
func (v VerdictStatus) String() string {
	return fmt.Sprintf("%s %s on %s by %s: %s: %s (against %s)", v.Project, v.Checkin[:min(len(v.Checkin), 10)], v.Branch, v.User, v.Verdict, v.Reason, v.Against)
}

func (v *VerdictStatus) validate(f string) error {
	if err := CheckProject(strictjson.JoinField(f, "project"), v.Project); err != nil {
		return err
	}
	for k, h := range map[string]string{"checkin": v.Checkin, "tag": v.Tag} {
		if err := CheckHash(strictjson.JoinField(f, k), h); err != nil {
			return err
		}
	}
	if err := CheckBranch(strictjson.JoinField(f, "branch"), v.Branch); err != nil {
		return err
	}
	if err := CheckUser(strictjson.JoinField(f, "user"), v.User); err != nil {
		return err
	}
	if v.Verdict != VerdictPass && v.Verdict != VerdictFail {
		return strictjson.FieldErr(strictjson.JoinField(f, "verdict"), strictjson.ErrInvalid, fmt.Sprintf("%s is not a verdict (pass, fail)", strictjson.QuoteShort(v.Verdict)))
	}
	if err := CheckLine(strictjson.JoinField(f, "reason"), v.Reason, true, MaxTextLen); err != nil {
		return err
	}
	return CheckLine(strictjson.JoinField(f, "against"), v.Against, true, MaxPathLen)
}

// HookStatus says whether the wake hook is installed on a repository of the
// login group.
type HookStatus struct {
	Project    string `json:"project" why:"a hook names its project"`
	Repository string `json:"repository" why:"a hook names its repository file"`
	Installed  bool   `json:"installed" why:"a hook says whether it is installed"`
	// Newest is the repository's newest receipt (its max rcvid); 0 when it
	// received nothing, or was not read.
	Newest uint64 `json:"newest,omitempty"`
	// Mark is the newest receipt the hook handled (AGENTS/hook.mark.PROJECT);
	// nil when it keeps no mark. Behind Newest for more than a moment, the
	// hook is held back, and the daemon runs it (D24).
	Mark *uint64 `json:"mark,omitempty"`
	// HeldUntil is when Fossil's embargo on its hooks ends (it renews it
	// after each push it answers with gimme cards, for as long as a phantom
	// lasts); nil when none holds.
	HeldUntil *time.Time `json:"held_until,omitempty"`
}

// LoginStatus is an agent login and the repositories it has an account on.
type LoginStatus struct {
	Login    string          `json:"login" why:"an agent login has a name"`
	Accounts []AccountStatus `json:"accounts" why:"a login lists its accounts, even when it has none"`
}

// AccountStatus is a login's account on one project's repository, with its
// Fossil capability letters ("" once withdrawn).
type AccountStatus struct {
	Project      string `json:"project" why:"an account is on a project's repository"`
	Capabilities string `json:"capabilities" why:"an account has its capability letters"`
}

// WorkspaceCondition is where a workspace stands.
type WorkspaceCondition string

// The conditions of a workspace.
const (
	// WorkspaceActive: a running process names it.
	WorkspaceActive WorkspaceCondition = "active"
	// WorkspaceIdle: it is on the host and no process names it.
	WorkspaceIdle WorkspaceCondition = "idle"
	// WorkspaceTerminated: a terminated note ends it.
	WorkspaceTerminated WorkspaceCondition = "terminated"
	// WorkspaceMissing: its definition is on the record but it is not on the host.
	WorkspaceMissing WorkspaceCondition = "missing"
)

// WorkspaceStatus is one workspace: its key, its record (the thread whose first
// post defines it), its branch and its condition.
type WorkspaceStatus struct {
	Login   string             `json:"login" why:"the note names the agent login of its workspace"`
	Project string             `json:"project" why:"the note names the project of its workspace"`
	Record  string             `json:"record" why:"a workspace names its record"`
	Branch  string             `json:"branch" why:"a workspace names its branch"`
	State   WorkspaceCondition `json:"state" why:"a workspace is active, idle, terminated or missing"`
	// Response is the response its login wrote to the protocol v1 record
	// its last session ran (D51), as the record holds it; absent when
	// that session's record is none, or it has none.
	Response *ResponseStatus `json:"response,omitempty"`
}

// ResponseStatus is a v1 record's response (seed 001 E5, D51), as the
// status shows it.
type ResponseStatus struct {
	Record  string          `json:"record" why:"a response names the record it answers"`
	Hash    string          `json:"hash" why:"a response is a post, named by its hash"`
	Outcome ResponseOutcome `json:"outcome" why:"a response says how the run ended"`
	Note    string          `json:"note" why:"a response says the end in words"`
}

func (r *ResponseStatus) validate(f string) error {
	if err := CheckHash(strictjson.JoinField(f, "record"), r.Record); err != nil {
		return err
	}
	if err := CheckHash(strictjson.JoinField(f, "hash"), r.Hash); err != nil {
		return err
	}
	resp := Response{Answers: r.Record, Outcome: r.Outcome, Note: r.Note}
	return prefixField(f, resp.Validate())
}

// prefixField puts a field path in front of a *FieldError's field.
func prefixField(f string, err error) error {
	var fe *strictjson.FieldError
	if errors.As(err, &fe) {
		fe.Field = strictjson.JoinField(f, fe.Field)
	}
	return err
}

// sessionActivity says whether a session is in a turn.
type sessionActivity string

// The activities of a running session.
const (
	SessionWorking sessionActivity = "working"
	SessionIdle    sessionActivity = "idle"
)

// SessionStatus is one running process that names a workspace, from the
// process table.
type SessionStatus struct {
	Login   string `json:"login" why:"the note names the agent login of its workspace"`
	Project string `json:"project" why:"the note names the project of its workspace"`
	// Record is the session's own record: a thread's root post or a ticket's id.
	Record string `json:"record" why:"a session names its own record"`
	// Launch is the launch note it serves; a terminal session has none.
	Launch    string          `json:"launch,omitempty"`
	PID       int             `json:"pid" max:"pid" why:"a process is named by its PID and start time"`
	StartTime uint64          `json:"start_time" why:"a process is named by its PID and start time (clock ticks since boot)"`
	StartedBy Origin          `json:"started_by" why:"a session says how it was started: daemon, terminal or orphan"`
	State     sessionActivity `json:"state" why:"a session is working or idle"`
	// Listening says a process holds its wake pipe open for reading.
	Listening bool `json:"listening" why:"a session says whether a process holds its wake pipe"`
	// Release is the release it runs, named as an end note names it.
	Release string `json:"release" why:"a session names the release it runs"`
	// Older says its release is older than the current one.
	Older bool `json:"older" why:"a session says whether its release is older than the current one"`
	// Hears are the users whose posts wake it (its definition's hears, or
	// the users holding admin or setup when it started), as the daemon wrote
	// them for the hook (AGENTS/LOGIN/held/PROJECT/hears); absent when none were written,
	// as for a session a release before this one started.
	Hears []string `json:"hears,omitzero"`
	// Usage is its use of the node so far (D50): the node's count of its
	// model (what limits.tokens decides by), its turns as it measured them
	// and what its runner reported of itself. Absent when neither was
	// read.
	Usage *SessionUsage `json:"usage,omitempty"`
}

// Validate checks every entry, and that hooks, logins, workspaces and
// listeners each appear once.
func (s *NodeState) Validate() error {
	if err := checkVersion(s.Version); err != nil {
		return err
	}
	seen := map[string]string{}
	once := func(field, key string) error {
		if prev, dup := seen[key]; dup {
			return strictjson.FieldErr(field, strictjson.ErrInvalid, "repeats "+prev)
		}
		seen[key] = field
		return nil
	}
	for i, h := range s.Hooks {
		f := strictjson.IndexField("hooks", i)
		if err := h.validate(f); err != nil {
			return err
		}
		if err := once(f, "hook "+h.Repository); err != nil {
			return err
		}
		if err := h.validateCounts(f); err != nil {
			return err
		}
	}
	for i, l := range s.Logins {
		f := strictjson.IndexField("logins", i)
		if err := CheckLogin(strictjson.JoinField(f, "login"), l.Login); err != nil {
			return err
		}
		if err := once(f, "login "+l.Login); err != nil {
			return err
		}
		if err := l.validateAccounts(f); err != nil {
			return err
		}
	}
	for i, w := range s.Workspaces {
		f := strictjson.IndexField("workspaces", i)
		if err := w.validate(f); err != nil {
			return err
		}
		if err := once(f, w.key()); err != nil {
			return err
		}
	}
	for i, p := range s.Sessions {
		if err := p.validate(strictjson.IndexField("sessions", i)); err != nil {
			return err
		}
	}
	for i, l := range s.Listeners {
		f := strictjson.IndexField("listeners", i)
		if err := l.validate(f); err != nil {
			return err
		}
		if err := once(f, listenerKey(l)); err != nil {
			return err
		}
	}
	if s.Daemon != nil {
		if err := s.Daemon.validate("daemon"); err != nil {
			return err
		}
	}
	if err := s.validateOffers(once); err != nil {
		return err
	}
	if s.SessionLimits != nil {
		if err := s.SessionLimits.validate("session_limits"); err != nil {
			return err
		}
	}
	return s.validateReviews(once)
}

// validateReviews checks the look-alikes, the verdicts and the reviews,
// each verdict and review once.
func (s *NodeState) validateReviews(once func(field, key string) error) error {
	for i, l := range s.LookAlikes {
		if err := l.validate(strictjson.IndexField("look_alikes", i)); err != nil {
			return err
		}
	}
	if s.LookAlikesLeftOut < 0 || s.LookAlikesLeftOut > strictjson.MaxSafeInt {
		return strictjson.FieldErr("look_alikes_left_out", strictjson.ErrInvalid, fmt.Sprintf("is %d; it counts the look-alikes left out", s.LookAlikesLeftOut))
	}
	for i, v := range s.Verdicts {
		f := strictjson.IndexField("verdicts", i)
		if err := v.validate(f); err != nil {
			return err
		}
		if err := once(f, v.key()); err != nil {
			return err
		}
	}
	for i, r := range s.Reviews {
		f := strictjson.IndexField("reviews", i)
		if err := r.validate(f); err != nil {
			return err
		}
		if err := once(f, r.key()); err != nil {
			return err
		}
	}
	return nil
}

// validateOffers checks the restrictions and the runners the node offers,
// each once.
func (s *NodeState) validateOffers(once func(field, key string) error) error {
	for i, r := range s.Restrictions {
		f := strictjson.IndexField("restrictions", i)
		if r != "no_password" && r != "branch" && r != "own_thread" {
			return strictjson.FieldErr(f, strictjson.ErrInvalid, fmt.Sprintf("%s is not a restriction (no_password, branch, own_thread)", strictjson.QuoteShort(r)))
		}
		if err := once(f, "restriction "+r); err != nil {
			return err
		}
	}
	for i, r := range s.Runners {
		f := strictjson.IndexField("runners", i)
		if !slices.Contains(Runners, r.Name) {
			return strictjson.FieldErr(f+".name", strictjson.ErrInvalid, fmt.Sprintf("%s is not a runner (%s)", strictjson.QuoteShort(r.Name), strictjson.ListWords(Runners)))
		}
		if err := once(f, "runner "+r.Name); err != nil {
			return err
		}
		if err := CheckLine(f+".version", r.Version, true, MaxShortLen); err != nil {
			return err
		}
	}
	return nil
}

func (h *HookStatus) validate(f string) error {
	if err := CheckProject(strictjson.JoinField(f, "project"), h.Project); err != nil {
		return err
	}
	if err := CheckRepository(strictjson.JoinField(f, "repository"), h.Repository); err != nil {
		return err
	}
	if ProjectOf(h.Repository) != h.Project {
		return strictjson.FieldErr(strictjson.JoinField(f, "repository"), strictjson.ErrInvalid, fmt.Sprintf("%s does not hold project %q", strictjson.QuoteShort(h.Repository), h.Project))
	}
	return nil
}

// validateCounts checks the hook's receipts and its hold.
func (h *HookStatus) validateCounts(f string) error {
	if h.Newest > strictjson.MaxSafeInt {
		return strictjson.FieldErr(strictjson.JoinField(f, "newest"), strictjson.ErrInvalid, fmt.Sprintf("%d is past 2^53-1", h.Newest))
	}
	if h.Mark != nil && *h.Mark > strictjson.MaxSafeInt {
		return strictjson.FieldErr(strictjson.JoinField(f, "mark"), strictjson.ErrInvalid, fmt.Sprintf("%d is past 2^53-1", *h.Mark))
	}
	if h.HeldUntil != nil {
		return checkTime(strictjson.JoinField(f, "held_until"), *h.HeldUntil)
	}
	return nil
}

// validateAccounts checks the login's accounts, one per project.
func (l *LoginStatus) validateAccounts(f string) error {
	projects := map[string]bool{}
	for j, a := range l.Accounts {
		af := strictjson.IndexField(strictjson.JoinField(f, "accounts"), j)
		if err := CheckProject(strictjson.JoinField(af, "project"), a.Project); err != nil {
			return err
		}
		if projects[a.Project] {
			return strictjson.FieldErr(af, strictjson.ErrInvalid, fmt.Sprintf("repeats the account on %q", a.Project))
		}
		projects[a.Project] = true
		if err := checkCapabilities(strictjson.JoinField(af, "capabilities"), a.Capabilities); err != nil {
			return err
		}
	}
	return nil
}

func (w *WorkspaceStatus) validate(f string) error {
	if err := CheckLogin(strictjson.JoinField(f, "login"), w.Login); err != nil {
		return err
	}
	if err := CheckProject(strictjson.JoinField(f, "project"), w.Project); err != nil {
		return err
	}
	if err := CheckHash(strictjson.JoinField(f, "record"), w.Record); err != nil {
		return err
	}
	if err := CheckBranch(strictjson.JoinField(f, "branch"), w.Branch); err != nil {
		return err
	}
	switch w.State {
	case WorkspaceActive, WorkspaceIdle, WorkspaceTerminated, WorkspaceMissing:
	default:
		return strictjson.FieldErr(strictjson.JoinField(f, "state"), strictjson.ErrInvalid, fmt.Sprintf("%s is not a workspace's state (active, idle, terminated, missing)", strictjson.QuoteShort(string(w.State))))
	}
	if w.Response != nil {
		return w.Response.validate(strictjson.JoinField(f, "response"))
	}
	return nil
}

// The keys Validate allows once per state.
func (w *WorkspaceStatus) key() string { return "workspace " + w.Login + "/" + w.Project }
func listenerKey(l Listener) string {
	return "listener " + l.Login + "/" + l.Project + " " + string(l.Kind) + " " + l.Names
}
func (v *VerdictStatus) key() string { return "verdict " + v.Project + " " + v.Checkin + " " + v.User }
func (r *ReviewStatus) key() string  { return "review " + r.Project + " " + r.Login + " " + r.Branch }

// Prune removes from the lists the record gives (workspaces, sessions,
// listeners, verdicts and reviews) each entry Validate would refuse, and
// each that repeats an earlier one, and says why it removed each: one bad
// artifact (a branch name, a verdict, a note the status cannot carry)
// costs only its own entry, never the whole state (issue 22 item 5).
// What is left validates as far as those lists go; the node's own parts
// (hooks, logins, the daemon, restrictions, runners) are Validate's alone.
func (s *NodeState) Prune() []error {
	var out []error
	seen := map[string]bool{}
	keep := func(f string, err error, key string) bool {
		if err == nil && key != "" && seen[key] {
			err = strictjson.FieldErr(f, strictjson.ErrInvalid, "repeats "+key)
		}
		if err != nil {
			out = append(out, err)
			return false
		}
		if key != "" {
			seen[key] = true
		}
		return true
	}
	ws := s.Workspaces[:0]
	for i, w := range s.Workspaces {
		if keep(strictjson.IndexField("workspaces", i), w.validate(strictjson.IndexField("workspaces", i)), w.key()) {
			ws = append(ws, w)
		}
	}
	s.Workspaces = ws
	ss := s.Sessions[:0]
	for i, p := range s.Sessions {
		if keep(strictjson.IndexField("sessions", i), p.validate(strictjson.IndexField("sessions", i)), "") {
			ss = append(ss, p)
		}
	}
	s.Sessions = ss
	ls := s.Listeners[:0]
	for i, l := range s.Listeners {
		if keep(strictjson.IndexField("listeners", i), l.validate(strictjson.IndexField("listeners", i)), listenerKey(l)) {
			ls = append(ls, l)
		}
	}
	s.Listeners = ls
	vs := s.Verdicts[:0]
	for i, v := range s.Verdicts {
		if keep(strictjson.IndexField("verdicts", i), v.validate(strictjson.IndexField("verdicts", i)), v.key()) {
			vs = append(vs, v)
		}
	}
	s.Verdicts = vs
	rs := s.Reviews[:0]
	for i, r := range s.Reviews {
		if keep(strictjson.IndexField("reviews", i), r.validate(strictjson.IndexField("reviews", i)), r.key()) {
			rs = append(rs, r)
		}
	}
	s.Reviews = rs
	return out
}

func (p *SessionStatus) validate(f string) error {
	if err := CheckLogin(strictjson.JoinField(f, "login"), p.Login); err != nil {
		return err
	}
	if err := CheckHears(strictjson.JoinField(f, "hears"), p.Hears); err != nil {
		return err
	}
	if err := CheckProject(strictjson.JoinField(f, "project"), p.Project); err != nil {
		return err
	}
	if err := CheckHash(strictjson.JoinField(f, "record"), p.Record); err != nil {
		return err
	}
	if err := checkOptHash(strictjson.JoinField(f, "launch"), p.Launch); err != nil {
		return err
	}
	if err := checkPID(strictjson.JoinField(f, "pid"), p.PID); err != nil {
		return err
	}
	if err := checkStartTime(strictjson.JoinField(f, "start_time"), p.StartTime); err != nil {
		return err
	}
	if err := checkOrigin(strictjson.JoinField(f, "started_by"), p.StartedBy); err != nil {
		return err
	}
	switch p.State {
	case SessionWorking, SessionIdle:
	default:
		return strictjson.FieldErr(strictjson.JoinField(f, "state"), strictjson.ErrInvalid, fmt.Sprintf("%s is not a session's state (working, idle)", strictjson.QuoteShort(string(p.State))))
	}
	if p.Usage != nil {
		if err := p.Usage.validate(strictjson.JoinField(f, "usage")); err != nil {
			return err
		}
	}
	return CheckLine(strictjson.JoinField(f, "release"), p.Release, true, MaxShortLen)
}

// checkCapabilities checks Fossil capability letters: letters and digits, each once.
func checkCapabilities(field, s string) error {
	if len(s) > 62 {
		return strictjson.FieldErr(field, strictjson.ErrTooLong, fmt.Sprintf("is %d letters; Fossil has at most 62 capabilities", len(s)))
	}
	var seen [128]bool
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s holds %q; capabilities are letters and digits", strictjson.QuoteShort(s), rune(c)))
		}
		if seen[c] {
			return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s names %q twice", strictjson.QuoteShort(s), rune(c)))
		}
		seen[c] = true
	}
	return nil
}

// DecodeState reads and validates the status JSON.
func DecodeState(data []byte) (*NodeState, error) {
	const where = "state"
	v, err := strictjson.Parse(data, strictjson.MaxStateLen)
	if err != nil {
		return nil, strictjson.At(where, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &strictjson.FieldError{Where: where, Problem: "is " + strictjson.JSONType(v) + "; the state is a JSON object", Err: strictjson.ErrInvalid}
	}
	o := strictjson.Obj{Map: m}
	kind, err := o.Str("ocx", true, `the state says "ocx": "state"`)
	if err != nil {
		return nil, strictjson.At(where, err)
	}
	if NoteKind(kind) != kindState {
		return nil, &strictjson.FieldError{Where: where, Field: "ocx", Problem: fmt.Sprintf("is %s; the state says \"state\"", strictjson.QuoteShort(kind)), Err: strictjson.ErrWrongKind}
	}
	if err := readVersion(o); err != nil {
		return nil, strictjson.At(where, err)
	}
	s := &NodeState{}
	if err := Fill(o, s); err != nil {
		return nil, strictjson.At(where, err)
	}
	if err := s.Validate(); err != nil {
		return nil, strictjson.At(where, err)
	}
	return s, nil
}

// Encode validates the state and renders it as GET /state serves it: JSON with
// "ocx" first, indented by two spaces, and a newline. Nil lists are written as [].
func (s *NodeState) Encode() ([]byte, error) {
	c := *s
	if c.Hooks == nil {
		c.Hooks = []HookStatus{}
	}
	if c.Logins == nil {
		c.Logins = []LoginStatus{}
	}
	c.Logins = append(make([]LoginStatus, 0, len(c.Logins)), c.Logins...)
	for i := range c.Logins {
		if c.Logins[i].Accounts == nil {
			c.Logins[i].Accounts = []AccountStatus{}
		}
	}
	if c.Workspaces == nil {
		c.Workspaces = []WorkspaceStatus{}
	}
	if c.Sessions == nil {
		c.Sessions = []SessionStatus{}
	}
	if c.Listeners == nil {
		c.Listeners = []Listener{}
	}
	if c.Daemon != nil {
		d := *c.Daemon
		if d.Reexec != nil {
			r := *d.Reexec
			r.At = r.At.UTC()
			d.Reexec = &r
		}
		c.Daemon = &d
	}
	if err := c.Validate(); err != nil {
		return nil, strictjson.At("state", err)
	}
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&c); err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	var flat bytes.Buffer
	flat.WriteString(`{"ocx":"state"`)
	if c.Version != 0 {
		flat.WriteString(`,"version":` + strconv.Itoa(c.Version))
	}
	flat.WriteByte(',')
	flat.Write(bytes.TrimSpace(body.Bytes())[1:])
	var out bytes.Buffer
	if err := json.Indent(&out, flat.Bytes(), "", "  "); err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// CheckStateDoc checks the framing of a state document as Encode writes
// it, read from the daemon (D70): a caller that prints the document
// copies it without decoding it, so a document cut short or of another
// kind is refused naming what is wrong. What it holds was validated as
// it was encoded; a caller that reads it decodes it (DecodeState).
func CheckStateDoc(doc []byte) error {
	const head = "{\n  \"ocx\": \"state\","
	switch {
	case !bytes.HasPrefix(doc, []byte(head)):
		return &strictjson.FieldError{Where: "state", Problem: "does not begin as a state document does ({\"ocx\": \"state\", ...)", Err: strictjson.ErrInvalid}
	case !bytes.HasSuffix(doc, []byte("\n}\n")):
		return &strictjson.FieldError{Where: "state", Problem: "does not end as a state document does (a closing brace and a newline): it is cut short", Err: strictjson.ErrInvalid}
	}
	return nil
}

// String renders a summary of the state on one line.
func (s *NodeState) String() string {
	active := 0
	for _, w := range s.Workspaces {
		if w.State == WorkspaceActive {
			active++
		}
	}
	listening := 0
	for _, p := range s.Sessions {
		if p.Listening {
			listening++
		}
	}
	return Render(kindState).version(s.Version).KV("hooks", strconv.Itoa(len(s.Hooks))).
		KV("logins", strconv.Itoa(len(s.Logins))).KV("workspaces", strconv.Itoa(len(s.Workspaces))).
		KV("active", strconv.Itoa(active)).KV("sessions", strconv.Itoa(len(s.Sessions))).
		KV("listening", strconv.Itoa(listening)).KV("listeners", strconv.Itoa(len(s.Listeners))).String()
}

// String renders one session of the state on one line.
func (p SessionStatus) String() string {
	s := fmt.Sprintf("session %s/%s record=%s pid=%d start_time=%d started_by=%s state=%s listening=%t release=%s older=%t",
		Token(p.Login), Token(p.Project), Token(p.Record), p.PID, p.StartTime, Token(string(p.StartedBy)), Token(string(p.State)), p.Listening, Token(p.Release), p.Older)
	if p.Hears != nil {
		hs := make([]string, len(p.Hears))
		for i, h := range p.Hears {
			hs[i] = Token(h)
		}
		s += " hears=[" + strings.Join(hs, " ") + "]"
	}
	if u := p.Usage; u != nil {
		s += u.fields()
	}
	return s
}

// String renders the hook's state on one line.
func (h HookStatus) String() string {
	s := fmt.Sprintf("hook %s repository=%s installed=%t newest=%d", Token(h.Project), Token(h.Repository), h.Installed, h.Newest)
	if h.Mark != nil {
		s += fmt.Sprintf(" mark=%d", *h.Mark)
	}
	if h.HeldUntil != nil {
		s += " held_until=" + h.HeldUntil.UTC().Format(time.RFC3339)
	}
	return s
}

// String renders the login and its accounts on one line.
func (l LoginStatus) String() string {
	parts := make([]string, len(l.Accounts))
	for i, a := range l.Accounts {
		parts[i] = a.String()
	}
	return "login " + Token(l.Login) + " accounts=" + tokens(parts)
}

// String renders the account as PROJECT:CAPABILITIES.
func (a AccountStatus) String() string { return Token(a.Project) + ":" + Token(a.Capabilities) }

// String renders the workspace's state on one line.
func (w WorkspaceStatus) String() string {
	s := fmt.Sprintf("workspace %s/%s record=%s branch=%s state=%s", Token(w.Login), Token(w.Project), Token(w.Record), Token(w.Branch), Token(string(w.State)))
	if w.Response != nil {
		s += fmt.Sprintf(" response=%s outcome=%s", Token(w.Response.Hash), Token(string(w.Response.Outcome)))
	}
	return s
}
