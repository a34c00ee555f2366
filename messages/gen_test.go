package messages

import (
	"strconv"
	"strings"
	"time"
	"unicode"

	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/messages/modelapi"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// Generators of valid values, for the property tests. They reach the edges of
// every rule: names of 64 bytes, branches with spaces, '/' and '%', paths with
// dots inside a name, text with newlines, optional fields present and absent.

func genName() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		if rapid.IntRange(0, 9).Draw(t, "long") == 0 {
			return "a" + rapid.StringMatching(`[A-Za-z0-9._-]{63}`).Draw(t, "name64")
		}
		return rapid.StringMatching(`[A-Za-z0-9][A-Za-z0-9._-]{0,20}`).Draw(t, "name")
	})
}

func genLogin() *rapid.Generator[string] {
	return genName().Filter(func(s string) bool {
		if reservedRootName(s) {
			return false
		}
		for _, p := range pseudoUsers {
			if strings.EqualFold(s, p) {
				return false
			}
		}
		return true
	})
}

func genHash() *rapid.Generator[string] {
	return rapid.OneOf(rapid.StringMatching(`[0-9a-f]{40}`), rapid.StringMatching(`[0-9a-f]{64}`))
}

func genTicket() *rapid.Generator[string] { return rapid.StringMatching(`[0-9a-f]{40}`) }

// printable draws a rune that is neither a control character nor invalid;
// multiline adds newlines and tabs.
func printable(multiline bool) *rapid.Generator[rune] {
	extra := []rune("abc /%.:-_'\"\\<>&`{}[]é日€😀\u00a0\u2028")
	if multiline {
		extra = append(extra, '\n', '\t')
	}
	return rapid.OneOf(rapid.SampledFrom(extra), rapid.Rune().Filter(func(r rune) bool { return !unicode.IsControl(r) && r != unicode.ReplacementChar }))
}

func genBranch() *rapid.Generator[string] {
	return rapid.StringOfN(printable(false), 1, 40, maxBranchLen)
}

func genText(required bool) *rapid.Generator[string] {
	min := 0
	if required {
		min = 1
	}
	return rapid.StringOfN(printable(true), min, 60, MaxTextLen)
}

func genLineText(required bool) *rapid.Generator[string] {
	min := 0
	if required {
		min = 1
	}
	return rapid.StringOfN(printable(false), min, 30, MaxShortLen)
}

func genPath() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		segs := rapid.SliceOfN(rapid.OneOf(
			rapid.StringMatching(`[A-Za-z0-9_-][A-Za-z0-9._-]{0,12}`),
			rapid.SampledFrom([]string{"...", ".claude", "..a", "a b", "日本", "x:y", "100%"}),
		), 0, 6).Draw(t, "segs")
		return "/" + strings.Join(segs, "/")
	})
}

func genPaths() *rapid.Generator[[]string] { return rapid.SliceOfN(genPath(), 0, 5) }

func genHomes() *rapid.Generator[[]string] {
	return rapid.SliceOfNDistinct(genPath().Filter(func(p string) bool { return p != "/" }), 0, 4, func(p string) string {
		return p[strings.LastIndexByte(p, '/')+1:]
	})
}

func genPathDirs() *rapid.Generator[[]string] {
	return rapid.SliceOfN(genPath().Filter(func(p string) bool { return !strings.Contains(p, ":") }), 0, 5)
}

func genVersion() *rapid.Generator[int] { return rapid.SampledFrom([]int{0, version}) }

func genArg() *rapid.Generator[string] { return rapid.StringOfN(printable(true), 0, 30, MaxTextLen) }

func genCommand() *rapid.Generator[[]string] {
	return rapid.Custom(func(t *rapid.T) []string {
		first := rapid.StringOfN(printable(true), 1, 20, MaxTextLen).Draw(t, "program")
		rest := rapid.SliceOfN(genArg(), 0, 4).Draw(t, "args")
		return append([]string{first}, rest...)
	})
}

func genSignal() *rapid.Generator[string] {
	return rapid.OneOf(rapid.SampledFrom([]string{"SIGTERM", "SIGKILL", "SIGHUP", "SIGRTMIN+3", "SIGRTMAX-1"}),
		rapid.StringMatching(`SIG[A-Z][A-Z0-9]{0,8}`))
}

