package console

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/workspaces"
	"github.com/ocx-go/ocx/messages"
)

// The pages of seed 000, each reading what it shows.

const logTail = 16 << 10

// status is the node's status, from the daemon's live record when it
// answers (D66); a page read from the repository itself says so.
func (q *request) status() (*messages.NodeState, error) {
	st, why, err := q.n.LiveStatus(q.ctx)
	if why != "" {
		q.readItself = "This page read the repository itself: " + why
	}
	return st, err
}

type hookData struct {
	Hooks        []messages.HookStatus
	AllInstalled bool
}

func (q *request) hookPage() {
	hooks, a := q.n.HookStatus(q.ctx)
	var err error
	if !a.OK() {
		err = fmt.Errorf("%s", *a.Stopped)
	}
	d := hookData{Hooks: hooks, AllInstalled: len(hooks) > 0}
	for _, h := range hooks {
		d.AllInstalled = d.AllInstalled && h.Installed
	}
	q.renderProblem("hook", "Hook", "hook", d, err)
}

type loginRow struct {
	Login string
	Here  bool
	Caps  string
}

func (q *request) loginsPage() {
	st, err := q.status()
	var rows []loginRow
	if st != nil {
		for _, l := range st.Logins {
			row := loginRow{Login: l.Login}
			for _, a := range l.Accounts {
				if a.Project == q.project && a.Capabilities != "" {
					row.Here, row.Caps = true, a.Capabilities
				}
			}
			rows = append(rows, row)
		}
	}
	q.renderProblem("logins", "Agent logins", "logins", struct{ Logins []loginRow }{rows}, err)
}

func (q *request) workspacesPage() {
	st, err := q.status()
	var ws []messages.WorkspaceStatus
	if st != nil {
		for _, w := range st.Workspaces {
			if w.Project == q.project {
				ws = append(ws, w)
			}
		}
	}
	q.renderProblem("workspaces", "Workspaces", "workspaces", struct{ Workspaces []messages.WorkspaceStatus }{ws}, err)
}

// key is the workspace of login in this project, validated as the tools
// validate it; a page for a bad name answers 404 naming it.
func (q *request) key(login string) (messages.WorkspaceKey, bool) {
	k, err := messages.ParseWorkspaceKey(q.keyOf(login))
	if err != nil {
		q.plain(404, "no such workspace: "+err.Error())
		return messages.WorkspaceKey{}, false
	}
	return k, true
}

type workspaceData struct {
	Key                messages.WorkspaceKey
	State              messages.WorkspaceCondition
	Record, Terminated string
	Definition         string
	Session            *messages.SessionStatus
	End                string
	Log                string
}

func (q *request) workspacePage(login string) {
	k, ok := q.key(login)
	if !ok {
		return
	}
	defs, err := q.n.Workspaces(q.ctx, q.project)
	if err != nil {
		q.renderProblem("workspace", k.String(), "workspaces", workspaceData{Key: k}, err)
		return
	}
	w := defs[k]
	if w == nil {
		q.plain(404, fmt.Sprintf("no workspace %s is defined on the record", k))
		return
	}
	d := workspaceData{Key: k, Record: w.Record, Terminated: w.Terminated}
	if b, err := w.Definition.Encode(); err == nil {
		d.Definition = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(string(b), "```json\n"), "```\n"))
	}
	st, err := q.status()
	if st != nil {
		for _, ws := range st.Workspaces {
			if ws.Login == k.Login && ws.Project == k.Project {
				d.State = ws.State
			}
		}
		d.Session = sessionOf(st, k)
	}
	if d.Session == nil {
		if end, eerr := q.n.LastSessionEnd(q.ctx, k); eerr == nil && end != nil {
			d.End = endText(end)
		}
	}
	if paths, perr := q.n.WorkspacePaths(k); perr == nil {
		d.Log, _ = q.n.LogTail(paths.Log, logTail)
	}
	q.renderProblem("workspace", k.String(), "workspaces", d, err)
}

