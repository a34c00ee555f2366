package console

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/daemonclient"
	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/workspaces"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/wire"
)

//go:embed templates/*.html
var templateFiles embed.FS

// pages are parsed at the first page, not at every start of ocx (1 ms of
// every command's start, a run's holder's too).
var pages = sync.OnceValue(func() *template.Template { return parsePages() })

func parsePages() *template.Template {
	return template.Must(template.New("console").Funcs(template.FuncMap{
		"short": func(h string) string {
			if len(h) > 10 {
				return h[:10]
			}
			return h
		},
		"join":      strings.Join,
		"stateOf":   stateOf,
		"startedBy": startedBy,
		"seconds":   func(ms uint64) string { return strconv.FormatFloat(float64(ms)/1000, 'f', 1, 64) + " s" },
	}).ParseFS(templateFiles, "templates/*.html"))
}

// stateOf is where a running session stands, as the pages say it: working
// or idle while a process holds its wake pipe, not listening otherwise.
func stateOf(s messages.SessionStatus) string {
	if !s.Listening {
		return "not listening"
	}
	return string(s.State)
}

// startedBy says how a session was started, as the Sessions page says it.
func startedBy(o messages.Origin) string {
	switch o {
	case messages.OriginDaemon:
		return "from the console or a tool, by the daemon"
	case messages.OriginTerminal:
		return "at a terminal"
	case messages.OriginOrphan:
		return "by a daemon no longer running"
	}
	return string(o)
}

// DaemonWait bounds how long a page waits for a daemon it started to read
// its pipe before it says that none runs.
const DaemonWait = 3 * time.Second

// Console serves the pages of one agents root.
type Console struct {
	agents string
	key    []byte
	// Now is the clock; tests may set it.
	Now func() time.Time
	// Node is what each request's node is opened with (its caller
	// set per request): in the daemon, its open repositories and its
	// own answers, the kept status among them (D71).
	Node node.Options
	// InDaemon: the console renders pages inside the daemon, which never
	// runs git's CGI (D81): a git fetch is ocx console's alone.
	InDaemon bool
}

// Open opens the console of the agents root: its key is made on first use.
func Open(agents string) (*Console, error) {
	key, err := loadKey(agents)
	if err != nil {
		return nil, err
	}
	return &Console{agents: agents, key: key, Now: time.Now}, nil
}

// view is what every page renders with.
type view struct {
	Title, Nav    string
	Script, Nonce string
	Project       string
	Viewer        string
	Admin         bool
	Token         string
	Daemon        string // why no daemon runs, when none does
	Problem       string // what could not be read for this page
	ReadItself    string // why the status was read from the repository, not the daemon's
	Data          any
	Answer        *node.Answer
	Next, Refusal string
	// Reexec is, on the answer of an accept or a rollback, the daemon's
	// re-exec outcome recorded after the press; nil when none was.
	Reexec *messages.ReexecOutcome
}

// request is one request's context: Fossil's side, the node and the page.
type request struct {
	c       *Console
	f       Fossil
	w       http.ResponseWriter
	r       *http.Request
	n       *node.Node
	project string
	ctx     context.Context
	// daemonProblem says why no daemon runs, when none does.
	daemonProblem string
	// readItself says why the page's status was not the daemon's.
	readItself string
	// asJSON: the request is a tool's JSON endpoint (/tool/NAME.json),
	// answered in JSON, its refusals too.
	asJSON bool
}

// Serve answers one request Fossil handed over.
func (c *Console) Serve(w http.ResponseWriter, r *http.Request, f Fossil) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	q := &request{c: c, f: f, w: w, r: r, ctx: ctx, asJSON: toolJSON(f.Path)}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if !f.MayRead() {
		q.plain(http.StatusForbidden, "you may not read this repository, so you may not see its console: log in as a user who may (capability o)")
		return
	}
	code := ""
	n, err := node.Open(c.agents, c.Node)
	if err == nil {
		project, ok := n.ProjectOf(f.Repository)
		if !ok {
			q.plain(http.StatusNotFound, fmt.Sprintf("%s is not a repository of this node (its node.json names %s)", f.Repository, strings.Join(n.Config.ProjectNames(), ", ")))
			return
		}
		q.project = project
		r, err := n.OpenRepo(project)
		if err == nil {
			code, err = r.ProjectCode(ctx)
			r.Close()
		}
	}
	if err != nil {
		q.plain(http.StatusInternalServerError, "the console cannot open the node: "+err.Error())
		return
	}
	if len(code) >= 16 {
		q.f.Cookie = loginCookie(r, code[:16])
	}
	if q.f.Cookie != "" {
		if login, err := fossilio.CookieLogin(q.f.Cookie); err != nil || login != f.Viewer {
			q.f.Cookie = "" // another login's cookie is not the viewer's
		}
	}
	caller := node.Caller{}
	if q.f.Admin() && q.f.Cookie != "" {
		caller = node.Caller{Login: f.Viewer, Cookie: q.f.Cookie}
	}
	opts := c.Node
	opts.Caller = caller
	if q.n, err = node.Open(c.agents, opts); err != nil {
		q.plain(http.StatusInternalServerError, "the console cannot open the node: "+err.Error())
		return
	}
	q.route()
}