func genTime() *rapid.Generator[time.Time] {
	return rapid.Custom(func(t *rapid.T) time.Time {
		sec := rapid.Int64Range(0, 253402300799).Draw(t, "sec") // 1970 to 9999
		nsec := int64(0)
		if rapid.Bool().Draw(t, "frac") {
			nsec = rapid.Int64Range(0, 999999999).Draw(t, "nsec")
		}
		return time.Unix(sec, nsec).UTC()
	})
}

func genOpt(g *rapid.Generator[string]) *rapid.Generator[string] {
	return rapid.OneOf(rapid.Just(""), g)
}

func genProcess() *rapid.Generator[holder] {
	return rapid.Custom(func(t *rapid.T) holder {
		return holder{
			PID:       rapid.IntRange(1, maxPID).Draw(t, "pid"),
			StartTime: rapid.Uint64Range(0, strictjson.MaxSafeInt).Draw(t, "start"),
			Command:   genCommand().Draw(t, "command"),
			StartedBy: rapid.SampledFrom([]Origin{OriginDaemon, OriginTerminal, OriginOrphan}).Draw(t, "by"),
		}
	})
}

func genListener() *rapid.Generator[Listener] {
	return rapid.Custom(func(t *rapid.T) Listener {
		l := Listener{Login: genLogin().Draw(t, "login"), Project: genName().Draw(t, "project"),
			Kind: rapid.SampledFrom([]ListenKind{ListenThread, ListenTicket, ListenBranch}).Draw(t, "kind")}
		switch l.Kind {
		case ListenThread:
			l.Names = genHash().Draw(t, "root")
		case ListenTicket:
			l.Names = genTicket().Draw(t, "ticket")
		default:
			l.Names = genBranch().Draw(t, "branch")
		}
		return l
	})
}

