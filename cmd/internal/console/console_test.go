package console

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ocx-go/ocx/cmd/internal/consolepage"
	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/release"
	"github.com/ocx-go/ocx/cmd/internal/tools"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const evil = `<script>alert("x")</script>`

// TestPagesRender: every page of the forms, the releases and the tools
// renders with its data filled in, for an admin and for a reader, and
// whatever the data holds is escaped (consolepage's test has the pages
// read by GET).
func TestPagesRender(t *testing.T) {
	k := messages.WorkspaceKey{Login: "agent-1", Project: "demo"}
	sess := &messages.SessionStatus{Login: "agent-1", Project: "demo", Record: strings.Repeat("a", 64), PID: 42, StartTime: 9,
		StartedBy: messages.OriginDaemon, State: messages.SessionIdle, Listening: true, Release: evil, Older: true, Hears: []string{"admin"}}
	built := time.Unix(1_700_000_000, 0)
	data := map[string]any{
		"workspace-add": workspaceAddData{Templates: []string{"small"}, Template: "small", TemplateError: evil, Logins: []string{"agent-1"},
			Threads: []fossilio.Thread{{Root: strings.Repeat("c", 64), Title: evil}}, Branches: []string{"trunk"}, Sandbox: evil},
		"session-start": sessionStartData{Key: k, Templates: []string{"ci"}, Template: "ci", Kind: "llm", Command: evil, Runner: "claude", Model: evil, Lifetime: "completes", Hears: "admin"},
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
	}
	for name, d := range data {
		for _, admin := range []bool{true, false} {
			v := consolepage.View{Title: evil, Script: "/ext/console", Nonce: "abc123", Project: "demo", Viewer: evil, Admin: admin, Data: d}
			if admin {
				v.Token = "tok"
			}
			var b bytes.Buffer
			if err := consolepage.Pages().ExecuteTemplate(&b, name, v); err != nil {
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
	if err := consolepage.Pages().ExecuteTemplate(&b, "releases", consolepage.View{Script: "/ext/console", Admin: true, Token: "tok", Data: data["releases"]}); err != nil ||
		!strings.Contains(b.String(), `id="ocx-rollback"`) || !strings.Contains(b.String(), `class="ocx-inline ocx-accept"`) || !strings.Contains(b.String(), `id="ocx-older-restart"`) {
		t.Fatalf("the releases page shows an admin no Accept, Roll back or restart link: %v\n%s", err, b.String())
	}
	b.Reset()
	if err := consolepage.Pages().ExecuteTemplate(&b, "answer", consolepage.View{Script: "/ext/console", Answer: &node.Answer{Tool: "release accept", Log: []string{evil}, Stopped: ptr(evil)},
		Reexec: &messages.ReexecOutcome{At: built, PID: 42, Error: evil}}); err != nil || strings.Contains(b.String(), evil) || !strings.Contains(b.String(), `data-ocx-reexec="error"`) {
		t.Fatalf("the answer page of an accept: %v\n%s", err, b.String())
	}
	if !strings.Contains(b.String(), "the old image runs on") {
		t.Fatalf("the answer page of an exec that failed does not say the old image runs on:\n%s", b.String())
	}
	// A release rolled back after its daemon ended (D73): no old image runs.
	b.Reset()
	if err := consolepage.Pages().ExecuteTemplate(&b, "answer", consolepage.View{Script: "/ext/console", Answer: &node.Answer{Tool: "release accept", Log: []string{}, Stopped: ptr("x")},
		Reexec: &messages.ReexecOutcome{At: built, PID: 42, Error: "release b was rolled back", State: messages.ReexecRolledBack}}); err != nil ||
		strings.Contains(b.String(), "old image") || !strings.Contains(b.String(), "release b was rolled back") {
		t.Fatalf("the answer page of a release rolled back: %v\n%s", err, b.String())
	}
	b.Reset()
	if err := consolepage.Pages().ExecuteTemplate(&b, "answer", consolepage.View{Script: "/ext/console", Answer: &node.Answer{Tool: "x", Log: []string{evil}, Stopped: ptr(evil),
		Sessions: []node.SessionOutcome{{Workspace: evil, Outcome: node.OutcomeRestarted, Launch: evil, Release: evil, Why: evil}}}}); err != nil || strings.Contains(b.String(), evil) || !strings.Contains(b.String(), `id="ocx-restart-outcomes"`) {
		t.Fatalf("the answer page: %v\n%s", err, b.String())
	}
	// A run posted from a pattern: the command that opens a shell in its
	// sandbox (D100).
	b.Reset()
	run := strings.Repeat("f", 64)
	if err := consolepage.Pages().ExecuteTemplate(&b, "pattern", consolepage.View{Script: "/ext/console", Data: patternData{Pattern: tools.RunPatternInfo{Name: "echo"},
		Answer: &node.Answer{Tool: "run post", Log: []string{}, Result: &run}}}); err != nil || !strings.Contains(b.String(), "<code>ocx run shell "+run+"</code>") {
		t.Fatalf("the pattern page of a run posted shows no shell command: %v\n%s", err, b.String())
	}
}

func ptr(s string) *string { return &s }

// TestCheckPost: a button acts only for a POST from a page of this
// repository, carrying the token of the viewer's own cookie, pressed by an
// admin; each other case is refused, with its reason.
func TestCheckPost(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	cookie := "fossil-0123456789abcdef=HASH%2F0123456789abcdef%2Fadmin"
	other := "fossil-0123456789abcdef=OTHER%2F0123456789abcdef%2Fbob"
	f := consolepage.Fossil{Viewer: "admin", Caps: "as", Base: "http://127.0.0.1:8080", Cookie: cookie}
	post := func(method, referer, tok string) *http.Request {
		form := url.Values{"token": {tok}}
		r := httptest.NewRequest(method, "/ext/console/hook/install", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if referer != "" {
			r.Header.Set("Referer", referer)
		}
		return r
	}
	good := consolepage.Token(key, cookie)
	for _, c := range []struct {
		name   string
		r      *http.Request
		f      consolepage.Fossil
		status int
		words  string
	}{
		{"a GET", post(http.MethodGet, f.Base+"/ext/console/hook", good), f, 405, "a button is a POST"},
		{"no Referer", post(http.MethodPost, "", good), f, 403, "not sent from a page of this repository"},
		{"another port", post(http.MethodPost, "http://127.0.0.1:9090/attack", good), f, 403, "not sent from a page"},
		{"a host that starts like it", post(http.MethodPost, "http://127.0.0.1:8080.evil.example/x", good), f, 403, "not sent from a page"},
		{"no token", post(http.MethodPost, f.Base+"/ext/console/hook", ""), f, 403, "token is not this viewer's"},
		{"another viewer's token", post(http.MethodPost, f.Base+"/ext/console/hook", consolepage.Token(key, other)), f, 403, "token is not this viewer's"},
		{"another key's token", post(http.MethodPost, f.Base+"/ext/console/hook", consolepage.Token(bytes.Repeat([]byte{8}, 32), cookie)), f, 403, "token is not this viewer's"},
		{"not logged in", post(http.MethodPost, f.Base+"/ext/console/hook", good), consolepage.Fossil{Caps: "o", Base: f.Base}, 403, "log in first"},
		{"a reader", post(http.MethodPost, f.Base+"/ext/console/hook", good), consolepage.Fossil{Viewer: "admin", Caps: "oi", Base: f.Base, Cookie: cookie}, 403, "neither admin nor setup"},
	} {
		ref := checkPost(c.r, c.f, key)
		if ref == nil || ref.Status != c.status || !strings.Contains(ref.Reason, c.words) {
			t.Errorf("%s: %+v, want %d saying %q", c.name, ref, c.status, c.words)
		}
	}
	if ref := checkPost(post(http.MethodPost, f.Base+"/ext/console/hook", good), f, key); ref != nil {
		t.Fatalf("the admin's own form: %v", ref)
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
	if err := consolepage.Pages().ExecuteTemplate(&b, "tools", consolepage.View{Script: "/ext/console", Data: struct{ Tools []tools.Tool }{tools.Tools()}}); err != nil {
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
			v := consolepage.View{Script: "/ext/console", Admin: admin, Token: "tok", Viewer: "admin", Data: toolFormData(tool, nil)}
			if err := consolepage.Pages().ExecuteTemplate(&b, "tool", v); err != nil {
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
		if consolepage.ToolJSON(path) != want {
			t.Errorf("consolepage.ToolJSON(%q) = %v", path, !want)
		}
	}
}
