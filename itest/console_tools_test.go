package itest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages/toolio"
)

// The protocol v1 tools in the console (issue 14 item 2): /tools, a form
// per tool, its button and its JSON answer. cmd/ocx
// TestToolFrontEndsAnswerAlike runs every tool case through the console
// beside the registry, `ocx tool` and MCP; these tests are the pages'.

// postJSON presses a tool's button at its JSON endpoint, path.json.
func (v *viewer) postJSON(path, referer string, fields url.Values) (int, string, string) {
	v.t.Helper()
	req, err := http.NewRequest(http.MethodPost, v.base+"ext/console/"+path+".json", strings.NewReader(fields.Encode()))
	if err != nil {
		v.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Referer", referer)
	resp, err := v.c.Do(req)
	if err != nil {
		v.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// TestConsoleTools: /tools lists the registry's five tools, in its order;
// a reader sees the forms' pages without a button, and a tool the
// registry lacks has no page. The admin's button writes as the admin; a
// dry run writes nothing; a refusal is 422 with the answer's JSON on the
// page. A reader's POST with the admin's token, the admin's without a
// Referer and a tool that is none are refused, nothing written; refusals
// of the JSON endpoint are JSON.
func TestConsoleTools(t *testing.T) {
	needs(t, "ocxd")
	n := consoleNode(t)
	admin, alice := n.viewer(n.srv.AdminLogin), n.viewer(person)
	root := n.result(n.srv.AdminLogin, "thread", "--title", "Tools", "--text", "hello")
	posts := func() int { return len(n.thread(root)) }

	code, body := admin.get("tools")
	names := regexp.MustCompile(`data-ocx-tool="([a-z]+)"`).FindAllStringSubmatch(body, -1)
	var got []string
	for _, m := range names {
		got = append(got, m[1])
	}
	if code != 200 || strings.Join(got, ",") != strings.Join(toolio.ToolNames, ",") {
		t.Fatalf("/tools: %d lists %v, the registry %v", code, got, toolio.ToolNames)
	}
	if _, body := admin.get(""); !strings.Contains(body, `id="ocx-tools-link"`) {
		t.Errorf("the index does not link to the tools")
	}
	for _, tool := range toolio.ToolNames {
		code, body := alice.get("tool/" + tool)
		if code != 200 || token(body) != "" || strings.Contains(body, "<form") {
			t.Errorf("a reader's /tool/%s: %d, token %q", tool, code, token(body))
		}
	}
	if code, _ := admin.get("tool/launch"); code != 404 {
		t.Errorf("/tool/launch: %d, want 404", code)
	}

	page := n.srv.URL + "ext/console/tool/post"
	_, body = admin.get("tool/post")
	tok := token(body)
	if tok == "" || !strings.Contains(body, `id="ocx-tool-dry" checked`) {
		t.Fatalf("the admin's /tool/post has no button or no ticked dry-run box:\n%s", body)
	}
	before := posts()
	for _, c := range []struct {
		name string
		v    *viewer
		path string
		ref  string
		tok  string
		want int
	}{
		{"a reader with the admin's token", alice, "tool/post", page, tok, 403},
		{"a reader's JSON", alice, "tool/post.json", page, tok, 403},
		{"no Referer", admin, "tool/post", "", tok, 403},
		{"another site", admin, "tool/post", "http://127.0.0.2:1/x", tok, 403},
		{"no token", admin, "tool/post", page, "", 403},
		{"a tool that is none", admin, "tool/launch", page, tok, 404},
	} {
		fields := url.Values{"token": {c.tok}, "to": {root}, "text": {"forged"}, "dry_run_box": {"1"}}
		code, body := c.v.post(c.path, c.ref, fields)
		if code != c.want {
			t.Errorf("%s: %d, want %d\n%s", c.name, code, c.want, body)
		}
		if strings.HasSuffix(c.path, ".json") && !json.Valid([]byte(body)) {
			t.Errorf("%s: the JSON endpoint refused in %q", c.name, body)
		}
	}
	if posts() != before {
		t.Fatalf("a refused press wrote a post")
	}
	if code, body := admin.get("tool/post.json"); code != 405 || !json.Valid([]byte(body)) {
		t.Errorf("a GET of the JSON endpoint: %d %s", code, body)
	}

	// The form: a dry run writes nothing; at tool/post.json the answer
	// alone, in JSON.
	code, ctype, js := admin.postJSON("tool/post", page, url.Values{"token": {tok}, "to": {root[:12]}, "text": {"hi"}, "dry_run_box": {"1"}, "dry_run": {"true"}})
	var a answer
	if err := json.Unmarshal([]byte(js), &a); code != 200 || ctype != "application/json" || err != nil || !a.DryRun || a.Result != nil ||
		len(a.Log) != 1 || !strings.HasPrefix(a.Log[0], "would post a reply to "+root) || posts() != before {
		t.Fatalf("the dry run: %d %s %v\n%s", code, ctype, err, js)
	}
	// Unticked, it posts, as the admin.
	code, body = admin.post("tool/post", page, url.Values{"token": {tok}, "to": {root[:12]}, "text": {"from the console"}, "dry_run_box": {"1"}})
	log, result, stopped := answerOf(body)
	if code != 200 || stopped != "" || len(result) != 64 || n.senderOf(result) != n.srv.AdminLogin || len(log) != 1 || posts() != before+1 {
		t.Fatalf("the post: %d %q %q %v\n%s", code, result, stopped, log, body)
	}
	if !strings.Contains(body, `id="ocx-answer-json"`) || !strings.Contains(body, `&#34;result&#34;: &#34;`+result) {
		t.Errorf("the answer page shows no JSON answer:\n%s", body)
	}
	// A refusal: 422, the reason naming the field, nothing written.
	code, body = admin.post("tool/post", page, url.Values{"token": {tok}, "input": {`{"to": "` + root + `", "text": "x", "title": "t"}`}})
	if _, _, stopped := answerOf(body); code != 422 || !strings.Contains(stopped, "title: is not a field of post") || posts() != before+1 {
		t.Fatalf("the refusal: %d %q", code, stopped)
	}
}

// TestConsoleToolsInTheBrowser (issue 14 item 2), in Debian's chromium:
// the admin opens Tools, then post, fills the form and presses it with
// the dry-run box as it comes (ticked): the log says what it would write,
// and nothing is. Unticked, the press posts, and the page shows the
// result's hash, a post by the admin. A reader sees the page and no
// button, and a POST made in the page with a token of its own gets 403,
// nothing written. No page of the console raises a script error or a CSP
// violation.
func TestConsoleToolsInTheBrowser(t *testing.T) {
	needs(t, "ocxd")
	n := consoleNode(t)
	root := n.result(n.srv.AdminLogin, "thread", "--title", "Tools", "--text", "hello")
	posts := func() int { return len(n.thread(root)) }
	console := n.srv.URL + "ext/console/"
	b := harness.StartBrowser(t)
	browserLogin(t, b, n, n.srv.AdminLogin)
	b.Navigate(console, "#ocx-tools-link")
	b.ClickAndLoad("#ocx-tools-link")
	b.WaitVisible("#ocx-tools")
	var rows int
	b.Eval(`document.querySelectorAll('[data-ocx-tool]').length`, &rows)
	if rows != len(toolio.ToolNames) {
		t.Fatalf("Tools lists %d tools", rows)
	}
	b.Screenshot("01-tools")
	b.ClickAndLoad(`[data-ocx-tool="post"] a`)
	b.WaitVisible("#ocx-tool-submit")
	var ticked bool
	b.Eval(`document.getElementById('ocx-tool-dry').checked`, &ticked)
	if !ticked {
		t.Fatalf("the dry-run box is not ticked on a fresh form")
	}
	b.Fill("#ocx-field-to", root[:12])
	b.Fill("#ocx-field-text", "from the browser")
	b.Screenshot("02-post-form")
	before := posts()
	if code := b.ClickAndLoad("#ocx-tool-submit"); code != 200 {
		t.Fatalf("the dry run's page: %d", code)
	}
	b.WaitVisible("#ocx-tool-answer")
	if log := b.Text("#ocx-log"); !strings.Contains(log, "would post a reply to "+root) {
		t.Fatalf("the dry run's log: %q", log)
	}
	if js := b.Text("#ocx-answer-json"); !strings.Contains(js, `"dry_run": true`) || !strings.Contains(js, `"result": null`) {
		t.Fatalf("the dry run's JSON: %q", js)
	}
	if posts() != before {
		t.Fatalf("the dry run wrote a post")
	}
	b.Screenshot("03-dry-run")

	// The form comes back filled in, the box ticked again: untick it.
	var to string
	b.Eval(`document.getElementById('ocx-field-to').value`, &to)
	b.Eval(`document.getElementById('ocx-tool-dry').checked`, &ticked)
	if to != root[:12] || !ticked {
		t.Fatalf("the form after the dry run: to %q, box ticked %v", to, ticked)
	}
	b.Click("#ocx-tool-dry")
	b.Eval(`document.getElementById('ocx-tool-dry').checked`, &ticked)
	if ticked {
		t.Fatal("the box is still ticked")
	}
	b.ClickAndLoad("#ocx-tool-submit")
	result := answerDone(t, b, "post through the tool")
	if len(result) != 64 || n.senderOf(result) != n.srv.AdminLogin || posts() != before+1 {
		t.Fatalf("the post's result %q (sender %q), %d posts", result, n.senderOf(result), posts())
	}
	b.Screenshot("04-posted")
	b.NoErrors()

	// A reader: the page, no button; a forged POST gets 403.
	p := harness.StartBrowser(t)
	browserLogin(t, p, n, person)
	p.Navigate(console+"tool/post", "#ocx-tool-description")
	var forms int
	p.Eval(`document.querySelectorAll('form[method="POST"], form[method="post"]').length`, &forms)
	if forms != 0 || !strings.Contains(p.Text("#ocx-readonly"), "neither admin nor setup") {
		t.Fatalf("a reader's /tool/post: %d buttons", forms)
	}
	p.Screenshot("05-reader")
	p.NoErrors()
	var status int
	p.Eval(`fetch(location.href, {method: 'POST', credentials: 'same-origin', body: new URLSearchParams({token: '`+strings.Repeat("0", 64)+
		`', to: '`+root+`', text: 'forged', dry_run_box: '1'})}).then(function (r) { return r.status; })`, &status)
	if status != 403 || posts() != before+1 {
		t.Fatalf("a reader's forged POST: %d, %d posts", status, posts())
	}
	// The browser reports the refused POST's 403, and nothing else (the
	// check at cleanup).
	p.Expect("the forged POST's 403", func(e harness.PageEvent) bool { return strings.Contains(e.String(), "403") })
}