// genNote draws a valid note of the given kind.
func genNote(kind NoteKind) *rapid.Generator[Note] {
	return rapid.Custom(func(t *rapid.T) Note {
		v := genVersion().Draw(t, "version")
		login := genLogin().Draw(t, "login")
		project := genName().Draw(t, "project")
		switch kind {
		case KindWorkspace:
			return &WorkspaceDefinition{Version: v, Login: login, Project: project, Branch: genBranch().Draw(t, "branch"),
				Sandbox: Sandbox{Network: rapid.Bool().Draw(t, "network"), ReadOnly: genPaths().Draw(t, "ro"),
					ReadWrite: genPaths().Draw(t, "rw"), Homes: genHomes().Draw(t, "homes"), Path: genPathDirs().Draw(t, "path")}}
		case KindSession:
			d := &SessionDefinition{Version: v, Lifetime: rapid.SampledFrom([]Lifetime{Completes, Stays}).Draw(t, "lifetime")}
			if rapid.Bool().Draw(t, "mechanical") {
				d.Kind, d.Command = Mechanical, genCommand().Draw(t, "command")
			} else {
				d.Kind, d.Runner, d.Model = LLM, rapid.SampledFrom(Runners).Draw(t, "runner"), genLineText(true).Draw(t, "model")
			}
			d.Hears = genHears().Draw(t, "hears")
			if rapid.Bool().Draw(t, "has-checkins") {
				d.Checkins = genBranches().Draw(t, "checkins")
			}
			wall := rapid.SampledFrom([]string{"", "2h", "90s", "1d"}).Draw(t, "wall")
			var tokens uint64
			if d.Kind == LLM && rapid.Bool().Draw(t, "has-tokens") {
				tokens = rapid.Uint64Range(1, modelapi.MaxTokens).Draw(t, "tokens")
			}
			disk := rapid.SampledFrom([]string{"", "16M", "4G", "1073741824"}).Draw(t, "disk")
			if wall != "" || tokens > 0 || disk != "" {
				d.Limits = &SessionLimits{Wall: wall, Tokens: tokens, Disk: disk}
			}
			d.Result = rapid.SampledFrom([]ResultKind{"", ResultCI, ResultVerdict}).Draw(t, "result")
			if d.Result == ResultVerdict {
				d.Lifetime = Completes
			}
			return d
		case KindLaunch:
			return &LaunchNote{Version: v, Login: login, Project: project, Workspace: genHash().Draw(t, "ws"), Session: genHash().Draw(t, "sess"),
				Release: rapid.SampledFrom([]string{ReleaseCurrent, ReleasePrevious}).Draw(t, "release"), Checkin: genOpt(genHash()).Draw(t, "checkin")}
		case kindRefusal:
			n := &RefusalNote{Version: v, Launch: genHash().Draw(t, "launch"), Login: login, Project: project, Reason: genText(true).Draw(t, "reason")}
			if rapid.Bool().Draw(t, "holder") {
				p := genProcess().Draw(t, "process")
				n.Holder = &p
			}
			return n
		case kindEnd:
			n := &EndNote{Version: v, Launch: genHash().Draw(t, "launch"), Login: login, Project: project,
				PID: rapid.IntRange(1, maxPID).Draw(t, "pid"), StartTime: rapid.Uint64Range(0, strictjson.MaxSafeInt).Draw(t, "start"),
				Status:  rapid.SampledFrom([]endStatus{EndExited, EndSignaled, EndUnknown, EndSandboxFailed}).Draw(t, "status"),
				Release: genLineText(true).Draw(t, "release"), Seen: genTime().Draw(t, "seen"), Note: genText(true).Draw(t, "note")}
			code := rapid.IntRange(0, 255).Draw(t, "code")
			switch n.Status {
			case EndExited:
				n.ExitCode = &code
			case EndSignaled:
				n.Signal, n.Killed = genSignal().Draw(t, "signal"), rapid.Bool().Draw(t, "killed")
			case EndUnknown:
				n.Killed = rapid.Bool().Draw(t, "killed")
			case EndSandboxFailed:
				if rapid.Bool().Draw(t, "known") {
					n.ExitCode = &code
				}
			}
			if n.Status != EndSandboxFailed && rapid.Bool().Draw(t, "budget") {
				n.Budget = rapid.SampledFrom(budgetLimits).Draw(t, "limit")
			}
			if rapid.Bool().Draw(t, "has-usage") {
				n.Usage = genUsage().Draw(t, "usage")
			}
			if rapid.Bool().Draw(t, "ci") {
				n.Checkin = genHash().Draw(t, "checkin")
				n.Result = rapid.SampledFrom([]CIResult{"", CIGreen, CIRed, CIPass, CIFail, CINone}).Draw(t, "result")
			}
			return n
		case KindStop:
			return &StopNote{Version: v, Login: genOpt(genLogin()).Draw(t, "login"), Reason: genText(false).Draw(t, "reason")}
		case KindStopped:
			n := &StoppedNote{Version: v, Login: login, Project: project, Launch: genOpt(genHash()).Draw(t, "launch")}
			switch rapid.IntRange(0, 2).Draw(t, "cause") {
			case 0:
				n.Cause, n.Request = StopByRequest, genHash().Draw(t, "req")
			case 1:
				n.Cause, n.Signal = StopBySignal, genSignal().Draw(t, "signal")
			default:
				n.Cause, n.Budget = StopByBudget, rapid.SampledFrom(stoppedBudgetLimits).Draw(t, "limit")
			}
			return n
		case KindTerminated:
			return &TerminatedNote{Version: v, Login: login, Project: project, Reason: genText(false).Draw(t, "reason")}
		case KindListen:
			return &ListenNote{Version: v, Listener: genListener().Draw(t, "listener")}
		case KindUnlisten:
			return &UnlistenNote{Version: v, Listener: genListener().Draw(t, "listener")}
		case kindUnheard:
			n := &UnheardNote{Version: v, Post: genHash().Draw(t, "post"), Login: login, Project: project,
				Why: rapid.SampledFrom([]UnheardWhy{UnheardNoReader, UnheardNoPipe, UnheardEnded}).Draw(t, "why")}
			if more := rapid.SliceOfNDistinct(genHash(), 0, 4, func(s string) string { return s }).Draw(t, "more"); len(more) > 0 {
				n.Posts = []string{n.Post}
				for _, p := range more {
					if p != n.Post {
						n.Posts = append(n.Posts, p)
					}
				}
				if len(n.Posts) < 2 {
					n.Posts = nil
				}
			}
			return n
		case KindReport:
			return &ReportNote{Version: v, Outcome: rapid.SampledFrom([]reportOutcome{ReportDone, ReportFailed}).Draw(t, "outcome"), Summary: genText(false).Draw(t, "summary")}
		case KindCI:
			tag := genCITag().Draw(t, "tag")
			return &CINote{Version: v, Checkin: genHash().Draw(t, "checkin"), Result: tag.Result, Line: tag.Line}
		}
		panic("no generator for " + string(kind))
	})
}

