// Package consolepage renders the console's pages read by GET (D71): the
// node's status, a thread's, the hook, the logins, the workspaces and the
// sessions, and the receipt page, in Fossil's skin, from the facts a page
// reads (Reads); the daemon renders them with the status it derived, `ocx
// console` with its node's. The forms and the buttons' actions are the
// console package's.
package consolepage

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
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/wire"
)

//go:embed templates/*.html
var templateFiles embed.FS

// Pages are the console's templates, parsed at the first page, not at
// every start of ocx (1 ms of every command's start, a run's holder's
// too).
var Pages = sync.OnceValue(func() *template.Template { return parsePages() })

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
		"chart":     func(c *usageChart, label string) template.HTML { return chartSVG(c.Days, label) },
		"rowChart":  rowSVG,
		"budget":    tokensBudget,
		"plural":    plural,
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

// View is what every page renders with.
type View struct {
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
	// Answer is an action's answer (the console's node.Answer).
	Answer        any
	Next, Refusal string
	// Reexec is, on the answer of an accept or a rollback, the daemon's
	// re-exec outcome recorded after the press; nil when none was.
	Reexec *messages.ReexecOutcome
}

// Reads are what a page reads of the node beyond its layout and node.json.
type Reads interface {
	// Status is the node's status; why, when not empty, says why it was
	// read from the repository, not given by the daemon.
	Status(ctx context.Context) (st *messages.NodeState, why string, err error)
	// StateDoc is the state document `ocx status --json` prints.
	StateDoc(ctx context.Context) ([]byte, error)
	// Repo is the project's repository, open, for a caller that closes
	// it; Index is the record index of the repository r, which Repo gave.
	Repo(project string) (*fossilio.Repo, error)
	Index(r *fossilio.Repo) *record.Index
	// ProjectCode is the project's code (a login cookie's name holds it).
	ProjectCode(ctx context.Context, project string) (string, error)
	// Metrics are the daemon's metrics in Prometheus' text format; an
	// error when no daemon answers (the metrics are the running
	// daemon's, never read from the record).
	Metrics(ctx context.Context) ([]byte, error)
}

// Page is one request for a page: Fossil's side, the node's, the reply.
type Page struct {
	W      http.ResponseWriter
	R      *http.Request
	F      Fossil
	Ctx    context.Context
	Layout host.Layout
	Config *messages.NodeConfig
	Reads  Reads
	// Key is the console's key, whose HMAC of the viewer's cookie is a
	// form's token.
	Key []byte
	// Project is the project whose repository Fossil serves.
	Project string
	// Refusals logs, once, each file below the agents root not read.
	Refusals *unixhost.RefusalLog
	// DaemonProblem says why no daemon runs, when none does.
	DaemonProblem string
	// ReadItself says why the page's status was not the daemon's.
	ReadItself string
	// AsJSON: the request is answered in JSON, its refusals too.
	AsJSON bool
}

// Begin is the page a request asks for: it may be read by a viewer who
// may read the repository (capability o), and is answered (false) when
// the viewer may not.
func Begin(ctx context.Context, w http.ResponseWriter, r *http.Request, f Fossil) (*Page, bool) {
	p := &Page{W: w, R: r, F: f, Ctx: ctx, AsJSON: ToolJSON(f.Path)}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if !f.MayRead() {
		p.Plain(http.StatusForbidden, "you may not read this repository, so you may not see its console: log in as a user who may (capability o)")
		return nil, false
	}
	return p, true
}

// Open opens the page on the node: the project whose repository Fossil
// serves, found among node.json's (projectOf), and the viewer's login
// cookie read for it. A request that cannot be answered so is answered
// (false).
func (p *Page) Open(layout host.Layout, cfg *messages.NodeConfig, reads Reads, key []byte, log *slog.Logger) bool {
	p.Layout, p.Config, p.Reads, p.Key, p.Refusals = layout, cfg, reads, key, unixhost.NewRefusalLog(log)
	project, ok := projectOf(cfg, p.F.Repository)
	if !ok {
		p.Plain(http.StatusNotFound, fmt.Sprintf("%s is not a repository of this node (its node.json names %s)", p.F.Repository, strings.Join(cfg.ProjectNames(), ", ")))
		return false
	}
	p.Project = project
	code, err := reads.ProjectCode(p.Ctx, project)
	if err != nil {
		p.Plain(http.StatusInternalServerError, "the console cannot open the node: "+err.Error())
		return false
	}
	if len(code) >= 16 {
		p.F.Cookie = loginCookie(p.R, code[:16])
	}
	if p.F.Cookie != "" {
		if login, err := fossilio.CookieLogin(p.F.Cookie); err != nil || login != p.F.Viewer {
			p.F.Cookie = "" // another login's cookie is not the viewer's
		}
	}
	return true
}

// ToolJSON says whether path is a tool's JSON endpoint (/tool/NAME.json):
// every reply to it is JSON, its refusals too.
func ToolJSON(path string) bool {
	rest, ok := strings.CutPrefix(strings.Trim(path, "/"), "tool/")
	return ok && !strings.Contains(rest, "/") && strings.HasSuffix(rest, ".json")
}

