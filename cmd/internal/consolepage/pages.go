package consolepage

import (
	"fmt"
	"html/template"
	"sort"
	"strings"

	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/messages"
)

// The pages of seed 000, each reading what it shows.

const logTail = 16 << 10

// status is the node's status, from the daemon's live record when it
// answers (D66); a page read from the repository itself says so.
func (p *Page) status() (*messages.NodeState, error) {
	st, why, err := p.Reads.Status(p.Ctx)
	if why != "" {
		p.ReadItself = "This page read the repository itself: " + why
	}
	return st, err
}

// indexData is the index: this project's usage drawn.
type indexData struct{ Usage *usageChart }

func (p *Page) indexPage() {
	st, err := p.status()
	d := indexData{}
	c, _, uerr := p.usage(st, false)
	d.Usage = c
	if err == nil {
		err = uerr
	}
	p.RenderProblem("index", p.Project, "", d, err)
}

type hookData struct {
	Hooks        []messages.HookStatus
	AllInstalled bool
}

func (p *Page) hookPage() {
	hooks, err := p.hooks()
	d := hookData{Hooks: hooks, AllInstalled: len(hooks) > 0}
	for _, h := range hooks {
		d.AllInstalled = d.AllInstalled && h.Installed
	}
	p.RenderProblem("hook", "Hook", "hook", d, err)
}

type loginRow struct {
	Login string
	Here  bool
	Caps  string
}

func (p *Page) loginsPage() {
	st, err := p.status()
	var rows []loginRow
	if st != nil {
		for _, l := range st.Logins {
			row := loginRow{Login: l.Login}
			for _, a := range l.Accounts {
				if a.Project == p.Project && a.Capabilities != "" {
					row.Here, row.Caps = true, a.Capabilities
				}
			}
			rows = append(rows, row)
		}
	}
	p.RenderProblem("logins", "Agent logins", "logins", struct{ Logins []loginRow }{rows}, err)
}

func (p *Page) workspacesPage() {
	st, err := p.status()
	var ws []messages.WorkspaceStatus
	if st != nil {
		for _, w := range st.Workspaces {
			if w.Project == p.Project {
				ws = append(ws, w)
			}
		}
	}
	p.RenderProblem("workspaces", "Workspaces", "workspaces", struct{ Workspaces []messages.WorkspaceStatus }{ws}, err)
}