func genCITag() *rapid.Generator[CITag] {
	return rapid.Custom(func(t *rapid.T) CITag {
		line := strings.TrimSpace(rapid.StringOfN(printable(false), 0, 30, maxCILineLen).Draw(t, "line"))
		return CITag{Result: rapid.SampledFrom([]CIResult{CIGreen, CIRed}).Draw(t, "result"), Line: line}
	})
}

func genState() *rapid.Generator[*NodeState] {
	return rapid.Custom(func(t *rapid.T) *NodeState {
		s := &NodeState{Version: genVersion().Draw(t, "version")}
		for i, p := range rapid.SliceOfNDistinct(genName(), 0, 3, rapid.ID[string]).Draw(t, "hooks") {
			h := HookStatus{Project: p, Repository: "/srv/fossil/" + p + ".fossil", Installed: i%2 == 0,
				Newest: rapid.Uint64Range(0, strictjson.MaxSafeInt).Draw(t, "newest")}
			if rapid.Bool().Draw(t, "has mark") {
				m := rapid.Uint64Range(0, strictjson.MaxSafeInt).Draw(t, "mark")
				h.Mark = &m
			}
			if rapid.Bool().Draw(t, "held") {
				u := genTime().Draw(t, "held until")
				h.HeldUntil = &u
			}
			s.Hooks = append(s.Hooks, h)
		}
		for _, l := range rapid.SliceOfNDistinct(genLogin(), 0, 3, rapid.ID[string]).Draw(t, "logins") {
			ls := LoginStatus{Login: l, Accounts: []AccountStatus{}}
			for _, p := range rapid.SliceOfNDistinct(genName(), 0, 2, rapid.ID[string]).Draw(t, "accounts") {
				ls.Accounts = append(ls.Accounts, AccountStatus{Project: p, Capabilities: rapid.SampledFrom([]string{"", "ijk", "cghijkorw"}).Draw(t, "caps")})
			}
			s.Logins = append(s.Logins, ls)
		}
		for i, l := range rapid.SliceOfNDistinct(genLogin(), 0, 3, rapid.ID[string]).Draw(t, "workspaces") {
			s.Workspaces = append(s.Workspaces, WorkspaceStatus{Login: l, Project: "p" + string(rune('a'+i)), Record: genHash().Draw(t, "record"),
				Branch: genBranch().Draw(t, "branch"), State: rapid.SampledFrom([]WorkspaceCondition{WorkspaceActive, WorkspaceIdle, WorkspaceTerminated, WorkspaceMissing}).Draw(t, "state"),
				Response: rapid.Ptr(rapid.Custom(func(t *rapid.T) ResponseStatus {
					r := genResponse().Draw(t, "response")
					return ResponseStatus{Record: r.Answers, Hash: genHash().Draw(t, "hash"), Outcome: r.Outcome, Note: r.Note}
				}), true).Draw(t, "response")})
		}
		for range rapid.IntRange(0, 3).Draw(t, "sessions") {
			s.Sessions = append(s.Sessions, SessionStatus{Login: genLogin().Draw(t, "login"), Project: genName().Draw(t, "project"),
				Record: genHash().Draw(t, "record"), Launch: genOpt(genHash()).Draw(t, "launch"), PID: rapid.IntRange(1, maxPID).Draw(t, "pid"),
				StartTime: rapid.Uint64Range(0, strictjson.MaxSafeInt).Draw(t, "start"), StartedBy: rapid.SampledFrom([]Origin{OriginDaemon, OriginTerminal, OriginOrphan}).Draw(t, "by"),
				State: rapid.SampledFrom([]sessionActivity{SessionWorking, SessionIdle}).Draw(t, "state"), Listening: rapid.Bool().Draw(t, "listening"),
				Release: genLineText(true).Draw(t, "release"), Older: rapid.Bool().Draw(t, "older"), Hears: genHears().Draw(t, "hears")})
			if rapid.Bool().Draw(t, "has-usage") {
				s.Sessions[len(s.Sessions)-1].Usage = genUsage().Draw(t, "usage")
			}
		}
		s.Listeners = rapid.SliceOfNDistinct(genListener(), 0, 3, func(l Listener) Listener { return l }).Draw(t, "listeners")
		if rapid.Bool().Draw(t, "has daemon") {
			s.Daemon = genDaemonStatus().Draw(t, "daemon")
		}
		s.Restrictions = rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"no_password", "branch", "own_thread"}), 0, 3, func(r string) string { return r }).Draw(t, "restrictions")
		for _, name := range rapid.SliceOfNDistinct(rapid.SampledFrom(Runners), 0, 3, func(r string) string { return r }).Draw(t, "runners") {
			s.Runners = append(s.Runners, RunnerOffer{Name: name, Version: rapid.OneOf(rapid.Just(VersionUnknown), genLineText(true)).Draw(t, "version")})
		}
		if rapid.Bool().Draw(t, "session limits") {
			l := &SessionLimitsStatus{Memory: rapid.Uint64Range(0, strictjson.MaxSafeInt).Draw(t, "memory"), Processes: rapid.Uint64Range(0, 1<<20).Draw(t, "processes")}
			if rapid.Bool().Draw(t, "cgroups") {
				l.Cgroups = "v1 /sys/fs/cgroup/memory /sys/fs/cgroup/pids"
			} else {
				l.NotApplied = genLineText(true).Draw(t, "why")
			}
			if rapid.Bool().Draw(t, "disk") {
				l.Disk = rapid.Uint64Range(minDisk, maxDisk).Draw(t, "disk size")
				if rapid.Bool().Draw(t, "disk not applied") {
					l.DiskNotApplied = genLineText(true).Draw(t, "disk why")
				}
			}
			s.SessionLimits = l
		}
		for i := range rapid.IntRange(0, 2).Draw(t, "verdicts") {
			s.Verdicts = append(s.Verdicts, VerdictStatus{Project: genName().Draw(t, "vproject"), Checkin: genHash().Draw(t, "vcheckin"),
				Branch: "trunk", User: "user-" + strconv.Itoa(i), Verdict: rapid.SampledFrom([]string{VerdictPass, VerdictFail}).Draw(t, "verdict"),
				Reason: genLineText(true).Draw(t, "reason"), Against: "PLAN.md", Tag: genHash().Draw(t, "tag")})
		}
		for i := range rapid.IntRange(0, 2).Draw(t, "reviews") {
			r := ReviewStatus{Project: genName().Draw(t, "rproject"), Login: "rev-" + strconv.Itoa(i), Branch: genBranch().Draw(t, "rbranch"),
				Record: genHash().Draw(t, "rrecord"), Pending: rapid.SliceOfNDistinct(genHash(), 0, 3, func(h string) string { return h }).Draw(t, "pending"),
				Skipped: rapid.IntRange(0, 3).Draw(t, "skipped")}
			if r.Pending == nil {
				r.Pending = []string{}
			}
			s.Reviews = append(s.Reviews, r)
		}
		for range rapid.IntRange(0, 2).Draw(t, "look-alikes") {
			s.LookAlikes = append(s.LookAlikes, LookAlikeStatus{Login: genLogin().Draw(t, "llogin"), Project: genName().Draw(t, "lproject"),
				PID: rapid.IntRange(1, maxPID).Draw(t, "lpid"), StartTime: rapid.Uint64Range(0, strictjson.MaxSafeInt).Draw(t, "lstart"),
				Command: genLineText(true).Draw(t, "command"), Why: genLineText(true).Draw(t, "lwhy"),
				Claims: rapid.SampledFrom([]int{0, 2, 3, 20000, strictjson.MaxSafeInt}).Draw(t, "claims")})
		}
		s.LookAlikesLeftOut = rapid.SampledFrom([]int{0, 0, 1, 57}).Draw(t, "left out")
		if s.Hooks == nil {
			s.Hooks = []HookStatus{}
		}
		if s.Logins == nil {
			s.Logins = []LoginStatus{}
		}
		if s.Workspaces == nil {
			s.Workspaces = []WorkspaceStatus{}
		}
		if s.Sessions == nil {
			s.Sessions = []SessionStatus{}
		}
		return s
	})
}

