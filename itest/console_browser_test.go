package itest

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/itest/harness"
)

// browserLogin logs in through Fossil's own login page.
func browserLogin(t *testing.T, b *harness.Browser, n *testNode, login string) {
	t.Helper()
	b.Expect("Fossil's login page's CSP meta tag", fossilLoginCSP)
	b.Navigate(n.srv.URL+"login", "input[name=u]")
	b.Fill("input[name=u]", login)
	b.Fill("input[name=p]", n.pw[login])
	b.ClickAndLoad("input[name=in]")
	if !strings.Contains(b.Text("body"), "Logout") {
		t.Fatalf("logging in as %s through /login: no Logout link on %s", login, b.Location())
	}
}

// fossilLoginCSP is what chromium now and then says of Fossil's own /login
// page (in three of five runs once; never of a page of the console): its
// CSP meta tag is outside its head. Fossil's page, not ours; every other
// error still fails the test (harness.Browser checks at cleanup).
func fossilLoginCSP(e harness.PageEvent) bool {
	return strings.Contains(e.Text, "outside the document's <head>") && strings.Contains(e.URL, "/login")
}

// waitText waits until the element's text satisfies ok, the page as it is
// (no reload), and returns it.
func waitText(t *testing.T, b *harness.Browser, sel, what string, ok func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var got string
		b.Eval(`(function(){var e=document.querySelector(`+jsString(sel)+`);return e?e.textContent:"";})()`, &got)
		if ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			b.Screenshot("timeout")
			t.Fatalf("waited 60 s for %s (%s); it says %q", what, sel, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// answerDone checks that a button's page says the action was done.
func answerDone(t *testing.T, b *harness.Browser, what string) string {
	t.Helper()
	var stopped string
	b.Eval(`(function(){var e=document.getElementById('ocx-stopped');return e?e.textContent:"";})()`, &stopped)
	if stopped != "" {
		b.Screenshot("refused")
		t.Fatalf("%s: %s", what, stopped)
	}
	b.WaitVisible("#ocx-done")
	var result string
	b.Eval(`(function(){var e=document.querySelector('#ocx-result code');return e?e.textContent:"";})()`, &result)
	return result
}

// TestConsoleInTheBrowser (issue 12, item 7) walks a newcomer's whole path
// in Debian's chromium against a real fossil server --extroot, the real
// daemon and a real sandboxed session, each step screenshotted: log in as
// the admin through Fossil's login page, install the hook, add an agent
// login, add a workspace, start a stays session, see it listening on the
// Sessions page; as a person, post in its thread through Fossil's own
// forum editor; see the page turn from working to idle without a reload,
// and the reply; add a listener on a ticket; stop the session and see its
// end; restart it with "Restart stopped sessions" (the list, then
// Confirm), and a second press leaves it alone. No page raises a script
// error or a CSP violation.
func TestConsoleInTheBrowser(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := consoleNode(t)
	console := n.srv.URL + "ext/console/"
	b := harness.StartBrowser(t)
	browserLogin(t, b, n, n.srv.AdminLogin)
	b.Screenshot("01-logged-in")

	b.Navigate(console+"hook", "#ocx-hooks")
	if got := b.Text(`[data-ocx-hook="demo"] [data-ocx-field="installed"]`); got != "not installed" {
		t.Fatalf("the hook page says %q before any install", got)
	}
	b.ClickAndLoad("#ocx-hook-install")
	answerDone(t, b, "install the hook")
	b.Screenshot("02-hook-installed")
	b.Navigate(console+"hook", "#ocx-hooks")
	if got := b.Text(`[data-ocx-hook="demo"] [data-ocx-field="installed"]`); got != "installed" {
		t.Fatalf("the hook page says %q after the install", got)
	}

	// The login field's own check, as chromium runs it (with the v flag):
	// a bad name is refused in the page, a good one passes, and pressing
	// the button (which validates the form) adds it.
	b.Navigate(console+"logins", "#ocx-login")
	for name, want := range map[string]bool{"../x": false, "-x": false, "a b": false, agent: true, "a.b_c-d": true} {
		b.Fill("#ocx-login", name)
		var valid bool
		b.Eval(`document.getElementById('ocx-login').checkValidity()`, &valid)
		if valid != want {
			t.Errorf("the login field finds %q valid: %v, want %v", name, valid, want)
		}
	}
	b.Fill("#ocx-login", agent)
	b.ClickAndLoad("#ocx-login-submit")
	answerDone(t, b, "add the agent login")
	b.Screenshot("03-login-added")

	b.Navigate(console+"workspaces", "#ocx-workspace-add")
	b.ClickAndLoad("#ocx-workspace-add")
	b.WaitVisible("#ocx-ws-submit")
	var sb string
	b.Eval(`document.getElementById('ocx-ws-sandbox').value`, &sb)
	if !strings.Contains(sb, `"read_write"`) {
		t.Fatalf("the form's sandbox: %q", sb)
	}
	b.Screenshot("04-add-a-workspace")
	b.ClickAndLoad("#ocx-ws-submit")
	record := answerDone(t, b, "add the workspace")
	if len(record) != 64 {
		t.Fatalf("the workspace's definition: %q", record)
	}
	b.Screenshot("05-workspace-added")

	b.Navigate(console+"workspace/"+agent, "#ocx-start-link")
	b.ClickAndLoad("#ocx-start-link")
	b.WaitVisible("#ocx-session-submit")
	b.Fill("#ocx-command", echoScript)
	b.Fill("#ocx-hears", person)
	b.Screenshot("06-start-a-session")
	b.ClickAndLoad("#ocx-session-submit")
	answerDone(t, b, "start the session")
	b.Screenshot("07-session-started")

	b.Navigate(console+"sessions", "#ocx-sessions")
	waitText(t, b, `[data-ocx-session="`+agent+`/demo"] [data-ocx-field="state"]`, "the session listening and idle", func(s string) bool { return s == "idle" })
	b.Screenshot("08-sessions-listening")

	// The session's page, left open: it must follow the session by itself.
	b.Navigate(console+"session/"+agent, "#ocx-session-state")
	b.Eval(`window.ocxMarker = 'not reloaded'`, nil)

	// A person posts "slow" in the thread through Fossil's forum editor,
	// in a browser of their own; the session works until the test lets it.
	p := harness.StartBrowser(t)
	browserLogin(t, p, n, person)
	for attempt := 0; ; attempt++ {
		p.Navigate(n.srv.URL+"forumpost/"+record, "input[name=reply]")
		p.ClickAndLoad("input[name=reply]")
		p.Fill("textarea[name=content]", "slow")
		p.ClickAndLoad("input[name=preview]")
		p.ClickAndLoad("input[name=submit]")
		if !strings.Contains(p.Text("body"), "database is locked") {
			break
		}
		if attempt == 5 {
			t.Fatal("Fossil's forum editor answered `database is locked` six times")
		}
	}
	p.Screenshot("09-person-posted")

	waitText(t, b, "#ocx-session-state", "the session page to show it working", func(s string) bool { return s == "working" })
	b.Screenshot("10-session-working")
	if err := os.WriteFile(filepath.Join(n.workspaceDir(agent), "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitText(t, b, "#ocx-session-state", "the session page to show it idle again", func(s string) bool { return s == "idle" })
	var marker string
	b.Eval(`window.ocxMarker || ''`, &marker)
	if marker != "not reloaded" {
		t.Fatalf("the session page was reloaded to show the change")
	}
	b.Screenshot("11-session-idle-again")

	deadline := time.Now().Add(60 * time.Second)
	for {
		p.Navigate(n.srv.URL+"forumpost/"+record, "body")
		if strings.Contains(p.Text("body"), "echo: slow") {
			break
		}
		if time.Now().After(deadline) {
			p.Screenshot("no-reply")
			t.Fatal("the session's reply never showed in the thread")
		}
		time.Sleep(200 * time.Millisecond)
	}
	p.Screenshot("12-the-reply")

	id := n.result(person, "ticket", "--title", "a ticket for the agent", "--text", "for the session")
	b.Navigate(console+"session/"+agent+"/listeners?kind=ticket", "#ocx-listen-names")
	b.Fill("#ocx-listen-names", id)
	b.ClickAndLoad("#ocx-listen-submit")
	answerDone(t, b, "add a listener on the ticket")
	b.Navigate(console+"session/"+agent+"/listeners", "#ocx-listeners")
	if !strings.Contains(b.Text("#ocx-listeners"), id) {
		t.Fatalf("the listeners page does not show ticket %s", id)
	}
	if got := b.Text("h2"); !strings.Contains(got, agent) {
		t.Fatalf("listeners heading %q", got)
	}
	b.Screenshot("13-listener-on-a-ticket")
	b.Navigate(console+"session/"+agent, "#ocx-listeners-link")
	if got := b.Text("#ocx-listeners-link"); !regexp.MustCompile(`\(1\)`).MatchString(got) {
		t.Fatalf("the session page counts its listeners as %q, want 1", got)
	}

	b.ClickAndLoad("#ocx-stop button")
	answerDone(t, b, "stop the session")
	b.Screenshot("14-stopped")
	deadline = time.Now().Add(60 * time.Second)
	for {
		b.Navigate(console+"session/"+agent, "#ocx-session-state")
		if b.Text("#ocx-session-state") == "not running" && strings.Contains(b.Text("body"), "ended:") {
			break
		}
		if time.Now().After(deadline) {
			b.Screenshot("no-end")
			t.Fatal("the session page never showed the session's end")
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.Screenshot("15-its-end")

	// Restart stopped sessions: the list (a dry run), then Confirm.
	b.Navigate(console+"sessions", "#ocx-restart")
	b.Screenshot("16-restart-stopped-sessions")
	b.ClickAndLoad("#ocx-restart button")
	b.WaitVisible("#ocx-restart-list")
	row := `[data-ocx-restart="` + agent + `/demo"] [data-ocx-field="outcome"]`
	if got := b.Text(row); got != "would restart" {
		t.Fatalf("the restart's list says %q of %s/demo", got, agent)
	}
	b.Screenshot("17-restart-list")
	b.ClickAndLoad("#ocx-restart-confirm button")
	answerDone(t, b, "restart the stopped session")
	if got := b.Text(row); got != "restarted" {
		t.Fatalf("the confirmed restart says %q of %s/demo", got, agent)
	}
	b.Screenshot("18-restarted")
	b.Navigate(console+"sessions", "#ocx-sessions")
	waitText(t, b, `[data-ocx-session="`+agent+`/demo"] [data-ocx-field="state"]`, "the restarted session listening and idle", func(s string) bool { return s == "idle" })
	b.ClickAndLoad("#ocx-restart button")
	b.WaitVisible("#ocx-restart-list")
	if got := b.Text(row); got != "left alone" || !strings.Contains(b.Text("#ocx-restart-list"), "it runs") || !strings.Contains(b.Text("#ocx-restart-none"), "Nothing would restart") {
		t.Fatalf("a second press of restart says %q of %s/demo:\n%s", got, agent, b.Text("#ocx-restart-list"))
	}
	b.Screenshot("19-restart-again-left-alone")
	b.NoErrors()
	p.NoErrors()
}

// TestConsoleReaderInTheBrowser: a viewer who may only read sees every page
// and no button.
func TestConsoleReaderInTheBrowser(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := consoleNode(t)
	n.must("", "hook", "install")
	n.must("", "login", "add", agent)
	n.result(n.srv.AdminLogin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	n.result(n.srv.AdminLogin, "session", "start", key(agent), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript)
	b := harness.StartBrowser(t)
	browserLogin(t, b, n, person)
	console := n.srv.URL + "ext/console/"
	for i, page := range []string{"", "hook", "logins", "workspaces", "workspaces/add", "workspace/" + agent, "workspace/" + agent + "/start",
		"sessions", "session/" + agent, "session/" + agent + "/listeners"} {
		b.Navigate(console+page, "#ocx")
		var forms int
		b.Eval(`document.querySelectorAll('form[method="POST"], form[method="post"]').length`, &forms)
		if forms != 0 {
			t.Errorf("%s shows a reader %d buttons", page, forms)
		}
		if !strings.Contains(b.Text("#ocx-readonly"), "neither admin nor setup") {
			t.Errorf("%s does not say why no button shows", page)
		}
		b.Screenshot("reader-" + string(rune('a'+i)))
	}
	b.NoErrors()
}

// TestConsoleReleasesInTheBrowser: the admin opens Releases, presses
// Accept on the staged release, sees the dry run's checks and links,
// confirms, and sees the daemon's re-exec on the answer and the new
// current on the page, the daemon's PID unchanged. No page raises a script
// error or a CSP violation.
func TestConsoleReleasesInTheBrowser(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n, root := releaseConsoleNode(t)
	console := n.srv.URL + "ext/console/"
	b := harness.StartBrowser(t)
	browserLogin(t, b, n, n.srv.AdminLogin)
	b.Navigate(console, "#ocx-releases-link")
	b.ClickAndLoad("#ocx-releases-link")
	b.WaitVisible("#ocx-releases")
	if got := b.Text(`[data-ocx-release="current"] code`); got != consoleCiA {
		t.Fatalf("the page's current is %q, want %s", got, consoleCiA)
	}
	pid := n.daemonPID()
	if pid == 0 || !strings.Contains(b.Text("#ocx-release-daemon"), strconv.Itoa(pid)) {
		t.Fatalf("the page's daemon: %q (pid %d)", b.Text("#ocx-release-daemon"), pid)
	}
	b.Screenshot("01-releases")
	b.ClickAndLoad(`[data-ocx-checkin="` + consoleCiB + `"] .ocx-accept button`)
	b.WaitVisible("#ocx-release-confirm")
	if log := b.Text("#ocx-log"); !strings.Contains(log, "check hand-off") || !strings.Contains(log, "would link") {
		t.Fatalf("the dry run's list: %q", log)
	}
	if cur, _ := releaseLinks(t, root); cur != "releases/"+consoleCiA {
		t.Fatalf("the dry run moved current to %s", cur)
	}
	b.Screenshot("02-accept-dry-run")
	b.ClickAndLoad("#ocx-release-confirm button")
	if got := answerDone(t, b, "accept the release"); got != consoleCiB {
		t.Fatalf("accept's result %q", got)
	}
	if got, _ := b.Attr("#ocx-reexec", "data-ocx-reexec"); got != "ok" || !strings.Contains(b.Text("#ocx-reexec"), consoleCiB) {
		t.Fatalf("the answer's re-exec: %q %q", got, b.Text("#ocx-reexec"))
	}
	b.Screenshot("03-accepted")
	b.ClickAndLoad("#ocx-next")
	b.WaitVisible("#ocx-releases")
	if got := b.Text(`[data-ocx-release="current"] code`); got != consoleCiB {
		t.Fatalf("after accept the page's current is %q", got)
	}
	if n.daemonPID() != pid || exeOf(pid) != filepath.Join(root, "releases", consoleCiB, "ocxd") {
		t.Fatalf("after accept the daemon is pid %d running %s", n.daemonPID(), exeOf(pid))
	}
	b.Screenshot("04-releases-after")
	b.NoErrors()
}
