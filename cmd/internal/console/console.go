package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ocx-go/ocx/messages/wire"

	"github.com/ocx-go/ocx/cmd/internal/consolepage"
	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/workspaces"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host/daemonclient"
	"github.com/ocx-go/ocx/messages"
)

// daemonWait bounds how long a page waits for a daemon it started to read
// its pipe before it says that none runs.
const daemonWait = 3 * time.Second

// console serves the pages of one agents root, as `ocx console`: the
// pages read by GET (consolepage), the forms and the buttons' actions.
type console struct {
	agents string
	key    []byte
	// Now is the clock; tests may set it.
	Now func() time.Time
	// Node is what each request's node is opened with (its caller
	// set per request).
	Node node.Options
}

// open opens the console of the agents root: its key is made on first use.
func open(agents string) (*console, error) {
	key, err := consolepage.LoadKey(agents)
	if err != nil {
		return nil, err
	}
	return &console{agents: agents, key: key, Now: time.Now}, nil
}

// request is one request: its page (Fossil's side, the reply) and the
// node its actions act on.
type request struct {
	*consolepage.Page
	n *node.Node
}

// nodeReads are the node's reads a page makes: its status the daemon's
// when it answers (LiveStatus), else read here.
type nodeReads struct{ n *node.Node }

func (r nodeReads) Status(ctx context.Context) (*messages.NodeState, string, error) {
	return r.n.LiveStatus(ctx)
}

func (r nodeReads) StateDoc(ctx context.Context) ([]byte, error) {
	doc, _, err := r.n.LiveStatusDoc(ctx)
	return doc, err
}

func (r nodeReads) Repo(project string) (*fossilio.Repo, error) { return r.n.OpenRepo(project) }

func (r nodeReads) Index(repo *fossilio.Repo) *record.Index { return r.n.Index(repo) }

func (r nodeReads) ProjectCode(ctx context.Context, project string) (string, error) {
	repo, err := r.n.OpenRepo(project)
	if err != nil {
		return "", err
	}
	defer repo.Close()
	return repo.ProjectCode(ctx)
}

// Metrics are the daemon's, asked on its socket: with no daemon there
// are none (the page then says so, 503).
func (r nodeReads) Metrics(ctx context.Context) ([]byte, error) {
	rep, err := r.n.AskDaemon(ctx, wire.NewAsk(wire.AskMetrics))
	if err != nil {
		return nil, err
	}
	if rep.Error != "" {
		return nil, errors.New(rep.Error)
	}
	return rep.MetricsText, nil
}

// Serve answers one request Fossil handed over.
func (c *console) Serve(w http.ResponseWriter, r *http.Request, f consolepage.Fossil) {
	ctx, cancel := context.WithTimeout(r.Context(), consolepage.PageBound)
	defer cancel()
	p, ok := consolepage.Begin(ctx, w, r, f)
	if !ok {
		return
	}
	n, err := node.Open(c.agents, c.Node)
	if err != nil {
		p.Plain(http.StatusInternalServerError, "the console cannot open the node: "+err.Error())
		return
	}
	if !p.Open(n.Layout, n.Config, nodeReads{n}, c.key, n.Log) {
		return
	}
	caller := node.Caller{}
	if p.F.Admin() && p.F.Cookie != "" {
		caller = node.Caller{Login: f.Viewer, Cookie: p.F.Cookie}
	}
	opts := c.Node
	opts.Caller = caller
	if n, err = node.Open(c.agents, opts); err != nil {
		p.Plain(http.StatusInternalServerError, "the console cannot open the node: "+err.Error())
		return
	}
	p.Reads = nodeReads{n}
	q := &request{Page: p, n: n}
	q.route()
}

