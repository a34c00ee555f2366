package console

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/release"
	"github.com/ocx-go/ocx/cmd/internal/tools"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/modelapi"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const evil = `<script>alert("x")</script>`

// TestPagesRender: every page renders with its data filled in, for an
// admin and for a reader, and whatever the data holds is escaped.
func TestPagesRender(t *testing.T) {
	k := messages.WorkspaceKey{Login: "agent-1", Project: "demo"}
	mark := uint64(7)
	sess := &messages.SessionStatus{Login: "agent-1", Project: "demo", Record: strings.Repeat("a", 64), PID: 42, StartTime: 9,
		StartedBy: messages.OriginDaemon, State: messages.SessionIdle, Listening: true, Release: evil, Older: true, Hears: []string{"admin"}}
	code := 0
	end := &node.SessionEnd{End: &messages.EndNote{Status: messages.EndExited, ExitCode: &code, Seen: time.Unix(1_700_000_000, 0)},
		Report: &messages.ReportNote{Outcome: messages.ReportDone, Summary: evil}}
	built := time.Unix(1_700_000_000, 0)
	data := map[string]any{
		"index":  nil,
		"hook":   hookData{Hooks: []messages.HookStatus{{Project: "demo", Repository: evil, Installed: true, Newest: 9, Mark: &mark}}},
		"logins": struct{ Logins []loginRow }{[]loginRow{{Login: "agent-1", Here: true, Caps: evil}}},
		"workspaces": struct{ Workspaces []messages.WorkspaceStatus }{[]messages.WorkspaceStatus{{Login: "agent-1", Project: "demo",
			Record: strings.Repeat("b", 64), State: messages.WorkspaceIdle}}},
		"workspace-add": workspaceAddData{Templates: []string{"small"}, Template: "small", TemplateError: evil, Logins: []string{"agent-1"},
			Threads: []fossilio.Thread{{Root: strings.Repeat("c", 64), Title: evil}}, Branches: []string{"trunk"}, Sandbox: evil},
		"workspace":     workspaceData{Key: k, State: messages.WorkspaceActive, Record: strings.Repeat("b", 64), Definition: evil, Session: sess, End: endText(end), Log: evil},
		"session-start": sessionStartData{Key: k, Templates: []string{"ci"}, Template: "ci", Kind: "llm", Command: evil, Runner: "claude", Model: evil, Lifetime: "completes", Hears: "admin"},
		"sessions": sessionsData{Sessions: []messages.SessionStatus{*sess}, Ended: []endedRow{{Key: messages.WorkspaceKey{Login: "agent-2", Project: "demo"},
			Record: strings.Repeat("f", 64), Completed: reportText(end.Report), End: endText(end)}}},
		"session": sessionData{Key: k, Session: sess, Completed: reportText(end.Report), End: endText(end), ListenerCount: 2, Log: evil,
			Response: &messages.ResponseStatus{Record: strings.Repeat("b", 64), Hash: strings.Repeat("f", 64), Outcome: messages.ResponseStopped, Note: evil},
			Usage:    &messages.SessionUsage{Model: &messages.ModelCount{Requests: 1}, Turns: 1, Runner: &messages.RunnerReport{Cost: messages.CostUSD(evil)}}},
		"restart": restartData{Release: evil, Picks: []string{evil}, Answer: &node.Answer{Tool: "session restart", DryRun: true, Sessions: []node.SessionOutcome{
			{Workspace: evil, Start: strings.Repeat("d", 64), Outcome: node.OutcomeWouldRestart, Release: evil, Why: evil},
			{Workspace: "agent-2/demo", Start: strings.Repeat("e", 64), Outcome: node.OutcomeLeftAlone, Why: evil}}}},
		"releases": releasesData{State: &release.State{Root: evil, Current: &release.Info{Checkin: strings.Repeat("a", 40), Version: evil, Built: &built},
			Previous: &release.Info{Checkin: strings.Repeat("b", 40), Error: evil}, Staged: []release.Info{{Checkin: strings.Repeat("c", 40), Version: evil}},
			Next: strings.Repeat("c", 40), Daemon: messages.DaemonStatus{Running: true, PID: 42, Release: evil, Reexec: &messages.ReexecOutcome{At: built, PID: 42, Error: evil}}},
			Older: []messages.SessionStatus{*sess}},
		"release-confirm": releaseConfirmData{Action: "accept", Checkin: strings.Repeat("c", 40), Answer: &node.Answer{Tool: "release accept", DryRun: true, Log: []string{evil}}},
		"tools":           struct{ Tools []tools.Tool }{[]tools.Tool{{Name: "post", Description: evil}}},
		"tool": toolData{Tool: tools.Tool{Name: "post", Description: evil, InputSchema: []byte(evil)}, Fields: []formField{{Name: "to", Help: evil, Value: evil}, {Name: "text", Value: evil, Long: true}},
			Input: evil, Answer: &node.Answer{Tool: "post", Log: []string{evil}, Result: ptr(evil), Stopped: ptr(evil)}, AnswerJSON: evil},
		"patterns": patternsData{Patterns: []tools.RunPatternInfo{{Name: "echo", Page: "run/echo", Version: strings.Repeat("a", 64), Sender: evil, Layers: []string{evil}},
			{Name: "broken", Page: "run/broken", Version: strings.Repeat("b", 64), Sender: "admin", Problem: evil}}},
		"pattern": patternData{Pattern: tools.RunPatternInfo{Name: "echo", Page: "run/echo", Version: strings.Repeat("a", 64), Sender: evil, Text: evil, Problem: evil},
			Objective: evil, Fields: evil, Answer: &node.Answer{Tool: "run post", DryRun: true, Log: []string{evil}, Result: ptr(evil), Stopped: ptr(evil)}},
		"listeners": listenersData{Key: k, Kind: "ticket", Listeners: []messages.Listener{{Login: "agent-1", Project: "demo", Kind: messages.ListenTicket, Names: evil}},
			Recent: []option{{Value: evil, Label: evil}}},
	}
	for name, d := range data {
		for _, admin := range []bool{true, false} {
			v := view{Title: evil, Script: "/ext/console", Nonce: "abc123", Project: "demo", Viewer: evil, Admin: admin, Data: d}
			if admin {
				v.Token = "tok"
			}
			var b bytes.Buffer
			if err := pages().ExecuteTemplate(&b, name, v); err != nil {
				t.Fatalf("%s (admin %v): %v", name, admin, err)
			}
			out := b.String()
			if strings.Contains(out, evil) {
				t.Errorf("%s: the data is not escaped:\n%s", name, out)
			}
			if !strings.HasPrefix(out, "<div class='fossil-doc'") {
				t.Errorf("%s: does not open with Fossil's fossil-doc div, so Fossil would not wrap it in its skin", name)
			}
			if !strings.Contains(out, `<script nonce="abc123">`) {
				t.Errorf("%s: the page's script carries no nonce", name)
			}
			if forms := strings.Count(out, `method="POST"`); forms != strings.Count(out, `name="token" value="tok"`) {
				t.Errorf("%s (admin %v): %d POST forms, %d tokens", name, admin, forms, strings.Count(out, `name="token"`))
			}
			if !admin && strings.Contains(out, `method="POST"`) {
				t.Errorf("%s: a reader is shown a button", name)
			}
		}
	}
	var b bytes.Buffer
	if err := pages().ExecuteTemplate(&b, "releases", view{Script: "/ext/console", Admin: true, Token: "tok", Data: data["releases"]}); err != nil ||
		!strings.Contains(b.String(), `id="ocx-rollback"`) || !strings.Contains(b.String(), `class="ocx-inline ocx-accept"`) || !strings.Contains(b.String(), `id="ocx-older-restart"`) {
		t.Fatalf("the releases page shows an admin no Accept, Roll back or restart link: %v\n%s", err, b.String())
	}
	b.Reset()
	if err := pages().ExecuteTemplate(&b, "answer", view{Script: "/ext/console", Answer: &node.Answer{Tool: "release accept", Log: []string{evil}, Stopped: ptr(evil)},
		Reexec: &messages.ReexecOutcome{At: built, PID: 42, Error: evil}}); err != nil || strings.Contains(b.String(), evil) || !strings.Contains(b.String(), `data-ocx-reexec="error"`) {
		t.Fatalf("the answer page of an accept: %v\n%s", err, b.String())
	}
	if !strings.Contains(b.String(), "the old image runs on") {
		t.Fatalf("the answer page of an exec that failed does not say the old image runs on:\n%s", b.String())
	}
	// A release rolled back after its daemon ended (D73): no old image runs.
	b.Reset()
	if err := pages().ExecuteTemplate(&b, "answer", view{Script: "/ext/console", Answer: &node.Answer{Tool: "release accept", Log: []string{}, Stopped: ptr("x")},
		Reexec: &messages.ReexecOutcome{At: built, PID: 42, Error: "release b was rolled back", State: messages.ReexecRolledBack}}); err != nil ||
		strings.Contains(b.String(), "old image") || !strings.Contains(b.String(), "release b was rolled back") {
		t.Fatalf("the answer page of a release rolled back: %v\n%s", err, b.String())
	}
	b.Reset()
	if err := pages().ExecuteTemplate(&b, "answer", view{Script: "/ext/console", Answer: &node.Answer{Tool: "x", Log: []string{evil}, Stopped: ptr(evil),
		Sessions: []node.SessionOutcome{{Workspace: evil, Outcome: node.OutcomeRestarted, Launch: evil, Release: evil, Why: evil}}}}); err != nil || strings.Contains(b.String(), evil) || !strings.Contains(b.String(), `id="ocx-restart-outcomes"`) {
		t.Fatalf("the answer page: %v\n%s", err, b.String())
	}
}