// route picks the page or the action for the request's path.
func (q *request) route() {
	parts := wire.ConsolePath(q.f.Path)
	path := strings.Join(parts, "/")
	if len(parts) == 2 && parts[0] == "tool" {
		parts[1], _ = toolPath(parts[1])
	}
	if len(parts) > 0 && parts[0] == "receipt" {
		// Read by a node on another host, by GET or POST, authorized by
		// Fossil's login of a node user alone (D72).
		q.receipts(parts[1:])
		return
	}
	if q.r.Method == http.MethodPost && (len(parts) == 0 || parts[0] != "git") {
		if ref := checkPost(q.r, q.f, q.c.key); ref != nil {
			q.refuse(ref)
			return
		}
		q.act(parts)
		return
	}
	if q.r.Method != http.MethodGet && q.r.Method != http.MethodHead && (len(parts) == 0 || parts[0] != "git") {
		q.refuse(&refusal{http.StatusMethodNotAllowed, "the console answers GET, and POST from its buttons"})
		return
	}
	if len(parts) == 0 || parts[0] != "git" {
		q.ensureDaemon()
	}
	switch {
	case len(parts) == 0:
		q.render("index", q.project, "", nil)
	case path == "state":
		q.state()
	case len(parts) == 2 && parts[0] == "thread":
		q.thread(parts[1])
	case parts[0] == "git":
		q.git(parts[1:])
	case path == "hook":
		q.hookPage()
	case path == "logins":
		q.loginsPage()
	case path == "workspaces":
		q.workspacesPage()
	case path == "workspaces/add":
		q.workspaceAddPage()
	case len(parts) == 2 && parts[0] == "workspace":
		q.workspacePage(parts[1])
	case len(parts) == 3 && parts[0] == "workspace" && parts[2] == "start":
		q.sessionStartPage(parts[1])
	case path == "sessions":
		q.sessionsPage()
	case len(parts) == 2 && parts[0] == "session":
		q.sessionPage(parts[1])
	case len(parts) == 3 && parts[0] == "session" && parts[2] == "listeners":
		q.listenersPage(parts[1])
	case path == "releases":
		q.releasesPage()
	case path == "tools":
		q.toolsPage()
	case path == "patterns":
		q.patternsPage()
	case len(parts) == 2 && parts[0] == "pattern":
		q.patternPage(parts[1])
	case len(parts) == 2 && parts[0] == "tool" && !q.asJSON:
		q.toolPage(parts[1])
	case len(parts) == 2 && parts[0] == "tool":
		q.refuse(&refusal{http.StatusMethodNotAllowed, "a tool's JSON answer is a POST of its input, as its form's button sends it"})
	default:
		q.plain(http.StatusNotFound, fmt.Sprintf("the console has no page %q", q.f.Path))
	}
}

// act runs a button's action (checkPost passed) and shows its one answer.
func (q *request) act(parts []string) {
	form := q.r.PostForm
	var (
		a       *node.Answer
		next    string
		release bool // an accept or a rollback: the answer shows the re-exec
	)
	pressed := time.Now()
	path := strings.Join(parts, "/")
	switch {
	case len(parts) == 2 && parts[0] == "tool":
		q.toolCall(parts[1], q.asJSON)
		return
	case len(parts) == 2 && parts[0] == "pattern":
		q.patternPost(parts[1], form)
		return
	case path == "hook/install":
		a, next = q.n.HookInstall(q.ctx, false), "/hook"
	case path == "hook/remove":
		a, next = q.n.HookRemove(q.ctx, false), "/hook"
	case path == "logins/add":
		a, next = q.n.LoginAdd(q.ctx, form.Get("login"), false), "/logins"
	case path == "logins/withdraw":
		a, next = q.n.LoginWithdraw(q.ctx, form.Get("login"), false), "/logins"
	case path == "workspaces/add":
		a, next = q.workspaceAdd(form)
	case len(parts) == 3 && parts[0] == "workspace" && parts[2] == "terminate":
		if form.Get("confirm") != "yes" {
			q.refuse(&refusal{http.StatusBadRequest, "terminating a workspace needs its box ticked: nothing written"})
			return
		}
		a, next = workspaces.Of(q.n).WorkspaceTerminate(q.ctx, q.keyOf(parts[1]), form.Get("reason"), false), "/workspaces"
	case len(parts) == 3 && parts[0] == "workspace" && parts[2] == "start":
		a, next = q.sessionStart(parts[1], form)
	case path == "sessions/restart":
		q.restartList(form)
		return
	case path == "sessions/restart/confirm":
		a, next = q.restartConfirm(form)
	case path == "releases/accept" || path == "releases/rollback":
		q.releaseDryRun(parts[1], form)
		return
	case path == "releases/accept/confirm" || path == "releases/rollback/confirm":
		a, next = q.releaseConfirm(parts[1], form)
		release = true
	case len(parts) == 3 && parts[0] == "session" && parts[2] == "stop":
		a, next = workspaces.Of(q.n).SessionStop(q.ctx, q.keyOf(parts[1]), false), "/session/"+parts[1]
	case len(parts) == 4 && parts[0] == "session" && parts[2] == "listeners" && (parts[3] == "add" || parts[3] == "remove"):
		in := workspaces.ListenerInput{Workspace: q.keyOf(parts[1]), Kind: form.Get("kind"), Names: strings.TrimSpace(form.Get("names"))}
		if parts[3] == "add" {
			a = workspaces.Of(q.n).ListenerAdd(q.ctx, in)
		} else {
			a = workspaces.Of(q.n).ListenerRemove(q.ctx, in)
		}
		next = "/session/" + parts[1] + "/listeners"
	default:
		q.refuse(&refusal{http.StatusNotFound, fmt.Sprintf("the console has no button %q", q.f.Path)})
		return
	}
	v := q.view(a.Tool, "")
	v.Answer, v.Next = a, next
	if release {
		if d, err := q.n.DaemonStatus(); err == nil && d.Reexec != nil && !d.Reexec.At.Before(pressed) {
			v.Reexec = d.Reexec
		}
	}
	status := http.StatusOK
	if !a.OK() {
		status = http.StatusUnprocessableEntity
	}
	q.write(status, "answer", v)
}