// route picks the page or the action for the request's path.
func (q *request) route() {
	parts := wire.ConsolePath(q.F.Path)
	path := strings.Join(parts, "/")
	if len(parts) == 2 && parts[0] == "tool" {
		parts[1], _ = toolPath(parts[1])
	}
	if len(parts) > 0 && parts[0] == "receipt" {
		// Read by a node on another host, by GET or POST, authorized by
		// Fossil's login of a node user alone (D72).
		q.Receipts(parts[1:])
		return
	}
	if q.R.Method == http.MethodPost && (len(parts) == 0 || parts[0] != "git") {
		if ref := checkPost(q.R, q.F, q.Key); ref != nil {
			q.Refuse(ref)
			return
		}
		q.act(parts)
		return
	}
	if q.R.Method != http.MethodGet && q.R.Method != http.MethodHead && (len(parts) == 0 || parts[0] != "git") {
		q.Refuse(&consolepage.Refusal{Status: http.StatusMethodNotAllowed, Reason: "the console answers GET, and POST from its buttons"})
		return
	}
	if len(parts) == 0 || parts[0] != "git" {
		q.ensureDaemon()
	}
	if q.Serve(parts) {
		return
	}
	switch {
	case parts[0] == "git":
		q.git(parts[1:])
	case path == "workspaces/add":
		q.workspaceAddPage()
	case len(parts) == 3 && parts[0] == "workspace" && parts[2] == "start":
		q.sessionStartPage(parts[1])
	case path == "releases":
		q.releasesPage()
	case path == "tools":
		q.toolsPage()
	case path == "patterns":
		q.patternsPage()
	case len(parts) == 2 && parts[0] == "pattern":
		q.patternPage(parts[1])
	case len(parts) == 2 && parts[0] == "tool" && !q.AsJSON:
		q.toolPage(parts[1])
	case len(parts) == 2 && parts[0] == "tool":
		q.Refuse(&consolepage.Refusal{Status: http.StatusMethodNotAllowed, Reason: "a tool's JSON answer is a POST of its input, as its form's button sends it"})
	default:
		q.Plain(http.StatusNotFound, fmt.Sprintf("the console has no page %q", q.F.Path))
	}
}

// act runs a button's action (checkPost passed) and shows its one answer.
func (q *request) act(parts []string) {
	form := q.R.PostForm
	var (
		a       *node.Answer
		next    string
		release bool // an accept or a rollback: the answer shows the re-exec
	)
	pressed := time.Now()
	path := strings.Join(parts, "/")
	switch {
	case len(parts) == 2 && parts[0] == "tool":
		q.toolCall(parts[1], q.AsJSON)
		return
	case len(parts) == 2 && parts[0] == "pattern":
		q.patternPost(parts[1], form)
		return
	case path == "hook/install":
		a, next = q.n.HookInstall(q.Ctx, false), "/hook"
	case path == "hook/remove":
		a, next = q.n.HookRemove(q.Ctx, false), "/hook"
	case path == "logins/add":
		a, next = q.n.LoginAdd(q.Ctx, form.Get("login"), false), "/logins"
	case path == "logins/withdraw":
		a, next = q.n.LoginWithdraw(q.Ctx, form.Get("login"), false), "/logins"
	case path == "workspaces/add":
		a, next = q.workspaceAdd(form)
	case len(parts) == 3 && parts[0] == "workspace" && parts[2] == "terminate":
		if form.Get("confirm") != "yes" {
			q.Refuse(&consolepage.Refusal{Status: http.StatusBadRequest, Reason: "terminating a workspace needs its box ticked: nothing written"})
			return
		}
		a, next = workspaces.Of(q.n).WorkspaceTerminate(q.Ctx, q.KeyOf(parts[1]), form.Get("reason"), false), "/workspaces"
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
		a, next = workspaces.Of(q.n).SessionStop(q.Ctx, q.KeyOf(parts[1]), false), "/session/"+parts[1]
	case len(parts) == 4 && parts[0] == "session" && parts[2] == "listeners" && (parts[3] == "add" || parts[3] == "remove"):
		in := workspaces.ListenerInput{Workspace: q.KeyOf(parts[1]), Kind: form.Get("kind"), Names: strings.TrimSpace(form.Get("names"))}
		if parts[3] == "add" {
			a = workspaces.Of(q.n).ListenerAdd(q.Ctx, in)
		} else {
			a = workspaces.Of(q.n).ListenerRemove(q.Ctx, in)
		}
		next = "/session/" + parts[1] + "/listeners"
	default:
		q.Refuse(&consolepage.Refusal{Status: http.StatusNotFound, Reason: fmt.Sprintf("the console has no button %q", q.F.Path)})
		return
	}
	v := q.View(a.Tool, "")
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
	q.Write(status, "answer", v)
}

// ensureDaemon starts the daemon when none runs (seed 002, "ensure the
// daemon runs from the console"); a page that cannot says so.
func (q *request) ensureDaemon() {
	_, err := daemonclient.Ensure(q.Ctx, q.n.Layout, q.n.Program("ocxd"), daemonWait)
	if err != nil {
		q.DaemonProblem = "No daemon runs, so nothing will be launched or stopped: " + err.Error()
	}
}