func ptr(s string) *string { return &s }

// TestSessionPageShowsUsage: the session page shows a running session's
// use of the node (D50), the node's count of its model apart from what its
// runner reported of itself, and an ended one's as its end note says it.
func TestSessionPageShowsUsage(t *testing.T) {
	k := messages.WorkspaceKey{Login: "agent-1", Project: "demo"}
	u := &messages.SessionUsage{Model: &messages.ModelCount{Requests: 2, Tokens: modelapi.Tokens{Input: 250, Output: 30, Cached: 100}, Refused: 1},
		Limit: 1000, Turns: 3, WallMS: 5400, CPUMS: 800, Runner: &messages.RunnerReport{Tokens: modelapi.Tokens{Input: 2, Output: 2}, Cost: "0.0123"}}
	for _, ended := range []bool{false, true} {
		var b bytes.Buffer
		d := sessionData{Key: k, Usage: u, Ended: ended}
		if err := pages().ExecuteTemplate(&b, "session", view{Script: "/ext/console", Data: d}); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for _, want := range []string{`id="ocx-tokens-in">250<`, `id="ocx-tokens-out">30<`, "(100 cached)", "in 2 requests", `id="ocx-tokens-limit">1000<`,
			"1 refused past the limit", `id="ocx-turns">3<`, "5.4 s wall, 0.8 s CPU", "what its runner reported (its own word)", "2 tokens in, 2 out, $0.0123"} {
			if !strings.Contains(out, want) {
				t.Errorf("ended %v: the page lacks %q:\n%s", ended, want, out)
			}
		}
		if caption := "What its last run used"; ended != strings.Contains(out, caption) {
			t.Errorf("ended %v: caption %q shown: %v", ended, caption, !ended)
		}
	}
	var b bytes.Buffer
	if err := pages().ExecuteTemplate(&b, "session", view{Script: "/ext/console", Data: sessionData{Key: k}}); err != nil || strings.Contains(b.String(), "ocx-usage") {
		t.Errorf("a session with no usage shows a usage table: %v", err)
	}
}