// Serve renders the page a GET or HEAD asks for, and says whether it is
// one of this package's: the index, the state, a thread's status, the
// hook, the logins, the workspaces, a workspace, the sessions, a session
// and its listeners, the receipt page. Any other (a form, the releases,
// the tools, the patterns, the git mirror) is not, and is not answered.
func (p *Page) Serve(parts []string) bool {
	path := strings.Join(parts, "/")
	switch {
	case len(parts) > 0 && parts[0] == "receipt":
		p.Receipts(parts[1:])
	case len(parts) == 0:
		p.indexPage()
	case path == "state":
		p.state()
	case path == "metrics":
		p.metrics()
	case len(parts) == 2 && parts[0] == "thread":
		p.thread(parts[1])
	case path == "hook":
		p.hookPage()
	case path == "logins":
		p.loginsPage()
	case path == "workspaces":
		p.workspacesPage()
	case len(parts) == 2 && parts[0] == "workspace":
		p.workspacePage(parts[1])
	case path == "sessions":
		p.sessionsPage()
	case len(parts) == 2 && parts[0] == "session":
		p.sessionPage(parts[1])
	case len(parts) == 3 && parts[0] == "session" && parts[2] == "log":
		p.sessionLog(parts[1])
	case len(parts) == 3 && parts[0] == "session" && parts[2] == "listeners":
		p.listenersPage(parts[1])
	default:
		return false
	}
	return true
}

// KeyOf is the workspace of login in this repository's project, as the
// tools name it; the action validates it.
func (p *Page) KeyOf(login string) string { return login + "/" + p.Project }

// View is a page's common part.
func (p *Page) View(title, nav string) View {
	v := View{Title: "OCX: " + title, Nav: nav, Script: p.F.Script, Nonce: p.F.Nonce, Project: p.Project,
		Viewer: p.F.Viewer, Admin: p.F.Admin()}
	if v.Admin && p.F.Cookie != "" {
		v.Token = Token(p.Key, p.F.Cookie)
	} else {
		v.Admin = false
	}
	return v
}

// Render renders a page.
func (p *Page) Render(name, title, nav string, data any) {
	v := p.View(title, nav)
	v.Data = data
	p.Write(http.StatusOK, name, v)
}

// RenderProblem renders a page that could not read all it shows: err
// says what.
func (p *Page) RenderProblem(name, title, nav string, data any, err error) {
	v := p.View(title, nav)
	v.Data = data
	if err != nil {
		v.Problem = err.Error()
	}
	p.Write(http.StatusOK, name, v)
}

// Write renders template name with v as the reply, with status.
func (p *Page) Write(status int, name string, v View) {
	if p.DaemonProblem != "" {
		v.Daemon = p.DaemonProblem
	}
	v.ReadItself = p.ReadItself
	var b bytes.Buffer
	if err := Pages().ExecuteTemplate(&b, name, v); err != nil {
		p.Plain(http.StatusInternalServerError, "the console's page "+name+" does not render: "+err.Error())
		return
	}
	p.W.Header().Set("Content-Type", "text/html; charset=utf-8")
	p.W.WriteHeader(status)
	p.W.Write(b.Bytes())
}

// Refuse answers a request the console will not act on.
func (p *Page) Refuse(r *Refusal) {
	if p.AsJSON {
		p.JSONError(r.Status, r)
		return
	}
	v := p.View("refused", "")
	v.Refusal = r.Reason
	var b bytes.Buffer
	if err := Pages().ExecuteTemplate(&b, "refused", v); err != nil {
		p.Plain(r.Status, r.Reason)
		return
	}
	p.W.Header().Set("Content-Type", "text/html; charset=utf-8")
	p.W.WriteHeader(r.Status)
	p.W.Write(b.Bytes())
}

// Plain answers in plain text, which Fossil wraps in its skin; a tool's
// JSON endpoint in JSON.
func (p *Page) Plain(status int, msg string) {
	if p.AsJSON {
		p.JSONError(status, errors.New(strings.TrimSpace(msg)))
		return
	}
	p.W.Header().Set("Content-Type", "text/plain; charset=utf-8")
	p.W.WriteHeader(status)
	fmt.Fprintln(p.W, msg)
}

// state serves the status JSON (seed 002, "serve status as JSON"): the
// document `ocx status --json` prints, with an ETag, so that a page that
// polls it gets 304 while nothing changed.
func (p *Page) state() {
	data, err := p.Reads.StateDoc(p.Ctx)
	if err != nil {
		p.JSONError(http.StatusInternalServerError, err)
		return
	}
	p.JSONBody(data)
}

// metrics answers the daemon's metrics in Prometheus' text format, for a
// monitoring system that scrapes them with a reader's login (Begin lets
// readers alone in); 503 while no daemon answers, so that a scrape
// counts the node as down rather than reading zeros.
func (p *Page) metrics() {
	data, err := p.Reads.Metrics(p.Ctx)
	if err != nil {
		p.Plain(http.StatusServiceUnavailable, "no metrics: "+err.Error())
		return
	}
	p.W.Header().Set("Content-Type", wire.MetricsContentType)
	p.W.Write(data)
}

// JSONBody answers data, a JSON document, with its ETag.
func (p *Page) JSONBody(data []byte) {
	sum := sha256.Sum256(data)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	p.W.Header().Set("ETag", etag)
	p.W.Header().Set("Content-Type", "application/json")
	if p.R.Header.Get("If-None-Match") == etag {
		p.W.WriteHeader(http.StatusNotModified)
		return
	}
	p.W.Write(data)
}

// JSONError answers err in JSON, with status.
func (p *Page) JSONError(status int, err error) {
	p.W.Header().Set("Content-Type", "application/json")
	p.W.WriteHeader(status)
	json.NewEncoder(p.W).Encode(map[string]string{"error": err.Error()})
}