// keyOf is the workspace of login in this repository's project, as the
// tools name it; the action validates it.
func (q *request) keyOf(login string) string { return login + "/" + q.project }

// view is a page's common part.
func (q *request) view(title, nav string) view {
	v := view{Title: "OCX: " + title, Nav: nav, Script: q.f.Script, Nonce: q.f.Nonce, Project: q.project,
		Viewer: q.f.Viewer, Admin: q.f.Admin()}
	if v.Admin && q.f.Cookie != "" {
		v.Token = token(q.c.key, q.f.Cookie)
	} else {
		v.Admin = false
	}
	return v
}

// render renders a page; problem says what could not be read for it.
func (q *request) render(name, title, nav string, data any) {
	v := q.view(title, nav)
	v.Data = data
	q.write(http.StatusOK, name, v)
}

// renderProblem renders a page that could not read all it shows.
func (q *request) renderProblem(name, title, nav string, data any, err error) {
	v := q.view(title, nav)
	v.Data = data
	if err != nil {
		v.Problem = err.Error()
	}
	q.write(http.StatusOK, name, v)
}

func (q *request) write(status int, name string, v view) {
	if q.daemonProblem != "" {
		v.Daemon = q.daemonProblem
	}
	v.ReadItself = q.readItself
	var b bytes.Buffer
	if err := pages().ExecuteTemplate(&b, name, v); err != nil {
		q.plain(http.StatusInternalServerError, "the console's page "+name+" does not render: "+err.Error())
		return
	}
	q.w.Header().Set("Content-Type", "text/html; charset=utf-8")
	q.w.WriteHeader(status)
	q.w.Write(b.Bytes())
}

func (q *request) refuse(r *refusal) {
	if q.asJSON {
		q.jsonError(r.status, r)
		return
	}
	v := q.view("refused", "")
	v.Refusal = r.reason
	var b bytes.Buffer
	if err := pages().ExecuteTemplate(&b, "refused", v); err != nil {
		q.plain(r.status, r.reason)
		return
	}
	q.w.Header().Set("Content-Type", "text/html; charset=utf-8")
	q.w.WriteHeader(r.status)
	q.w.Write(b.Bytes())
}

// plain answers in plain text, which Fossil wraps in its skin; a tool's
// JSON endpoint in JSON.
func (q *request) plain(status int, msg string) {
	if q.asJSON {
		q.jsonError(status, errors.New(strings.TrimSpace(msg)))
		return
	}
	q.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	q.w.WriteHeader(status)
	fmt.Fprintln(q.w, msg)
}

// ensureDaemon starts the daemon when none runs (seed 002, "ensure the
// daemon runs from the console"); a page that cannot says so.
func (q *request) ensureDaemon() {
	_, err := daemonclient.Ensure(q.ctx, q.n.Layout, q.n.Program("ocxd"), DaemonWait)
	if err != nil {
		q.daemonProblem = "No daemon runs, so nothing will be launched or stopped: " + err.Error()
	}
}

// state serves the status JSON (seed 002, "serve status as JSON"): the
// document `ocx status --json` prints, with an ETag, so that a page that
// polls it gets 304 while nothing changed.
func (q *request) state() {
	data, _, err := q.n.LiveStatusDoc(q.ctx)
	if err != nil {
		q.jsonError(http.StatusInternalServerError, err)
		return
	}
	q.jsonBody(data)
}

func (q *request) jsonBody(data []byte) {
	sum := sha256.Sum256(data)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	q.w.Header().Set("ETag", etag)
	q.w.Header().Set("Content-Type", "application/json")
	if q.r.Header.Get("If-None-Match") == etag {
		q.w.WriteHeader(http.StatusNotModified)
		return
	}
	q.w.Write(data)
}

func (q *request) jsonError(status int, err error) {
	q.w.Header().Set("Content-Type", "application/json")
	q.w.WriteHeader(status)
	json.NewEncoder(q.w).Encode(map[string]string{"error": err.Error()})
}