// TestCheckPost: a button acts only for a POST from a page of this
// repository, carrying the token of the viewer's own cookie, pressed by an
// admin; each other case is refused, with its reason.
func TestCheckPost(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	cookie := "fossil-0123456789abcdef=HASH%2F0123456789abcdef%2Fadmin"
	other := "fossil-0123456789abcdef=OTHER%2F0123456789abcdef%2Fbob"
	f := Fossil{Viewer: "admin", Caps: "as", Base: "http://127.0.0.1:8080", Cookie: cookie}
	post := func(method, referer, tok string) *http.Request {
		form := url.Values{"token": {tok}}
		r := httptest.NewRequest(method, "/ext/console/hook/install", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if referer != "" {
			r.Header.Set("Referer", referer)
		}
		return r
	}
	good := token(key, cookie)
	for _, c := range []struct {
		name   string
		r      *http.Request
		f      Fossil
		status int
		words  string
	}{
		{"a GET", post(http.MethodGet, f.Base+"/ext/console/hook", good), f, 405, "a button is a POST"},
		{"no Referer", post(http.MethodPost, "", good), f, 403, "not sent from a page of this repository"},
		{"another port", post(http.MethodPost, "http://127.0.0.1:9090/attack", good), f, 403, "not sent from a page"},
		{"a host that starts like it", post(http.MethodPost, "http://127.0.0.1:8080.evil.example/x", good), f, 403, "not sent from a page"},
		{"no token", post(http.MethodPost, f.Base+"/ext/console/hook", ""), f, 403, "token is not this viewer's"},
		{"another viewer's token", post(http.MethodPost, f.Base+"/ext/console/hook", token(key, other)), f, 403, "token is not this viewer's"},
		{"another key's token", post(http.MethodPost, f.Base+"/ext/console/hook", token(bytes.Repeat([]byte{8}, 32), cookie)), f, 403, "token is not this viewer's"},
		{"not logged in", post(http.MethodPost, f.Base+"/ext/console/hook", good), Fossil{Caps: "o", Base: f.Base}, 403, "log in first"},
		{"a reader", post(http.MethodPost, f.Base+"/ext/console/hook", good), Fossil{Viewer: "admin", Caps: "oi", Base: f.Base, Cookie: cookie}, 403, "neither admin nor setup"},
	} {
		ref := checkPost(c.r, c.f, key)
		if ref == nil || ref.status != c.status || !strings.Contains(ref.reason, c.words) {
			t.Errorf("%s: %+v, want %d saying %q", c.name, ref, c.status, c.words)
		}
	}
	if ref := checkPost(post(http.MethodPost, f.Base+"/ext/console/hook", good), f, key); ref != nil {
		t.Fatalf("the admin's own form: %v", ref)
	}
}

// TestCGIWriter: the reply is a CGI reply Fossil reads: a Status line, the
// headers (a header's CR or LF cannot start another), a blank line, the
// body; a reply without a Content-Type is plain text, never sniffed.
func TestCGIWriter(t *testing.T) {
	w := newCGIWriter()
	w.Header().Set("X-Name", "a\r\nSet-Cookie: x=1")
	w.WriteHeader(http.StatusForbidden)
	w.Write([]byte("<html>"))
	var b bytes.Buffer
	if code := w.flush(&b); code != 0 {
		t.Fatal(code)
	}
	want := "Status: 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nX-Name: a  Set-Cookie: x=1\r\nContent-Length: 6\r\n\r\n<html>"
	if b.String() != want {
		t.Fatalf("reply:\n%q\nwant\n%q", b.String(), want)
	}
}

// TestFossilFromEnv: the request's Fossil side, from Fossil's variables
// alone; a request without FOSSIL_REPOSITORY did not come from Fossil.
func TestFossilFromEnv(t *testing.T) {
	env := map[string]string{"FOSSIL_USER": "admin", "FOSSIL_CAPABILITIES": "as", "FOSSIL_NONCE": "n1", "FOSSIL_REPOSITORY": "demo.fossil",
		"REQUEST_SCHEME": "https", "HTTP_HOST": "example.org", "FOSSIL_URI": "/cgi/demo", "SCRIPT_NAME": "/cgi/demo/ext/console", "PATH_INFO": "/hook"}
	f, err := FossilFromEnv(func(k string) string { return env[k] })
	if err != nil || f.Base != "https://example.org/cgi/demo" || f.Script != "/ext/console" || f.Path != "/hook" || !f.Admin() || f.Nonce != "n1" {
		t.Fatalf("%+v %v", f, err)
	}
	delete(env, "FOSSIL_REPOSITORY")
	if _, err := FossilFromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "extroot") {
		t.Fatalf("without Fossil: %v", err)
	}
	for caps, want := range map[string][2]bool{"cghjnorz": {true, false}, "as": {true, true}, "s": {true, true}, "gh": {false, false}} {
		g := Fossil{Viewer: "v", Caps: caps}
		if g.MayRead() != want[0] || g.Admin() != want[1] {
			t.Errorf("caps %q: read %v admin %v, want %v", caps, g.MayRead(), g.Admin(), want)
		}
	}
}