// sessionOf is the session of workspace k in the state, nil when none runs.
func sessionOf(st *messages.NodeState, k messages.WorkspaceKey) *messages.SessionStatus {
	for i := range st.Sessions {
		if s := &st.Sessions[i]; s.Login == k.Login && s.Project == k.Project {
			return s
		}
	}
	return nil
}

// endText says how a session ended, in words.
func endText(e *node.SessionEnd) string {
	s := e.End.StatusString() + " at " + e.End.Seen.UTC().Format("2006-01-02 15:04:05 UTC")
	if e.End.Budget != "" {
		s += ", past its " + e.End.Budget
	}
	if e.Report != nil {
		s += "; its report: " + reportText(e.Report)
	}
	return s
}

func reportText(r *messages.ReportNote) string {
	if r.Summary != "" {
		return string(r.Outcome) + ": " + r.Summary
	}
	return string(r.Outcome)
}

// sessionsData is the Sessions page: the sessions running (the process
// table), and how the last session ended in each workspace of the project
// where none runs ("completed: REPORT" when it ended on its report).
type sessionsData struct {
	Sessions []messages.SessionStatus
	Ended    []endedRow
}

// endedRow is a workspace with no session running whose record shows a
// session's end.
type endedRow struct {
	Key       messages.WorkspaceKey
	Record    string
	Completed string // the report, when it ended on one
	End       string // how it ended, in words
}

func (q *request) sessionsPage() {
	st, err := q.status()
	d := sessionsData{}
	if st != nil {
		for _, s := range st.Sessions {
			if s.Project == q.project {
				d.Sessions = append(d.Sessions, s)
			}
		}
		d.Ended = q.endedRows(st)
	}
	q.renderProblem("sessions", "Sessions", "sessions", d, err)
}

// endedRows reads the last end of each workspace of this project, not
// terminated, where no session runs; a workspace whose record shows none
// has no row.
func (q *request) endedRows(st *messages.NodeState) []endedRow {
	var out []endedRow
	for _, w := range st.Workspaces {
		k := messages.WorkspaceKey{Login: w.Login, Project: w.Project}
		if w.Project != q.project || w.State == messages.WorkspaceTerminated || sessionOf(st, k) != nil {
			continue
		}
		end, err := q.n.LastSessionEnd(q.ctx, k)
		if err != nil || end == nil {
			continue
		}
		row := endedRow{Key: k, Record: end.Record, End: endText(end)}
		if end.Report != nil {
			row.Completed = reportText(end.Report)
		}
		out = append(out, row)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key.String() < out[j].Key.String() })
	return out
}

type sessionData struct {
	Key           messages.WorkspaceKey
	Session       *messages.SessionStatus
	Completed     string
	End           string
	ListenerCount int
	Log           string
	// Usage is the running session's use of the node, or the last one's
	// as its end note says it (Ended); nil for none (D50).
	Usage *messages.SessionUsage
	Ended bool
	// Response is the response its login wrote to the v1 record its last
	// session ran (D51); nil for none.
	Response *messages.ResponseStatus
}

func (q *request) sessionPage(login string) {
	k, ok := q.key(login)
	if !ok {
		return
	}
	d := sessionData{Key: k}
	st, err := q.status()
	if st != nil {
		d.Session = sessionOf(st, k)
		d.ListenerCount = len(listenersOf(st, k, ownRecord(d.Session)))
	}
	if d.Session != nil {
		d.Usage = d.Session.Usage
	}
	if d.Session == nil {
		if end, eerr := q.n.LastSessionEnd(q.ctx, k); eerr == nil && end != nil {
			if end.Report != nil {
				d.Completed = reportText(end.Report)
			}
			d.End = endText(end)
			d.Usage, d.Ended = end.End.Usage, true
			d.Response = end.Response
		}
	}
	if paths, perr := q.n.WorkspacePaths(k); perr == nil {
		d.Log, _ = q.n.LogTail(paths.Log, logTail)
	}
	q.renderProblem("session", "session of "+k.String(), "sessions", d, err)
}

func ownRecord(s *messages.SessionStatus) string {
	if s == nil {
		return ""
	}
	return s.Record
}