// WorkspaceKey is the workspace of login in this project, validated as the tools
// validate it; a page for a bad name answers 404 naming it.
func (p *Page) WorkspaceKey(login string) (messages.WorkspaceKey, bool) {
	k, err := messages.ParseWorkspaceKey(p.KeyOf(login))
	if err != nil {
		p.Plain(404, "no such workspace: "+err.Error())
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

func (p *Page) workspacePage(login string) {
	k, ok := p.WorkspaceKey(login)
	if !ok {
		return
	}
	defs, err := p.workspaces()
	if err != nil {
		p.RenderProblem("workspace", k.String(), "workspaces", workspaceData{Key: k}, err)
		return
	}
	w := defs[k]
	if w == nil {
		p.Plain(404, fmt.Sprintf("no workspace %s is defined on the record", k))
		return
	}
	d := workspaceData{Key: k, Record: w.Entry.Record, Terminated: w.Terminated}
	if b, err := w.Definition.Encode(); err == nil {
		d.Definition = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(string(b), "```json\n"), "```\n"))
	}
	st, err := p.status()
	if st != nil {
		for _, ws := range st.Workspaces {
			if ws.Login == k.Login && ws.Project == k.Project {
				d.State = ws.State
			}
		}
		d.Session = sessionOf(st, k)
	}
	if d.Session == nil {
		if end, eerr := p.lastSessionEnd(k); eerr == nil && end != nil {
			d.End = endText(end)
		}
	}
	if paths, perr := p.Layout.Workspace(k); perr == nil {
		d.Log, _, _ = p.logTail(paths.Log, logTail)
	}
	p.RenderProblem("workspace", k.String(), "workspaces", d, err)
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
func endText(e *record.SessionEnd) string {
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
	// Usage is this project's usage drawn (D102).
	Usage *usageChart
	// Walls are the running sessions' wall time against limits.wall, by
	// login, where known.
	Walls map[string]template.HTML
}

// endedRow is a workspace with no session running whose record shows a
// session's end.
type endedRow struct {
	Key       messages.WorkspaceKey
	Record    string
	Completed string // the report, when it ended on one
	End       string // how it ended, in words
}

func (p *Page) sessionsPage() {
	st, err := p.status()
	d := sessionsData{}
	if st != nil {
		for _, s := range st.Sessions {
			if s.Project == p.Project {
				d.Sessions = append(d.Sessions, s)
			}
		}
		d.Ended = p.endedRows(st)
	}
	c, walls, uerr := p.usage(st, true)
	d.Usage, d.Walls = c, walls
	if err == nil {
		err = uerr
	}
	p.RenderProblem("sessions", "Sessions", "sessions", d, err)
}

// endedRows reads the last end of each workspace of this project, not
// terminated, where no session runs; a workspace whose record shows none
// has no row.
func (p *Page) endedRows(st *messages.NodeState) []endedRow {
	var out []endedRow
	for _, w := range st.Workspaces {
		k := messages.WorkspaceKey{Login: w.Login, Project: w.Project}
		if w.Project != p.Project || w.State == messages.WorkspaceTerminated || sessionOf(st, k) != nil {
			continue
		}
		end, err := p.lastSessionEnd(k)
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
	// LogEnd is the log's size when Log was read: where the page's live
	// log goes on from (session/LOGIN/log?from=).
	LogEnd int64
	// Usage is the running session's use of the node, or the last one's
	// as its end note says it (Ended); nil for none (D50).
	Usage *messages.SessionUsage
	Ended bool
	// Wall is the running session's wall time against limits.wall, where
	// known (D102).
	Wall template.HTML
	// Response is the response its login wrote to the v1 record its last
	// session ran (D51); nil for none.
	Response *messages.ResponseStatus
}

func (p *Page) sessionPage(login string) {
	k, ok := p.WorkspaceKey(login)
	if !ok {
		return
	}
	d := sessionData{Key: k}
	st, err := p.status()
	if st != nil {
		d.Session = sessionOf(st, k)
		d.ListenerCount = len(listenersOf(st, k, ownRecord(d.Session)))
	}
	if d.Session != nil {
		d.Usage = d.Session.Usage
		d.Wall = p.wallBudgets([]messages.SessionStatus{*d.Session})[k.Login]
	}
	if d.Session == nil {
		if end, eerr := p.lastSessionEnd(k); eerr == nil && end != nil {
			if end.Report != nil {
				d.Completed = reportText(end.Report)
			}
			d.End = endText(end)
			d.Usage, d.Ended = end.End.Usage, true
			d.Response = end.Response
		}
	}
	if paths, perr := p.Layout.Workspace(k); perr == nil {
		d.Log, d.LogEnd, _ = p.logTail(paths.Log, logTail)
	}
	p.RenderProblem("session", "session of "+k.String(), "sessions", d, err)
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

type listenersData struct {
	Key       messages.WorkspaceKey
	Listeners []messages.Listener
	Kind      string
	Recent    []option
}

func (p *Page) listenersPage(login string) {
	k, ok := p.WorkspaceKey(login)
	if !ok {
		return
	}
	kind := p.R.URL.Query().Get("kind")
	switch kind {
	case "thread", "ticket", "branch":
	default:
		kind = "thread"
	}
	d := listenersData{Key: k, Kind: kind}
	st, err := p.status()
	if st != nil {
		d.Listeners = listenersOf(st, k, ownRecord(sessionOf(st, k)))
	}
	recent, rerr := p.recent(kind)
	d.Recent = recent
	if err == nil {
		err = rerr
	}
	p.RenderProblem("listeners", "listeners of "+k.String(), "sessions", d, err)
}