// TestLoadKey: the key is made once, 0600, and two consoles starting at
// once read the same one; a key file another user could read is refused.
func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	keys := make([][]byte, 8)
	errs := make([]error, 8)
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys[i], errs[i] = loadKey(dir)
		}()
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil || !bytes.Equal(keys[i], keys[0]) || len(keys[i]) != 32 {
			t.Fatalf("load %d: %x %v, want the one key", i, keys[i], errs[i])
		}
	}
	st, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file %v %v", st, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".console.key.*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	os.Chmod(filepath.Join(dir, KeyFile), 0o644)
	if _, err := loadKey(dir); err == nil || !strings.Contains(err.Error(), "0600") {
		t.Fatalf("a readable key: %v", err)
	}
}

// TestLoginCookie: the viewer's cookie is the one named for this project,
// among any others the browser sends; a malformed one is none.
func TestLoginCookie(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Cookie", "fossil-ffffffffffffffff=A%2Fffffffffffffffff%2Fbob; theme=dark; fossil-0123456789abcdef=H%2F0123456789abcdef%2Fadmin")
	if got := loginCookie(r, "0123456789abcdef"); got != "fossil-0123456789abcdef=H%2F0123456789abcdef%2Fadmin" {
		t.Fatalf("got %q", got)
	}
	r.Header.Set("Cookie", "fossil-0123456789abcdef=garbage")
	if got := loginCookie(r, "0123456789abcdef"); got != "" {
		t.Fatalf("a malformed cookie: %q", got)
	}
}

