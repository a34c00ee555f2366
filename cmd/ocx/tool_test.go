package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	ocxmcp "github.com/ocx-go/ocx/cmd/internal/mcp"
	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/node/setup"
	"github.com/ocx-go/ocx/cmd/internal/tools"
	"github.com/ocx-go/ocx/cmd/internal/workspaces"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/daemonclient"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// The tools' tests run every case through each front end and want the
// same answer from each: the Go registry, `ocx tool` (the binary), MCP
// (the SDK's client) and the console (its CGI run by the fossil server's
// --extroot, as a browser's button sends it).

var (
	buildOnce  sync.Once
	releaseDir string
	buildErr   error
)

// builtRelease builds ocx, ocxd and workspace once into a release directory,
// with the stand-in runner beside them (D9).
func builtRelease(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		releaseDir, buildErr = os.MkdirTemp("", "ocx-tool-release-")
		if buildErr != nil {
			return
		}
		for _, name := range []string{"ocx", "ocxd", "workspace"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(releaseDir, name), "github.com/ocx-go/ocx/cmd/"+name)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("build %s: %v\n%s", name, err, out)
				return
			}
		}
		runner, err := os.ReadFile(filepath.Join("..", "internal", "session", "testdata", "ocx-runner-native"))
		if err == nil {
			err = os.WriteFile(filepath.Join(releaseDir, "ocx-runner-native"), runner, 0o755)
		}
		buildErr = err
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return releaseDir
}

// toolNode is a real fossil server and a node initialised for it.
type toolNode struct {
	t      testing.TB
	ctx    context.Context
	srv    *harness.Server
	agents string
	rel    string
	n      *node.Node
	// cookies are the login cookies Fossil's /login gave, by login.
	cookies map[string]string
}

const (
	tPerson   = "alice"
	tPersonPW = "alice-pw-1"
)

func newToolNode(t testing.TB) *toolNode {
	rel := builtRelease(t)
	extroot := filepath.Join(t.TempDir(), "ext")
	if err := os.Mkdir(extroot, 0o755); err != nil {
		t.Fatal(err)
	}
	srv := harness.StartServer(t, harness.Options{Users: []harness.User{{Login: tPerson, Password: tPersonPW, Caps: "cghijnorwz234"}}, ExtRoot: extroot})
	tn := &toolNode{t: t, ctx: context.Background(), srv: srv, agents: filepath.Join(t.TempDir(), "agents"), rel: rel, cookies: map[string]string{}}
	if a := setup.Init(tn.ctx, tn.agents, setup.InitInput{Projects: []setup.InitProject{{Name: "demo", Repository: srv.Repo, URL: srv.URL}}}, node.Options{Release: rel}); !a.OK() {
		t.Fatalf("init: %s", *a.Stopped)
	}
	n, err := node.Open(tn.agents, node.Options{Release: rel})
	if err != nil {
		t.Fatal(err)
	}
	tn.n = n
	t.Cleanup(tn.shutdown)
	if a := n.ConsoleInstall(extroot, false); !a.OK() {
		t.Fatalf("console install: %s", *a.Stopped)
	}
	return tn
}