// listenersOf are the listeners of workspace k but its own record.
func listenersOf(st *messages.NodeState, k messages.WorkspaceKey, own string) []messages.Listener {
	var out []messages.Listener
	for _, l := range st.Listeners {
		if l.Login == k.Login && l.Project == k.Project && !(own != "" && l.Names == own) {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return string(out[i].Kind)+":"+out[i].Names < string(out[j].Kind)+":"+out[j].Names
	})
	return out
}

type option struct{ Value, Label string }

type listenersData struct {
	Key       messages.WorkspaceKey
	Listeners []messages.Listener
	Kind      string
	Recent    []option
}

func (q *request) listenersPage(login string) {
	k, ok := q.key(login)
	if !ok {
		return
	}
	kind := q.r.URL.Query().Get("kind")
	switch kind {
	case "thread", "ticket", "branch":
	default:
		kind = "thread"
	}
	d := listenersData{Key: k, Kind: kind}
	st, err := q.status()
	if st != nil {
		d.Listeners = listenersOf(st, k, ownRecord(sessionOf(st, k)))
	}
	recent, rerr := q.recent(kind)
	d.Recent = recent
	if err == nil {
		err = rerr
	}
	q.renderProblem("listeners", "listeners of "+k.String(), "sessions", d, err)
}

// splitList is a comma-separated list of names.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func (q *request) sessionStart(login string, form url.Values) (*node.Answer, string) {
	in := workspaces.SessionStartInput{Workspace: q.keyOf(login), Kind: form.Get("kind"), Lifetime: form.Get("lifetime")}
	switch in.Kind {
	case string(messages.Mechanical):
		// As `ocx session start --command`: run by /bin/sh -c.
		if c := strings.TrimSpace(form.Get("command")); c != "" {
			in.Command = []string{"/bin/sh", "-c", c}
		}
	case string(messages.LLM):
		in.Runner, in.Model = strings.TrimSpace(form.Get("runner")), strings.TrimSpace(form.Get("model"))
	}
	if h := strings.TrimSpace(form.Get("hears")); h != "" {
		in.Hears = splitList(h)
	}
	return workspaces.Of(q.n).SessionStart(q.ctx, in), "/session/" + login
}

// restartData is the list a press of "Restart stopped sessions" shows: the
// dry run's answer, and the picks its Confirm button carries.
type restartData struct {
	Release string
	Answer  *node.Answer
	Picks   []string // LOGIN/PROJECT@START, as RestartPick.String
}

// restartList is the first press of "Restart stopped sessions" (seed 002,
// "restart stopped sessions"): a dry run on the chosen release, showing
// which sessions would restart and which are left alone, and why, with a
// Confirm button carrying exactly the ones that would restart. It writes
// nothing.
func (q *request) restartList(form url.Values) {
	release := form.Get("release")
	if release == "" {
		release = messages.ReleaseCurrent
	}
	a := workspaces.Of(q.n).SessionRestart(q.ctx, workspaces.SessionRestartInput{Release: release, Project: q.project, DryRun: true})
	d := restartData{Release: release, Answer: a}
	for _, o := range a.Sessions {
		if o.Outcome == node.OutcomeWouldRestart {
			d.Picks = append(d.Picks, o.Pick().String())
		}
	}
	v := q.view("restart stopped sessions", "sessions")
	v.Data = d
	status := http.StatusOK
	if !a.OK() {
		status = http.StatusUnprocessableEntity
	}
	q.write(status, "restart", v)
}

// restartConfirm is the Confirm of a restart's list: it restarts exactly
// the picks the list showed (SessionRestartInput.Only), none when it
// showed none; a session whose latest start is another by now is left
// alone, saying so.
func (q *request) restartConfirm(form url.Values) (*node.Answer, string) {
	picks := []node.RestartPick{}
	for _, p := range form["pick"] {
		ws, start, _ := strings.Cut(p, "@")
		picks = append(picks, node.RestartPick{Workspace: ws, Start: start})
	}
	return workspaces.Of(q.n).SessionRestart(q.ctx, workspaces.SessionRestartInput{Release: form.Get("release"), Project: q.project, Only: picks}), "/sessions"
}