// TestWithWorkspaceDir: the form's stand-in becomes the workspace's own
// directory, which is made read-write once.
func TestWithWorkspaceDir(t *testing.T) {
	sb := `{"network": false, "read_only": ["/usr"], "read_write": ["WORKSPACE"], "homes": [], "path": ["/usr/bin"]}`
	got, err := messages.DecodeSandbox(withWorkspaceDir([]byte(sb), "/srv/agents/a/projects/demo"))
	if err != nil || len(got.ReadWrite) != 1 || got.ReadWrite[0] != "/srv/agents/a/projects/demo" {
		t.Fatalf("%+v %v", got, err)
	}
	got, err = messages.DecodeSandbox(withWorkspaceDir([]byte(`{"network": false, "read_only": [], "read_write": [], "homes": [], "path": []}`), "/w"))
	if err != nil || len(got.ReadWrite) != 1 || got.ReadWrite[0] != "/w" {
		t.Fatalf("added: %+v %v", got, err)
	}
	if bad := withWorkspaceDir([]byte(`{"memory": 1}`), "/w"); !strings.Contains(string(bad), "memory") {
		t.Fatalf("a bad sandbox is passed on for the action to refuse: %s", bad)
	}
}

func TestShellCommand(t *testing.T) {
	if got := shellCommand([]string{"/bin/sh", "-c", "make test"}); got != "make test" {
		t.Errorf("%q", got)
	}
	if got := shellCommand([]string{"printf", "it's %s"}); got != `'printf' 'it'\''s %s'` {
		t.Errorf("%q", got)
	}
}