func genReexecOutcome() *rapid.Generator[*ReexecOutcome] {
	return rapid.Custom(func(t *rapid.T) *ReexecOutcome {
		r := &ReexecOutcome{At: genTime().Draw(t, "at"), PID: rapid.IntRange(1, maxPID).Draw(t, "pid"),
			Target: genOpt(genPath()).Draw(t, "target"), Release: genLineText(false).Draw(t, "release"), OK: rapid.Bool().Draw(t, "ok")}
		if !r.OK {
			r.Error = genText(true).Draw(t, "error")
			r.State = rapid.SampledFrom(append([]string{""}, reexecStates...)).Draw(t, "state")
		}
		r.From = genLineText(false).Draw(t, "from")
		return r
	})
}

func genDaemonStatus() *rapid.Generator[*DaemonStatus] {
	return rapid.Custom(func(t *rapid.T) *DaemonStatus {
		d := &DaemonStatus{Running: rapid.Bool().Draw(t, "running")}
		if d.Running {
			d.PID = rapid.IntRange(1, maxPID).Draw(t, "pid")
			d.Release = genLineText(false).Draw(t, "release")
		}
		if rapid.Bool().Draw(t, "has reexec") {
			d.Reexec = genReexecOutcome().Draw(t, "reexec")
		}
		d.ConfinedOnly = rapid.Bool().Draw(t, "confined only")
		return d
	})
}