// shutdown stops what a test left running: each session through the
// daemon, then the daemon.
func (tn *toolNode) shutdown() {
	ctx := context.Background()
	logins, _ := os.ReadDir(tn.agents)
	for _, l := range logins {
		key := l.Name() + "/demo"
		if a := workspaces.Of(tn.n).SessionStop(ctx, key, false); a.OK() {
			k, _ := messages.ParseWorkspaceKey(key)
			ws, _ := tn.n.Layout.Workspace(k)
			for end := time.Now().Add(15 * time.Second); exists(ws.Binding) && time.Now().Before(end); {
				if running, err := tn.n.Running(k); err != nil || !running {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); {
		pid, _ := daemonclient.PID(tn.n.Layout)
		if pid == 0 {
			return
		}
		if p, err := os.FindProcess(pid); err == nil {
			p.Signal(unixhost.OSSignal(host.SIGTERM))
		}
		time.Sleep(50 * time.Millisecond)
	}
	tn.t.Errorf("the daemon of %s did not end", tn.agents)
}

func (tn *toolNode) repo() *fossilio.Repo {
	tn.t.Helper()
	r, err := fossilio.OpenNode(tn.srv.Repo, nil)
	if err != nil {
		tn.t.Fatal(err)
	}
	tn.t.Cleanup(func() { r.Close() })
	return r
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

func (tn *toolNode) admin() node.Caller {
	return node.Caller{Login: tn.srv.AdminLogin, Password: tn.srv.AdminPassword}
}

// frontEnd calls a tool as a caller (or as an agent login the node keeps
// a password for) with a JSON input.
type frontEnd struct {
	name string
	// adminOnly: the front end lets only a caller holding admin or setup
	// call a tool (the console's buttons, D31). Another caller is refused
	// before any tool runs, with nothing written, and call returns nil.
	adminOnly bool
	call      func(tn *toolNode, caller node.Caller, agent, tool, input string) *node.Answer
}

var frontEnds = []frontEnd{
	{name: "registry", call: func(tn *toolNode, caller node.Caller, agent, tool, input string) *node.Answer {
		if agent != "" {
			var err error
			if caller, err = tools.Of(tn.n).AgentCaller(agent); err != nil {
				tn.t.Fatal(err)
			}
		}
		return tools.Of(tn.n).Call(tn.ctx, caller, tool, json.RawMessage(input))
	}},
	{name: "ocx tool", call: func(tn *toolNode, caller node.Caller, agent, tool, input string) *node.Answer {
		args := []string{"tool", tool, "--agents", tn.agents}
		env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tn.agents}
		switch {
		case agent != "":
			args = append(args, "--agent", agent)
		case caller.Login != "":
			args = append(args, "--user", caller.Login)
			env = append(env, "OCX_PASSWORD="+caller.Password)
		}
		cmd := exec.Command(filepath.Join(tn.rel, "ocx"), args...)
		cmd.Env = env
		cmd.Stdin = strings.NewReader(input)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var a node.Answer
		if jerr := json.Unmarshal(out.Bytes(), &a); jerr != nil {
			tn.t.Fatalf("ocx %s: %v; stdout %q, stderr %q (%v)", strings.Join(args, " "), err, out.String(), errb.String(), jerr)
		}
		if (err != nil) != (a.Stopped != nil) {
			tn.t.Errorf("ocx tool %s exited %v with stopped %v", tool, err, a.Stopped)
		}
		return &a
	}},
	{name: "mcp", call: func(tn *toolNode, caller node.Caller, agent, tool, input string) *node.Answer {
		return mcpCall(tn.t, tn.ctx, tn.n, caller, agent, tool, input)
	}},
	{name: "console", adminOnly: true, call: consoleCall},
}

var consoleToken = regexp.MustCompile(`name="token" value="([0-9a-f]+)"`)

// consoleCall calls a tool through the console as Fossil serves it: the
// caller logs in through Fossil's /login, opens /tool/NAME, and its
// button's POST (the page's token, a Referer from the repository) goes to
// /tool/NAME.json with the input as the form's raw JSON, exactly as
// given. The answer is the JSON the console replies with, status 422 when
// it stopped. A caller shown no button (not an admin, or not logged in)
// sends the POST with a token of its own making: it must get 403 and
// leave the repository as it was, and consoleCall returns nil.
func consoleCall(tn *toolNode, caller node.Caller, agent, tool, input string) *node.Answer {
	t := tn.t
	t.Helper()
	if agent != "" {
		t.Fatalf("the console has no agent callers: an agent calls through MCP")
	}
	cookie := ""
	if caller.Login != "" {
		if cookie = tn.cookies[caller.Login]; cookie == "" {
			var err error
			if cookie, err = tn.srv.LoginCookie(caller.Login, caller.Password); err != nil {
				t.Fatal(err)
			}
			tn.cookies[caller.Login] = cookie
		}
	}
	page := tn.srv.URL + "ext/console/tool/" + tool
	do := func(method, url string, body string, hdr map[string]string) (int, http.Header, []byte) {
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	code, _, body := do(http.MethodGet, page, "", nil)
	tok := ""
	if m := consoleToken.FindSubmatch(body); m != nil {
		tok = string(m[1])
	}
	if code != http.StatusOK && (tok != "" || code != http.StatusForbidden) {
		t.Fatalf("GET %s as %q: %d\n%s", page, caller.Login, code, body)
	}
	before := tn.received()
	if tok == "" {
		tok = strings.Repeat("0", 64)
	}
	form := url.Values{"token": {tok}, "input": {input}}
	code, reply, body := do(http.MethodPost, page+".json", form.Encode(), map[string]string{
		"Content-Type": "application/x-www-form-urlencoded", "Referer": page})
	if reply.Get("Content-Type") != "application/json" {
		t.Fatalf("POST %s.json as %q: %d %s, not JSON\n%s", page, caller.Login, code, reply.Get("Content-Type"), body)
	}
	if code == http.StatusForbidden {
		if after := tn.received(); after != before {
			t.Errorf("the console refused %q's call (%s) but the repository received %d artifacts", caller.Login, body, after-before)
		}
		return nil
	}
	a, err := ocxmcp.DecodeAnswer(body)
	if err != nil {
		t.Fatalf("POST %s.json as %q: %d: %v\n%s", page, caller.Login, code, err, body)
	}
	if want := map[bool]int{true: http.StatusOK, false: http.StatusUnprocessableEntity}[a.OK()]; code != want {
		t.Errorf("POST %s.json: %d with stopped %v, want %d", page, code, a.Stopped, want)
	}
	var direct bytes.Buffer
	a.WriteJSON(&direct)
	if !bytes.Equal(direct.Bytes(), body) {
		t.Errorf("the console's JSON is not the answer's own bytes:\n%s\nwant\n%s", body, direct.Bytes())
	}
	return a
}

// received counts the artifacts the node's repository received.
func (tn *toolNode) received() int {
	tn.t.Helper()
	r := tn.repo()
	hashes, _, err := r.Received(tn.ctx, 0)
	if err != nil {
		tn.t.Fatal(err)
	}
	return len(hashes)
}

// mcpCall calls a tool through the node's MCP server with the SDK's own
// client, over an in-memory transport: the server a session's socket
// serves (D38), here for the given caller, or as an agent login the way
// a session's server calls as its agent. An input that is not JSON cannot
// be carried by MCP, whose arguments are a JSON object inside JSON-RPC:
// the client refuses to send it, and the front end answers with the
// registry's own refusal of it, which is what a server would have said.
func mcpCall(t testing.TB, ctx context.Context, n *node.Node, caller node.Caller, agent, tool, input string) *node.Answer {
	t.Helper()
	callerOf := func() (node.Caller, error) { return caller, nil }
	if agent != "" {
		callerOf = func() (node.Caller, error) { return tools.Of(n).AgentCaller(agent) }
	}
	if !json.Valid([]byte(input)) {
		return tools.Of(n).Call(ctx, caller, tool, json.RawMessage(input))
	}
	srv := ocxmcp.NewServer(n, "", callerOf)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Wait()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(input)})
	if err != nil {
		t.Fatalf("mcp call %s: %v", tool, err)
	}
	a, err := ocxmcp.AnswerOf(res)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError != !a.OK() {
		t.Errorf("mcp %s: IsError %v with stopped %v", tool, res.IsError, a.Stopped)
	}
	return a
}

// hashes are full hashes in an answer, which differ between two writes
// of the same case.
var hashes = regexp.MustCompile(`\b[0-9a-f]{40}([0-9a-f]{24})?\b`)

func normal(a *node.Answer) string {
	b, _ := json.Marshal(a)
	return hashes.ReplaceAllString(string(b), "HASH")
}

// TestToolFrontEndsAnswerAlike runs each case through every front end and
// wants the same answer, hashes aside when the case writes: each front end
// writes an artifact of its own (a reply), so its hash is the one thing
// that legitimately differs; normal replaces every full hash. The console
// answers only an admin or setup caller (D31): every other case's caller
// is refused there with 403 and nothing written, which consoleCall checks.
func TestToolFrontEndsAnswerAlike(t *testing.T) {
	tn := newToolNode(t)
	tn.n.Caller = tn.admin()
	thread := tn.n.Thread(tn.ctx, node.PostInput{Title: "A thread", Text: "hello"})
	if !thread.OK() {
		t.Fatalf("thread: %s", *thread.Stopped)
	}
	root := *thread.Result
	const base = `"objective": "Keep docs in step.", "budget": {"wall": "2h"}, "model": "m-1"`
	for _, c := range []struct {
		name   string
		caller node.Caller
		tool   string
		input  string
		ok     bool
	}{
		{"post", node.Caller{Login: tPerson, Password: tPersonPW}, "post", `{"to": "` + root[:10] + `", "text": "a reply"}`, true},
		{"post by the admin", tn.admin(), "post", `{"to": "` + root[:10] + `", "text": "the admin's reply"}`, true},
		{"post dry run", tn.admin(), "post", `{"to": "` + root + `", "text": "a reply", "dry_run": true}`, true},
		{"post unknown field", tn.admin(), "post", `{"to": "` + root + `", "text": "x", "title": "t"}`, false},
		{"post short hash", tn.admin(), "post", `{"to": "` + root[:9] + `", "text": "x"}`, false},
		{"post no such post", tn.admin(), "post", `{"to": "0000000000", "text": "x"}`, false},
		{"post not JSON", tn.admin(), "post", `{"to": `, false},
		{"create dry run", tn.admin(), "create", `{` + base + `, "user": "docs-9", "runner": "native", "dry_run": true}`, true},
		{"create by a person", node.Caller{Login: tPerson, Password: tPersonPW}, "create", `{` + base + `}`, false},
		{"create unknown restriction", tn.admin(), "create", `{` + base + `, "restrict": {"no_password": true, "sudo": true}}`, false},
		{"create unknown budget", tn.admin(), "create", `{"objective": "o", "budget": {"wall": "2h", "cpu": 9}}`, false},
		{"audit a post", tn.admin(), "audit", `{"checkin": "` + root + `", "verdict": "pass", "reason": "r", "against": "PLAN.md"}`, false},
		{"audit bad verdict", tn.admin(), "audit", `{"checkin": "` + root + `", "verdict": "ok", "reason": "r", "against": "PLAN.md"}`, false},
		{"push by a person", node.Caller{Login: tPerson, Password: tPersonPW}, "push", `{}`, false},
		{"stop a post that is no record", tn.admin(), "stop", `{"record": "` + root + `"}`, false},
		{"stop by a person", node.Caller{Login: tPerson, Password: tPersonPW}, "stop", `{"record": "` + root + `"}`, false},
		{"no caller", node.Caller{}, "post", `{"to": "` + root + `", "text": "x"}`, false},
		{"a key twice", tn.admin(), "post", `{"to": "` + root + `", "to": "` + root + `", "text": "x"}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var first string
			for i, fe := range frontEnds {
				a := fe.call(tn, c.caller, "", c.tool, c.input)
				if privileged := c.caller.Login == tn.srv.AdminLogin; fe.adminOnly && !privileged {
					if a != nil {
						t.Errorf("%s answered %q, who holds neither admin nor setup: %s", fe.name, c.caller.Login, normal(a))
					}
					continue
				} else if a == nil {
					t.Fatalf("%s refused %q", fe.name, c.caller.Login)
				}
				if a.OK() != c.ok {
					t.Errorf("%s: ok %v, want %v: %v", fe.name, a.OK(), c.ok, a.Stopped)
				}
				if a.Result != nil && !a.DryRun {
					// Written as the caller (D30 for the console's viewer).
					if info, err := tn.repo().Info(tn.ctx, *a.Result); err != nil || info.Sender != c.caller.Login {
						t.Errorf("%s: %s was sent by %q (%v), not by the caller %q", fe.name, *a.Result, info.Sender, err, c.caller.Login)
					}
				}
				t.Logf("%s: %s", fe.name, normal(a))
				if i == 0 {
					first = normal(a)
				} else if got := normal(a); got != first {
					t.Errorf("%s answers\n%s\nbut %s answers\n%s", fe.name, got, frontEnds[0].name, first)
				}
			}
		})
	}
}

// TestToolCreateStopRespondsOnceAndWithdraws: create makes the agent's
// user, workspace and record and starts its session; stop (by another
// front end) has the daemon end it, answers with the end note, the
// record's one response, and leaves the user without capabilities; a
// second stop is refused, the agent not running.
func TestToolCreateStopRespondsOnceAndWithdraws(t *testing.T) {
	tn := newToolNode(t)
	in := `{"objective": "Answer what is said here.", "user": "native-1", "runner": "native", "model": "m-1", "hears": ["` + tn.srv.AdminLogin + `"],
		"budget": {"wall": "1h"}}`
	a := frontEnds[0].call(tn, tn.admin(), "", "create", in)
	if !a.OK() {
		slog, _ := os.ReadFile(filepath.Join(tn.agents, "native-1", "projects", "demo", "session", "log"))
		dlog, _ := os.ReadFile(tn.n.Layout.Log())
		t.Fatalf("create stopped: %s\n%s\nsession log:\n%s\ndaemon log:\n%s", *a.Stopped, strings.Join(a.Log, "\n"), slog, lastLines(dlog, 15))
	}
	rec := *a.Result
	r, err := tn.n.Status(tn.ctx)
	if err != nil {
		t.Fatal(err)
	}
	running := false
	for _, s := range r.Sessions {
		running = running || (s.Login == "native-1" && s.Record == rec)
	}
	if !running {
		t.Fatalf("no session of native-1 on record %s: %+v\n%s", rec, r.Sessions, strings.Join(a.Log, "\n"))
	}
	// The record is the thread's first post, by the admin, in v1's shape.
	rd := tn.repo()
	post, err := rd.Post(tn.ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := runmsg.ReadTaskRecord([]byte(post.Text))
	if err != nil || post.Sender != tn.srv.AdminLogin || post.InReplyTo != "" || tr.User != "native-1" || tr.Budget.Wall != "1h" {
		t.Fatalf("the record: sender %q, %+v, %v", post.Sender, tr, err)
	}

	stop := frontEnds[1].call(tn, tn.admin(), "", "stop", `{"record": "`+rec[:10]+`"}`)
	if !stop.OK() || stop.Result == nil {
		t.Fatalf("stop: %v\n%s", stop.Stopped, strings.Join(stop.Log, "\n"))
	}
	// The response (E5, D51) is the node user's, answering the record, in
	// its thread: stop's result.
	resp, err := rd.Post(tn.ctx, *stop.Result)
	if err != nil || resp.Sender != tn.n.Config.User || resp.Root != rec {
		t.Fatalf("the response %s: sender %q in thread %q (%v)\n%s", *stop.Result, resp.Sender, resp.Root, err, strings.Join(stop.Log, "\n"))
	}
	if b, err := messages.ReadResponse([]byte(resp.Text)); err != nil || b.Answers != rec || b.Outcome != messages.ResponseStopped {
		t.Errorf("the response: %+v, %v", b, err)
	}
	u, err := rd.User(tn.ctx, "native-1")
	if err != nil || u.Caps != "" {
		t.Errorf("the agent's user keeps capabilities %q (%v)", u.Caps, err)
	}
	again := frontEnds[0].call(tn, tn.admin(), "", "stop", `{"record": "`+rec+`"}`)
	if again.OK() || !strings.Contains(*again.Stopped, "is not running") {
		t.Errorf("a second stop: %v", again.Stopped)
	}
	ends, responses := 0, 0
	thread, err := rd.Thread(tn.ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range thread {
		if n, err := messages.ReadPost([]byte(p.Text)); err == nil {
			if _, ok := n.(*messages.EndNote); ok && p.Sender == tn.n.Config.User {
				ends++
			}
		}
		if _, err := messages.ReadResponse([]byte(p.Text)); err == nil {
			responses++
			if p.Sender != tn.n.Config.User {
				t.Errorf("a response %s by %q, not the node user", p.Hash, p.Sender)
			}
		}
	}
	if ends != 1 || responses != 1 {
		t.Errorf("the record has %d end notes by the node user and %d responses, want exactly 1 of each", ends, responses)
	}
}

// TestToolFlags: the friendly flags set the input's fields; --help says
// how; ocx tool list prints the registry.
func TestToolFlags(t *testing.T) {
	tn := newToolNode(t)
	tn.n.Caller = tn.admin()
	thread := tn.n.Thread(tn.ctx, node.PostInput{Title: "A thread", Text: "hello"})
	var out, errb bytes.Buffer
	t.Setenv("OCX_PASSWORD", tn.srv.AdminPassword)
	code := run(tn.ctx, []string{"tool", "post", "--agents", tn.agents, "--user", tn.srv.AdminLogin, "--to", *thread.Result, "--text", "by flags", "--dry-run"}, &out, &errb)
	var a node.Answer
	if err := json.Unmarshal(out.Bytes(), &a); err != nil || code != 0 || !a.DryRun || !a.OK() {
		t.Fatalf("exit %d, %s %s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := run(tn.ctx, []string{"tool", "list"}, &out, &errb); code != 0 {
		t.Fatalf("tool list: exit %d: %s", code, errb.String())
	}
	var tools []tools.Tool
	if err := json.Unmarshal(out.Bytes(), &tools); err != nil || len(tools) != 5 || tools[2].Name != "audit" {
		t.Errorf("tool list: %v %s", err, out.String())
	}
	errb.Reset()
	if code := run(tn.ctx, []string{"tool", "audit", "--help"}, &out, &errb); code != 0 || !strings.Contains(errb.String(), "-against") {
		t.Errorf("tool audit --help: exit %d: %s", code, errb.String())
	}
	if code := run(tn.ctx, []string{"tool", "launch"}, &out, &errb); code != 2 {
		t.Errorf("an unknown tool exits %d, want 2", code)
	}
}

// TestToolCreateWallEndsTheSession: a record's budget.wall is enforced
// (E3, E9) by the daemon (D40): past it the daemon sends TERM, the session
// writes its stopped note for the signal, and the daemon's end note (the
// record's response) names the budget, wall.
func TestToolCreateWallEndsTheSession(t *testing.T) {
	tn := newToolNode(t)
	a := frontEnds[1].call(tn, tn.admin(), "", "create", `{"objective": "Wait.", "user": "native-2", "runner": "native", "model": "m-1", "budget": {"wall": "2s"}}`)
	if !a.OK() {
		t.Fatalf("create stopped: %s\n%s", *a.Stopped, strings.Join(a.Log, "\n"))
	}
	rec := *a.Result
	rd := tn.repo()
	var stopped *messages.StoppedNote
	var end *messages.EndNote
	for deadline := time.Now().Add(20 * time.Second); (stopped == nil || end == nil) && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		thread, err := rd.Thread(tn.ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range thread {
			n, err := messages.ReadPost([]byte(p.Text))
			if err != nil {
				continue
			}
			switch x := n.(type) {
			case *messages.StoppedNote:
				if p.Sender == "native-2" {
					stopped = x
				}
			case *messages.EndNote:
				if p.Sender == tn.n.Config.User {
					end = x
				}
			}
		}
	}
	if stopped == nil || end == nil {
		t.Fatalf("no stopped note (%v) or no end note (%v) within 20 s of a 2 s wall", stopped, end)
	}
	if stopped.Cause != messages.StopBySignal || stopped.Signal != "SIGTERM" {
		t.Errorf("the session stopped by %s %s, want signal SIGTERM: the daemon's", stopped.Cause, stopped.Signal)
	}
	if end.Budget != messages.LimitWall || !strings.Contains(end.Note, "past its wall limit of 2s") {
		t.Errorf("the end note %s, want budget wall", end)
	}
	// The end note is the response, so the daemon that wrote it withdraws
	// every capability of the agent's user (E5, D35), no stop asked.
	var caps string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		u, err := rd.User(tn.ctx, "native-2")
		if err != nil {
			t.Fatal(err)
		}
		if caps = u.Caps; caps == "" {
			break
		}
	}
	if caps != "" {
		dlog, _ := os.ReadFile(tn.n.Layout.Log())
		t.Fatalf("the agent's user keeps capabilities %q after its response\ndaemon log:\n%s", caps, lastLines(dlog, 15))
	}
	st, err := tn.n.Status(tn.ctx)
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, l := range st.Logins {
		if l.Login != "native-2" {
			continue
		}
		for _, acc := range l.Accounts {
			listed = true
			if acc.Capabilities != "" {
				t.Errorf("the status shows native-2 on %s with capabilities %q", acc.Project, acc.Capabilities)
			}
		}
	}
	if !listed {
		t.Errorf("the status lists no account of native-2: %+v", st.Logins)
	}
	thread, err := rd.Thread(tn.ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	ends := 0
	for _, p := range thread {
		if n, err := messages.ReadPost([]byte(p.Text)); err == nil {
			if _, ok := n.(*messages.EndNote); ok {
				ends++
			}
		}
	}
	if ends != 1 {
		t.Errorf("%d end notes on the record, want exactly one", ends)
	}
}