// TestToolPages: /tools lists exactly the registry's tools, each with a
// link to its form; each form offers exactly the tool's friendly fields,
// the raw JSON and the dry-run box, ticked; a reader sees no form.
func TestToolPages(t *testing.T) {
	var b bytes.Buffer
	if err := pages().ExecuteTemplate(&b, "tools", view{Script: "/ext/console", Data: struct{ Tools []tools.Tool }{tools.Tools()}}); err != nil {
		t.Fatal(err)
	}
	list := b.String()
	if got := strings.Count(list, "data-ocx-tool="); got != len(tools.Tools()) {
		t.Errorf("the tools page lists %d tools, the registry %d", got, len(tools.Tools()))
	}
	for _, tool := range tools.Tools() {
		if !strings.Contains(list, `href="$ROOT/ext/console/tool/`+tool.Name+`"`) {
			t.Errorf("the tools page has no link to %s", tool.Name)
		}
		for _, admin := range []bool{true, false} {
			b.Reset()
			v := view{Script: "/ext/console", Admin: admin, Token: "tok", Viewer: "admin", Data: toolFormData(tool, nil)}
			if err := pages().ExecuteTemplate(&b, "tool", v); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			if !admin {
				if strings.Contains(out, "<form") {
					t.Errorf("%s: a reader sees a form", tool.Name)
				}
				continue
			}
			fields := tools.ToolFields(tool.Name)
			if got := strings.Count(out, `id="ocx-field-`); got != len(fields) {
				t.Errorf("%s: %d fields on the form, %d friendly fields", tool.Name, got, len(fields))
			}
			for _, f := range fields {
				if !strings.Contains(out, `name="`+f.Name+`"`) {
					t.Errorf("%s: no field %s", tool.Name, f.Name)
				}
			}
			if !strings.Contains(out, `id="ocx-tool-dry" checked`) || !strings.Contains(out, `name="input"`) || !strings.Contains(out, `name="dry_run_box"`) {
				t.Errorf("%s: no raw input or no ticked dry-run box:\n%s", tool.Name, out)
			}
		}
	}
	if _, ok := toolByName("launch"); ok {
		t.Error("a name the registry lacks is a tool")
	}
}