// genTokens draws a count of tokens, the cached some of the read.
func genTokens() *rapid.Generator[modelapi.Tokens] {
	return rapid.Custom(func(t *rapid.T) modelapi.Tokens {
		in := rapid.Uint64Range(0, modelapi.MaxTokens).Draw(t, "input")
		return modelapi.Tokens{Input: in, Output: rapid.Uint64Range(0, modelapi.MaxTokens).Draw(t, "output"), Cached: rapid.Uint64Range(0, in).Draw(t, "cached")}
	})
}

// genRunnerReport draws what a runner reports, with a cost or none.
func genRunnerReport() *rapid.Generator[*RunnerReport] {
	return rapid.Custom(func(t *rapid.T) *RunnerReport {
		r := &RunnerReport{Tokens: genTokens().Draw(t, "tokens")}
		if rapid.Bool().Draw(t, "has-cost") {
			r.Cost = costOfMicros(rapid.Uint64Range(0, 1e15).Draw(t, "micros"))
		}
		return r
	})
}

// genUsage draws a session's usage, with or without the node's count and
// the runner's report.
func genUsage() *rapid.Generator[*SessionUsage] {
	return rapid.Custom(func(t *rapid.T) *SessionUsage {
		n := func(l string) uint64 { return rapid.Uint64Range(0, strictjson.MaxSafeInt).Draw(t, l) }
		u := &SessionUsage{Turns: n("turns"), WallMS: n("wall"), CPUMS: n("cpu")}
		if rapid.Bool().Draw(t, "has-model") {
			u.Model = &ModelCount{Requests: n("requests"), Tokens: genTokens().Draw(t, "tokens"), Unread: n("unread"), Refused: n("refused")}
			u.Limit = n("limit")
		}
		if rapid.Bool().Draw(t, "has-runner") {
			u.Runner = genRunnerReport().Draw(t, "runner")
		}
		return u
	})
}

// genUser draws a Fossil login as a receipt names it: any printable line
// without space at either end.
func genUser() *rapid.Generator[string] {
	return rapid.OneOf(genLogin(), rapid.Custom(func(t *rapid.T) string {
		s := rapid.StringOfN(printable(false), 1, 20, 200).Draw(t, "user")
		s = strings.Trim(s, " ")
		if s == "" || s == HearsEveryone {
			return "u"
		}
		return s
	}))
}

// genHears draws a hears list: absent, empty, everyone, or some users.
// genBranches draws one to three distinct branch names.
func genBranches() *rapid.Generator[[]string] {
	return rapid.Custom(func(t *rapid.T) []string {
		return rapid.SliceOfNDistinct(genBranch(), 1, 3, func(b string) string { return b }).Draw(t, "branches")
	})
}

func genHears() *rapid.Generator[[]string] {
	return rapid.Custom(func(t *rapid.T) []string {
		switch rapid.IntRange(0, 3).Draw(t, "hears-kind") {
		case 0:
			return nil
		case 1:
			return []string{}
		case 2:
			return []string{HearsEveryone}
		}
		return rapid.SliceOfNDistinct(genUser(), 1, 4, func(s string) string { return s }).Draw(t, "hears")
	})
}