// TestToolInput: the form's fields over its raw JSON, dry_run as its box
// says; without fields or box, the raw JSON exactly as given.
func TestToolInput(t *testing.T) {
	for _, c := range []struct {
		name string
		form url.Values
		want string
	}{
		{"raw alone", url.Values{"input": {`{"to": "a", "to": "b"}`}}, `{"to": "a", "to": "b"}`},
		{"fields, box ticked", url.Values{"to": {"abc"}, "text": {"hi"}, "input": {""}, "dry_run_box": {"1"}, "dry_run": {"true"}}, `{"dry_run":true,"text":"hi","to":"abc"}`},
		{"box unticked", url.Values{"to": {" "}, "input": {`{"to": "abc", "text": "x", "dry_run": true}`}, "dry_run_box": {"1"}}, `{"dry_run":false,"text":"x","to":"abc"}`},
		{"a field of another tool", url.Values{"record": {"abc"}, "input": {`{}`}}, `{}`},
	} {
		if got := string(toolInput("post", c.form)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestToolPath(t *testing.T) {
	if n, j := toolPath("post.json"); n != "post" || !j {
		t.Errorf("post.json: %q %v", n, j)
	}
	if n, j := toolPath("post"); n != "post" || j {
		t.Errorf("post: %q %v", n, j)
	}
	for path, want := range map[string]bool{"/tool/post.json": true, "tool/x.json/": true, "/tool/post": false, "/tools.json": false, "/tool/a/b.json": false, "/state": false} {
		if toolJSON(path) != want {
			t.Errorf("toolJSON(%q) = %v", path, !want)
		}
	}
}

// TestSessionPageShowsTheResponse (D51): a session's page shows the
// response of its last run's v1 record: its outcome, its note and a link to
// its post and to the record.
func TestSessionPageShowsTheResponse(t *testing.T) {
	k := messages.WorkspaceKey{Login: "agent-1", Project: "demo"}
	rec, hash := strings.Repeat("b", 64), strings.Repeat("f", 64)
	d := sessionData{Key: k, End: "signaled SIGTERM", Response: &messages.ResponseStatus{Record: rec, Hash: hash,
		Outcome: messages.ResponseStopped, Note: "signaled SIGTERM; its agent's last report: done"}}
	var b bytes.Buffer
	if err := pages().ExecuteTemplate(&b, "session", view{Script: "/ext/console", Project: "demo", Data: d}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{`id="ocx-response"`, `<b data-ocx-field="outcome" id="ocx-response-outcome">stopped</b>`,
		"signaled SIGTERM; its agent&#39;s last report: done", "/forumpost/" + hash, "/forumpost/" + rec, "by agent-1"} {
		if !strings.Contains(out, want) {
			t.Errorf("the session page lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	d.Response = nil
	if err := pages().ExecuteTemplate(&b, "session", view{Script: "/ext/console", Project: "demo", Data: d}); err != nil || strings.Contains(b.String(), "ocx-response") {
		t.Errorf("a page without a response shows one: %v", err)
	}
}

// TestSessionsPageFlagsAndEnds (issue 27 items 6 and 10): the Sessions page
// flags a session on a release older than current, and only that one, and
// says "completed: REPORT" of a workspace whose last session ended on its
// report, "ended: ..." of one that ended otherwise.
func TestSessionsPageFlagsAndEnds(t *testing.T) {
	older := messages.SessionStatus{Login: "agent-1", Project: "demo", Record: strings.Repeat("a", 64), PID: 42,
		StartedBy: messages.OriginDaemon, State: messages.SessionIdle, Listening: true, Release: "aaaa", Older: true}
	current := older
	current.Login, current.Release, current.Older = "agent-2", "bbbb", false
	code := 0
	seen := time.Unix(1_700_000_000, 0)
	done := &node.SessionEnd{End: &messages.EndNote{Status: messages.EndExited, ExitCode: &code, Seen: seen},
		Report: &messages.ReportNote{Outcome: messages.ReportDone, Summary: "all green"}}
	stopped := &node.SessionEnd{End: &messages.EndNote{Status: messages.EndExited, ExitCode: &code, Seen: seen}}
	d := sessionsData{Sessions: []messages.SessionStatus{older, current}, Ended: []endedRow{
		{Key: messages.WorkspaceKey{Login: "agent-3", Project: "demo"}, Completed: reportText(done.Report), End: endText(done)},
		{Key: messages.WorkspaceKey{Login: "agent-4", Project: "demo"}, End: endText(stopped)}}}
	var b bytes.Buffer
	if err := pages().ExecuteTemplate(&b, "sessions", view{Script: "/ext/console", Nonce: "n", Project: "demo", Data: d}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	row := func(attr string) string {
		i := strings.Index(out, attr)
		if i < 0 {
			t.Fatalf("no row %s:\n%s", attr, out)
		}
		j := strings.Index(out[i:], "</tr>")
		return out[i : i+j]
	}
	if r := row(`data-ocx-session="agent-1/demo"`); !strings.Contains(r, `class="ocx-flag"`) || !strings.Contains(r, "older than the current release") {
		t.Errorf("the session on an older release is not flagged: %s", r)
	}
	if r := row(`data-ocx-session="agent-2/demo"`); strings.Contains(r, "ocx-flag") {
		t.Errorf("the session on the current release is flagged: %s", r)
	}
	if r := row(`data-ocx-ended="agent-3/demo"`); !strings.Contains(r, `<td data-ocx-field="end">completed: done: all green</td>`) {
		t.Errorf("the completed session's row: %s", r)
	}
	if r := row(`data-ocx-ended="agent-4/demo"`); !strings.Contains(r, "ended: exited 0 at 2023-11-14") || strings.Contains(r, "completed") {
		t.Errorf("the stopped session's row: %s", r)
	}
}
